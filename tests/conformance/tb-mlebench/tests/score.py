"""Grade the submission; prints the MLEBench verdict block ("ALL TESTS PASSED" or the failures)."""
import csv

problems = []
expected = {"a": 3.0, "b": 5.0, "c": 21.0}
try:
    with open("/app/submission.csv") as f:
        rows = list(csv.DictReader(f))
    got = {row["id"]: float(row["y"]) for row in rows}
    if set(got) != set(expected):
        problems.append(f"ids {sorted(got)} != {sorted(expected)}")
    problems += [f"{k}: {got[k]} != {v}" for k, v in expected.items() if k in got and abs(got[k] - v) > 1e-6]
except (OSError, KeyError, ValueError) as e:
    problems.append(f"unreadable submission: {e}")
print("MLEBench results starts here")
print("ALL TESTS PASSED" if not problems else "\n".join(problems))
print("MLEBench results ends here")
