"""A trajectory strategy from outside tbscale, for the tests: `knockout` runs N attempts, keeps
`keep` of them by `pick`, then picks one of those by `pick` again. tbscale has no name of it: it
registers by decorator when this module is imported, and the tests install it the way another
package would, through the `tbscale.strategies` entry-point group (see `tbscale_testing.plugins`).

It declares what tbscale's report and trial line need from it: its record is a staged record (the
report's stage tables, the viewer's brackets), and `pick: oracle` lets the verifier choose (the trial
line's `oracle_selection`, the report's "oracle upper bound" label). Its parameter is named `pick`,
a name no built-in strategy uses.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, ValidationInfo, field_validator

from tbscale.strategies import RECORD_STAGED, register_trajectory
from tbscale.strategies.base import StartAttempt, TrajectoryOutcome
from tbscale.strategies.best_of_n import StagedParams, StagedStrategy

NAME = "knockout"


class KnockoutParams(StagedParams):
    n: int = Field(3, ge=1, le=64, description="attempts")
    keep: int = Field(2, ge=1, le=64, description="attempts kept by the first pick")
    pick: Literal["rtv", "judge", "random", "oracle"] = "rtv"

    @field_validator("keep")
    @classmethod
    def _keep_le_n(cls, keep: int, info: ValidationInfo) -> int:
        n = info.data.get("n")
        if n is not None and keep > n:
            raise ValueError(f"keep ({keep}) cannot exceed n ({n})")
        return keep

    def oracle_selects(self) -> bool:
        return self.pick == "oracle"


@register_trajectory(NAME, KnockoutParams, record=RECORD_STAGED)
class Knockout(StagedStrategy):
    kind = NAME

    async def run(self, task, start_attempt: StartAttempt, rec) -> TrajectoryOutcome:
        p: KnockoutParams = self.p
        self._setup(task, rec)
        pool = await self._iteration(start_attempt, "iter0", p.n, lambda k: (None, []), p.pick in ("rtv", "judge"))
        kept = await self._select(p.pick, pool, p.keep, "select_k")
        result = await self._select(p.pick, [self.attempts[i] for i in kept.survivors], 1, "final")
        return self._outcome(self.attempts[result.survivors[0]], n=p.n, keep=p.keep, pick=p.pick)
