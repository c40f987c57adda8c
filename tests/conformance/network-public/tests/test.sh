#!/bin/bash
ok=1
[ "$(cat /app/agent-probe.txt 2>/dev/null)" = "reachable echo-token-5521" ] || ok=0
[ "$(probe-url http://echo:8000/)" = "reachable echo-token-5521" ] || ok=0
echo "$ok" > /logs/verifier/reward.txt
