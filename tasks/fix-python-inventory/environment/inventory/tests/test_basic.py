import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from inventory import Inventory, paginate


def test_add_and_get():
    inv = Inventory()
    inv.add("X", "thing", 3, 1.0)
    assert inv.get("X").qty == 3


def test_first_page():
    assert paginate(list(range(10)), 1, 3) == [0, 1, 2]
