"""Best-of-N trajectories: N independent attempts, then one is returned, picked by
- `rtv`: Recursive Tournament Voting over the attempts' summaries (pdr-rtv.txt Section 2.3);
- `judge`: one flat LLM judgement over all N summaries (V votes, majority);
- `random`: a seeded random attempt (what N attempts buy with no selection at all);
- `oracle`: a passing attempt if there is one, by the verifier. For analysis only: it is the
  pass@N ceiling of the pool, not a strategy anyone could run.

Any action policy runs inside each attempt (the setting's `policy`), so Turn-BoN or an action
verifier inside best-of-N needs nothing but the config. The machinery shared with PDR (running an
iteration of attempts, summarizing each as it finishes, selecting, metering each stage's tokens,
the record) lives in `StagedStrategy`.
"""

from __future__ import annotations

import asyncio
from typing import Any, Callable, Literal

from pydantic import Field

from tbscale.strategies.registry import RECORD_STAGED, register_trajectory
from tbscale.strategies.base import AttemptResult, StartAttempt, TrajectoryOutcome
from tbscale.strategies.rtv import RTVParams, RTVResult, SummaryJudge, select
from tbscale.strategies.stage_records import StagedRecord, StageRecord
from tbscale.strategies.summaries import StageMeter, Summarizer, Summary, SummaryParams, stage_usage_json
from tbscale.types.completion import Usage, sum_usage

Selector = Literal["rtv", "judge", "random", "oracle"]


class StagedParams(RTVParams, SummaryParams):
    summarize: Literal["auto", "always"] = Field(
        "auto", description="auto: summarize the attempts a selection or a later iteration reads; always: every attempt")
    log_calls: Literal["full", "parsed", "off"] = Field(
        "full", description="judge and summarizer calls as verifier_call events; full keeps messages and responses")

    def model_refs(self):
        return {**RTVParams.model_refs(self), **SummaryParams.model_refs(self)}


class BestOfNParams(StagedParams):
    n: int = Field(4, ge=1, le=256, description="N: attempts")
    selector: Selector = "rtv"

    def oracle_selects(self) -> bool:
        return self.selector == "oracle"


class StagedStrategy:
    """Shared machinery of the trajectory strategies that run stages of attempts and select."""

    kind = "staged"

    def __init__(self, params: StagedParams, *, models, seed: int, prompts: dict[str, str] | None = None, **_):
        self.p, self.models, self.seed, self.prompts = params, models, seed, prompts
        self.summarizer = Summarizer(params, models, seed=seed, log_calls=params.log_calls)

    # -- pieces -------------------------------------------------------------------------------------
    def _setup(self, task, rec) -> None:
        self.meter = StageMeter(rec)
        self.attempts: dict[int, AttemptResult] = {}
        self.summaries: dict[int, Summary] = {}
        self.stages: list[StageRecord] = []
        self.instruction = task.instruction
        self.judge = SummaryJudge(self.p, self.models, instruction=task.instruction, seed=self.seed,
                                  log_calls=self.p.log_calls)

    async def _iteration(self, start_attempt: StartAttempt, stage: str, count: int,
                         context: Callable[[int], tuple[str | None, list[int]]], summarize: bool) -> list[AttemptResult]:
        """`count` attempts at once (the runner bounds the containers), each summarized as soon
        as it is done when `summarize`."""
        sink = self.meter.sink(stage)

        async def one(k: int) -> AttemptResult:
            text, indices = context(k)
            attempt = await start_attempt(stage, text, indices)
            self.attempts[attempt.index] = attempt
            if summarize:
                self.summaries[attempt.index] = await self.summarizer.summarize(attempt, self.instruction, sink, sink)
            return attempt

        done = list(await asyncio.gather(*(one(k) for k in range(count))))
        self.stages.append({"stage": stage, "kind": "iteration", "attempts": [a.index for a in done],
                            "summarized": summarize})
        return done

    async def _select(self, method: str, pool: list[AttemptResult], target: int, stage: str, **info) -> RTVResult:
        sink = self.meter.sink(stage)
        missing = [a for a in pool if a.index not in self.summaries] if method in ("rtv", "judge") else []
        for a, s in zip(missing, await asyncio.gather(*(self.summarizer.summarize(a, self.instruction, sink, sink)
                                                        for a in missing))):
            self.summaries[a.index] = s
        result = await select(method, [a.index for a in pool], target=target, judge=self.judge,
                              summaries={i: s.text for i, s in self.summaries.items()}, params=self.p,
                              seed=self.seed, tag=stage, sink=sink,
                              passed=lambda i: self.attempts[i].passed and self.attempts[i].ending == "pass")
        self.stages.append({"stage": stage, "kind": "select", "method": method, "target": result.record["target"],
                            "from": [a.index for a in pool], "selected": result.survivors,
                            "tournament": result.record, **info})
        return result

    def _stage_usage(self) -> dict[str, dict[str, Usage]]:
        """Tokens per stage and role: the attempts of an iteration (generator, selector,
        verifier inside them) plus the summaries and votes made for that stage."""
        own = self.meter.by_stage()
        out = {}
        for st in self.stages:
            parts = [self.attempts[i].usage for i in st.get("attempts", [])] + [own.get(st["stage"], {})]
            out[st["stage"]] = sum_usage(*parts)
        for stage, roles in own.items():  # e.g. summaries made for a selection of another stage
            out.setdefault(stage, roles)
        return out

    def _outcome(self, final: AttemptResult, **record: Any) -> TrajectoryOutcome:
        attempts = [self.attempts[i] for i in sorted(self.attempts)]
        # `record` holds the strategy's parameters (StagedRecord's optional keys)
        rec: StagedRecord = {"kind": self.kind, **record, "stages": self.stages, "final": final.index,  # type: ignore[typeddict-item]
               # the summaries themselves are `summary` events in the trajectory file; the row keeps it lean
               "summaries": {str(i): {"source": s.source, "chars": len(s.text), **({"error": s.error} if s.error else {})}
                             for i, s in sorted(self.summaries.items())},
               "stage_usage": stage_usage_json(self._stage_usage())}
        return TrajectoryOutcome(final=final, attempts=attempts, record=rec)


@register_trajectory("best_of_n", BestOfNParams, record=RECORD_STAGED)
class BestOfN(StagedStrategy):
    kind = "best_of_n"

    async def run(self, task, start_attempt: StartAttempt, rec) -> TrajectoryOutcome:
        p: BestOfNParams = self.p
        self._setup(task, rec)
        needs = p.selector in ("rtv", "judge") or p.summarize == "always"
        pool = await self._iteration(start_attempt, "iter0", p.n, lambda k: (None, []), needs)
        result = await self._select(p.selector, pool, 1, "final")
        final = self.attempts[result.survivors[0]]
        return self._outcome(final, n=p.n, selector=p.selector, group_size=p.group_size, votes=p.votes)
