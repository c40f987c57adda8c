#!/bin/bash
{ probe-url http://allowed-svc:8000/; probe-url http://blocked-svc:8000/; } > /app/agent-probe.txt
