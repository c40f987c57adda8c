#!/bin/bash
mkdir -p /logs/verifier
if grep -q '^GPU 0' /app/gpus.txt 2>/dev/null; then echo 1; else echo 0; fi > /logs/verifier/reward.txt
