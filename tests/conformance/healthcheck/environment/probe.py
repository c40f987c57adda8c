"""The task's healthcheck: succeeds once the site answers, and leaves a dated mark when it does."""
import sys
import time
import urllib.request

try:
    with urllib.request.urlopen("http://127.0.0.1:8080/status.txt", timeout=2) as reply:
        reply.read()
except OSError:
    sys.exit(1)
with open("/tmp/healthcheck-passed", "a") as mark:
    mark.write(f"{time.time():.3f}\n")
