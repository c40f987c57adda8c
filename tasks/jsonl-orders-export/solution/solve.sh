#!/bin/bash
set -e

head -c 600 /app/data/orders.jsonl; echo; wc -l /app/data/orders.jsonl

mkdir -p /app/out

cat > /app/export.py <<'PY'
import csv, json
bad, rows = [], []
with open("/app/data/orders.jsonl") as f:
    for no, line in enumerate(f, 1):
        if not line.strip():
            continue
        try:
            o = json.loads(line)
        except json.JSONDecodeError:
            bad.append(no)
            continue
        if o["status"] == "cancelled":
            continue
        items = o.get("items") or []
        total = round(sum(i["qty"] * i["price"] for i in items), 2)
        rows.append((o["id"], o["customer"]["email"].strip().lower(), sum(i["qty"] for i in items), total, o["status"]))
rows.sort(key=lambda r: (-r[3], r[0]))
with open("/app/out/orders.csv", "w", newline="") as f:
    w = csv.writer(f, lineterminator="\n")
    w.writerow(["id", "email", "item_count", "total", "status"])
    for r in rows:
        w.writerow([r[0], r[1], r[2], f"{r[3]:.2f}", r[4]])
with open("/app/out/bad_lines.txt", "w") as f:
    f.write("".join(f"{n}\n" for n in bad))
cust = {}
for r in rows:
    c = cust.setdefault(r[1], {"orders": 0, "total": 0.0})
    c["orders"] += 1
    c["total"] += r[3]
for c in cust.values():
    c["total"] = round(c["total"], 2)
with open("/app/out/customers.json", "w") as f:
    json.dump(cust, f, indent=2, sort_keys=True)
PY

python3 /app/export.py

head -5 /app/out/orders.csv; cat /app/out/bad_lines.txt
