import csv
import hashlib
import json
from pathlib import Path

OUT = Path("/app/out")


def csv_rows():
    p = OUT / "orders.csv"
    assert p.exists(), "orders.csv missing"
    with p.open(newline="") as f:
        return list(csv.reader(f))


def test_input_untouched():
    assert hashlib.sha256(Path("/app/data/orders.jsonl").read_bytes()).hexdigest() == INPUT_SHA256


def test_bad_lines():
    p = OUT / "bad_lines.txt"
    assert p.exists(), "bad_lines.txt missing"
    assert p.read_text().split() == ["8", "24", "25", "43", "60"]


def test_orders_csv_shape():
    rows = csv_rows()
    assert rows[0] == ["id", "email", "item_count", "total", "status"]
    body = rows[1:]
    assert len(body) == 44
    assert all(r[4] in ("paid", "shipped") for r in body)
    assert all(r[1] == r[1].strip().lower() and r[1].endswith("@shop.example") for r in body)
    assert all(len(r[3].split(".")[1]) == 2 for r in body)


def test_orders_csv_values_and_order():
    body = csv_rows()[1:]
    # spot checks computed by hand from the input
    assert body[0] == ["5026", "fay.brown@shop.example", "15", "1130.45", "paid"]
    assert body[1] == ["5048", "fay.brown@shop.example", "10", "967.50", "paid"]
    assert ["5022", "fay.brown@shop.example", "3", "17.49", "shipped"] in body
    # tie on 17.49: lower id first
    ids = [r[0] for r in body]
    assert ids.index("5022") < ids.index("5031")
    # orders without items are kept with zero totals, ordered by id
    assert ids[-8:] == ["5012", "5016", "5027", "5034", "5035", "5039", "5050", "5057"]
    assert all(r[2] == "0" and r[3] == "0.00" for r in body[-8:])
    totals = [float(r[3]) for r in body]
    assert totals == sorted(totals, reverse=True)
    assert abs(sum(totals) - 9126.57) < 0.02


def test_customers_json():
    p = OUT / "customers.json"
    assert p.exists(), "customers.json missing"
    cust = json.loads(p.read_text())
    body = csv_rows()[1:]
    exp = {}
    for r in body:
        e = exp.setdefault(r[1], [0, 0.0])
        e[0] += 1
        e[1] += float(r[3])
    assert set(cust) == set(exp) and len(cust) == 7
    for k, (n, t) in exp.items():
        assert cust[k]["orders"] == n, k
        assert abs(float(cust[k]["total"]) - t) < 0.011, k
    assert cust["ben.okoro@shop.example"]["orders"] == 11


INPUT_SHA256 = "424b7d95f74eea843de3ebe5ab85c18dba8c8212c4ea3505460a7f37f4865ee1"
