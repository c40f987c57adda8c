#!/bin/bash
set -e

head -3 /app/logs/access.log; wc -l /app/logs/access.log

awk '{print $1}' /app/logs/access.log | sort | uniq -c | sort -rn | head -5

L=/app/logs/access.log
{
  echo "total_requests=$(wc -l < $L)"
  echo "unique_ips=$(awk '{print $1}' $L | sort -u | wc -l)"
  echo "server_errors=$(awk '$9 ~ /^5[0-9][0-9]$/' $L | wc -l)"
  echo "busiest_hour=$(awk '{split($4, t, ":"); print t[2]}' $L | sort | uniq -c | sort -k1,1nr | head -1 | awk '{print $2}')"
  echo "slowest_path=$(awk '{p=$7; sub(/\?.*/, "", p); s[p]+=$NF; n[p]++} END {for (p in s) printf "%s %.3f\n", p, s[p]/n[p]}' $L | sort -k2,2nr | head -1)"
  echo "top_ips:"
  awk '{print $1}' $L | sort | uniq -c | sort -k1,1nr | head -3 | awk '{print $2, $1}'
} > /app/report.txt

cat /app/report.txt
