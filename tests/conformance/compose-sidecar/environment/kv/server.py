"""An in-memory key-value store: PUT /<key> stores the body, GET /<key> returns it."""
import http.server

store: dict[str, bytes] = {}


class Handler(http.server.BaseHTTPRequestHandler):
    def _reply(self, code: int, body: bytes) -> None:
        self.send_response(code)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_PUT(self):
        store[self.path] = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        self._reply(200, b"stored " + self.path.encode())

    def do_GET(self):
        if self.path in store:
            self._reply(200, store[self.path])
        else:
            self._reply(404, b"missing")

    def log_message(self, *args):
        pass


http.server.ThreadingHTTPServer(("0.0.0.0", 8000), Handler).serve_forever()
