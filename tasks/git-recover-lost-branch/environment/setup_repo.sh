#!/bin/bash
# Builds /app/shop: a repository in which the branch feature/payments was deleted and the
# reflogs were expired, so its commits are only reachable as dangling objects.
set -euo pipefail
export GIT_AUTHOR_NAME="Dana Kurz" GIT_AUTHOR_EMAIL="dana@example.com"
export GIT_COMMITTER_NAME="Dana Kurz" GIT_COMMITTER_EMAIL="dana@example.com"
n=0
commit() {  # commit <message>, with deterministic dates
  n=$((n + 1))
  export GIT_AUTHOR_DATE="2024-04-0$((n / 10 + 1))T1$((n % 10)):00:00Z" GIT_COMMITTER_DATE="2024-04-0$((n / 10 + 1))T1$((n % 10)):00:00Z"
  git commit -q -m "$1"
}
mkdir -p /app/shop && cd /app/shop
git init -q -b main .
cat > shop.py <<'PY'
"""Tiny shop core."""

PRICES = {"apple": 0.5, "pear": 0.75, "melon": 3.0}


def price_of(item, qty=1):
    return PRICES[item] * qty
PY
printf '# shop\n\nA tiny shop.\n' > README.md
git add -A && commit "Initial shop core"
cat > cart.py <<'PY'
from shop import price_of


class Cart:
    def __init__(self):
        self.lines = []

    def add(self, item, qty=1):
        self.lines.append((item, qty))

    def total(self):
        return sum(price_of(i, q) for i, q in self.lines)
PY
git add cart.py && commit "Add shopping cart"
git checkout -q -b feature/payments
cat > payments.py <<'PY'
"""Payment processing."""


class Payment:
    def __init__(self, amount):
        self.amount = round(amount, 2)
        self.captured = False

    def capture(self):
        self.captured = True
        return self.amount
PY
git add payments.py && commit "Add payments module"
cat >> payments.py <<'PY'


def refund(payment, amount=None):
    """Refund all or part of a captured payment; returns the refunded amount."""
    if not payment.captured:
        raise ValueError("payment not captured")
    amount = payment.amount if amount is None else round(amount, 2)
    if amount > payment.amount:
        raise ValueError("refund exceeds payment")
    payment.amount = round(payment.amount - amount, 2)
    return amount
PY
git add payments.py && commit "Add refund support"
git checkout -q main
printf '# shop\n\nA tiny shop with a cart.\n\nRun the tests with `python3 -m pytest`.\n' > README.md
git add README.md && commit "Document the cart"
cat >> shop.py <<'PY'


def in_stock(item):
    return item in PRICES
PY
git add shop.py && commit "Add stock check"
# a decoy: an abandoned experiment that was never on any branch
git checkout -q -b experiment
echo 'PRICES["durian"] = 12.0' >> shop.py
git add shop.py && commit "WIP: try exotic fruit"
git checkout -q main
git branch -D experiment >/dev/null
git branch -D feature/payments >/dev/null
git reflog expire --expire=now --all
