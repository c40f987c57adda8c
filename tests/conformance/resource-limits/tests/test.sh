#!/bin/bash
# 384 MiB and 2 CPUs, as seen by the agent and by the verifier.
expected=$'memory_bytes=402653184\ncpus=2.00'
ok=1
[ "$(cat /app/limits.txt 2>/dev/null)" = "$expected" ] || ok=0
[ "$(show-limits)" = "$expected" ] || ok=0
mkdir -p /logs/verifier
echo "$ok" > /logs/verifier/reward.txt
