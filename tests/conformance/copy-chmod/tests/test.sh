#!/bin/bash
# The modes COPY --chmod asked for, and the greeting the agent could only get by running greet.
mkdir -p /logs/verifier
if [ "$(stat -c %a /usr/local/bin/greet)" = 755 ] && [ "$(stat -c '%a %U' /app/notes.txt)" = "640 agent" ] \
    && [ "$(cat /app/greeting.txt 2>/dev/null)" = "hello from greet" ]; then
  echo 1
else
  echo 0
fi > /logs/verifier/reward.txt
