#!/bin/bash
# Nothing to do.
true
