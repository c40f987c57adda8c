#!/bin/bash
# Verifier for cron-backup-setup (plain bash checks).
mkdir -p /logs/verifier
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
mode() { stat -c '%a' "$1" 2>/dev/null; }

# --- permissions
[ "$(mode /app/data/secrets)" = "700" ] || fail "secrets dir mode is $(mode /app/data/secrets)"
for f in /app/data/secrets/api.key /app/data/secrets/db.url; do
  [ "$(mode $f)" = "600" ] || fail "$f mode is $(mode $f)"
done
[ "$(mode /app/data/reports/q1.csv)" = "644" ] || fail "q1.csv mode changed"
[ "$(mode /app/data/reports)" = "755" ] || fail "reports dir mode changed"

# --- cron file
cf=/etc/cron.d/app-backup
if [ ! -f $cf ]; then
  fail "$cf missing"
else
  [ "$(mode $cf)" = "644" ] || fail "$cf mode is $(mode $cf)"
  [ -z "$(tail -c1 $cf)" ] || fail "$cf must end with a newline"
  jobs=$(grep -vE '^[[:space:]]*(#|$)' $cf | grep -vE '^[A-Za-z_]+=')
  [ "$(printf '%s\n' "$jobs" | grep -c .)" = "1" ] || fail "expected exactly one job line, got: $jobs"
  norm=$(printf '%s\n' "$jobs" | awk '{$1=$1; print}')
  [ "$norm" = "30 2 * * * root /app/bin/backup.sh >> /var/log/app-backup.log 2>&1" ] || fail "bad job line: $norm"
fi

# --- backup script
s=/app/bin/backup.sh
if [ ! -f $s ]; then
  fail "$s missing"
else
  [ "$(mode $s)" = "755" ] || fail "$s mode is $(mode $s)"
  rm -rf /app/backups
  out=$(cd / && $s 2>&1) || fail "first run (no /app/backups yet) failed: $out"
  mkdir -p /app/backups
  touch -d '10 days ago' /app/backups/data-20000101.tar.gz
  touch -d '3 days ago' /app/backups/data-recent.tar.gz
  touch -d '30 days ago' /app/backups/notes.txt
  out=$(cd /tmp && $s 2>&1) || fail "backup.sh exited non-zero: $out"
  today=/app/backups/data-$(date +%Y%m%d).tar.gz
  if [ ! -f "$today" ]; then
    fail "archive $today not created"
  else
    list=$(tar tzf "$today" 2>/dev/null) || fail "archive is not a valid tar.gz"
    for e in data/reports/q1.csv data/reports/q2.csv data/uploads/2024/logo.png data/secrets/api.key data/VERSION; do
      printf '%s\n' "$list" | sed 's#^\./##' | grep -qx "$e" || fail "archive lacks $e"
    done
    printf '%s\n' "$list" | grep -q '\.tmp$' && fail "archive contains .tmp files"
    printf '%s\n' "$list" | grep -qE '^/|^app/' && fail "archive paths must start with data/"
    tmpd=$(mktemp -d); tar xzf "$today" -C "$tmpd" 2>/dev/null
    cmp -s "$tmpd/data/reports/q1.csv" /app/data/reports/q1.csv || fail "archived q1.csv differs"
    rm -rf "$tmpd"
  fi
  [ -e /app/backups/data-20000101.tar.gz ] && fail "old backup (10 days) was not deleted"
  [ -e /app/backups/data-recent.tar.gz ] || fail "recent backup (3 days) was deleted"
  [ -e /app/backups/notes.txt ] || fail "unrelated file was deleted"
  # same-day re-run overwrites
  echo 'app data v2' > /app/data/VERSION
  (cd / && $s >/dev/null 2>&1) || fail "second run failed"
  [ "$(tar xzf "$today" -O data/VERSION 2>/dev/null || tar xzf "$today" -O ./data/VERSION 2>/dev/null)" = "app data v2" ] || fail "same-day archive not overwritten"
  echo 'app data v1' > /app/data/VERSION
fi

if [ $fails -eq 0 ]; then echo PASS; echo 1 > /logs/verifier/reward.txt; else echo 0 > /logs/verifier/reward.txt; fi
