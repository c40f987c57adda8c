"""Behavioral self-rewarding (BSR): verifier-conditioned reward refinement from pairwise judgments.

Offline version of the method in /work/shared/seeds/bsr-self-reward.txt (SPEC "bsr-self-reward.txt"),
run over finished tbscale runs. See docs/bsr.md for the full description; in short:

1. **Groups**: all trials of one task within one setting (``group_by="setting"``) or of one task
   across every given setting and run (``group_by="task"``).
2. **Buckets**: inside a group, trajectories are split by verifier outcome (``passed``): bucket 0
   (fail) and bucket 1 (pass). Only the buckets named in ``BsrParams.buckets`` are judged
   (paper's main setting: failure only, ``a1 = 0``).
3. **Schedule** (Appendix A.1): exhaustive pairs for ``2 <= n < 5``; Swiss rounds for ``n >= 5``
   with ``T = min(ceil(log2 n) + 2, n - 1)`` rounds and at most ``floor(n/2)`` comparisons per
   round, pairing by current net weighted wins and never repeating a pair.
4. **Judge**: a model (any litellm model, or ``sim/bsr_judge``) sees the task instruction, the
   shared outcome and two trajectory summaries (presentation order randomized with the seed), and
   answers JSON ``{"winner": "A"|"B", "strength": 1|2|3, "reason": ...}``.
5. **Bradley-Terry** (Appendix A.2, formula lost in extraction): maximize
   ``sum_c alpha_c * log sigmoid(s_win - s_lose) - lam/2 * ||s||^2`` by Newton's method (the
   objective is strictly concave for ``lam > 0``, so the optimum is unique).
6. **Reward mapping** (formulas lost in extraction; our choices, all parameters):
   ``z = (s - mean s) / std s`` (0 when std is 0);
   soft deadzone ``d = sign(z) * (g(|z|) - g(0))`` with ``g(x) = tau * softplus((x - delta) / tau)``
   (``tau = 0`` gives the hard deadzone ``max(|z| - delta, 0)``, ``delta = tau = 0`` the identity);
   centre ``u = d - mean d``; bound ``aux = a_y * u / max|u|`` so ``|aux| <= a_y`` and the bucket's
   largest deviation has amplitude exactly ``a_y``.
7. **Ordering guarantee**: refined = reward + aux. If ``a0 + a1`` is not smaller than the gap
   between the lowest passing and highest failing verifier reward, both amplitudes are shrunk to
   ``(1 - margin) * gap``; every passing trajectory then keeps a strictly higher refined reward than
   every failing one, which :func:`refine` asserts.
8. **Random control**: the same mapping with ``u`` drawn uniformly from [-1, 1] and centred, then
   bounded the same way (same amplitude ``a_y``), with no judge calls.

Behaviour statistics (Table 9) use tbscale.analysis.behaviours for every command classification.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import math
import random
import re
import shlex
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from tbscale.analysis.behaviours import (
    FINISH_MARKER,
    HistoryState,
    extract_commands,
    label_candidate,
    program_of,
)
from tbscale.errors import TbscaleError
from tbscale.logs import read_jsonl
from tbscale.models import sim_bsr  # noqa: F401  registers sim/bsr_judge

FAIL, PASS = 0, 1
BUCKET_NAMES = {FAIL: "fail", PASS: "pass"}
SEARCH_PROGRAMS = frozenset({"grep", "egrep", "fgrep", "rg", "ag", "ack", "find", "fd", "locate", "git-grep"})
READ_FILE_PROGRAMS = frozenset({"cat", "head", "tail", "less", "more", "nl", "bat", "sed", "awk", "wc", "view"})


@dataclass
class BsrParams:
    """Every constant of the method; defaults are the paper's main setting (Section 4)."""

    a0: float = 0.15  # amplitude of the failure bucket's auxiliary rewards
    a1: float = 0.0  # amplitude of the success bucket's auxiliary rewards
    delta: float = 0.5  # deadzone half-width, in standard deviations of the normalized scores
    tau: float = 0.5  # softness of the deadzone (0: hard deadzone)
    buckets: tuple[str, ...] = ("fail",)  # which outcome buckets are judged
    bt_l2: float = 0.1  # L2 regularization of the Bradley-Terry scores
    margin: float = 0.01  # share of the pass/fail reward gap kept free when amplitudes must shrink
    group_by: str = "setting"  # "setting": task x setting; "task": task across settings and runs
    random_control: bool = False
    seed: int = 0
    judge_tries: int = 2  # calls per pair until a reply parses
    concurrency: int = 8
    # trajectory summaries
    short_obs_chars: int = 1200
    error_obs_chars: int = 4000
    head_tail_chars: int = 500
    max_summary_chars: int = 30000
    conversion_window: int = 5  # steps after a search in which an edit counts as its conversion

    def amplitude(self, bucket: int) -> float:
        return self.a1 if bucket == PASS else self.a0


