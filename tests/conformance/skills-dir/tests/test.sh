#!/bin/bash
mkdir -p /logs/verifier
if [ "$(head -n1 /app/RELEASE.md 2>/dev/null)" = "# Release aurora-17" ]; then echo 1; else echo 0; fi \
  > /logs/verifier/reward.txt
