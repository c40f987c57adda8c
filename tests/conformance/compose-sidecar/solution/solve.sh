#!/bin/bash
python3 - <<'PY'
import urllib.request
request = urllib.request.Request("http://kv:8000/status", data=b"conformance-ok", method="PUT")
reply = urllib.request.urlopen(request, timeout=5).read()
open("/app/ack.txt", "wb").write(reply)
PY
