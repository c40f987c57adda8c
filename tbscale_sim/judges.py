"""Simulated verifier, judge, summarizer and refining-policy roles for the `sim` provider.

Like the rest of tbscale's simulation (tbscale_sim/provider.py) these are not language models. They
let action verification, RTV and PDR run end to end with no API key, with knobs that say how good
each role is. None of them ever sees a verifier result: like `sim/selector`, each reads only its
prompt, and measures what it sees against the task's reference steps (looked up by the task
instruction the prompt contains, `sim.lookup_task`), the way a model that knows the benchmark well
would.

Roles (model `sim/<role>`; parameters under the model's `sim:`):
- `verifier` (`accuracy`, default 0.9): answers the action-verifier prompts of
  tbscale.strategies.verifiers. With probability `accuracy` a candidate is scored by what it is:
  the reference next step scores high (75-100% of the scale), a harmless other command middling
  (25-55%), a rerun, premature submission or response that cannot run low (0-12%); otherwise the
  score is uniform on the scale. Pairwise replies score both sides that way and prefer the
  higher; listwise replies pick like `sim/selector`.
- `judge` (`accuracy`, default 0.9): answers RTV votes over summaries. It reads the commands
  quoted in each summary (```bash blocks) and whether the final state says `submitted`; a summary
  that shows every reference step in order and a submission looks solved. With probability
  `accuracy` it votes for the best-looking summary (ties at random), otherwise uniformly.
- `summarizer` (`accuracy`, default 0.9): writes the structured summary of an attempt from its
  transcript: the commands that ran (quoted), the failing ones, how it stopped. With probability
  `accuracy` the summary is faithful, otherwise lossy (each command dropped with probability 0.4),
  which misleads judges and later attempts as a poor summary would.
- `refiner`: the `policy` role that also learns from earlier attempts. When the instance prompt
  carries `<attempt_summary>` blocks (PDR's refinement context), its per-candidate skill becomes
  `ctx_skill_min + (ctx_skill_max - ctx_skill_min) * q`, where q is the share of those summaries
  that look solved (as the judge reads them); without context it is `skill`. It also answers
  verifier, judge, summarizer and Turn-BoN selector prompts itself, with accuracy
  `self_accuracy` (default 0.7): the generator as its own verifier (self-verification).

The module registers its roles when imported (tbscale_sim registers every role when the provider is loaded, so any
config that uses these strategies has them).
"""

from __future__ import annotations

import json
import random
import re

import tbscale_sim.provider as sim
from tbscale.types.actions import FINISH_MARKER
from tbscale_sim.provider import lookup_task, register_role

TRUNC_MARK = "# ...[truncated]"
_ACTION = re.compile(r'<action turn="\d+">\n```bash\n(.*?)\n```\n</action>', re.DOTALL)
_OBS = re.compile(r'<observation turn="(\d+)">\n(.*?)\n</observation>', re.DOTALL)
_CAND = re.compile(r'<candidate(?: label="([A-Z])")?>\n(.*?)\n</candidate>', re.DOTALL)
_SUMMARY = re.compile(r'<summary id="(\d+)">\n(.*?)\n</summary>', re.DOTALL)
_CTX = re.compile(r'<attempt_summary index="(\d+)">\n(.*?)\n</attempt_summary>', re.DOTALL)
_BASH = re.compile(r"```bash\n(.*?)\n```", re.DOTALL)
_RC = re.compile(r"<returncode>(-?\d+)</returncode>")

ROLE_DEFAULTS = {"self_accuracy": 0.7, "ctx_skill_min": 0.35, "ctx_skill_max": 0.9}


# ---- reading prompts -----------------------------------------------------------------------------
def _same(shown: str, step: str) -> bool:
    shown, step = shown.strip(), step.strip()
    if shown == step:
        return True
    if shown.endswith(TRUNC_MARK):  # a command a summary quoted only in part
        head = shown[: -len(TRUNC_MARK)].rstrip()
        return bool(head) and step.startswith(head)
    return False


