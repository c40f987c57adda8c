#!/bin/bash
# Like the SWE-bench adapter's script: run the instance's tests, then print the verdict between the
# markers. Lines outside the markers (including this unrelated FAILED) are not the verdict, and the
# exit status is always 0: only the parser decides.
echo "FAILED tests/test_unrelated.py::test_flaky - not part of this instance"
echo "PASSED"
python3 "$TEST_DIR/grade.py"
exit 0
