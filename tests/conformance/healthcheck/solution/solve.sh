#!/bin/bash
# One attempt, no retries: this only works when the run time waited for the healthcheck.
python3 - <<'PY'
import urllib.request
body = urllib.request.urlopen("http://127.0.0.1:8080/status.txt", timeout=3).read()
open("/app/status.txt", "wb").write(body)
PY
