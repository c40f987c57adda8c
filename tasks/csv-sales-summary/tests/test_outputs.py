import csv
import hashlib
import json
from pathlib import Path

EXPECTED_REGIONS = {
    "east": {"orders": 41, "units": 437, "revenue": 2562.21},
    "north": {"orders": 49, "units": 523, "revenue": 3326.48},
    "south": {"orders": 41, "units": 407, "revenue": 1625.92},
    "west": {"orders": 37, "units": 363, "revenue": 1762.11},
}


def load_summary():
    p = Path("/app/summary.json")
    assert p.exists(), "/app/summary.json is missing"
    return json.loads(p.read_text())


def test_summary_counts():
    s = load_summary()
    assert s["skipped_rows"] == 12
    assert s["duplicate_rows"] == 6
    assert s["top_product"] == "gadget"


def test_summary_regions():
    s = load_summary()
    assert set(s["regions"]) == set(EXPECTED_REGIONS)
    for name, exp in EXPECTED_REGIONS.items():
        got = s["regions"][name]
        assert got["orders"] == exp["orders"], name
        assert got["units"] == exp["units"], name
        assert abs(float(got["revenue"]) - exp["revenue"]) < 0.011, name


def test_clean_csv():
    p = Path("/app/clean_sales.csv")
    assert p.exists(), "/app/clean_sales.csv is missing"
    with p.open(newline="") as f:
        rows = list(csv.reader(f))
    assert rows[0] == ["order_id", "date", "region", "product", "quantity", "unit_price"]
    body = rows[1:]
    assert len(body) == 168
    ids = [int(r[0]) for r in body]
    assert ids == sorted(ids) and len(set(ids)) == len(ids)
    for r in body:
        assert r[2] in EXPECTED_REGIONS, r
        assert r[4].isdigit() and int(r[4]) > 0, r
        assert r[5] in {"2.50", "12.99", "7.25", "0.99", "4.40"}, r
    # per-region totals recomputed from the cleaned file must agree with the summary
    units = {}
    for r in body:
        units[r[2]] = units.get(r[2], 0) + int(r[4])
    assert units == {k: v["units"] for k, v in EXPECTED_REGIONS.items()}
    # duplicated order ids keep the quantity of their first occurrence in the input
    first = {r[0]: r for r in body}
    src = {}
    with open("/app/data/sales.csv", newline="") as f:
        for r in csv.DictReader(f):
            src.setdefault(r["order_id"], r)
    for oid, r in first.items():
        assert int(r[4]) == int(src[oid]["quantity"]), oid


def test_input_untouched():
    data = Path("/app/data/sales.csv").read_bytes()
    assert hashlib.sha256(data).hexdigest() == SALES_SHA256
SALES_SHA256 = "2d7ac51b4956b0b35a6249d9bcbec1c2b32197e057c3c8260cabaeb413fe8251"
