#!/bin/bash
set -e

head -5 /app/data/sales.csv; wc -l /app/data/sales.csv

cat > /app/clean.py <<'PY'
import csv, json
seen, rows, skipped, dups = set(), [], 0, 0
with open("/app/data/sales.csv", newline="") as f:
    for r in csv.DictReader(f):
        if r["order_id"] in seen:
            dups += 1
            continue
        seen.add(r["order_id"])
        q = r["quantity"].strip()
        if not q.isdigit() or int(q) <= 0:
            skipped += 1
            continue
        r["quantity"] = int(q)
        r["region"] = r["region"].strip().lower()
        r["unit_price"] = float(r["unit_price"].strip().lstrip("$").strip())
        rows.append(r)
rows.sort(key=lambda r: int(r["order_id"]))
cols = ["order_id", "date", "region", "product", "quantity", "unit_price"]
with open("/app/clean_sales.csv", "w", newline="") as f:
    w = csv.writer(f, lineterminator="\n")
    w.writerow(cols)
    for r in rows:
        w.writerow([r["order_id"], r["date"], r["region"], r["product"], r["quantity"], f"{r['unit_price']:.2f}"])
regions, products = {}, {}
for r in rows:
    e = regions.setdefault(r["region"], {"orders": 0, "units": 0, "revenue": 0.0})
    e["orders"] += 1
    e["units"] += r["quantity"]
    e["revenue"] += r["quantity"] * r["unit_price"]
    products[r["product"]] = products.get(r["product"], 0) + r["quantity"] * r["unit_price"]
for e in regions.values():
    e["revenue"] = round(e["revenue"], 2)
summary = {"regions": regions, "top_product": max(products, key=products.get),
           "skipped_rows": skipped, "duplicate_rows": dups}
with open("/app/summary.json", "w") as f:
    json.dump(summary, f, indent=2, sort_keys=True)
PY

python3 /app/clean.py

cat /app/summary.json; head -3 /app/clean_sales.csv
