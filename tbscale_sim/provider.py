"""The embedded simulated model: a litellm custom provider named `sim`.

It is not a language model and never claims to be one: every response's model name starts with
`sim/`, runs record `simulated: true`, and reports print a banner. It exists so that the whole
harness (containers, agent loop, strategies, verifiers, logs, reports) runs end to end with no
API key, through the same litellm code path a real model takes.

Roles (the part after `sim/` in the model name):
- `policy`: knows the bundled tasks' reference solutions (looked up by the task's instruction in
  the prompt, like a model that memorized the benchmark). Each sampled candidate is, with
  probability `skill`, the correct next step (or the submission once every step has run), and
  otherwise a plausible mistake: an inspection, a rerun of the last command, a malformed reply, a
  broken command, or a premature submission.
- `selector`: reads the Turn-BoN selector prompt; with probability `accuracy` it picks a correct
  candidate when there is one (else a harmless one), otherwise it picks uniformly at random.
  With accuracy 0 it is a random selector, and Turn-BoN then buys nothing, as it should.
  Given a lookahead prompt (each candidate with its outcome), it reads each outcome's exit code
  and timeout and nothing else of it: a candidate that exited non-zero or timed out is ruled out
  whenever one that exited 0 is there, on both branches (so a command that broke is never picked
  over one that ran, even by the random branch), and the answer-key judgement above applies to
  the rest. It does not read the output: a premature submission ran fine, and looks it.
Further roles (judges, summarizers, verifiers) register themselves with `register_role`.
"""

from __future__ import annotations

import asyncio
import json
import random
import re
import threading
from typing import Any, Callable

from tbscale.seeds import digest
from tbscale.types.actions import FINISH_MARKER

SUBMIT = f"echo {FINISH_MARKER}"
DEFAULTS = {"skill": 0.55, "accuracy": 0.9, "latency_sec": 0.0}

_book_lock = threading.Lock()
_TASK_BOOK: dict[str, list[str]] = {}  # instruction -> reference steps

RoleFn = Callable[[list[dict[str, Any]], int, random.Random, dict[str, float]], list[str]]
ROLES: dict[str, RoleFn] = {}


def register_task(instruction: str, steps: list[str]) -> None:
    with _book_lock:
        _TASK_BOOK[instruction.strip()] = [s.strip() for s in steps]


def register_role(name: str):
    def deco(fn: RoleFn) -> RoleFn:
        ROLES[name] = fn
        return fn
    return deco


def lookup_task(text: str) -> list[str] | None:
    """The reference steps of the registered task whose instruction appears in `text`."""
    with _book_lock:
        best = None
        for instruction, steps in _TASK_BOOK.items():
            if instruction in text and (best is None or len(instruction) > len(best[0])):
                best = (instruction, steps)
    return best[1] if best else None


_FENCE = re.compile(r"```(?:bash)?\n(.*?)\n?```", re.DOTALL)


def executed_commands(messages: list[dict[str, Any]]) -> list[str]:
    """Commands that ran in the agent's history: assistant replies answered by an observation."""
    out = []
    for m, nxt in zip(messages, messages[1:]):
        if m["role"] == "assistant" and str(nxt.get("content", "")).startswith("<returncode>"):
            blocks = _FENCE.findall(str(m.get("content") or ""))
            if len(blocks) == 1:
                out.append(blocks[0].strip())
    return out


def progress(steps: list[str], executed: list[str]) -> int:
    """How many reference steps have run, in order."""
    p = 0
    for cmd in executed:
        if p < len(steps) and cmd.strip() == steps[p]:
            p += 1
    return p


def _reply(thought: str, command: str) -> str:
    return f"THOUGHT: {thought}\n\n```bash\n{command}\n```"


_INSPECT = ["ls -la", "pwd && ls", "ls -R . | head -50", "cat *.md 2>/dev/null | head -40", "find . -maxdepth 2 -type f | head -30",
            "env | sort | head -20", "df -h . && whoami"]


