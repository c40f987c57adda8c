#!/bin/bash
python3 "$TEST_DIR/score.py"
