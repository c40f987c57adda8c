"""The default trajectory strategy: one attempt is the trial."""

from __future__ import annotations

from tbscale.strategies.registry import register_trajectory
from tbscale.strategies.base import Params, TrajectoryOutcome


class SingleParams(Params):
    pass


@register_trajectory("single", SingleParams, baseline=True)
class Single:
    def __init__(self, params: SingleParams, **_):
        pass

    async def run(self, task, start_attempt, rec) -> TrajectoryOutcome:
        attempt = await start_attempt("final", None, [])
        return TrajectoryOutcome(final=attempt, attempts=[attempt])
