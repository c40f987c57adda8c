#!/bin/bash
show-limits > /app/limits.txt
