#!/bin/bash
# The hook's snapshot, copied out of the sidecar and put back at its source path in this container.
mkdir -p /logs/verifier
if [ "$(cat /var/lib/counter/stats.json 2>/dev/null)" = '{"dumped_by": "collect-hook", "hits": 3}' ]; then
  echo 1
else
  echo 0
fi > /logs/verifier/reward.txt
