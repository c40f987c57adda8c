"""The local executor: every trial an asyncio task in this process, at most `concurrency` at once
(containers are bounded separately, per attempt)."""

from __future__ import annotations

import asyncio
from typing import Awaitable, Callable


class LocalExecutor:
    def __init__(self, concurrency: int):
        self.concurrency = concurrency

    def summary(self) -> dict:
        return {}

    async def run_trial(self, spec, trials):
        """One trial, here: `trials` is the run's TrialRunner."""
        return await trials.run_trial(spec)

    async def run(self, specs: list, run_one: Callable[[object], Awaitable[None]]) -> None:
        """Run `run_one` for every spec. The first exception `run_one` lets through (a model that is
        unavailable) cancels the trials still running and is raised; `run_one` handles the rest."""
        await run_bounded(specs, run_one, self.concurrency)


async def run_bounded(specs: list, run_one: Callable[[object], Awaitable[None]], concurrency: int) -> None:
    """`run_one` for every spec, at most `concurrency` at once; the first exception it lets through
    cancels the others (each executor adds its own cleanup around this)."""
    gate = asyncio.Semaphore(concurrency)

    async def guarded(spec) -> None:
        async with gate:
            await run_one(spec)

    tasks = [asyncio.create_task(guarded(s)) for s in specs]
    try:
        for finished in asyncio.as_completed(tasks):
            await finished
    finally:
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
