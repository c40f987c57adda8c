#!/bin/bash
# The root filesystem the agent saw is at most 1024 MiB (+5% for filesystem overhead).
size_kb=$(awk 'NR == 2 { print $2 }' /app/df.txt 2>/dev/null)
mkdir -p /logs/verifier
if [ -n "$size_kb" ] && [ "$size_kb" -le $((1024 * 1024 * 105 / 100)) ]; then echo 1; else echo 0; fi \
  > /logs/verifier/reward.txt
