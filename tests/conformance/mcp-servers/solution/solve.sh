#!/bin/bash
# The oracle reads the MCP configuration the run time hands to agents and calls each server the
# way an MCP client would.
set -eu
python3 /solution/mcp_client.py "$TBSCALE_MCP_CONFIG" notes:read_note vault:get_code > /app/mcp.txt
