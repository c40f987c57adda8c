"""The spend ledger (spend.jsonl): one line per model call ever made for a run, crashed, retried
and superseded trials included. The report sets what was spent beside what its tables count."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from tbscale.runfiles import read_spend


@dataclass
class SpendTotals:
    """Calls, tokens and cost over a whole ledger (cost NaN when any call's price was unknown)."""

    calls: int
    input_tokens: int
    output_tokens: int
    cost_usd: float
    trials: int  # trials with at least one call


def spend_totals(run_dir: Path) -> SpendTotals | None:
    """The ledger's totals; None when the run has no ledger (older runs, imported ones)."""
    path = Path(run_dir) / "spend.jsonl"
    if not path.is_file():
        return None
    calls = input_tokens = output_tokens = 0
    cost, trials = 0.0, set()
    for line in read_spend(path):
        calls += line.usage.calls
        input_tokens += line.usage.input
        output_tokens += line.usage.output
        c = line.usage.cost_usd
        cost = math.nan if c is None else cost + c
        trials.add(line.trial_key)
    return SpendTotals(calls, input_tokens, output_tokens, cost, len(trials))
