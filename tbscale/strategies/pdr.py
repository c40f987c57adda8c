"""Parallel-Distill-Refine with Recursive Tournament Voting (pdr-rtv.txt Sections 2.4-2.5).

1. Iteration 0: N independent attempts, each summarized.
2. Select-K: RTV (or another `select` method) keeps K of them.
3. Iteration 1: N fresh attempts, each conditioned on the K selected summaries (rendered into the
   instance prompt by the `context_summaries` template; the environments are fresh, only the
   summaries carry over).
4. Final: RTV over the iteration-1 attempts returns one.

With T > 2 iterations, steps 2-3 repeat (each iteration conditioned on K selected from the one
before). Paper defaults: N=16, T=2, K=4, G=2, V=8.

`context` chooses how refinement contexts are built (pdr-rtv Table 1): `select_k` (the K chosen
by `select`, the same for every attempt: PDR+RTV), `random_k` (each attempt its own seeded random
K: plain PDR), `single` (attempt i refines attempt i's own summary). The action policy of the
setting runs inside every attempt, so e.g. Turn-BoN inside PDR is config only.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, ValidationInfo, field_validator

from tbscale.seeds import derive_rng
from tbscale.strategies.registry import RECORD_STAGED, register_trajectory
from tbscale.strategies.base import StartAttempt, TrajectoryOutcome
from tbscale.strategies.best_of_n import Selector, StagedParams, StagedStrategy
from tbscale.strategies.stage_records import stage_name


class PDRParams(StagedParams):
    n: int = Field(16, ge=1, le=256, description="N: attempts per iteration")
    iterations: int = Field(2, ge=1, le=8, description="T: iterations (T=2: iteration 0 and iteration 1)")
    k: int = Field(4, ge=1, le=256, description="K: summaries kept as the next iteration's context")
    context: Literal["select_k", "random_k", "single"] = "select_k"
    select: Literal["rtv", "judge", "oracle"] = Field("rtv", description="how Select-K picks (context: select_k)")
    final: Selector = Field("rtv", description="how the returned attempt is picked from the last iteration")
    shuffle_context: bool = Field(False, description="each attempt sees the K summaries in its own seeded order")

    @field_validator("k")
    @classmethod
    def _k_le_n(cls, k: int, info: ValidationInfo) -> int:
        n = info.data.get("n")
        if n is not None and k > n:
            raise ValueError(f"k ({k}) cannot exceed n ({n})")
        return k

    def oracle_selects(self) -> bool:
        # `select` counts even where `context` leaves Select-K unused: the label errs toward marking.
        return "oracle" in (self.select, self.final)


@register_trajectory("pdr", PDRParams, record=RECORD_STAGED)
class PDR(StagedStrategy):
    kind = "pdr"

    def _context_text(self, indices: list[int]) -> str:
        from tbscale.agent.templates import render

        return render("context_summaries", self.prompts, summaries=[self.summaries[i].text for i in indices])

    async def run(self, task, start_attempt: StartAttempt, rec) -> TrajectoryOutcome:
        p: PDRParams = self.p
        self._setup(task, rec)
        prev = None
        for t in range(p.iterations):
            last = t == p.iterations - 1
            summarize = (not last) or p.final in ("rtv", "judge") or p.summarize == "always"
            if prev is None:
                ctx_of = lambda k: (None, [])  # noqa: E731
            else:
                ctx_of = self._contexts(prev, t)
            pool = await self._iteration(start_attempt, stage_name("iter", t), p.n, ctx_of, summarize)
            if last:
                break
            if p.context == "select_k":
                result = await self._select(p.select, pool, p.k, stage_name("select", t), after_iteration=t)
                prev = ("select_k", result.survivors, pool)
            else:
                prev = (p.context, [], pool)
        result = await self._select(p.final, pool, 1, "final")
        final = self.attempts[result.survivors[0]]
        return self._outcome(final, n=p.n, iterations=p.iterations, k=p.k, group_size=p.group_size, votes=p.votes,
                             context=p.context, select=p.select, final_method=p.final)

    def _contexts(self, prev, t: int):
        mode, selected, pool = prev
        p: PDRParams = self.p
        idx = [a.index for a in pool]

        def ctx_of(k: int):
            if mode == "select_k":
                chosen = list(selected)
            elif mode == "random_k":
                chosen = sorted(derive_rng(self.seed, "random_k", t, k).sample(idx, min(p.k, len(idx))))
            else:  # single: refine the attempt at the same position of the previous iteration
                chosen = [idx[k % len(idx)]]
            if p.shuffle_context:
                derive_rng(self.seed, "ctx_order", t, k).shuffle(chosen)
            return self._context_text(chosen), chosen

        return ctx_of
