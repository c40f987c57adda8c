"""Action verification at the model-harness boundary (mid-harness.txt).

Each turn the generator samples N candidate actions on the same history; a verifier judges them
and only the chosen one runs. Three mechanisms, each a registered action policy:

- `verify_pointwise`: every candidate is scored on its own (`q_i = psi(h_t, a_i)`, an integer on
  a scale, 1..10 by default, optionally averaged over several samples); the highest score wins,
  ties broken by a seeded rule (`tie_break: random`, seeded by the turn's seed, or `first`).
- `verify_pairwise`: pairs of candidates are judged under the same history (`J_ij`: a score for
  each side and a preference); candidates are ranked by their margin-weighted win rate over the
  pairs evaluated (see `margin_weighted_win_rates`), ties broken by the same seeded rule.
- `verify_listwise`: one prompt with every candidate, the verifier returns the index it picks
  (Turn-BoN's listwise selector, logged as a verifier call so it can be distilled as well).

Self-verification: `verifier` names a key of `models`; left out, the generator judges its own
candidates (in the `verifier` role, so its tokens are counted apart from generation).

Every verifier call is logged as a `verifier_call` trajectory event (role, method, model,
messages, response, parsed scores or preference), so `tbscale export verifier-data` can turn a
run into a distillation set. Identical runnable commands are judged once (`dedupe`), and a
response that cannot run is never shown to the verifier (`skip_unrunnable`): it takes the lowest
score.

The transcript each verifier sees is fitted to its context window (render.fit_transcript).
"""

from __future__ import annotations

import asyncio
import random
from abc import ABC, abstractmethod
from typing import Any, Callable, Literal

from pydantic import Field, ValidationInfo, field_validator
from typing_extensions import TypedDict

from tbscale.models.replies import ask_json, parse_json_reply
from tbscale.seeds import derive_rng, derive_seed
from tbscale.strategies.registry import register_policy
from tbscale.strategies.base import Decision, TurnContext
from tbscale.strategies.baseline import TurnWindow, sample_candidates
from tbscale.strategies.calls import log_call, read_prompt
from tbscale.strategies.render import (
    fit_transcript,
    render_candidates,
    render_transcript,
    transcript_budget,
)
from tbscale.types.actions import Action
from tbscale.types.messages import ChatMessage


def select_max(scores: list[float | None], rng: random.Random, tie_break: str = "random") -> tuple[int | None, list[int]]:
    """The index of the highest score (None scores never win) and the indices tied at the top.
    Ties: `random` picks one with `rng` (seeded, so reruns agree), `first` the lowest index.
    Returns (None, []) when every score is None."""
    valid = [(i, s) for i, s in enumerate(scores) if s is not None]
    if not valid:
        return None, []
    top = max(s for _, s in valid)
    tied = [i for i, s in valid if abs(s - top) <= 1e-9]
    if len(tied) == 1 or tie_break == "first":
        return tied[0], tied
    return rng.choice(tied), tied


def margin_weighted_win_rates(n: int, comparisons: list[tuple[int, int, float]]) -> list[float | None]:
    """Margin-weighted win rate of each of n candidates over the pairwise comparisons made.

    A comparison (i, j, m) says candidate i beat candidate j by margin m in [-1, 1] (m < 0: j was
    better; 0: a tie). It gives i the credit (1 + m) / 2 and j the credit (1 - m) / 2, so a clear
    win is worth 1, a clear loss 0 and a tie 1/2 to each; a candidate's rate is its mean credit
    over the comparisons it took part in (None if it took part in none). With margins of +-1
    only, this is the plain win rate with ties counted as half a win."""
    credit, count = [0.0] * n, [0] * n
    for i, j, m in comparisons:
        m = max(-1.0, min(1.0, float(m)))
        credit[i] += (1 + m) / 2
        credit[j] += (1 - m) / 2
        count[i] += 1
        count[j] += 1
    return [credit[k] / count[k] if count[k] else None for k in range(n)]


