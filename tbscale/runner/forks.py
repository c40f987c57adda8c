"""An attempt's environment as a policy may branch it (agent/policy.py, Branches; the lookahead
policy, docs/forks-and-lookahead.md).

`AttemptForks` holds the attempt's current environment. `open(count)` snapshots it and starts
`count` forks of it, with the attempt's labels (so `tbscale clean` and the crash paths find
them), each registered with the attempt's environments (so every path stops them) and seen as the
agent phase sees its environment (its user and env; the backend starts a fork under its parent's
network policy, which is the agent phase's). `adopt(fork)` makes a fork the
attempt's environment: the former environment and every other open fork are stopped, and
verification later runs in the adopted fork, sealed as ever (runner/verification.py):
- the verifier guard's baseline of toolchain digests and mount points stays the one taken before
  the agent phase began (the fork's filesystem is the parent's, so what the agent changed before
  or after the fork is compared with the state it started from);
- the files whose status changed are found per environment: a commit gives every file it carries
  a new status change time, so in a fork everything ever written since the image (by the harness
  too: a previous step's tests, a step's workdir files) would look changed. So when a turn forks,
  the changes in the environment being left are found against its own reference and kept, and an
  adopted fork's reference becomes its clock as it started;
- its baseline of processes is replaced by the fork's own, listed as it started and before any
  candidate ran: processes are not carried into a fork, and the ones the task's entrypoint and
  services start there again are the task's, not the agent's (a sidecar's would otherwise be
  swept as the agent's).
A snapshot whose forks are all discarded is released at once. The snapshot an adopted fork started
from is kept to the attempt's end (`close`, on every path), when all are released newest first:
the next turn's snapshot is taken in that fork, so its image is a child of this one and holds its
layers anyway, and an engine removes a parent image only after its children. What `adopt` lets go of is removed off the turn's path (`drain` waits for
it; the attempt drains before it stops its environments).
"""

from __future__ import annotations

import asyncio
import collections
import time
from dataclasses import dataclass
from typing import Any

from tbscale.environments import Environment, PhaseView
from tbscale.environments.base import snapshot_of
from tbscale.errors import SandboxError
from tbscale.logs import AttemptRecorder
from tbscale.runner.environment import AttemptEnvironments
from tbscale.runner.verification import AttemptVerification
from tbscale.tasks.model import AgentSpec
from tbscale.types.guard import ProcessBaseline


PURPOSE = "lookahead"


def _id(snapshot: Any) -> str:
    return str(getattr(snapshot, "id", snapshot))


class ForkGate:
    """The bound on forks alive at once across a run's attempts (`fork_concurrency`; None: none
    but each policy's own per turn). A turn takes all its forks' places at once, before its
    snapshot, in the order turns asked (so a turn that asks for many is not passed over for ever
    by turns that ask for few), and gives them back once those forks are removed; the fork a turn
    adopts moves into the place of the environment it replaces, which is removed with the rest. No
    turn asks for more than the bound (runner/checks.py refuses such a config), so the bound
    changes when forks start, never what a trial does. `give` may be called from a worker thread
    (an attempt's closing runs in one)."""

    def __init__(self, limit: int | None):
        self.limit, self.free = limit, limit or 0
        self._waiting: collections.deque[tuple[int, asyncio.Future]] = collections.deque()
        self._loop: asyncio.AbstractEventLoop | None = None

    async def take(self, count: int) -> None:
        if self.limit is None or count <= 0:
            return
        if count > self.limit:  # runner/checks.py refuses such a config: this would wait for ever
            raise ValueError(f"a turn asks for {count} forks at once, more than fork_concurrency ({self.limit})")
        self._loop = asyncio.get_running_loop()
        if not self._waiting and self.free >= count:
            self.free -= count
            return
        granted = self._loop.create_future()
        self._waiting.append((count, granted))
        try:
            await granted
        except asyncio.CancelledError:
            if granted.done() and not granted.cancelled():
                self._give(count)  # granted as it was cancelled: nobody holds those places
            else:
                self._wake()  # a later turn may fit now that this one left the queue
            raise

    def give(self, count: int) -> None:
        if self.limit is None or count <= 0 or self._loop is None:
            return
        try:
            on_loop = asyncio.get_running_loop() is self._loop
        except RuntimeError:
            on_loop = False
        if on_loop:
            self._give(count)
        else:
            self._loop.call_soon_threadsafe(self._give, count)

    def _give(self, count: int) -> None:
        self.free += count
        self._wake()

    def _wake(self) -> None:
        while self._waiting:
            count, granted = self._waiting[0]
            if granted.done():  # its turn was cancelled while it waited
                self._waiting.popleft()
                continue
            if count > self.free:
                return
            self._waiting.popleft()
            self.free -= count
            granted.set_result(None)


