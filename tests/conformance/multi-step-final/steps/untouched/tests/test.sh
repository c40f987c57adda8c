#!/bin/bash
# Passes for any agent that leaves the file alone, the nop agent included: only the gates above
# keep a nop run from reaching this step.
if [ "$(cat /app/keep.txt 2>/dev/null)" = original ]; then echo 1; else echo 0; fi > /logs/verifier/reward.txt