def win_rates(n: int, comparisons: list[tuple[int, int, float]]) -> list[float | None]:
    """Unweighted: a win is 1, a tie 1/2, a loss 0, whatever the margin."""
    return margin_weighted_win_rates(n, [(i, j, (m > 0) - (m < 0)) for i, j, m in comparisons])


# ---- what a verifier's reply parses to, and what the selection records -----------------------------
class PointwiseReply(TypedDict):
    score: float
    rationale: str


class PairwiseReply(TypedDict):
    """Both scores, or neither, and the preference (A, B, tie) when the reply gave one."""

    score_a: float | None
    score_b: float | None
    preference: str | None
    rationale: str


class ListwiseReply(TypedDict):
    selected_index: int
    rationale: str


class PairMargin(TypedDict):
    margin: float | None  # A over B, in [-1, 1]; None: the reply was unusable


class SelectionInfo(TypedDict, total=False):
    """What a verifier policy adds to its turn's `selection` event (types/events.py Selection)."""

    judged: list[int]  # the candidates shown to the verifier: one per distinct runnable command
    same_as: dict[int, int]  # a candidate left out -> the judged one with its command
    prompt_elided_chars: int
    tied: list[int]
    samples: int
    comparisons: list[list[int | float]]  # [first, second, margin] per pairwise comparison
    pairs_asked: int


def pair_margin(parsed: PairwiseReply, lo: float, hi: float) -> float | None:
    """Margin of A over B in [-1, 1] from a pairwise reply: from the two scores when both are
    given ((score_a - score_b) / (hi - lo)), else from the preference alone (A: 1, B: -1, tie: 0)."""
    a, b = parsed.get("score_a"), parsed.get("score_b")
    if a is not None and b is not None:
        return (a - b) / (hi - lo) if hi > lo else 0.0
    pref = parsed.get("preference")
    return {"A": 1.0, "B": -1.0, "tie": 0.0}.get(pref)


def _number(v: Any, lo: float, hi: float) -> float | None:
    if isinstance(v, bool):
        return None
    if isinstance(v, str):
        try:
            v = float(v.strip())
        except ValueError:
            return None
    if isinstance(v, (int, float)) and lo <= v <= hi:
        return float(v)
    return None


# ---- rendering -------------------------------------------------------------------------------------
def render_one(label: str | None, action: Action) -> str:
    tag = f'<candidate label="{label}">' if label else "<candidate>"
    body = f"```bash\n{action.command}\n```" if action.runnable else f"[this response cannot be run: {action.error}]"
    return f"{tag}\n{body}\n</candidate>"


def pointwise_messages(messages, action: Action, system_prompt: str, lo: int, hi: int,
                       budget: int | None = None) -> list[ChatMessage]:
    user = (f'<verification kind="pointwise">\n{render_transcript(messages, budget)}\n\n'
            f"Below is one of the candidate next actions the agent proposed:\n\n{render_one(None, action)}\n\n"
            f'Respond with JSON: {{"rationale": string, "score": integer from {lo} (harmful or useless) '
            f"to {hi} (clearly the right next step)}}\n</verification>")
    return [{"role": "system", "content": system_prompt}, {"role": "user", "content": user}]


def pairwise_messages(messages, a: Action, b: Action, system_prompt: str, lo: int, hi: int,
                      budget: int | None = None) -> list[ChatMessage]:
    user = (f'<verification kind="pairwise">\n{render_transcript(messages, budget)}\n\n'
            f"Two candidate next actions, A and B, proposed on this same history:\n\n"
            f"{render_one('A', a)}\n\n{render_one('B', b)}\n\n"
            f'Respond with JSON: {{"rationale": string, "score_a": integer {lo}-{hi}, "score_b": integer '
            f'{lo}-{hi}, "preference": "A" | "B" | "tie"}}\n</verification>')
    return [{"role": "system", "content": system_prompt}, {"role": "user", "content": user}]


