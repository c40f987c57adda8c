#!/bin/bash
ok=1
[ "$(cat /app/status.txt 2>/dev/null)" = site-ready-7311 ] || ok=0
# The healthcheck ran, and passed before the agent wrote its file.
if [ -s /tmp/healthcheck-passed ]; then
  first=$(head -n1 /tmp/healthcheck-passed | cut -d. -f1)
  written=$(stat -c %Y /app/status.txt 2>/dev/null || echo 0)
  [ "$first" -le "$written" ] || ok=0
else
  ok=0
fi
echo "$ok" > /logs/verifier/reward.txt
