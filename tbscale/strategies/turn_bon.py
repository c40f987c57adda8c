"""Turn-level best-of-N (turn-bon.txt): each turn the generator samples N candidates on the same
history, a listwise selector sees the transcript and the N candidates (without reasoning) and
returns JSON with `selected_index`; only that candidate runs.

The N candidates come from one request with n=N where the provider takes it, else N concurrent
requests, so a turn costs about one generator call plus one selector call in wall time. A
selector reply that cannot be used is retried; when every try fails, the fallback (a seeded random
runnable candidate, by default) is taken and the turn is marked `selector_failed`, so behaviour
statistics can exclude it.

Adaptive Turn-BoN (`adaptive:`, docs/adaptive-turn-bon.md) spends the N samples and the selector
call only where the candidates differ. `adaptive: {first: 2}` samples two candidates first; when
their commands agree (strategies/agreement.py) that command runs with no selector call, else the
remaining N - 2 are sampled (the first two are kept) and the selector picks among all N.
`adaptive: {mode: all_agree}` samples all N and skips the selector when all N agree. The turn's
`candidates` event (and its `selection` event, when there is one) records the path it took:
`agreed_first`, `agreed_all` or `selected`.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, ValidationInfo, field_validator, model_validator

from tbscale.models.replies import SEED_STRIDE, ask_json, parse_json_reply
from tbscale.seeds import derive_rng
from tbscale.strategies.registry import register_policy
from tbscale.strategies.agreement import Match, all_agree
from tbscale.strategies.base import Decision, Params, TurnContext
from tbscale.strategies.baseline import TurnWindow, candidate_record, sample_candidates
from tbscale.strategies.calls import read_prompt
from tbscale.strategies.render import (
    fit_transcript,
    render_candidates,
    transcript_budget,
)
from tbscale.types.actions import parse_action

# What a turn of adaptive Turn-BoN did (the `path` of its `candidates` and `selection` events).
AGREED_FIRST, AGREED_ALL, SELECTED = "agreed_first", "agreed_all", "selected"
PATHS = (AGREED_FIRST, AGREED_ALL, SELECTED)


class AdaptiveParams(Params):
    """When Turn-BoN may skip the selector (docs/adaptive-turn-bon.md)."""

    mode: Literal["first", "all_agree"] = Field(
        "first", description="first: sample `first` candidates, and the rest only when they disagree; "
                             "all_agree: sample all n, skip the selector when all agree")
    first: int = Field(2, ge=2, description="candidates sampled before deciding (mode first); less than n")
    match: Match = Field("normalized", description="how commands are compared: normalized (insignificant "
                                                   "whitespace and comments ignored) or exact")

    @model_validator(mode="after")
    def _first_only_in_mode_first(self) -> "AdaptiveParams":
        if self.mode == "all_agree" and "first" in self.model_fields_set:
            raise ValueError("`first` applies to mode `first` only (mode `all_agree` samples all n candidates)")
        return self


class TurnBoNParams(TurnWindow):
    selector_field = "selector"
    adaptive_field = "adaptive"

    n: int = Field(4, ge=1, le=64)
    selector: str | None = Field(None, description="key of `models`; default: the generator (self-selection)")
    selector_tries: int = Field(3, ge=1, le=20)
    fallback: Literal["random_runnable", "first"] = "random_runnable"
    selector_system_prompt: str | None = Field(None, description="path to a file replacing ours")
    adaptive: AdaptiveParams | None = Field(None, description="skip the selector when candidates agree")

    @field_validator("adaptive", mode="before")
    @classmethod
    def _adaptive_is_a_mapping(cls, a: Any) -> Any:
        if a is not None and not isinstance(a, (dict, AdaptiveParams)):
            raise ValueError(f"a mapping such as {{first: 2}} or {{mode: all_agree}}, not {a!r}")
        return a

    @field_validator("adaptive")
    @classmethod
    def _adaptive_fits_n(cls, a: AdaptiveParams | None, info: ValidationInfo) -> AdaptiveParams | None:
        n = info.data.get("n")
        if a is None or n is None:
            return a
        if n < 2:
            raise ValueError(f"needs n of at least 2 (n is {n}): with one candidate there is no selector to skip")
        if a.mode == "first" and a.first >= n:
            raise ValueError(f"first ({a.first}) must be less than n ({n}); to sample all n and skip the "
                             "selector when they all agree, use `mode: all_agree`")
        return a

    def model_refs(self):
        return {"selector": self.selector}


def selector_messages(messages, actions, system_prompt: str, budget: int | None = None) -> list[dict]:
    n = len(actions)
    user = (f"{fit_transcript(messages, budget)[0]}\n\n"
            f"There are {n} candidate next actions, numbered 0 to {n - 1}:\n\n{render_candidates(actions)}\n\n"
            'Respond with JSON: {"rationale": string, "selected_index": integer in [0, ' f"{n - 1}" "]}")
    return [{"role": "system", "content": system_prompt}, {"role": "user", "content": user}]


def parse_selection(reply: str, n: int) -> tuple[int, str] | None:
    """(selected_index, rationale) from a selector reply, or None when it names no valid index."""
    obj = parse_json_reply(reply)
    idx = obj.get("selected_index") if obj else None
    if isinstance(idx, bool) or not isinstance(idx, int) or not 0 <= idx < n:
        return None
    return idx, str(obj.get("rationale", ""))


@register_policy("turn_bon", TurnBoNParams, adaptive=True)
class TurnBoN:
    def __init__(self, params: TurnBoNParams, *, generator, models, tools=None, **_):
        self.p, self.generator, self.tools = params, generator, tools
        self.selector = models(params.selector, "selector")
        self.system_prompt = read_prompt(params.selector_system_prompt, "selector_system.txt")

    async def decide(self, messages, ctx: TurnContext) -> Decision:
        n = self.p.n_at(ctx.turn, self.p.n)
        if self.p.adaptive is not None and n > 1:
            return await self._adaptive(messages, n, ctx)
        comps, actions = await sample_candidates(self.generator, messages, n, ctx, self.tools)
        if len(comps) == 1:
            return Decision(comps[0], actions[0], 1, 0)
        return await self._select(messages, comps, actions, ctx)

    async def _adaptive(self, messages, n: int, ctx: TurnContext) -> Decision:
        a = self.p.adaptive
        if a.mode == "first":
            comps, actions = await self._sample(messages, a.first, ctx.seed, ctx)
            if all_agree(actions, a.match):
                return self._agreed(comps, actions, AGREED_FIRST, ctx)
            # The rest carry the seeds plain Turn-BoN's parallel requests first..n-1 carry.
            more, more_actions = await self._sample(messages, n - a.first, ctx.seed + a.first, ctx)
            comps, actions = comps + more, actions + more_actions
        else:
            comps, actions = await self._sample(messages, n, ctx.seed, ctx)
            if all_agree(actions, a.match):
                return self._agreed(comps, actions, AGREED_ALL, ctx)
        self._log_candidates(comps, actions, SELECTED, ctx)
        return await self._select(messages, comps, actions, ctx, path=SELECTED)

    async def _sample(self, messages, n: int, seed: int, ctx: TurnContext):
        result = await self.generator.complete(messages, n=n, seed=seed, tools=self.tools, sink=ctx.rec)
        comps = result.completions[:n]
        return comps, [parse_action(c) for c in comps]

    @staticmethod
    def _log_candidates(comps, actions, path: str, ctx: TurnContext) -> None:
        """One `candidates` event per turn, with every candidate sampled and the path taken."""
        ctx.rec.event("candidates", candidates=[candidate_record(c, a) for c, a in zip(comps, actions)], path=path)

    def _agreed(self, comps, actions, path: str, ctx: TurnContext) -> Decision:
        self._log_candidates(comps, actions, path, ctx)
        return Decision(comps[0], actions[0], len(comps), 0)

    async def _select(self, messages, comps, actions, ctx: TurnContext, path: str | None = None) -> Decision:
        shown = render_candidates(actions)
        budget = transcript_budget(self.selector, len(self.system_prompt) + len(shown) + 500)
        elided = fit_transcript(messages, budget)[1]
        prompt = selector_messages(messages, actions, self.system_prompt, budget)
        parsed, reply, problem, tries = await ask_json(self.selector, prompt, lambda t: parse_selection(t, len(actions)),
                                                       seed=ctx.seed + SEED_STRIDE, sink=ctx.rec,
                                                       tries=self.p.selector_tries)
        failed = parsed is None
        if failed:
            runnable = [i for i, a in enumerate(actions) if a.runnable] or list(range(len(actions)))
            index = runnable[0] if self.p.fallback == "first" else derive_rng(ctx.seed, "fallback").choice(runnable)
            rationale = f"fallback ({self.p.fallback}) after selector failures: {problem}"
        else:
            index, rationale = parsed
        extra = {"prompt_elided_chars": elided} if elided else {}
        if path is not None:
            extra["path"] = path
        ctx.rec.event("selection", index=index, rationale=rationale, selector_failed=failed, tries=tries,
                      method="listwise", model=self.selector.name, **extra)
        return Decision(comps[index], actions[index], len(comps), index, failed)