def listwise_messages(messages, actions: list[Action], system_prompt: str, budget: int | None = None) -> list[ChatMessage]:
    n = len(actions)
    user = (f'<verification kind="listwise">\n{render_transcript(messages, budget)}\n\n'
            f"There are {n} candidate next actions, numbered 0 to {n - 1}:\n\n{render_candidates(actions)}\n\n"
            'Respond with JSON: {"rationale": string, "selected_index": integer in [0, ' f"{n - 1}" "]}\n"
            "</verification>")
    return [{"role": "system", "content": system_prompt}, {"role": "user", "content": user}]


def parse_pointwise(text: str, lo: float, hi: float) -> PointwiseReply | None:
    obj = parse_json_reply(text)
    score = _number(obj.get("score"), lo, hi) if obj else None
    return None if score is None else {"score": score, "rationale": str(obj.get("rationale", ""))[:2000]}


def parse_pairwise(text: str, lo: float, hi: float) -> PairwiseReply | None:
    obj = parse_json_reply(text)
    if not obj:
        return None
    a, b = _number(obj.get("score_a"), lo, hi), _number(obj.get("score_b"), lo, hi)
    pref = str(obj.get("preference", "")).strip().strip('"').upper()
    pref = {"A": "A", "B": "B", "TIE": "tie", "EQUAL": "tie", "NONE": "tie"}.get(pref)
    if (a is None or b is None) and pref is None:
        return None
    return {"score_a": a if b is not None else None, "score_b": b if a is not None else None,
            "preference": pref, "rationale": str(obj.get("rationale", ""))[:2000]}


def parse_listwise(text: str, n: int) -> ListwiseReply | None:
    obj = parse_json_reply(text)
    idx = obj.get("selected_index") if obj else None
    if isinstance(idx, bool) or not isinstance(idx, int) or not 0 <= idx < n:
        return None
    return {"selected_index": idx, "rationale": str(obj.get("rationale", ""))[:2000]}


# ---- the policies ------------------------------------------------------------------------------
class VerifierParams(TurnWindow):
    selector_field = "verifier"

    n: int = Field(4, ge=1, le=64, description="candidate actions sampled per turn")
    verifier: str | None = Field(None, description="key of `models`; default: the generator (self-verification)")
    tries: int = Field(2, ge=1, le=20, description="calls per judgement until a usable reply")
    tie_break: Literal["random", "first"] = Field("random", description="seeded random among the tied, or the lowest index")
    fallback: Literal["random_runnable", "first"] = "random_runnable"
    dedupe: bool = Field(True, description="judge identical commands once")
    skip_unrunnable: bool = Field(True, description="responses that cannot run get the lowest score, unjudged")
    system_prompt: str | None = Field(None, description="path to a file replacing ours")
    log_calls: Literal["full", "parsed", "off"] = Field(
        "full", description="full: messages and response in each verifier_call event (needed for export)")

    def model_refs(self):
        return {"verifier": self.verifier}


class ScoredParams(VerifierParams):
    scale_min: int = 1
    scale_max: int = 10

    @field_validator("scale_max")
    @classmethod
    def _scale(cls, hi: int, info: ValidationInfo) -> int:
        lo = info.data.get("scale_min")
        if lo is not None and hi <= lo:
            raise ValueError("scale_max must be greater than scale_min")
        return hi


class PointwiseParams(ScoredParams):
    samples: int = Field(1, ge=1, le=16, description="verifier samples per candidate; their scores are averaged")


class PairwiseParams(ScoredParams):
    both_orders: bool = Field(False, description="judge each pair as (A,B) and (B,A) to cancel position bias")
    max_pairs: int | None = Field(None, ge=1, description="judge at most this many pairs (seeded sample)")
    aggregation: Literal["margin", "wins"] = Field("margin", description="margin-weighted win rate, or plain win rate")


class ListwiseParams(VerifierParams):
    pass


