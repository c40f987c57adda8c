"""Simulated CER judge (`sim/cer_judge`) for the `sim` provider. SIMULATED: not a language model.

It answers the two prompts of tbscale.strategies.cer:
- `<cer_rubrics ...>`: a fixed rubric set (a group one: progress bucket, failing commands; a
  tie-break one: finer progress, fewer wasted turns), as a real judge would write criteria;
- `<cer_score ...>`: per continuation (and id 0, the shared prefix alone, when asked), a score per
  criterion with evidence. It reads the commands shown (shared prefix + continuation), measures
  them against the task's reference steps (`sim.lookup_task`, as the other simulated judges do)
  and, with probability `accuracy` (default 0.85), scores by what it sees; otherwise a criterion
  gets a uniformly random score. The group criterion is deliberately COARSE (nothing / some / all
  reference steps done: 0, 2 or 4), so sibling continuations often tie at the top and CER's
  tie-breaking has something to do; the tie-break criterion counts steps exactly (0..4 scaled).

It never sees a verifier result. Parameters under the model's `sim:` (`accuracy`).
"""

from __future__ import annotations

import json
import re

from tbscale.types.actions import FINISH_MARKER
from tbscale_sim.provider import lookup_task, progress, register_role

_CONT = re.compile(r'<continuation id="(\d+)" stopped="([^"]*)">\n(.*?)\n</continuation>', re.DOTALL)
_SHARED = re.compile(r"<shared_prefix>\n(.*?)\n</shared_prefix>", re.DOTALL)
_ACTION = re.compile(r'<action turn="\d+">\n(?:```bash\n(.*?)\n```|\[response with no runnable command\])\n</action>', re.DOTALL)
_RC = re.compile(r"<returncode>(-?\d+)</returncode>")
_IDS = re.compile(r"with ids \[([\d, ]*)\]")
_CRIT_ID = re.compile(r'^- id "([^"]+)"', re.MULTILINE)

GROUP_RUBRICS = [
    {"id": "c1", "criterion": "Has carried out the changes the task requires (nothing / part / all of them).",
     "weight": 3, "polarity": "positive"},
    {"id": "c2", "criterion": "Any command that failed or could not run.", "weight": 1, "polarity": "negative"},
]
TIE_RUBRICS = [
    {"id": "t1", "criterion": "How many of the required steps are already done, counted exactly.",
     "weight": 2, "polarity": "positive"},
    {"id": "t2", "criterion": "Turns wasted on repeated or irrelevant commands.", "weight": 1, "polarity": "negative"},
]


def _commands(text: str) -> tuple[list[str | None], int]:
    """(commands in order, None for an unrunnable response; number of non-zero return codes)."""
    cmds = [m.strip() if m else None for m in _ACTION.findall(text)]
    fails = sum(1 for rc in _RC.findall(text) if int(rc) != 0)
    return cmds, fails


def _view(steps: list[str] | None, shared: str, own: str) -> dict[str, float]:
    s_cmds, s_fail = _commands(shared)
    o_cmds, o_fail = _commands(own)
    cmds = [c for c in s_cmds + o_cmds if c and FINISH_MARKER not in c]
    done = progress(steps, cmds) if steps else 0
    frac = done / len(steps) if steps else 0.0
    useless = sum(1 for c in s_cmds + o_cmds if c is None) + max(0, len(cmds) - done)
    return {"frac": frac, "done": done, "fails": o_fail + s_fail, "useless": useless, "n": len(s_cmds + o_cmds)}


def _score_one(crit: str, v: dict[str, float]) -> tuple[int, str]:
    if crit == "c1":
        s = 0 if v["frac"] <= 0 else 4 if v["frac"] >= 1 else 2
        return s, f"{int(v['done'])} required steps visible"
    if crit == "c2":  # coarse too: any failure at all
        return (4 if v["fails"] else 0), f"{int(v['fails'])} commands exited non-zero"
    if crit == "t1":
        return int(round(4 * v["frac"])), f"{int(v['done'])} required steps done"
    if crit == "t2":
        return min(4, int(v["useless"]) // 2), f"{int(v['useless'])} turns did not advance the task"
    return 2, "no specific evidence"


@register_role("cer_judge")
def sim_cer_judge(messages, n, rng, params) -> list[str]:
    text = str(messages[-1]["content"])
    acc = float(params.get("accuracy", 0.85))
    out = []
    if text.startswith("<cer_rubrics"):
        tie = 'purpose="tie_break"' in text.split("\n", 1)[0]
        for _ in range(n):
            out.append(json.dumps({"rationale": "simulated rubric set", "criteria": TIE_RUBRICS if tie else GROUP_RUBRICS}))
        return out
    if text.startswith("<cer_score"):
        steps = lookup_task(text)
        shared_m = _SHARED.search(text)
        shared = shared_m.group(1) if shared_m else ""
        conts = {int(i): body for i, _, body in _CONT.findall(text)}
        m = _IDS.search(text)
        ids = [int(x) for x in m.group(1).split(",") if x.strip()] if m else sorted(conts)
        crits = _CRIT_ID.findall(text.split("<rubrics>", 1)[-1].split("</rubrics>", 1)[0])
        for _ in range(n):
            cands = []
            for i in ids:
                v = _view(steps, shared, conts.get(i, "") if i != 0 else "")
                scores = []
                for c in crits:
                    s, ev = _score_one(c, v)
                    if rng.random() >= acc:
                        s, ev = rng.randint(0, 4), "unclear evidence"
                    scores.append({"criterion": c, "score": s, "evidence": ev})
                cands.append({"id": i, "scores": scores})
            out.append(json.dumps({"candidates": cands}))
        return out
    return [json.dumps({"error": "sim/cer_judge only answers CER rubric and scoring prompts"})] * n
