#!/bin/bash
set -e
cat -A /app/config/app.ini | head -40

cat > /app/edit_ini.py <<'PY'
import re
path = "/app/config/app.ini"
changes = {
    "server": {"port": "9090", "workers": "8"},
    "database": {"host": "db.internal", "pool_size": "20"},
    "cache": {"enabled": "true"},
    "features": {"new_checkout": "true"},
}
lines = open(path).read().splitlines()
out, section = [], None
for line in lines:
    m = re.match(r"\s*\[([^\]]+)\]", line)
    if m:
        section = m.group(1)
    kv = re.match(r"\s*([A-Za-z_]+)\s*=", line)
    if kv and section == "features" and kv.group(1) == "legacy_mode":
        if out and out[-1].startswith("#"):
            out.pop()
        continue
    if kv and kv.group(1) in changes.get(section, {}):
        line = f"{kv.group(1)} = {changes[section][kv.group(1)]}"
    out.append(line)
if not any(l.strip() == "[logging]" for l in out):
    out += ["", "[logging]", "level = INFO", "file = /var/log/orders/app.log"]
open(path, "w").write("\n".join(out) + "\n")
PY

python3 /app/edit_ini.py

cat /app/config/app.ini