def _mistake(rng: random.Random, steps: list[str], p: int, executed: list[str]) -> str:
    kinds = ["inspect", "rerun", "malformed", "broken", "premature"]
    weights = [0.35, 0.2, 0.15, 0.15, 0.15]
    if not executed:
        weights[1] = 0.0
    if p >= len(steps):
        weights[4] = 0.0
    kind = rng.choices(kinds, weights)[0]
    if kind == "inspect":
        return _reply("Let me look around before changing anything.", rng.choice(_INSPECT))
    if kind == "rerun":
        return _reply("Let me run that again to be sure.", executed[-1])
    if kind == "malformed":
        return rng.choice(["I think the next step is to fix the remaining issue in the file.",
                           "THOUGHT: two things to do.\n\n```bash\nls\n```\n\n```bash\npwd\n```"])
    if kind == "broken":
        target = steps[min(p, len(steps) - 1)] if steps else "ls"
        return _reply("Applying the change.", "set -o pipefail; " + re.sub(r"^(\s*\S+)", r"\1_typo", target, count=1))
    return _reply("The task looks complete; submitting.", SUBMIT)


@register_role("policy")
def sim_policy(messages, n, rng, params) -> list[str]:
    steps = lookup_task(str(messages[1]["content"]) if len(messages) > 1 else "")
    executed = executed_commands(messages)
    if steps is None:  # not a task it knows: look around a little, then give up and submit
        return [_reply("Inspecting.", rng.choice(_INSPECT)) if len(executed) < 3 and rng.random() < 0.8
                else _reply("Submitting.", SUBMIT) for _ in range(n)]
    p = progress(steps, executed)
    good = steps[p] if p < len(steps) else SUBMIT
    out = []
    for _ in range(n):
        if rng.random() < params["skill"]:
            out.append(_reply("Next, the step the task needs." if good != SUBMIT else
                              "Everything the task asks for is done and checked; submitting.", good))
        else:
            out.append(_mistake(rng, steps, p, executed))
    return out


_CAND = re.compile(r'<candidate index="(\d+)">\n(.*?)\n</candidate>', re.DOTALL)


def parse_selector_prompt(text: str) -> tuple[list[str], list[str | None]]:
    """Executed commands and candidate commands (None: cannot run) from a Turn-BoN selector prompt."""
    transcript = text.split("candidate next actions", 1)[0]
    executed = [b.strip() for b in re.findall(r'<action turn="\d+">\n```bash\n(.*?)\n```\n</action>', transcript, re.DOTALL)]
    cands: list[str | None] = []
    for _, body in _CAND.findall(text):
        m = re.match(r"```bash\n(.*)\n```$", body.strip(), re.DOTALL)
        cands.append(m.group(1).strip() if m else None)
    return executed, cands


def judge_candidates(steps: list[str] | None, executed: list[str], cands: list[str | None]) -> tuple[list[int], list[int]]:
    """(good, harmless) candidate indices, by the reference solution."""
    if steps is None:
        return [], [i for i, c in enumerate(cands) if c is not None]
    p = progress(steps, executed)
    expected = steps[p] if p < len(steps) else SUBMIT
    good = [i for i, c in enumerate(cands) if c is not None and c.strip() == expected]
    harmless = [i for i, c in enumerate(cands) if c is not None and c.strip() != SUBMIT
                and (not executed or c.strip() != executed[-1])]
    return good, harmless


_RAN = re.compile(r'<candidate index="(\d+)">\n```bash\n(.*?)\n```\n<outcome exit_code="(-?\d+)" timed_out="(\w+)"',
                  re.DOTALL)


def parse_lookahead_prompt(text: str) -> list[tuple[str, int, bool]]:
    """(command, exit code, timed out) of each candidate of a lookahead selector prompt."""
    return [(cmd.strip(), int(code), out == "true") for _, cmd, code, out in _RAN.findall(text)]


def lookahead_pick(steps: list[str] | None, executed: list[str], ran: list[tuple[str, int, bool]],
                   rng: random.Random, accuracy: float) -> tuple[int, str]:
    """The simulated selector on a lookahead prompt (see the module doc): candidates whose outcome
    shows a failure (non-zero exit, timeout) are out while any other is there."""
    everyone = list(range(len(ran)))
    ok = [i for i, (_, code, timed_out) in enumerate(ran) if code == 0 and not timed_out] or everyone
    good, harmless = judge_candidates(steps, executed, [c for c, _, _ in ran])
    if rng.random() < accuracy:
        good_ok, harmless_ok = [i for i in good if i in ok], [i for i in harmless if i in ok]
        pool, why = ((good_ok, "it ran cleanly and makes the progress the task needs") if good_ok else
                     (harmless_ok, "it ran cleanly and is the safest of weak options") if harmless_ok else
                     (ok, "it is one that ran without failing"))
    else:
        pool, why = ok, "chosen without a clear preference among those that ran without failing"
    return rng.choice(pool) if pool else 0, why


