"""A minimal MCP-style JSON-RPC 2.0 tool server (initialize, tools/list, tools/call), standard library only.

`handle(message)` answers one request (None for notifications). `serve_stdio` speaks newline-delimited
JSON on stdin/stdout; `serve_http` answers POSTed JSON with a JSON body.
"""
import http.server
import json
import sys

PROTOCOL_VERSION = "2025-03-26"


def make_handler(name: str, tools: dict):
    """tools: {tool name: (description, function returning text)}."""

    def handle(message: dict):
        method, mid = message.get("method"), message.get("id")
        if mid is None:  # a notification, e.g. notifications/initialized
            return None
        if method == "initialize":
            result = {"protocolVersion": PROTOCOL_VERSION, "capabilities": {"tools": {}},
                      "serverInfo": {"name": name, "version": "1.0"}}
        elif method == "tools/list":
            result = {"tools": [{"name": t, "description": d, "inputSchema": {"type": "object", "properties": {}}}
                                for t, (d, _) in tools.items()]}
        elif method == "tools/call":
            tool = (message.get("params") or {}).get("name")
            if tool not in tools:
                return {"jsonrpc": "2.0", "id": mid, "error": {"code": -32602, "message": f"no tool {tool}"}}
            result = {"content": [{"type": "text", "text": tools[tool][1]()}], "isError": False}
        else:
            return {"jsonrpc": "2.0", "id": mid, "error": {"code": -32601, "message": f"no method {method}"}}
        return {"jsonrpc": "2.0", "id": mid, "result": result}

    return handle


def serve_stdio(handle) -> None:
    for line in sys.stdin:
        if not line.strip():
            continue
        reply = handle(json.loads(line))
        if reply is not None:
            sys.stdout.write(json.dumps(reply) + "\n")
            sys.stdout.flush()


def serve_http(handle, port: int, path: str = "/mcp") -> None:
    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self):
            if self.path != path:
                self.send_error(404)
                return
            reply = handle(json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0)))))
            if reply is None:
                self.send_response(202)
                self.end_headers()
                return
            body = json.dumps(reply).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    http.server.ThreadingHTTPServer(("0.0.0.0", port), Handler).serve_forever()
