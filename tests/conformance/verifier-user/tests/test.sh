#!/bin/bash
# Runs as `checker`: /logs/verifier must have been made writable for it by the run time.
if [ "$(id -un)" = checker ] && [ "$(cat /app/answer.txt 2>/dev/null)" = 42 ] && [ "$(stat -c %U /app/answer.txt)" = root ]; then
  echo 1
else
  echo 0
fi > /logs/verifier/reward.txt
