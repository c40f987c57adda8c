import csv
import shutil
import sqlite3
from pathlib import Path

DB = "/app/shop.db"
EXPECTED_REVENUE = {
    1: 761.17, 2: 766.39, 3: 1150.55, 4: 1842.17, 5: 2005.44, 6: 980.7, 7: 840.96, 8: 1036.74,
    9: 1251.18, 10: 595.27, 11: 724.5, 12: 749.41, 13: 637.01, 14: 229.56, 15: 569.5, 16: 662.5,
    17: 966.83, 18: 1060.9, 19: 67.9, 20: 1546.26, 21: 379.11, 22: 1297.0, 23: 277.67, 24: 1107.39,
    25: 535.61, 26: 689.98, 27: 1199.66, 28: 0.0, 29: 0.0, 30: 0.0,
}


def connect(path=DB):
    return sqlite3.connect(path)


def test_statuses_normalised():
    rows = dict(connect().execute("SELECT status, count(*) FROM orders GROUP BY status").fetchall())
    assert rows == {"cancelled": 13, "paid": 154, "pending": 28, "refunded": 25}


def test_data_otherwise_intact():
    db = connect()
    assert db.execute("SELECT count(*) FROM orders").fetchone()[0] == 220
    assert db.execute("SELECT count(*) FROM customers").fetchone()[0] == 30
    assert db.execute("SELECT round(sum(qty * unit_price), 2) FROM order_items").fetchone()[0] == 34969.33


def test_view_values():
    db = connect()
    kind = db.execute("SELECT type FROM sqlite_master WHERE name = 'customer_revenue'").fetchone()
    assert kind == ("view",)
    cols = [d[0] for d in db.execute("SELECT * FROM customer_revenue LIMIT 1").description]
    assert cols == ["customer_id", "name", "revenue"]
    rows = db.execute("SELECT customer_id, name, revenue FROM customer_revenue").fetchall()
    assert len(rows) == 30
    got = {r[0]: float(r[2] or 0) for r in rows}
    assert got.keys() == EXPECTED_REVENUE.keys()
    for k, v in EXPECTED_REVENUE.items():
        assert abs(got[k] - v) < 0.005, (k, got[k], v)
    names = dict(db.execute("SELECT id, name FROM customers").fetchall())
    assert all(r[1] == names[r[0]] for r in rows)


def test_view_is_live(tmp_path):
    copy = tmp_path / "copy.db"
    shutil.copy(DB, copy)
    db = connect(copy)
    db.execute("INSERT INTO orders VALUES (999, 30, '2024-06-01', 'paid')")
    db.execute("INSERT INTO order_items VALUES (999, 1, 2, 10.0)")
    db.execute("INSERT INTO orders VALUES (1000, 5, '2024-06-02', 'pending')")
    db.execute("INSERT INTO order_items VALUES (1000, 1, 3, 100.0)")
    db.commit()
    got = dict(db.execute("SELECT customer_id, revenue FROM customer_revenue").fetchall())
    assert abs(float(got[30]) - 20.0) < 0.005
    assert abs(float(got[5]) - 2005.44) < 0.005


def test_index():
    row = connect().execute(
        "SELECT tbl_name FROM sqlite_master WHERE type = 'index' AND name = 'idx_orders_customer'").fetchone()
    assert row == ("orders",)
    cols = [r[2] for r in connect().execute("PRAGMA index_info('idx_orders_customer')").fetchall()]
    assert cols == ["customer_id"]


def test_categories_report():
    p = Path("/app/reports/categories_2023.csv")
    assert p.exists()
    with p.open(newline="") as f:
        rows = list(csv.reader(f))
    assert rows == [
        ["category", "orders", "revenue"],
        ["kitchen", "42", "4037.90"],
        ["toys", "29", "3973.23"],
        ["books", "38", "2277.36"],
        ["garden", "31", "2190.87"],
    ]