def progress_of(steps: list[str], commands: list[str]) -> int:
    """How many reference steps the commands ran, in order (truncation-aware `sim.progress`)."""
    p = 0
    for cmd in commands:
        if p < len(steps) and _same(cmd, steps[p]):
            p += 1
    return p


def summary_looks(steps: list[str] | None, body: str) -> tuple[float, bool]:
    """(score, looks solved) of a summary: share of reference steps its quoted commands show, plus
    a bonus when all ran and the final state says submitted."""
    if not steps:
        return 0.0, False
    cmds = [c for c in _BASH.findall(body) if FINISH_MARKER not in c]
    p = progress_of(steps, cmds)
    submitted = re.search(r"final_state:\s*submitted", body, re.IGNORECASE) is not None
    solved = p == len(steps) and submitted
    return p / len(steps) + (0.5 if solved else 0.0), solved


def _executed(transcript: str) -> list[str]:
    return [c.strip() for c in _ACTION.findall(transcript)]


def _klass(steps: list[str] | None, executed: list[str], cmd: str | None) -> str:
    """good / harmless / bad, by the same rule as `sim/selector` (sim.judge_candidates)."""
    good, harmless = sim.judge_candidates(steps, executed, [cmd])
    return "good" if good else "harmless" if harmless else "bad"


_BANDS = {"good": (0.75, 1.0), "harmless": (0.25, 0.55), "bad": (0.0, 0.12)}


def _score(rng: random.Random, klass: str, lo: int, hi: int, accurate: bool) -> int:
    if not accurate:
        return rng.randint(lo, hi)
    a, b = _BANDS[klass]
    return int(round(lo + (hi - lo) * rng.uniform(a, b)))


def _candidates(text: str) -> list[tuple[str | None, str | None]]:
    out = []
    for label, body in _CAND.findall(text):
        m = re.match(r"```bash\n(.*)\n```$", body.strip(), re.DOTALL)
        out.append((label or None, m.group(1).strip() if m else None))
    return out


def _scale(text: str) -> tuple[int, int]:
    m = re.search(r"integer from (\d+) .*? to (\d+)", text) or re.search(r"integer (\d+)-(\d+)", text)
    return (int(m.group(1)), int(m.group(2))) if m else (1, 10)


# ---- roles ------------------------------------------------------------------------------------------
def _verify(messages, n, rng, params) -> list[str]:
    text = str(messages[-1]["content"])
    kind = re.match(r'<verification kind="(\w+)">', text)
    kind = kind.group(1) if kind else "listwise"
    acc = float(params.get("accuracy", 0.9))
    steps = lookup_task(text)
    if kind == "listwise":
        executed, cands = sim.parse_selector_prompt(text)
        good, harmless = sim.judge_candidates(steps, executed, cands)
        out = []
        for _ in range(n):
            if rng.random() < acc:
                pool = good or harmless or list(range(len(cands)))
            else:
                pool = list(range(len(cands)))
            idx = rng.choice(pool) if pool else 0
            out.append(json.dumps({"rationale": f"Candidate {idx} looks best.", "selected_index": idx}))
        return out
    transcript = text.split("candidate next action", 1)[0]
    executed = _executed(transcript)
    cands = _candidates(text.split("candidate next action", 1)[-1])
    lo, hi = _scale(text)
    out = []
    for _ in range(n):
        accurate = rng.random() < acc
        if kind == "pointwise":
            klass = _klass(steps, executed, cands[0][1] if cands else None)
            s = _score(rng, klass, lo, hi, accurate)
            out.append(json.dumps({"rationale": f"The command looks {klass}.", "score": s}))
        else:
            (_, a), (_, b) = (cands + [(None, None), (None, None)])[:2]
            sa = _score(rng, _klass(steps, executed, a), lo, hi, accurate)
            sb = _score(rng, _klass(steps, executed, b), lo, hi, accurate)
            pref = "A" if sa > sb else "B" if sb > sa else "tie"
            out.append(json.dumps({"rationale": "Compared the two commands.", "score_a": sa, "score_b": sb,
                                   "preference": pref}))
    return out


