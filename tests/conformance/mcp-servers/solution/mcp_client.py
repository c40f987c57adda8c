"""mcp_client.py CONFIG server:tool ...: call each tool over the server's transport, print the text results.

CONFIG is JSON: {"mcpServers": {name: {"transport": "stdio", "command": ..., "args": [...]} |
                                      {"transport": "streamable-http" | "sse", "url": ...}}}.
"""
import json
import subprocess
import sys
import urllib.request


def rpc(mid, method, params=None):
    return {"jsonrpc": "2.0", "id": mid, "method": method, "params": params or {}}


def call_stdio(spec, tool):
    proc = subprocess.Popen([spec["command"], *spec.get("args", [])], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            text=True)
    messages = [rpc(1, "initialize", {"protocolVersion": "2025-03-26", "capabilities": {},
                                      "clientInfo": {"name": "oracle", "version": "1"}}),
                {"jsonrpc": "2.0", "method": "notifications/initialized"},
                rpc(2, "tools/call", {"name": tool, "arguments": {}})]
    out, _ = proc.communicate("".join(json.dumps(m) + "\n" for m in messages), timeout=30)
    replies = {r["id"]: r for r in map(json.loads, out.splitlines()) if "id" in r}
    return replies[2]["result"]["content"][0]["text"]


def call_http(spec, tool):
    def post(message):
        request = urllib.request.Request(spec["url"], data=json.dumps(message).encode(), method="POST",
                                         headers={"Content-Type": "application/json",
                                                  "Accept": "application/json, text/event-stream"})
        return json.loads(urllib.request.urlopen(request, timeout=10).read())

    post(rpc(1, "initialize", {"protocolVersion": "2025-03-26", "capabilities": {},
                               "clientInfo": {"name": "oracle", "version": "1"}}))
    return post(rpc(2, "tools/call", {"name": tool, "arguments": {}}))["result"]["content"][0]["text"]


servers = json.load(open(sys.argv[1]))["mcpServers"]
for target in sys.argv[2:]:
    name, tool = target.split(":")
    spec = servers[name]
    print(call_stdio(spec, tool) if spec["transport"] == "stdio" else call_http(spec, tool))
