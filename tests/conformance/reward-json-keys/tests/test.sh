#!/bin/bash
# reward.txt is a decoy that always says 0: the run time must read reward.json when both exist.
mkdir -p /logs/verifier
echo 0 > /logs/verifier/reward.txt
if [ "$(cat /app/status.txt 2>/dev/null)" = done ]; then
  echo '{"reward": 1.0, "correctness": 1.0, "style": 0.5}' > /logs/verifier/reward.json
else
  echo '{"reward": 0.0, "correctness": 0.0, "style": 0.5}' > /logs/verifier/reward.json
fi
