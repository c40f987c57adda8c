#!/bin/bash
# python3 exists only in the prebuilt image, not in the (unused) Dockerfile's base.
mkdir -p /logs/verifier
if [ "$(cat /srv/answer.txt 2>/dev/null)" = 42 ] && command -v python3 >/dev/null; then echo 1; else echo 0; fi \
  > /logs/verifier/reward.txt
