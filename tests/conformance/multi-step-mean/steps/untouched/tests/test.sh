#!/bin/bash
# Passes for any agent that leaves the file alone, the nop agent included: with the mean of the
# three steps a nop run scores 1/3, with the last step's reward alone it would score 1.
source /tests/helpers.sh
reward test "$(cat /app/keep.txt 2>/dev/null)" = original
