"""The collect hook: write the live count to a file the artifact entry picks up."""
import json
import os
import urllib.request

stats = json.loads(urllib.request.urlopen("http://127.0.0.1:8000/stats", timeout=5).read())
stats["dumped_by"] = "collect-hook"
os.makedirs("/var/lib/counter", exist_ok=True)
with open("/var/lib/counter/stats.json", "w") as f:
    json.dump(stats, f, sort_keys=True)
