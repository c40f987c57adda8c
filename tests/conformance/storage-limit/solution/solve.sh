#!/bin/bash
df -Pk / > /app/df.txt
