from .store import Item, Inventory, paginate

__all__ = ["Item", "Inventory", "paginate"]
