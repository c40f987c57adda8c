"""FAIL_TO_PASS and PASS_TO_PASS checks for slugify(); prints the SWEBench verdict block."""
import sys

sys.path.insert(0, "/app")
from textutil import slugify  # noqa: E402

fail_to_pass = [("Hello, World!", "hello-world"), ("trailing---", "trailing")]
pass_to_pass = [("Already-Slugged", "already-slugged"), ("  spaced  out ", "spaced-out")]
resolved = all(slugify(given) == want for given, want in fail_to_pass + pass_to_pass)
print("SWEBench results starts here")
print("PASSED" if resolved else "FAILED")
print("SWEBench results ends here")
