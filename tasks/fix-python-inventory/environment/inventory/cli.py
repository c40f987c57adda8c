"""Print a stock report: python3 cli.py [page]"""
import sys

from inventory import Inventory, paginate

inv = Inventory()
inv.add("A-1", "bolt", 120, 0.15)
inv.add("A-2", "nut", 300, 0.05)
inv.add("B-7", "bracket", 12, 3.4, ["metal"])
inv.add("C-3", "hinge", 4, 7.99)
inv.add("D-9", "panel", 2, 49.5)
page = int(sys.argv[1]) if len(sys.argv) > 1 else 1
for item in paginate(inv.items(), page, 2):
    print(f"{item.sku:5} {item.name:8} {item.qty:4} {item.price:7.2f} {','.join(item.tags)}")
print(f"total value: {inv.total_value():.2f}")
