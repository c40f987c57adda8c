#!/bin/bash
# The relative path the agent wrote must be in the configured workdir, and the verifier runs there too.
mkdir -p /logs/verifier
if [ "$(cat /srv/work/where.txt 2>/dev/null)" = /srv/work ] && [ "$PWD" = /srv/work ] && [ ! -e /app/where.txt ]; then
  echo 1
else
  echo 0
fi > /logs/verifier/reward.txt
