#!/bin/bash
set -e

grep -rhoE --include='*.txt' '[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\.[A-Za-z]{2,}' /app/docs | tr 'A-Z' 'a-z' | LC_ALL=C sort -u > /app/emails.txt

cat /app/emails.txt
