#!/bin/bash
set -e
mkdir -p /app/data

cat > /app/server.py <<'PY'
"""Key-value HTTP service on port 8080, persisted to /app/data/kv.json."""
import json
import os
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
DATA = "/app/data/kv.json"
KEY = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
LOCK = threading.Lock()
STORE = {}
if os.path.exists(DATA):
    with open(DATA) as f:
        STORE.update(json.load(f))
def save():
    tmp = DATA + ".tmp"
    with open(tmp, "w") as f:
        json.dump(STORE, f)
    os.replace(tmp, DATA)
class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def send(self, code, obj=None, raw=None):
        body = b"" if obj is None and raw is None else (raw if raw is not None else json.dumps(obj).encode())
        self.send_response(code)
        if obj is not None:
            self.send_header("Content-Type", "application/json")
        elif raw is not None:
            self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def key(self):
        if not self.path.startswith("/kv/"):
            self.send(404, {"error": "not found"})
            return None
        k = self.path[len("/kv/"):]
        if not KEY.match(k):
            self.send(400, {"error": "bad key"})
            return None
        return k
    def do_GET(self):
        if self.path == "/health":
            return self.send(200, raw=b"ok")
        if self.path == "/kv":
            with LOCK:
                return self.send(200, {"keys": sorted(STORE)})
        k = self.key()
        if k is None:
            return
        with LOCK:
            if k in STORE:
                return self.send(200, {"key": k, "value": STORE[k]})
        self.send(404, {"error": "not found"})
    def do_PUT(self):
        length = int(self.headers.get("Content-Length") or 0)
        value = self.rfile.read(length).decode("utf-8")
        k = self.key()
        if k is None:
            return
        with LOCK:
            existed = k in STORE
            STORE[k] = value
            save()
        self.send(200 if existed else 201, {"key": k, "value": value})
    def do_DELETE(self):
        k = self.key()
        if k is None:
            return
        with LOCK:
            if k in STORE:
                del STORE[k]
                save()
                return self.send(204)
        self.send(404, {"error": "not found"})
    def do_POST(self):
        self.send(404, {"error": "not found"})
    def log_message(self, fmt, *args):
        pass
if __name__ == "__main__":
    ThreadingHTTPServer(("0.0.0.0", 8080), Handler).serve_forever()
PY

python3 -c "import ast; ast.parse(open('/app/server.py').read())"

curl -s -m 2 http://127.0.0.1:8080/health || (nohup python3 /app/server.py >/tmp/server.log 2>&1 &); for i in $(seq 1 50); do curl -s -m 1 http://127.0.0.1:8080/health >/dev/null && break; sleep 0.1; done

curl -s -i -X PUT --data 'hello' http://127.0.0.1:8080/kv/greeting && curl -s http://127.0.0.1:8080/kv && curl -s -o /dev/null -w '%{http_code}\n' -X DELETE http://127.0.0.1:8080/kv/greeting
