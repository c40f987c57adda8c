#!/bin/bash
# Both phases run under the baseline allowlist: allowed-svc answers, blocked-svc does not.
expected=$'reachable allowed-token-1204\nunreachable'
ok=1
[ "$(cat /app/agent-probe.txt 2>/dev/null)" = "$expected" ] || ok=0
[ "$(probe-url http://allowed-svc:8000/)" = "reachable allowed-token-1204" ] || ok=0
[ "$(probe-url http://blocked-svc:8000/)" = unreachable ] || ok=0
echo "$ok" > /logs/verifier/reward.txt
