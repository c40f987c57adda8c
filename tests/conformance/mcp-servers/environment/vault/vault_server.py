"""The `vault` MCP server (streamable HTTP, JSON replies) in its own container."""
import sys

sys.path.insert(0, "/srv")
from mcp_tool_server import make_handler, serve_http  # noqa: E402

serve_http(make_handler("vault", {"get_code": ("Read the access code.", lambda: "code: 9431")}), 8000)
