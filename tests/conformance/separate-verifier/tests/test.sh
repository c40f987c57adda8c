#!/bin/bash
ok=1
[ -f /etc/tbscale-verifier-image ] || ok=0                                  # the verifier image, not the agent's
[ "$(cat /app/report.json 2>/dev/null)" = "$CONF_EXPECTED_REPORT" ] || ok=0  # string-form artifact, at its source path
[ "$(cat /app/out/a.txt 2>/dev/null)" = keep ] || ok=0                     # table-form artifact (a folder)
[ ! -e /app/out/skip.tmp ] || ok=0                                          # excluded by the artifact's pattern
[ "$(cat /logs/artifacts/published.txt 2>/dev/null)" = published ] || ok=0  # the convention folder
[ ! -e /tmp/agent-only.txt ] || ok=0                                        # undeclared files stay behind
mkdir -p /logs/verifier
echo "$ok" > /logs/verifier/reward.txt
