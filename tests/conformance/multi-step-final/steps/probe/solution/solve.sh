#!/bin/bash
touch /app/ready.flag
