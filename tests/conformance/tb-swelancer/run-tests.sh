#!/bin/bash
python3 "$TEST_DIR/e2e.py"
