#!/bin/bash
if [ "$(cat /app/build.txt 2>/dev/null)" = built ]; then echo 1; else echo 0; fi > /logs/verifier/reward.txt
