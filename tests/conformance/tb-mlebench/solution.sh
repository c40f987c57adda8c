#!/bin/bash
python3 - <<'PY'
import csv
rows = list(csv.DictReader(open("/app/data/test.csv")))
with open("/app/submission.csv", "w", newline="") as f:
    out = csv.writer(f)
    out.writerow(["id", "y"])
    for row in rows:
        out.writerow([row["id"], 2 * float(row["x"]) + 1])
PY
