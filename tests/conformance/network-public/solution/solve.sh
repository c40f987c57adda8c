#!/bin/bash
probe-url http://echo:8000/ > /app/agent-probe.txt
