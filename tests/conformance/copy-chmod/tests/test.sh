#!/bin/bash
# The modes COPY --chmod asked for, the files the here-documents wrote, and the greeting the agent could only get by running greet.
mkdir -p /logs/verifier
if [ "$(stat -c %a /usr/local/bin/greet)" = 755 ] && [ "$(stat -c '%a %U' /app/notes.txt)" = "640 agent" ] \
    && [ "$(cat /app/greeting.txt 2>/dev/null)" = "hello from greet" ] \
    && [ "$(cat /app/motd.txt)" = 'kept as written: $HOME' ] && [ "$(cat /app/script.txt)" = "script ran" ]; then
  echo 1
else
  echo 0
fi > /logs/verifier/reward.txt
