#!/bin/bash
# pytest is not installed (nothing may be downloaded); tests/summary_runner.py runs the checks and
# prints pytest's `-rA` summary, which is what the pytest parser reads.
echo "FAILED lines before the summary header are not results: FAILED checks.py::test_stale"
python3 "$TEST_DIR/summary_runner.py" "$TEST_DIR/checks.py"