@register_role("selector")
def sim_selector(messages, n, rng, params) -> list[str]:
    text = str(messages[-1]["content"])
    if "<outcome exit_code=" in text:
        executed = parse_selector_prompt(text)[0]
        ran, steps = parse_lookahead_prompt(text), lookup_task(text)
        picks = [lookahead_pick(steps, executed, ran, rng, params["accuracy"]) for _ in range(n)]
        return [json.dumps({"rationale": f"Candidate {i}: {why}.", "selected_index": i}) for i, why in picks]
    executed, cands = parse_selector_prompt(text)
    steps = lookup_task(text)
    good, harmless = judge_candidates(steps, executed, cands)
    out = []
    for _ in range(n):
        if rng.random() < params["accuracy"]:
            pool, why = (good, "it makes the progress the task needs") if good else \
                        (harmless or list(range(len(cands))), "it is the safest of weak options")
        else:
            pool, why = list(range(len(cands))), "chosen without a clear preference"
        idx = rng.choice(pool) if pool else 0
        out.append(json.dumps({"rationale": f"Candidate {idx}: {why}.", "selected_index": idx}))
    return out


_OBSERVATION_BLOCK = re.compile(r'(<observation turn="\d+">\n<returncode>-?\d+</returncode>).*?(</observation>)', re.DOTALL)
# A lookahead candidate's outcome: its exit code and timeout stay, its run time and output go.
_OUTCOME_BLOCK = re.compile(r'(<outcome exit_code="-?\d+" timed_out="\w+")[^>]*>.*?</outcome>', re.DOTALL)


def _stable_text(message: dict[str, Any]) -> str:
    """A message without what commands printed: container output carries timestamps and ids, so
    seeding on it would make simulated runs differ from run to run. Return codes stay."""
    text = str(message.get("content") or "")
    if text.startswith("<returncode>"):
        return text.split("</returncode>", 1)[0]
    return _OUTCOME_BLOCK.sub(r"\1/>", _OBSERVATION_BLOCK.sub(r"\1\2", text))


def _seed_for(messages: list[dict[str, Any]], seed: Any, salt: str) -> int:
    # The system prompt names the working directory only, so it is left out.
    parts = (f"{m.get('role')}:{_stable_text(m)}" for m in messages[1:])
    return int.from_bytes(digest(seed, salt, len(messages), *parts)[:8], "big")


def simulate(role: str, messages: list[dict[str, Any]], n: int, seed: Any, params: dict[str, float]) -> list[str]:
    if role not in ROLES:
        raise ValueError(f"unknown simulated role sim/{role} (known: {', '.join(sorted(ROLES))})")
    rng = random.Random(_seed_for(messages, seed, role))
    return ROLES[role](messages, n, rng, {**DEFAULTS, **params})


_registered = False


def register(litellm) -> None:
    """Install the `sim` provider into litellm (idempotent)."""
    global _registered
    if _registered:
        return
    from litellm import CustomLLM
    from litellm.types.utils import Choices, Message, ModelResponse, Usage

    class SimProvider(CustomLLM):
        async def acompletion(self, model, messages, api_base, custom_prompt_dict, model_response, print_verbose,
                              encoding, api_key, logging_obj, optional_params, **kwargs):
            params = dict(optional_params.get("sim_params") or {})
            n = int(optional_params.get("n") or 1)
            latency = float(params.get("latency_sec", 0.0))
            if latency:
                await asyncio.sleep(latency)
            texts = simulate(model, messages, n, optional_params.get("seed"), params)
            prompt_tokens = sum(len(str(m.get("content") or "")) for m in messages) // 4
            completion_tokens = sum(max(1, len(t) // 4) for t in texts)
            return ModelResponse(
                model=f"sim/{model}",
                choices=[Choices(index=i, finish_reason="stop", message=Message(role="assistant", content=t))
                         for i, t in enumerate(texts)],
                usage=Usage(prompt_tokens=prompt_tokens, completion_tokens=completion_tokens,
                            total_tokens=prompt_tokens + completion_tokens))

        def completion(self, *args, **kwargs):
            raise TypeError("the simulated provider is async only: call it with litellm.acompletion")

    litellm.custom_provider_map = [m for m in litellm.custom_provider_map if m.get("provider") != "sim"] + [
        {"provider": "sim", "custom_handler": SimProvider()}]
    from litellm.utils import custom_llm_setup

    custom_llm_setup()
    _registered = True