# ---------------------------------------------------------------------------------------------
# Scheduling
# ---------------------------------------------------------------------------------------------


def swiss_rounds(n: int) -> int:
    """T = min(ceil(log2 n) + 2, n - 1) (Table 6)."""
    return min(math.ceil(math.log2(n)) + 2, n - 1) if n >= 2 else 0


def exhaustive_pairs(n: int) -> list[tuple[int, int]]:
    return [(i, j) for i in range(n) for j in range(i + 1, n)]


def swiss_round_pairs(scores: Sequence[float], played: set[frozenset[int]], rng: random.Random) -> list[tuple[int, int]]:
    """One Swiss round: order by current score (ties in seeded random order), then pair each unpaired
    player with the nearest-ranked unpaired one it has not met yet. At most floor(n/2) pairs."""
    n = len(scores)
    jitter = [rng.random() for _ in range(n)]
    order = sorted(range(n), key=lambda i: (-scores[i], jitter[i]))
    used: set[int] = set()
    pairs: list[tuple[int, int]] = []
    for a_pos, i in enumerate(order):
        if i in used:
            continue
        for j in order[a_pos + 1:]:
            if j not in used and frozenset((i, j)) not in played:
                pairs.append((i, j))
                used.update((i, j))
                break
    return pairs[: n // 2]


# ---------------------------------------------------------------------------------------------
# Bradley-Terry and the reward mapping
# ---------------------------------------------------------------------------------------------


def fit_bradley_terry(n: int, comparisons: Sequence[tuple[int, int, float]], l2: float = 0.1,
                      iters: int = 100, tol: float = 1e-10) -> np.ndarray:
    """Scores s (length n) maximizing sum w*log sigmoid(s_winner - s_loser) - l2/2 * ||s||^2.

    ``comparisons``: (winner, loser, weight). Newton's method on a strictly concave objective
    (l2 > 0), with step halving as a safeguard. Unconnected or uncompared players stay at 0.
    """
    if l2 <= 0:
        raise ValueError("bt_l2 must be > 0 (the fit is otherwise unbounded when one side never loses)")
    s = np.zeros(n)
    if n == 0 or not comparisons:
        return s
    win = np.array([c[0] for c in comparisons])
    lose = np.array([c[1] for c in comparisons])
    w = np.array([float(c[2]) for c in comparisons])

    def objective(x: np.ndarray) -> float:
        return float(np.sum(w * -np.logaddexp(0.0, -(x[win] - x[lose]))) - l2 / 2 * x @ x)

    current = objective(s)
    for _ in range(iters):
        p = 1.0 / (1.0 + np.exp(-(s[win] - s[lose])))  # P(winner beats loser)
        g = -l2 * s
        np.add.at(g, win, w * (1 - p))
        np.add.at(g, lose, -w * (1 - p))
        h = -l2 * np.eye(n)
        c = w * p * (1 - p)
        np.add.at(h, (win, win), -c)
        np.add.at(h, (lose, lose), -c)
        np.add.at(h, (win, lose), c)
        np.add.at(h, (lose, win), c)
        step = np.linalg.solve(h, -g)
        t = 1.0
        while t > 1e-6:
            cand = s + t * step
            value = objective(cand)
            if value >= current - 1e-12:
                break
            t /= 2
        s, improvement = cand, value - current
        current = value
        if np.max(np.abs(t * step)) < tol or abs(improvement) < tol:
            break
    return s


def normalize(scores: np.ndarray) -> np.ndarray:
    scores = np.asarray(scores, dtype=float)
    if scores.size == 0:
        return scores
    sd = scores.std()
    return np.zeros_like(scores) if sd < 1e-12 else (scores - scores.mean()) / sd


def soft_deadzone(z: np.ndarray, delta: float, tau: float) -> np.ndarray:
    """sign(z) * (g(|z|) - g(0)), g(x) = tau*softplus((x - delta)/tau); tau=0: max(|z|-delta, 0)*sign(z)."""
    z = np.asarray(z, dtype=float)
    a = np.abs(z)
    if tau <= 0:
        return np.sign(z) * np.maximum(a - delta, 0.0)
    g = tau * np.logaddexp(0.0, (a - delta) / tau)
    g0 = tau * np.logaddexp(0.0, -delta / tau)
    return np.sign(z) * (g - g0)


def center_and_bound(d: np.ndarray, amplitude: float) -> np.ndarray:
    """Centre on the bucket mean, then scale so the largest |value| is exactly `amplitude`."""
    d = np.asarray(d, dtype=float)
    if d.size == 0:
        return d
    u = d - d.mean()
    top = np.max(np.abs(u))
    return np.zeros_like(u) if top < 1e-12 else amplitude * u / top


def aux_from_scores(scores: np.ndarray, amplitude: float, delta: float, tau: float) -> np.ndarray:
    return center_and_bound(soft_deadzone(normalize(scores), delta, tau), amplitude)


def random_aux(n: int, amplitude: float, rng: np.random.Generator) -> np.ndarray:
    """Random-reward control: uniform draws, centred and bounded exactly like BSR's rewards."""
    if n < 2:
        return np.zeros(n)
    return center_and_bound(rng.uniform(-1.0, 1.0, size=n), amplitude)


def effective_amplitudes(rewards: Sequence[float], passed: Sequence[bool], a0: float, a1: float,
                         margin: float = 0.01) -> tuple[float, float, float]:
    """(a0, a1, scale): shrink both amplitudes when a0 + a1 would let a failure reach a pass."""
    r = np.asarray(rewards, dtype=float)
    p = np.asarray(passed, dtype=bool)
    if not p.any() or p.all() or a0 + a1 <= 0:
        return a0, a1, 1.0
    gap = float(r[p].min() - r[~p].max())
    if gap <= 0:
        raise TbscaleError(f"a passing trajectory has verifier reward {r[p].min()} <= a failing one's {r[~p].max()}: "
                           "no refinement can keep passes above failures")
    scale = min(1.0, (1 - margin) * gap / (a0 + a1))
    return a0 * scale, a1 * scale, scale


def check_ordering(refined: Sequence[float], passed: Sequence[bool]) -> bool:
    r = np.asarray(refined, dtype=float)
    p = np.asarray(passed, dtype=bool)
    return bool(not p.any() or p.all() or r[p].min() > r[~p].max())


# ---------------------------------------------------------------------------------------------
# Trajectories: events of the final attempt, behaviour statistics, summaries
# ---------------------------------------------------------------------------------------------


@dataclass
class Step:
    turn: int
    command: str | None  # None: the turn had no runnable action (format error)
    exit_code: int | None = None
    output: str = ""
    timed_out: bool = False


def load_steps(path: Path, attempt: int) -> tuple[list[Step], str]:
    """Steps of one attempt (action + observation per turn) and the task instruction (if logged)."""
    steps: dict[int, Step] = {}
    instruction = ""
    for ev in read_jsonl(path):
        t = ev.get("type")
        if t == "start":
            instruction = ev.get("instruction") or ""
            continue
        if ev.get("attempt") != attempt or ev.get("turn") is None:
            continue
        turn = int(ev["turn"])
        if t == "action":
            steps[turn] = Step(turn, ev.get("command") or "")
        elif t == "observation" and turn in steps:
            s = steps[turn]
            s.exit_code, s.output, s.timed_out = ev.get("exit_code"), ev.get("output") or "", bool(ev.get("timed_out"))
        elif t == "format_error" and turn not in steps:
            steps[turn] = Step(turn, None, output=str(ev.get("error") or ""))
    return [steps[k] for k in sorted(steps)], instruction


def _paths_in(command: str) -> tuple[set[str], set[str]]:
    """(files read, files edited) named in one command: a deliberately small rule set (positional
    arguments of file viewers; output redirections, tee, and sed/perl -i targets)."""
    read, edited = set(), set()
    for cmd in extract_commands(command):
        program = program_of(cmd)
        try:
            words = shlex.split(cmd, posix=True)
        except ValueError:
            words = cmd.split()
        # output redirections
        for i, w in enumerate(words):
            m = re.match(r"^\d*(>>?|&>>?)(.*)$", w)
            if m:
                target = m.group(2) or (words[i + 1] if i + 1 < len(words) else "")
                if target and not target.startswith(("/dev/", "&", "/tmp/", "/var/tmp/")):
                    edited.add(target)
        try:
            start = words.index(program) + 1 if program in words else 1
        except ValueError:
            start = 1
        args = [w for w in words[start:] if not re.match(r"^\d*(>>?|&>>?|<)", w)]
        positional = [a for a in args if not a.startswith("-")]
        if program == "tee":
            edited.update(a for a in positional if not a.startswith(("/dev/", "/tmp/")))
        elif program in ("sed", "perl") and any(a.startswith(("-i", "-pi")) for a in args):
            edited.update(positional[1:])
        elif program in READ_FILE_PROGRAMS:
            files = positional[1:] if program in ("sed", "awk") else positional
            if program in ("head", "tail"):  # -n N takes a value
                files = [a for k, a in enumerate(args) if not a.startswith("-")
                         and not (k > 0 and args[k - 1] in ("-n", "-c"))]
            read.update(f for f in files if not f.isdigit() and f not in ("EOF",))
    return read, edited


def behaviour_stats(steps: Sequence[Step], conversion_window: int = 5) -> dict[str, Any]:
    """Table 9 statistics of one attempt. Classification comes from tbscale.analysis.behaviours:
    edit = `edits_file`, test = `runs_test_or_check`, post-edit test = `tests_last_edit`, duplicate =
    `loops_on_command` (a repeat since the last edit, waits excluded); search = a read-only step whose
    commands include a search program (grep, rg, find, ...); read = any other read-only step."""
    history = HistoryState()
    kinds: list[set[str]] = []
    files_read: set[str] = set()
    files_edited: set[str] = set()
    errors = 0
    executed = 0
    for step in steps:
        cmd = step.command
        if cmd is None:
            kinds.append({"format_error"})
            continue
        submission = FINISH_MARKER in cmd
        labels = label_candidate(cmd, is_submission=submission, cannot_run=False, history=history)
        history = history.after(cmd)
        k: set[str] = set()
        if submission:
            k.add("submission")
        else:
            executed += 1
            k.add("cmd")
            programs = {program_of(c) for c in extract_commands(cmd)}
            if "git" in programs and re.search(r"\bgit\s+grep\b", cmd):
                programs.add("git-grep")
            if "edits_file" in labels:
                k.add("edit")
            if "runs_test_or_check" in labels:
                k.add("test")
            if "tests_last_edit" in labels:
                k.add("post_edit_test")
            if "loops_on_command" in labels:
                k.add("duplicate")
            if "edit" not in k and programs & SEARCH_PROGRAMS:
                k.add("search")
            elif "only_reads" in labels:
                k.add("read")
            r, e = _paths_in(cmd)
            files_read |= r
            files_edited |= e
        if step.exit_code not in (None, 0) or step.timed_out:
            errors += 1
        kinds.append(k)
    edit_idx = [i for i, k in enumerate(kinds) if "edit" in k]
    search_idx = [i for i, k in enumerate(kinds) if "search" in k]
    n_edit = len(edit_idx)
    converted = sum(any("edit" in kinds[j] for j in range(i + 1, min(len(kinds), i + 1 + conversion_window)))
                    for i in search_idx)
    last_edit = edit_idx[-1] if edit_idx else None
    return {
        "steps": len(steps),
        "commands": executed,
        "first_edit_step": edit_idx[0] + 1 if edit_idx else None,
        "search": len(search_idx),
        "read": sum("read" in k for k in kinds),
        "edit": n_edit,
        "test": sum("test" in k for k in kinds),
        "post_edit_tests": sum("post_edit_test" in k for k in kinds),
        "post_edit_test_rate": (min(1.0, sum("post_edit_test" in k for k in kinds) / n_edit) if n_edit else None),
        "search_to_edit": converted / len(search_idx) if search_idx else None,
        "duplicate_rate": sum("duplicate" in k for k in kinds) / executed if executed else 0.0,
        "errors": errors,
        "files_read": len(files_read),
        "files_edited": len(files_edited),
        "commands_before_final_edit": (sum("cmd" in k for k in kinds[:last_edit]) if last_edit is not None
                                       else executed),
        "commands_after_final_edit": sum("cmd" in k for k in kinds[last_edit + 1:]) if last_edit is not None else 0,
    }


_ERROR_RE = re.compile(r"Traceback|Error\b|Exception|error:|FAILED|fatal:|No such file|command not found", re.IGNORECASE)


def render_action(command: str | None) -> str:
    """Compact function-style action: bash(command="...") (JSON-escaped; multiline kept multiline)."""
    if command is None:
        return "(no runnable action: the reply had no valid command)"
    if "\n" in command:
        return 'bash(command="""\n' + command + '\n""")'
    return f"bash(command={json.dumps(command, ensure_ascii=False)})"


def reduce_observation(output: str, p: BsrParams) -> str:
    """Short outputs whole; outputs with errors/tracebacks whole up to error_obs_chars (then head +
    tail); other long outputs head + tail with an omission marker. Deterministic: the paper's LLM
    summary fallback for long leftovers is replaced by this head + tail truncation."""
    if len(output) <= p.short_obs_chars:
        return output
    limit = p.error_obs_chars if _ERROR_RE.search(output) else 2 * p.head_tail_chars
    if len(output) <= limit:
        return output
    keep = max(p.head_tail_chars, limit // 2)
    omitted = len(output) - 2 * keep
    return f"{output[:keep]}\n[... {omitted} characters omitted ...]\n{output[-keep:]}"


def summarize(steps: Sequence[Step], stats: dict[str, Any], p: BsrParams) -> str:
    """The judge's view of one trajectory: a statistics block, then step by step action + outcome."""
    shown = {k: stats[k] for k in ("steps", "first_edit_step", "search", "read", "edit", "test", "post_edit_tests",
                                    "post_edit_test_rate", "duplicate_rate", "errors", "files_read", "files_edited",
                                    "commands_before_final_edit", "commands_after_final_edit")}
    parts = []
    for s in steps:
        block = f"[step {s.turn}] {render_action(s.command)}"
        if s.command is not None:
            code = "timeout" if s.timed_out else s.exit_code
            block += f"\n-> exit {code}\n{reduce_observation(s.output, p)}".rstrip()
        parts.append(block)
    body = "\n".join(parts)
    if len(body) > p.max_summary_chars:
        half = p.max_summary_chars // 2
        body = f"{body[:half]}\n[... {len(body) - 2 * half} characters of steps omitted ...]\n{body[-half:]}"
    return f"<stats>{json.dumps(shown)}</stats>\n{body}"


# ---------------------------------------------------------------------------------------------
# Judge prompts and calls
# ---------------------------------------------------------------------------------------------

SYSTEM_FAIL = (
    "You compare two attempts by a terminal agent at the same task. BOTH attempts FAILED the task's tests. "
    "Decide which attempt shows more useful progress toward eventual success: did it search the right part "
    "of the environment, gather useful evidence, make directionally plausible edits, verify them, and fail in a "
    "recoverable way? Judge the observable actions and their outcomes, not writing style or confidence.")
SYSTEM_PASS = (
    "You compare two attempts by a terminal agent at the same task. BOTH attempts PASSED the task's tests. "
    "Decide which attempt solved the task better: acted efficiently, made a targeted change, avoided brittle or "
    "unnecessary changes, and verified the result. Judge the observable actions and their outcomes, not writing "
    "style or confidence.")
ANSWER = ('Answer with JSON only: {"winner": "A" or "B", "strength": 1, 2 or 3 (slight, clear, strong preference), '
          '"reason": "one sentence"}')


def judge_messages(instruction: str, bucket: int, summary_a: str, summary_b: str) -> list[dict[str, str]]:
    user = (f"<task>\n{instruction.strip() or '(instruction not recorded)'}\n</task>\n\n"
            f"Shared verifier outcome: {'PASSED' if bucket == PASS else 'FAILED'}\n\n"
            f'<trajectory label="A">\n{summary_a}\n</trajectory>\n\n'
            f'<trajectory label="B">\n{summary_b}\n</trajectory>\n\n{ANSWER}')
    return [{"role": "system", "content": SYSTEM_PASS if bucket == PASS else SYSTEM_FAIL},
            {"role": "user", "content": user}]


def parse_judgment(text: str) -> dict[str, Any] | None:
    m = re.search(r"\{.*\}", text or "", re.DOTALL)
    if not m:
        return None
    try:
        obj = json.loads(m.group(0))
    except json.JSONDecodeError:
        return None
    winner = str(obj.get("winner", "")).strip().upper()
    try:
        strength = int(obj.get("strength", 1))
    except (TypeError, ValueError):
        return None
    if winner not in ("A", "B"):
        return None
    return {"winner": winner, "strength": min(3, max(1, strength)), "reason": str(obj.get("reason", ""))[:500]}


def verifier_reward(row: dict[str, Any]) -> float:
    """The trial's verifier reward; a missing one counts as 1.0 for a pass and 0.0 for a failure."""
    r = row.get("reward")
    try:
        r = float(r)
    except (TypeError, ValueError):
        r = math.nan
    return float(bool(row["passed"])) if math.isnan(r) else r


def _seed(*parts: Any) -> int:
    return int(hashlib.sha256("|".join(map(str, parts)).encode()).hexdigest()[:8], 16) % (2**31)


JudgeFn = Callable[[list[dict[str, str]], int], Any]  # async (messages, seed) -> (reply text, usage dict)


def llm_judge(model_cfg) -> JudgeFn:
    from tbscale.models.llm import LLM

    llm = LLM(model_cfg, "judge")

    async def call(messages, seed):
        res = await llm.complete(messages, n=1, seed=seed)
        return (res.completions[0].text if res.completions else ""), res.usage.as_dict()
    return call


@dataclass
class Trajectory:
    index: int
    row: dict[str, Any]
    steps: list[Step]
    instruction: str
    stats: dict[str, Any]
    summary: str
    bucket: int
    bt_score: float = 0.0
    aux: float = 0.0
    comparisons: int = 0


@dataclass
class BsrResult:
    trajectories: list[Trajectory]
    comparisons: list[dict[str, Any]]
    buckets: list[dict[str, Any]]
    a0: float
    a1: float
    scale: float
    errors: int = 0
    ordering_ok: bool = True


async def _judge_bucket(group: str, bucket: int, members: list[Trajectory], judge: JudgeFn, p: BsrParams,
                        gate: asyncio.Semaphore, records: list[dict[str, Any]]) -> tuple[list[tuple[int, int, float]], int]:
    """Run the schedule for one bucket; returns ((winner, loser, strength) over local indices, errors)."""
    n = len(members)
    rng = random.Random(_seed(p.seed, group, bucket, "schedule"))
    results: list[tuple[int, int, float]] = []
    errors = 0

    async def compare(i: int, j: int, rnd: int) -> None:
        nonlocal errors
        # randomized presentation order, drawn per pair so it does not depend on call completion order
        flip = random.Random(_seed(p.seed, group, bucket, members[i].row["trial_key"], members[j].row["trial_key"]))
        a, b = (i, j) if flip.random() < 0.5 else (j, i)
        ta, tb = members[a], members[b]
        messages = judge_messages(ta.instruction or tb.instruction, bucket, ta.summary, tb.summary)
        seed = _seed(p.seed, ta.row["trial_key"], tb.row["trial_key"])
        parsed, reply, error, usage = None, "", None, {}
        for t in range(p.judge_tries):
            try:
                async with gate:
                    reply, usage = await judge(messages, seed + 7919 * t)
            except Exception as e:  # noqa: BLE001  any failed call is recorded and the pair skipped
                error = f"{type(e).__name__}: {e}"[:500]
                continue
            parsed = parse_judgment(reply)
            if parsed is not None:
                error = None
                break
            error = f"reply is not the JSON asked for: {reply[:200]!r}"
        rec = {"group": group, "bucket": BUCKET_NAMES[bucket], "round": rnd, "A": ta.row["trial_key"],
               "B": tb.row["trial_key"], "prompt": messages, "response": reply, "parsed": parsed, "usage": usage,
               "error": error}
        if parsed is None:
            errors += 1
        else:
            w, l = (a, b) if parsed["winner"] == "A" else (b, a)
            results.append((w, l, float(parsed["strength"])))
            members[a].comparisons += 1
            members[b].comparisons += 1
            rec["winner"] = members[w].row["trial_key"]
        records.append(rec)

    if n < 2:
        return results, 0
    if n < 5:
        await asyncio.gather(*[compare(i, j, 0) for i, j in exhaustive_pairs(n)])
        return sorted(results), errors
    played: set[frozenset[int]] = set()
    for rnd in range(swiss_rounds(n)):
        net = [0.0] * n
        for w, l, s in results:
            net[w] += s
            net[l] -= s
        pairs = swiss_round_pairs(net, played, rng)
        if not pairs:
            break
        played.update(frozenset(pr) for pr in pairs)
        await asyncio.gather(*[compare(i, j, rnd) for i, j in pairs])
        results.sort()  # completion order must not matter
    return results, errors


def load_trajectories(df, p: BsrParams) -> dict[str, list[Trajectory]]:
    """Groups of trajectories (final attempts) keyed by 'setting::task' or 'task'."""
    groups: dict[str, list[Trajectory]] = {}
    for row in df.sort_values(["task_id", "setting", "trial"]).to_dict("records"):
        if not row.get("trajectory_path"):
            raise TbscaleError(f"trial {row.get('trial_key')}: no trajectory_path in trials.jsonl")
        path = Path(row["run_dir"]) / row["trajectory_path"]
        if not path.is_file():
            raise TbscaleError(f"{path}: trajectory file missing")
        steps, instruction = load_steps(path, int(row.get("final_attempt") or 0))
        stats = behaviour_stats(steps, p.conversion_window)
        key = row["task_id"] if p.group_by == "task" else f"{row['setting']}::{row['task_id']}"
        members = groups.setdefault(key, [])
        members.append(Trajectory(len(members), row, steps, instruction, stats, summarize(steps, stats, p),
                                  PASS if bool(row["passed"]) else FAIL))
    return groups


async def refine(df, p: BsrParams, judge: JudgeFn | None) -> BsrResult:
    """Judge (or draw random control rewards for) every group's buckets and map scores to rewards."""
    if p.group_by not in ("setting", "task"):
        raise TbscaleError(f"group_by must be 'setting' or 'task', not {p.group_by!r}")
    unknown = set(p.buckets) - {"fail", "pass"}
    if unknown:
        raise TbscaleError(f"unknown bucket(s) {', '.join(sorted(unknown))} (use fail, pass)")
    groups = load_trajectories(df, p)
    all_trajs = [t for g in groups.values() for t in g]
    a0, a1, scale = effective_amplitudes([verifier_reward(t.row) for t in all_trajs],
                                         [t.bucket == PASS for t in all_trajs], p.a0, p.a1, p.margin)
    amp = {FAIL: a0, PASS: a1}
    gate = asyncio.Semaphore(max(1, p.concurrency))
    records: list[dict[str, Any]] = []
    bucket_rows: list[dict[str, Any]] = []
    errors = 0
    jobs = []
    for gkey, members in groups.items():
        for bucket in (FAIL, PASS):
            mem = [t for t in members if t.bucket == bucket]
            if mem and BUCKET_NAMES[bucket] in p.buckets:
                jobs.append((gkey, bucket, mem))

    async def run(gkey: str, bucket: int, mem: list[Trajectory]) -> None:
        nonlocal errors
        if p.random_control:
            rng = np.random.default_rng(_seed(p.seed, gkey, bucket, "random"))
            aux = random_aux(len(mem), amp[bucket], rng)
            scores = np.zeros(len(mem))
            n_cmp = 0
        else:
            if judge is None:
                raise TbscaleError("a judge is needed unless random_control is set")
            for k, t in enumerate(mem):
                t.index = k
            results, errs = await _judge_bucket(gkey, bucket, mem, judge, p, gate, records)
            errors += errs
            scores = fit_bradley_terry(len(mem), results, p.bt_l2)
            aux = aux_from_scores(scores, amp[bucket], p.delta, p.tau)
            n_cmp = len(results)
        for t, s, a in zip(mem, scores, aux):
            t.bt_score, t.aux = float(s), float(a)
        bucket_rows.append({"group": gkey, "bucket": BUCKET_NAMES[bucket], "n": len(mem), "comparisons": n_cmp,
                            "schedule": "none" if len(mem) < 2 else ("exhaustive" if len(mem) < 5 else
                                                                     f"swiss x{swiss_rounds(len(mem))}"),
                            "score_spread": float(np.ptp(scores)) if len(mem) else 0.0,
                            "aux_min": float(aux.min()) if len(mem) else 0.0,
                            "aux_max": float(aux.max()) if len(mem) else 0.0})

    await asyncio.gather(*[run(*j) for j in jobs])
    records.sort(key=lambda r: (r["group"], r["bucket"], r["round"], r["A"], r["B"]))
    refined = [verifier_reward(t.row) + t.aux for t in all_trajs]
    ok = check_ordering(refined, [t.bucket == PASS for t in all_trajs])
    if not ok:  # an explicit check, not `assert`: it must hold under python -O too
        raise AssertionError("BSR invariant broken: a failing trajectory's refined reward reached a passing one's")
    bucket_rows.sort(key=lambda r: (r["group"], r["bucket"]))
    return BsrResult(all_trajs, records, bucket_rows, a0, a1, scale, errors, ok)


# ---------------------------------------------------------------------------------------------
# Writing results
# ---------------------------------------------------------------------------------------------


def reward_rows(result: BsrResult) -> list[dict[str, Any]]:
    return [{"trial_key": t.row["trial_key"], "run": t.row.get("run"), "task_id": t.row["task_id"],
             "setting": t.row["setting"], "trial": t.row.get("trial"), "passed": t.bucket == PASS,
             "reward": verifier_reward(t.row), "bt_score": round(t.bt_score, 6), "aux_reward": round(t.aux, 6),
             "refined_reward": round(verifier_reward(t.row) + t.aux, 6), "bucket": BUCKET_NAMES[t.bucket],
             "comparisons": t.comparisons} for t in result.trajectories]


def write_outputs(out_dir: Path, result: BsrResult, p: BsrParams, judge_model: str | None, simulated: bool,
                  runs: Sequence[Path]) -> dict[str, Path]:
    import pandas as pd

    from tbscale.logs import dumps
    from tbscale.models.llm import redact

    out_dir.mkdir(parents=True, exist_ok=True)
    paths = {"rewards": out_dir / "bsr.jsonl", "comparisons": out_dir / "comparisons.jsonl",
             "stats": out_dir / "stats.csv", "manifest": out_dir / "manifest.json"}
    paths["rewards"].write_text("".join(dumps(r) + "\n" for r in reward_rows(result)))
    paths["comparisons"].write_text("".join(redact(dumps(r)) + "\n" for r in result.comparisons))
    stats = pd.DataFrame([{"trial_key": t.row["trial_key"], "task_id": t.row["task_id"], "setting": t.row["setting"],
                           "passed": t.bucket == PASS, "aux_reward": round(t.aux, 6), **t.stats}
                          for t in result.trajectories])
    stats.to_csv(paths["stats"], index=False)
    manifest = {"method": "bsr", "created_at": datetime.now(UTC).isoformat(),
                "runs": [str(r) for r in runs], "judge_model": None if p.random_control else judge_model,
                "simulated_judge": simulated and not p.random_control, "params": asdict(p), "seed": p.seed,
                "effective_a0": result.a0, "effective_a1": result.a1, "amplitude_scale": result.scale,
                "trajectories": len(result.trajectories), "comparisons": len(result.comparisons),
                "judge_errors": result.errors, "ordering_guarantee": result.ordering_ok, "buckets": result.buckets}
    if simulated and not p.random_control:
        manifest["simulated_note"] = ("sim/bsr_judge is tbscale's rule-based stand-in, not a language model: its "
                                      "preferences exercise the pipeline and measure nothing")
    paths["manifest"].write_text(json.dumps(manifest, indent=2, default=str))
    return paths


__all__ = [
    "BsrParams",
    "BsrResult",
    "Step",
    "aux_from_scores",
    "behaviour_stats",
    "center_and_bound",
    "check_ordering",
    "effective_amplitudes",
    "exhaustive_pairs",
    "fit_bradley_terry",
    "judge_messages",
    "llm_judge",
    "load_steps",
    "normalize",
    "parse_judgment",
    "random_aux",
    "refine",
    "reward_rows",
    "soft_deadzone",
    "summarize",
    "swiss_round_pairs",
    "swiss_rounds",
    "write_outputs",
]
