#!/bin/bash
set -e

cat /app/inventory/inventory/store.py

cd /app/inventory && python3 cli.py 1 && python3 cli.py 2

sed -i 's/def add(self, sku, name, qty, price, tags=\[\]):/def add(self, sku, name, qty, price, tags=None):/' /app/inventory/inventory/store.py

sed -i 's/^        tags\.append("new")$/        tags = list(tags or []) + ["new"]/' /app/inventory/inventory/store.py

sed -i 's/start = (page - 1) \* per_page - 1 if page > 1 else 0/start = (page - 1) * per_page/' /app/inventory/inventory/store.py

sed -i 's|return round(sum(i.qty \* i.price for i in self._items.values()) // 1, 2)|return round(sum(i.qty * i.price for i in self._items.values()), 2)|' /app/inventory/inventory/store.py

sed -i 's/        if item.qty < 0:/        if item.qty <= 0:/' /app/inventory/inventory/store.py

cd /app/inventory && python3 -m pytest -q -p no:cacheprovider tests && python3 cli.py 1 && python3 cli.py 2 && python3 cli.py 3
