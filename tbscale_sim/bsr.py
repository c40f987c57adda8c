"""Simulated BSR pairwise judge: the `sim/bsr_judge` role of the `sim` provider.

Not a language model (like everything in tbscale_sim/provider.py). It answers the pairwise prompts of
tbscale.analysis.bsr by reading the deterministic statistics block (`<stats>{...}</stats>`) of each
trajectory summary and scoring it with fixed rules:

    quality = post_edit_test_rate + 0.5 * min(edit, 3) / 3 - duplicate_rate - 0.5 * errors / max(steps, 1)

(post-edit testing and some editing are good; repeated commands and failing commands are bad). With
probability `accuracy` (default 0.9, from the model's `sim:` parameters) it prefers the trajectory
with higher quality (ties: A) and sets the strength from the quality gap (>= 0.5: 3, >= 0.2: 2,
else 1); otherwise it picks A or B uniformly with strength 1. Every reason says it is simulated.
"""

from __future__ import annotations

import json
import re
from typing import Any

from tbscale_sim.provider import register_role

_TRAJ = re.compile(r'<trajectory label="([AB])">\n<stats>(\{.*?\})</stats>', re.DOTALL)
NOTE = "simulated judge (rule-based, not a language model)"


def quality(stats: dict[str, Any]) -> float:
    def num(key: str) -> float:
        v = stats.get(key)
        return float(v) if isinstance(v, (int, float)) else 0.0

    return (num("post_edit_test_rate") + 0.5 * min(num("edit"), 3.0) / 3.0 - num("duplicate_rate")
            - 0.5 * num("errors") / max(num("steps"), 1.0))


@register_role("bsr_judge")
def sim_bsr_judge(messages, n, rng, params) -> list[str]:
    text = str(messages[-1].get("content") or "")
    found = {label: json.loads(body) for label, body in _TRAJ.findall(text)}
    out = []
    for _ in range(n):
        if set(found) != {"A", "B"}:
            out.append(json.dumps({"winner": rng.choice("AB"), "strength": 1,
                                   "reason": f"{NOTE}: could not read both trajectories' statistics"}))
            continue
        qa, qb = quality(found["A"]), quality(found["B"])
        if rng.random() < float(params.get("accuracy", 0.9)):
            winner = "A" if qa >= qb else "B"
            gap = abs(qa - qb)
            strength = 3 if gap >= 0.5 else 2 if gap >= 0.2 else 1
            why = f"quality {qa:.2f} vs {qb:.2f} (post-edit tests, edits, duplicates, errors)"
        else:
            winner, strength, why = rng.choice("AB"), 1, "no clear preference (noise)"
        out.append(json.dumps({"winner": winner, "strength": strength, "reason": f"{NOTE}: {why}"}))
    return out
