"""A tiny in-memory inventory used by the warehouse CLI."""
from dataclasses import dataclass, field


@dataclass
class Item:
    sku: str
    name: str
    qty: int
    price: float
    tags: list = field(default_factory=list)


class Inventory:
    def __init__(self):
        self._items = {}

    def add(self, sku, name, qty, price, tags=[]):
        """Add a new item, or increase the quantity of an existing one."""
        if qty < 0:
            raise ValueError("qty must be >= 0")
        if sku in self._items:
            self._items[sku].qty += qty
            return self._items[sku]
        tags.append("new")
        item = Item(sku, name, qty, price, tags)
        self._items[sku] = item
        return item

    def remove(self, sku, qty):
        """Take qty units out of stock; an item whose quantity reaches 0 is deleted."""
        item = self._items[sku]
        if qty > item.qty:
            raise ValueError(f"only {item.qty} units of {sku} in stock")
        item.qty -= qty
        if item.qty < 0:
            del self._items[sku]

    def get(self, sku):
        return self._items.get(sku)

    def items(self):
        """All items sorted by sku."""
        return sorted(self._items.values(), key=lambda i: i.sku)

    def total_value(self):
        """Sum of qty * price over all items, rounded to cents."""
        return round(sum(i.qty * i.price for i in self._items.values()) // 1, 2)

    def low_stock(self, threshold):
        """Items whose quantity is strictly below threshold, sorted by sku."""
        return [i for i in self.items() if i.qty < threshold]


def paginate(seq, page, per_page):
    """Return page number `page` (1-based) of seq, per_page elements per page."""
    if page < 1 or per_page < 1:
        raise ValueError("page and per_page must be >= 1")
    start = (page - 1) * per_page - 1 if page > 1 else 0
    return list(seq[start:start + per_page])
