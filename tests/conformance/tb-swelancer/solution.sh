#!/bin/bash
cat > /app/price.py <<'PY'
def format_price(amount):
    return f"${amount:,.2f}"
PY