class _VerifierPolicy(ABC):
    method = "?"
    prompt_file = "?"

    def __init__(self, params: VerifierParams, *, generator, models, tools=None, **_):
        self.p, self.generator, self.tools = params, generator, tools
        self.verifier = models(params.verifier, "verifier")
        self.self_verification = params.verifier is None or getattr(self.verifier, "name", None) == getattr(generator, "name", "")
        self.system_prompt = read_prompt(params.system_prompt, self.prompt_file)
        self.budget: int | None = None  # transcript characters per prompt, set each turn

    async def _judge(self, ctx: TurnContext, prompt, parse, seed_parts: tuple, *,
                     derive: Callable[[Any], PairMargin] | None = None, **log_fields) -> Any:
        """One verifier judgement, retried until the reply parses, and logged as a `verifier_call`
        with `log_fields` (and what `derive` makes of the parsed reply). Returns the parsed reply or
        None."""
        parsed, reply, problem, calls = await ask_json(self.verifier, prompt, parse,
                                                       seed=derive_seed(ctx.seed, *seed_parts), sink=ctx.rec,
                                                       tries=self.p.tries)
        extra = derive(parsed) if derive else {}
        log_call(ctx.rec, role="verifier", method=self.method, model=self.verifier.name, messages=prompt,
                 response=reply, parsed=parsed, mode=self.p.log_calls, self_verification=self.self_verification,
                 error=problem, calls=calls, **log_fields, **extra)
        return parsed

    async def decide(self, messages, ctx: TurnContext) -> Decision:
        comps, actions = await sample_candidates(self.generator, messages, self.p.n_at(ctx.turn, self.p.n), ctx,
                                                 self.tools)
        if len(comps) == 1:
            return Decision(comps[0], actions[0], 1, 0)
        rng = derive_rng(ctx.seed, self.method, "tie")
        # Which candidates the verifier sees: one per distinct runnable command.
        judged: list[int] = []
        same_as: dict[int, int] = {}
        seen: dict[str, int] = {}
        for i, a in enumerate(actions):
            if not a.runnable and self.p.skip_unrunnable:
                continue
            key = a.command if a.runnable else f"\0invalid{i}"
            if self.p.dedupe and key in seen:
                same_as[i] = seen[key]
                continue
            seen[key] = i
            judged.append(i)
        info: SelectionInfo = {"judged": judged, "same_as": same_as}
        # The transcript each verifier prompt carries, fitted to the verifier's context window.
        shown_chars = len(self.system_prompt) + sum(len(a.command or "") for a in actions) + 2000
        self.budget = transcript_budget(self.verifier, shown_chars)
        elided = fit_transcript(messages, self.budget)[1]
        if elided:
            info["prompt_elided_chars"] = elided
        if len(judged) == 0:
            index, failed, why = self._fallback(actions, ctx), False, "no candidate can run"
            scores: list[float | None] = [None] * len(actions)
        elif len(judged) == 1:
            index, failed, why = judged[0], False, "only one distinct runnable candidate: no verifier call"
            scores = [None] * len(actions)
        else:
            own, extra = await self._score(messages, actions, judged, ctx)
            info.update(extra)
            scores = [own.get(same_as.get(i, i)) for i in range(len(actions))]
            best, tied = select_max(scores, rng, self.p.tie_break)
            info["tied"] = tied
            if best is None:
                index, failed, why = self._fallback(actions, ctx), True, "every verifier call failed"
            else:
                index, failed, why = best, False, (f"highest {self.score_name}" +
                                                    (f" (tie of {len(tied)} broken by {self.p.tie_break})" if len(tied) > 1 else ""))
        ctx.rec.event("selection", index=index, rationale=why, selector_failed=failed, method=self.method,
                      model=self.verifier.name, scores=scores, self_verification=self.self_verification, **info)
        return Decision(comps[index], actions[index], len(comps), index, failed)

    score_name = "score"

    def _fallback(self, actions: list[Action], ctx: TurnContext) -> int:
        runnable = [i for i, a in enumerate(actions) if a.runnable] or list(range(len(actions)))
        return runnable[0] if self.p.fallback == "first" else derive_rng(ctx.seed, "fallback").choice(runnable)

    @abstractmethod
    async def _score(self, messages, actions, judged, ctx) -> tuple[dict[int, float], SelectionInfo]:
        """Scores of the judged candidates (higher is better) and extra fields for the event."""


