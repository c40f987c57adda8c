#!/bin/bash
python3 "$TEST_DIR/measure.py"
