#!/bin/bash
# The file must be owned by `agent` (so it was created as that user), and the verifier itself runs as root.
mkdir -p /logs/verifier
owner=$(stat -c %U /app/report.txt 2>/dev/null)
if [ "$owner" = agent ] && [ "$(cat /app/report.txt)" = agent ] && [ "$(id -u)" = 0 ]; then
  echo 1
else
  echo 0
fi > /logs/verifier/reward.txt
