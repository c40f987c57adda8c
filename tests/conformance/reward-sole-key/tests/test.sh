#!/bin/bash
mkdir -p /logs/verifier
if [ "$(cat /app/status.txt 2>/dev/null)" = done ]; then score=1.0; else score=0.0; fi
echo "{\"score\": $score}" > /logs/verifier/reward.json
