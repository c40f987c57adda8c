"""Counts GET /hit in memory; GET /stats reports the count. Nothing is written to disk."""
import http.server
import json
import threading

hits = 0
lock = threading.Lock()


class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        global hits
        if self.path == "/hit":
            with lock:
                hits += 1
            body = b"ok"
        elif self.path == "/stats":
            body = json.dumps({"hits": hits}).encode()
        else:
            self.send_error(404)
            return
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


http.server.ThreadingHTTPServer(("0.0.0.0", 8000), Handler).serve_forever()
