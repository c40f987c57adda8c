#!/bin/bash
# Verifier for extract-emails: exact comparison with the expected address list.
mkdir -p /logs/verifier
expected=$(cat <<'EXP'
alice.moreno@example.com
bob.tran@example.com
bob@mail.example.org
carol_92@uni.example.edu
dave.o-neil@partner-co.io
eve%relay@legacy.example.co.uk
frank@example.com
grace.h@sub.domain.example.com
support+tickets@helpdesk.example.net
EXP
)
ok=1
if [ ! -f /app/emails.txt ]; then
  echo "FAIL: /app/emails.txt missing"; ok=0
else
  actual=$(cat /app/emails.txt)
  if [ "$actual" != "$expected" ]; then
    echo "FAIL: /app/emails.txt content differs"; diff <(echo "$expected") /app/emails.txt; ok=0
  fi
  if grep -q '^$' /app/emails.txt; then echo "FAIL: blank line"; ok=0; fi
fi
# the documents must be untouched
if ! grep -q 'Alice.Moreno@Example.com' /app/docs/team.txt || ! grep -q 'hidden@example.com' /app/docs/archive/drafts.bak; then
  echo "FAIL: /app/docs was modified"; ok=0
fi
if [ $ok -eq 1 ]; then echo PASS; echo 1 > /logs/verifier/reward.txt; else echo 0 > /logs/verifier/reward.txt; fi
