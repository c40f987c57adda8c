"""The `notes` MCP server (stdio), started by the agent's MCP client from [[environment.mcp_servers]]."""
import sys

sys.path.insert(0, "/opt/mcp")
from mcp_tool_server import make_handler, serve_stdio  # noqa: E402

serve_stdio(make_handler("notes", {"read_note": ("Read the project note.", lambda: "note: alpha-12")}))
