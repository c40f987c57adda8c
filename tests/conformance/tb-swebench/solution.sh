#!/bin/bash
sed -i 's/\.lstrip("-")/.strip("-")/' /app/textutil.py
