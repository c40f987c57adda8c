#!/bin/bash
set -e
mkdir -p /app/out /logs/artifacts
printf '{"ok": true}\n' > /app/report.json
echo keep > /app/out/a.txt
echo scratch > /app/out/skip.tmp
echo published > /logs/artifacts/published.txt
echo "stays in the agent's container" > /tmp/agent-only.txt
