"""The end-to-end check; its last line is the SWE-Lancer verdict."""
import sys

sys.path.insert(0, "/app")
try:
    from price import format_price
    ok = [format_price(x) for x in (1234.5, 0, 1000000)] == ["$1,234.50", "$0.00", "$1,000,000.00"]
except Exception as e:  # noqa: BLE001
    print(f"error: {e}")
    ok = False
print("SWE Lancer success" if ok else "SWE Lancer failure")
