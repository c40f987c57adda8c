#!/bin/bash
mkdir -p /logs/verifier
if diff -q /tests/expected.txt /app/mcp.txt >/dev/null 2>&1; then echo 1; else echo 0; fi > /logs/verifier/reward.txt
