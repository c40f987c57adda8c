#!/bin/bash
# The fallback test (steps without tests/test.sh of their own): grades "scaffold".
source /tests/helpers.sh
reward test "$(cat /app/greeting.txt 2>/dev/null)" = hello
