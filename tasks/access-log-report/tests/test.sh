#!/bin/bash
# Verifier for access-log-report: the report must match the expected figures exactly.
mkdir -p /logs/verifier
expected=$(cat <<'EXP'
total_requests=600
unique_ips=27
server_errors=41
busiest_hour=20
slowest_path=/login 0.404
top_ips:
203.0.113.7 130
198.51.100.23 40
10.0.1.60 37
EXP
)
ok=1
if [ ! -f /app/report.txt ]; then
  echo "FAIL: /app/report.txt missing"; ok=0
else
  # tolerate a missing final newline and trailing whitespace, nothing else
  actual=$(sed -e 's/[[:space:]]*$//' /app/report.txt)
  if [ "$actual" != "$expected" ]; then
    echo "FAIL: report differs from the expected one:"; diff <(echo "$expected") <(echo "$actual"); ok=0
  fi
fi
if [ "$(wc -l < /app/logs/access.log)" != "600" ]; then echo "FAIL: access.log was modified"; ok=0; fi
if [ $ok -eq 1 ]; then echo PASS; echo 1 > /logs/verifier/reward.txt; else echo 0 > /logs/verifier/reward.txt; fi