@register_policy("verify_pointwise", PointwiseParams)
class PointwiseVerifier(_VerifierPolicy):
    method, prompt_file, score_name = "pointwise", "verifier_pointwise_system.txt", "pointwise score"

    async def _score(self, messages, actions, judged, ctx):
        p: PointwiseParams = self.p
        lo, hi = p.scale_min, p.scale_max

        async def one(i: int, s: int):
            prompt = pointwise_messages(messages, actions[i], self.system_prompt, lo, hi, self.budget)
            return i, await self._judge(ctx, prompt, lambda t: parse_pointwise(t, lo, hi), ("point", i, s),
                                        candidate=i, sample=s)

        results = await asyncio.gather(*(one(i, s) for i in judged for s in range(p.samples)))
        by: dict[int, list[float]] = {}
        for i, parsed in results:
            if parsed is not None:
                by.setdefault(i, []).append(parsed["score"])
        return {i: sum(v) / len(v) for i, v in by.items()}, {"samples": p.samples}


@register_policy("verify_pairwise", PairwiseParams)
class PairwiseVerifier(_VerifierPolicy):
    method, prompt_file, score_name = "pairwise", "verifier_pairwise_system.txt", "margin-weighted win rate"

    async def _score(self, messages, actions, judged, ctx):
        p: PairwiseParams = self.p
        lo, hi = p.scale_min, p.scale_max
        pairs = [(a, b) for k, a in enumerate(judged) for b in judged[k + 1:]]
        if p.max_pairs is not None and len(pairs) > p.max_pairs:
            pairs = sorted(derive_rng(ctx.seed, "pairs").sample(pairs, p.max_pairs))
        orders: list[tuple[int, int]] = []
        for a, b in pairs:
            if p.both_orders:
                orders += [(a, b), (b, a)]
            else:  # which one is shown first is a seeded coin, so position bias does not favour low indices
                orders.append((a, b) if derive_rng(ctx.seed, "order", a, b).random() < 0.5 else (b, a))

        def margin_of(parsed: PairwiseReply | None) -> PairMargin:
            return {"margin": pair_margin(parsed, lo, hi) if parsed else None}

        async def one(first: int, second: int):
            prompt = pairwise_messages(messages, actions[first], actions[second], self.system_prompt, lo, hi,
                                       self.budget)
            parsed = await self._judge(ctx, prompt, lambda t: parse_pairwise(t, lo, hi), ("pair", first, second),
                                       pair=[first, second], derive=margin_of)
            return first, second, margin_of(parsed)["margin"]

        results = await asyncio.gather(*(one(a, b) for a, b in orders))
        comparisons = [(a, b, m) for a, b, m in results if m is not None]
        agg = margin_weighted_win_rates if p.aggregation == "margin" else win_rates
        rates = agg(len(actions), comparisons)
        return ({i: rates[i] for i in judged if rates[i] is not None},
                {"comparisons": [[a, b, round(m, 4)] for a, b, m in comparisons], "pairs_asked": len(orders)})


@register_policy("verify_listwise", ListwiseParams)
class ListwiseVerifier(_VerifierPolicy):
    method, prompt_file, score_name = "listwise", "selector_system.txt", "listwise pick"

    async def _score(self, messages, actions, judged, ctx):
        shown = [actions[i] for i in judged]
        prompt = listwise_messages(messages, shown, self.system_prompt, self.budget)
        parsed = await self._judge(ctx, prompt, lambda t: parse_listwise(t, len(shown)), ("list",), shown=judged)
        if parsed is None:
            return {}, {}
        return {judged[parsed["selected_index"]]: 1.0}, {}