@dataclass
class _Fork:
    raw: Environment
    view: Environment
    snapshot: Any
    processes: ProcessBaseline | None = None  # the guard's process baseline, as the fork started


class AttemptForks:
    """See the module doc. `box` is the attempt's environment now (what verification runs in)."""

    def __init__(self, envs: AttemptEnvironments, checks: AttemptVerification, box: Environment, agent: AgentSpec,
                 rec: AttemptRecorder, gate: ForkGate | None = None):
        self.envs, self.checks, self.box, self.agent, self.rec = envs, checks, box, agent, rec
        self.gate = gate or ForkGate(None)
        self.held = 0  # places of the gate this attempt's open forks hold
        self.open_forks: list[_Fork] = []
        self.snapshot: Any = None  # of the open forks
        self.pending: list[asyncio.Task] = []  # removals started by `adopt`
        self.owed: list[Any] = []  # every snapshot taken and not yet released (`close` releases the rest)
        self._lock = asyncio.Lock()

    # ---- the Branches protocol ---------------------------------------------------------------------
    async def open(self, count: int) -> list[Environment]:
        async with self._lock:
            await self.drain()  # at most one turn's forks alive at once
            if self.open_forks or self.snapshot is not None:
                await self._discard()
            await self.gate.take(count)
            self.held = count
            t = time.monotonic()
            snapshot = await asyncio.to_thread(snapshot_of, self.box)
            took = time.monotonic() - t
            self.snapshot = snapshot
            self.owed.append(snapshot)
            self.rec.event("fork", op="snapshot", snapshot=_id(snapshot), container=self.box.id,
                           images=getattr(snapshot, "images", None), sec=round(took, 4), purpose=PURPOSE,
                           node=getattr(snapshot, "node", None))
            # Meanwhile, what the agent changed in the environment it is leaving (the guard's
            # reference moves to each fork's start: module doc).
            guard = self.checks.guard
            jobs = [self._start_fork(snapshot) for _ in range(count)]
            if guard is not None:
                jobs.append(asyncio.to_thread(guard.carry_changes, self.box))
            results = await asyncio.gather(*jobs, return_exceptions=True)  # a failed carry fails the turn
            self.open_forks = [r for r in results if isinstance(r, _Fork)]
            failed = [r for r in results if isinstance(r, BaseException)]
            if failed:
                await self._discard()
                err = failed[0]
                raise err if isinstance(err, SandboxError) else SandboxError(f"could not fork the environment: {err}")
            return [f.view for f in self.open_forks]

    async def adopt(self, fork: Environment) -> Environment:
        async with self._lock:
            chosen = next((f for f in self.open_forks if f.view is fork or f.raw is fork), None)
            if chosen is None:
                raise SandboxError("adopt: not one of the open forks")
            old, self.box = self.box, chosen.raw
            guard = self.checks.guard
            if guard is not None:
                guard.go_on_in(chosen.raw, chosen.processes or {})
            others = [f for f in self.open_forks if f is not chosen]
            self.open_forks = []
            self.snapshot = None  # the chosen fork's: released at the attempt's end (see the module doc)
            # Off the turn's path: the agent goes on while the others are removed (`drain` waits);
            # the gate gets the turn's places back once they are.
            self.pending.append(asyncio.create_task(self._retire([f.raw for f in others] + [old], self._let_go())))
            return chosen.view

    async def drain(self) -> None:
        """Wait until the environments `adopt` let go of are removed."""
        pending, self.pending = self.pending, []
        for task in pending:
            await task

    async def _retire(self, boxes: list[Environment], held: int) -> None:
        try:
            results = await asyncio.gather(*(asyncio.to_thread(self.envs.stop, b) for b in boxes),
                                           return_exceptions=True)
        finally:
            self.gate.give(held)
        for r in results:
            if isinstance(r, BaseException):
                self.rec.event("fork", op="stop_failed", snapshot="", purpose=PURPOSE,
                               error=f"{type(r).__name__}: {r}"[:300])

    async def discard(self) -> None:
        async with self._lock:
            await self._discard()

    # ---- the rest -----------------------------------------------------------------------------------
    async def _start_fork(self, snapshot: Any) -> _Fork:
        t = time.monotonic()
        raw = await asyncio.to_thread(self.envs.backend.fork, snapshot, labels=dict(self.envs.labels))
        self.envs.started.append(raw)
        parent_spec = self.envs.specs.get(id(self.box))
        if parent_spec is not None:
            self.envs.specs[id(raw)] = parent_spec
        took = time.monotonic() - t
        self.rec.event("fork", op="fork", snapshot=_id(snapshot), container=raw.id, sec=round(took, 4), purpose=PURPOSE)
        # The fork is under its parent's network policy already (the agent phase's: the backend puts
        # it there); the agent's user and env are the ones its parent was seen with.
        view = PhaseView(raw, user=self.agent.user, env=self.envs.agent_env)
        healthcheck = self.envs.env.healthcheck
        if healthcheck is not None:  # what the task itself runs is up again before a candidate runs
            await asyncio.to_thread(self.envs.healthcheck, raw, healthcheck, "[environment.healthcheck] (in a fork)")
        processes = None
        guard = self.checks.guard
        if guard is not None:
            processes = await asyncio.to_thread(guard.processes_of, raw)
        return _Fork(raw, view, snapshot, processes)

    async def _discard(self) -> None:
        forks, self.open_forks = self.open_forks, []
        snapshot, self.snapshot = self.snapshot, None
        held = self._let_go()
        try:
            await asyncio.gather(*(asyncio.to_thread(self.envs.stop, f.raw) for f in forks))
        finally:
            self.gate.give(held)
        if snapshot is not None:
            await asyncio.to_thread(self._release, snapshot)

    def _let_go(self) -> int:
        """The gate's places the open forks hold, now no longer this attempt's to give back twice."""
        held, self.held = self.held, 0
        return held

    def _release(self, snapshot: Any) -> None:
        if snapshot in self.owed:
            self.owed.remove(snapshot)
        t = time.monotonic()
        try:
            self.envs.backend.release(snapshot)
        except Exception as e:  # noqa: BLE001 - a release that fails is said; the run's clean-up removes it
            self.rec.event("fork", op="release_failed", snapshot=_id(snapshot), purpose=PURPOSE,
                           error=f"{type(e).__name__}: {e}"[:300])
            return
        self.rec.event("fork", op="release", snapshot=_id(snapshot), sec=round(time.monotonic() - t, 4),
                       purpose=PURPOSE)

    def close(self) -> None:
        """At the attempt's end, after `drain` and after its environments were stopped: every
        snapshot not yet released is released (on every path: a removal `adopt` started and a
        cancellation cut short included)."""
        try:
            for f in self.open_forks:
                self.envs.stop(f.raw)
        finally:
            self.gate.give(self._let_go())
        self.open_forks, self.snapshot = [], None
        for s in reversed(list(self.owed)):
            self._release(s)
