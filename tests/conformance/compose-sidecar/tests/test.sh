#!/bin/bash
mkdir -p /logs/verifier
stored=$(python3 -c "import urllib.request; print(urllib.request.urlopen('http://kv:8000/status', timeout=5).read().decode())" 2>/dev/null)
if [ "$stored" = conformance-ok ] && [ "$(cat /app/ack.txt 2>/dev/null)" = "stored /status" ]; then echo 1; else echo 0; fi \
  > /logs/verifier/reward.txt
