"""The spend ledger (spend.jsonl): one line per model call ever made for a run, crashed, retried
and superseded trials included. The report sets what was spent beside what its tables count."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from tbscale.logs import read_jsonl


def spend_totals(run_dir: Path) -> dict[str, Any] | None:
    """Calls, tokens and cost over the whole ledger (cost NaN when any call's price was unknown);
    None when the run has no ledger (older runs, imported ones)."""
    path = Path(run_dir) / "spend.jsonl"
    if not path.is_file():
        return None
    calls = input_tokens = output_tokens = 0
    cost, trials = 0.0, set()
    for line in read_jsonl(path):
        usage = line.get("usage") or {}
        calls += int(usage.get("calls") or 0)
        input_tokens += int(usage.get("input") or 0)
        output_tokens += int(usage.get("output") or 0)
        c = usage.get("cost_usd")
        cost = math.nan if c is None else cost + float(c)
        trials.add(line.get("trial_key"))
    return {"calls": calls, "input_tokens": input_tokens, "output_tokens": output_tokens, "cost_usd": cost,
            "trials": len(trials)}
