import subprocess
import sys

import pytest

sys.path.insert(0, "/app/inventory")

from inventory import Inventory, Item, paginate  # noqa: E402


def test_tags_do_not_leak():
    inv = Inventory()
    a = inv.add("A", "a", 1, 1.0)
    b = inv.add("B", "b", 1, 1.0)
    assert a.tags == ["new"]
    assert b.tags == ["new"]
    assert a.tags is not b.tags


def test_caller_tags_not_modified():
    inv = Inventory()
    mine = ["metal"]
    item = inv.add("M", "m", 1, 1.0, mine)
    assert mine == ["metal"]
    assert item.tags == ["metal", "new"]


def test_add_existing_increases_qty():
    inv = Inventory()
    inv.add("A", "a", 2, 1.0)
    inv.add("A", "a", 3, 1.0)
    assert inv.get("A").qty == 5
    assert inv.get("A").tags == ["new"]


@pytest.mark.parametrize("page,expected", [(1, [0, 1, 2]), (2, [3, 4, 5]), (3, [6, 7, 8]), (4, [9]), (5, [])])
def test_paginate(page, expected):
    assert paginate(list(range(10)), page, 3) == expected


def test_paginate_rejects_bad_args():
    with pytest.raises(ValueError):
        paginate([1, 2], 0, 1)
    with pytest.raises(ValueError):
        paginate([1, 2], 1, 0)


def test_total_value_with_cents():
    inv = Inventory()
    inv.add("A", "a", 3, 0.15)
    inv.add("B", "b", 2, 7.99)
    assert inv.total_value() == pytest.approx(16.43)


def test_remove_to_zero_deletes():
    inv = Inventory()
    inv.add("A", "a", 5, 1.0)
    inv.remove("A", 2)
    assert inv.get("A").qty == 3
    inv.remove("A", 3)
    assert inv.get("A") is None
    assert inv.items() == []


def test_remove_too_many_raises():
    inv = Inventory()
    inv.add("A", "a", 1, 1.0)
    with pytest.raises(ValueError):
        inv.remove("A", 2)
    assert inv.get("A").qty == 1


def test_low_stock_and_api():
    inv = Inventory()
    inv.add("B", "b", 1, 1.0)
    inv.add("A", "a", 10, 1.0)
    inv.add("C", "c", 0, 1.0)
    assert [i.sku for i in inv.low_stock(5)] == ["B", "C"]
    assert isinstance(inv.get("A"), Item)


def test_cli_report():
    out = subprocess.run([sys.executable, "/app/inventory/cli.py", "2"], capture_output=True, text=True, check=True).stdout
    lines = out.strip().splitlines()
    assert lines[0].split()[0] == "B-7" and lines[1].split()[0] == "C-3"
    assert lines[0].split()[-1] == "metal,new"
    assert lines[-1] == "total value: 204.76"


def test_existing_suite_passes():
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests"], cwd="/app/inventory", capture_output=True, text=True)
    assert r.returncode == 0, r.stdout