def _judge(messages, n, rng, params) -> list[str]:
    text = str(messages[-1]["content"])
    acc = float(params.get("accuracy", 0.9))
    steps = lookup_task(text)
    blocks = _SUMMARY.findall(text)
    ids = [int(i) for i, _ in blocks]
    scores = [summary_looks(steps, body)[0] for _, body in blocks]
    out = []
    for _ in range(n):
        if ids and rng.random() < acc:
            top = max(scores)
            best = rng.choice([i for i, s in zip(ids, scores) if s == top])
            why = "its decisions cover what the task needs and it submitted finished work"
        else:
            best = rng.choice(ids) if ids else 1
            why = "no clear difference"
        out.append(json.dumps({"rationale": f"Attempt {best}: {why}.", "best": best}))
    return out


def _summarize(messages, n, rng, params) -> list[str]:
    text = str(messages[-1]["content"])
    acc = float(params.get("accuracy", 0.9))
    obs = {int(t): body for t, body in _OBS.findall(text)}
    turns = re.findall(r'<action turn="(\d+)">\n```bash\n(.*?)\n```\n</action>', text, re.DOTALL)
    stopped = re.search(r"<how_it_stopped>(.*?)</how_it_stopped>", text, re.DOTALL)
    stopped = stopped.group(1).strip() if stopped else "unknown"
    ran = []
    for t, cmd in turns:
        if FINISH_MARKER in cmd:
            continue
        rc = _RC.search(obs.get(int(t), ""))
        ran.append((cmd.strip(), int(rc.group(1)) if rc else None))
    out = []
    for _ in range(n):
        faithful = rng.random() < acc
        kept = ran if faithful else [r for r in ran if rng.random() >= 0.4]
        failing = [c for c, rc in kept if rc not in (0, None)]
        out.append(json.dumps({
            "hypotheses": ["The task can be done with standard command-line tools in the given environment."],
            "key_decisions": [f"ran:\n```bash\n{c}\n```" for c, _ in kept],
            "progress": f"{len(kept)} commands ran, {len(failing)} of them failed.",
            "failure_modes": [f"`{c[:100]}` exited non-zero" for c in failing[:6]],
            "final_state": "submitted" if "submitted" in stopped else f"not submitted: {stopped}",
        }))
    return out


@register_role("verifier")
def sim_verifier(messages, n, rng, params) -> list[str]:
    return _verify(messages, n, rng, params)


@register_role("judge")
def sim_judge(messages, n, rng, params) -> list[str]:
    return _judge(messages, n, rng, params)


@register_role("summarizer")
def sim_summarizer(messages, n, rng, params) -> list[str]:
    return _summarize(messages, n, rng, params)


def context_quality(prompt: str) -> float | None:
    """Share of the refinement-context summaries in an instance prompt that look solved, or None
    when the prompt has no context."""
    blocks = _CTX.findall(prompt)
    if not blocks:
        return None
    steps = lookup_task(prompt)
    return sum(summary_looks(steps, body)[1] for _, body in blocks) / len(blocks)


@register_role("refiner")
def sim_refiner(messages, n, rng, params) -> list[str]:
    p = {**ROLE_DEFAULTS, **params}
    first = str(messages[1].get("content") or "") if len(messages) > 1 else ""
    if len(messages) == 2:  # a one-shot prompt: the generator asked to judge (self-verification)
        judged = {**p, "accuracy": p["self_accuracy"]}
        if first.startswith("<verification"):
            return _verify(messages, n, rng, judged)
        if first.startswith("<judge_attempts>"):
            return _judge(messages, n, rng, judged)
        if first.startswith("<summarize_attempt>"):
            return _summarize(messages, n, rng, judged)
        if first.startswith("<task_prompt>") and "candidate next actions" in first:
            return sim.ROLES["selector"](messages, n, rng, judged)
    q = context_quality(first)
    skill = p["skill"] if q is None else p["ctx_skill_min"] + (p["ctx_skill_max"] - p["ctx_skill_min"]) * q
    return sim.ROLES["policy"](messages, n, rng, {**p, "skill": skill})
