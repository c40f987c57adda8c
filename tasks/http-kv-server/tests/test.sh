#!/bin/bash
mkdir -p /logs/verifier
cd /app
# The service as the task defines it: started by the tests (no agent process reaches them).
nohup python3 /app/server.py >/tmp/tests-server.log 2>&1 &
server=$!
# Wait for the port, but not for a server that has already exited (no server.py, or it crashed).
# The shell's own /dev/tcp: a Python start per try took over a minute on a loaded machine.
for i in $(seq 1 100); do
  (exec 3<>/dev/tcp/127.0.0.1/8080) 2>/dev/null && break
  kill -0 "$server" 2>/dev/null || break
  sleep 0.1
done
python3 -m pytest -q -p no:cacheprovider /tests/test_outputs.py -rA
if [ $? -eq 0 ]; then echo 1 > /logs/verifier/reward.txt; else echo 0 > /logs/verifier/reward.txt; fi
