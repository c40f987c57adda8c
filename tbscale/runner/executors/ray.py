"""The Ray executor: every trial a Ray task, on whichever node of a cluster has room for it.

    executor: {name: ray, address: local}     # a private cluster on this machine
    executor: {name: ray, address: auto}      # the cluster this machine belongs to (`ray start`)
    executor: {name: ray, address: "ray://head:10001"}   # Ray Client

How a trial runs (docs/scale.md):
- It is one Ray task asking for its task's `cpus` and `memory_mb`, with `max_retries=0`: the driver
  owns retries. The task runs the ordinary TrialRunner in the worker, whose environments start
  where the run's backend puts them from that node (a local engine's images are built there, under
  a lock shared by the node's workers).
- The worker writes nothing into the run folder. Its trajectory lines and model-call records are
  batched and yielded to the driver (a streaming generator; under Ray Client, which cannot
  stream, they come back when the trial ends). The driver alone writes: lines go to
  `<trajectory>.partial`, renamed into place when the trial's result arrives; spend lines are
  written as they arrive (the money was spent either way); the trials.jsonl line is appended by the
  Runner once the result is in, so a trial is indexed exactly once.
- A node or worker that dies mid-trial (NodeDiedError, WorkerCrashedError, OutOfMemoryError, ...)
  costs only that attempt: its partial file is dropped and the trial is submitted again (a new
  attempt number, steered away from the node that failed), up to `retries` times; after that it
  counts as a crashed trial, which the next run retries.
- Keys: the values of the variables the models' `api_key_env` name travel as one task argument in
  a wrapper whose repr hides them; the worker sets them in its environment for the trial and
  registers them for redaction. Never through runtime_env, which Ray shows in its dashboard, state
  API and logs.
- Task files (environment, tests, solution) travel as archives in the object store, unpacked once
  per node under the cache folder, unless the node already sees the same folder with the same
  content (one machine, or a shared filesystem).
- `concurrency` bounds the trials in flight for this run across the whole cluster; Ray's resource
  accounting bounds what each node takes on.

Ray is an optional extra (`pip install 'tbscale[ray]'`) and is imported only when this executor
starts, so `tbscale --help` and local runs never load it.
"""

from __future__ import annotations

import asyncio
import os
import queue
import shutil
import tempfile
import threading
import time
import traceback
from collections import Counter
from dataclasses import replace
from pathlib import Path
from typing import Any, Awaitable, Callable, Iterator, Literal, Union

from typing_extensions import TypedDict

from tbscale.errors import ModelUnavailable, TbscaleError
from tbscale.logs import EventLog
from tbscale.runner.executors.local import run_bounded
from tbscale.runner.executors.taskfiles import materialize_task, pack_task
from tbscale.secrets import redact, redact_json, register_secret
from tbscale.types.manifest import ExecutorSummary, InfraRetry
from tbscale.types.results import TrialResult

MB = 1024 * 1024
# Driver-side errors that mean the attempt's machine went away, not that the trial failed.
INFRA_ERRORS = ("NodeDiedError", "WorkerCrashedError", "OutOfMemoryError", "ObjectLostError", "OwnerDiedError",
                "LocalRayletDiedError", "RaySystemError", "ObjectReconstructionFailedError")
# Faster dead-node detection for the clusters tbscale starts itself (about 4 s instead of 15 s).
FAST_HEALTH_CHECK = {"health_check_initial_delay_ms": 1000, "health_check_period_ms": 1000,
                     "health_check_timeout_ms": 1000, "health_check_failure_threshold": 3}


def _ray():
    try:
        import ray
    except ImportError:
        raise TbscaleError("executor `ray` needs Ray: pip install 'tbscale[ray]'") from None
    return ray


class Keys:
    """API key values for the workers: one task argument, never runtime_env. The repr hides the
    values, so nothing that prints task arguments shows them."""

    def __init__(self, values: dict[str, str]):
        self._values = dict(values)

    def __repr__(self) -> str:
        return f"Keys({', '.join(sorted(self._values))}; values hidden)"

    __str__ = __repr__

    def values(self) -> dict[str, str]:
        return dict(self._values)


# ---- the worker side ----------------------------------------------------------------------------

class StreamFolder:
    """What a TrialRunner in a Ray worker writes through instead of the run folder: every line of
    the trial's event log goes to `emit`; side files land in a scratch folder and are sent at the
    end."""

    def __init__(self, scratch: Path, run_name: str, emit: Callable[[tuple], None], run_label: str):
        self.path = scratch / run_name
        self.emit = emit
        # The driver's run folder, not the scratch: the containers a worker starts belong to that
        # run, for `tbscale clean RUN` and the run's own checks to find.
        self.run_label = run_label

    def event_log(self, spec, **base: Any) -> EventLog:
        return EventLog(self.path / spec.trajectory_relpath, sink=lambda line: self.emit(("line", line)), **base)

    def side_files(self, spec) -> Iterator[tuple[str, bytes]]:
        """Files the trial wrote beside its log: full outputs (`<trajectory>.files/`) and the
        artifacts its attempts collected (`artifacts/<trial key>/`)."""
        traj = self.path / spec.trajectory_relpath
        for folder in (traj.with_name(traj.stem + ".files"), self.path / "artifacts" / spec.key):
            if folder.is_dir():
                for f in sorted(p for p in folder.rglob("*") if p.is_file()):
                    yield f.relative_to(self.path).as_posix(), f.read_bytes()


class TrialPayload(TypedDict):
    """What the driver sends a worker for one trial (with the task's files and the keys apart)."""

    exp: Any  # the Experiment
    spec: Any  # the TrialSpec
    run_name: str
    run_label: str  # the driver's run folder (RunFolder.run_label)
    keep_images: list[str]


# What a worker sends back for one trial, in order (`trial_messages`).
class StartMessage(TypedDict):
    kind: Literal["start"]
    attempt: int
    node: str
    pid: int
    t: float


class ItemsMessage(TypedDict):
    kind: Literal["items"]
    items: list[tuple[str, Any]]  # ("line", an event line's JSON text) or ("call", a CallRecord)


class FilesMessage(TypedDict):
    kind: Literal["files"]
    files: list[tuple[str, bytes]]  # path relative to the run folder, content


class UnavailableMessage(TypedDict):
    kind: Literal["unavailable"]
    model: str
    cause: str
    tries: int
    detail: str


class ErrorMessage(TypedDict):
    kind: Literal["error"]
    type: str
    message: str
    traceback: str


class ResultMessage(TypedDict):
    kind: Literal["result"]
    row: Any  # the TrialResult, as JSON (model_dump(mode="json"))
    t: float


WorkerMessage = Union[StartMessage, ItemsMessage, FilesMessage, UnavailableMessage, ErrorMessage, ResultMessage]
EndMessage = Union[UnavailableMessage, ErrorMessage, ResultMessage]


class _Running:
    """The trial a worker runs on its own thread: its event loop and asyncio task (to cancel it
    from the generator's thread), and what it ended with."""

    loop: asyncio.AbstractEventLoop | None = None
    task: asyncio.Task | None = None
    row: TrialResult | None = None
    error: BaseException | None = None


_DONE = object()
CANCEL_GRACE_SEC = 20.0  # how long a cancelled trial gets to tear down its environments


def trial_messages(payload: TrialPayload, task_files: list, keys: Keys | None, attempt: int,
                   batch_max: int = 50, flush_sec: float = 0.2) -> Iterator[WorkerMessage]:
    """Run one trial in this worker and yield what the driver needs, in order: `start`, batches of
    `items` (("line", json) and ("call", record)), `files`, then `result`, `unavailable` or `error`.
    The trial's own exceptions come back as messages, never raised, so nothing needs unpickling
    on the driver; only a dead worker or node ends the stream early."""
    import ray

    from tbscale.environments import open_backend
    from tbscale.models import providers
    from tbscale.runner.trial import TrialRunner

    exp, spec = payload["exp"], payload["spec"]
    saved = {k: os.environ.get(k) for k in (keys.values() if keys else {})}
    for k, v in (keys.values() if keys else {}).items():
        register_secret(v)
        os.environ[k] = v
    scratch = Path(tempfile.mkdtemp(prefix="tbscale-ray-"))
    q: queue.Queue = queue.Queue()
    running = _Running()
    trial_thread: threading.Thread | None = None
    backend = None
    folder = StreamFolder(scratch, payload["run_name"], q.put, payload["run_label"])
    try:
        yield {"kind": "start", "attempt": attempt, "node": ray.get_runtime_context().get_node_id(),
               "pid": os.getpid(), "t": time.time()}
        task = materialize_task(spec.task, task_files)
        spec = replace(spec, task=task)
        providers.prepare([m.model for m in exp.models.values()], [task])
        backend = open_backend(exp.environment)
        backend.keep_images(set(payload.get("keep_images") or ()))

        async def body():
            running.loop, running.task = asyncio.get_running_loop(), asyncio.current_task()
            trials = TrialRunner(exp, folder, backend, asyncio.Semaphore(exp.concurrency),
                                 on_call=lambda _spec, record: q.put(("call", record)))
            return await trials.run_trial(spec)

        def run():
            try:
                running.row = asyncio.run(body())
            except BaseException as e:  # noqa: BLE001 - sent to the driver as a message
                running.error = e
            finally:
                q.put(_DONE)

        trial_thread = threading.Thread(target=run, name=f"trial-{spec.key}", daemon=True)
        trial_thread.start()
        batch: list = []
        deadline = time.monotonic() + flush_sec
        while True:
            try:
                item = q.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                item = None
            if item is _DONE:
                break
            if item is not None:
                batch.append(item)
            if batch and (len(batch) >= batch_max or time.monotonic() >= deadline):
                yield {"kind": "items", "items": batch}
                batch = []
            if time.monotonic() >= deadline:
                deadline = time.monotonic() + flush_sec
        if batch:
            yield {"kind": "items", "items": batch}
        files = list(folder.side_files(spec))
        if files:
            yield {"kind": "files", "files": files}
        err = running.error
        if isinstance(err, ModelUnavailable):
            yield {"kind": "unavailable", "model": err.model, "cause": err.cause, "tries": err.tries,
                   "detail": redact(err.detail)}
        elif err is not None:
            yield {"kind": "error", "type": type(err).__name__, "message": redact(str(err)),
                   "traceback": redact("".join(traceback.format_exception(err)))}
        else:
            assert running.row is not None
            # Redacted here, with what this node resolved: the driver writes the line, and a
            # variable may hold another value on this node than on the driver's.
            yield {"kind": "result", "row": redact_json(running.row.model_dump(mode="json")), "t": time.time()}
    except Exception as e:  # noqa: BLE001 - setting the trial up failed (task files, backend)
        yield {"kind": "error", "type": type(e).__name__, "message": redact(str(e)),
               "traceback": redact("".join(traceback.format_exception(e)))}
    finally:
        # Cancelled (the generator closed early): cancel the trial itself, as the local executor
        # does, so that it tears down its own environments and starts no new one; then remove
        # whatever is left.
        if trial_thread is not None and trial_thread.is_alive():
            loop, task = running.loop, running.task
            if loop is not None and task is not None:
                loop.call_soon_threadsafe(task.cancel)
            trial_thread.join(timeout=CANCEL_GRACE_SEC)
        if backend is not None:
            backend.stop_all()  # a cancelled trial leaves no environment behind
        shutil.rmtree(scratch, ignore_errors=True)
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def trial_stream(payload, task_files, keys, attempt):
    """The Ray task (a streaming generator)."""
    yield from trial_messages(payload, task_files, keys, attempt)


def trial_collect(payload, task_files, keys, attempt):
    """The Ray task where streaming is not available (Ray Client): every message at the end."""
    return list(trial_messages(payload, task_files, keys, attempt))


def cleanup_node(environment) -> int:
    """What dead tbscale processes on this node left behind (one small task per node), removed by
    the run's backend."""
    from tbscale.environments import open_backend

    try:
        return open_backend(environment).cleanup_orphans()
    except Exception:  # noqa: BLE001 - a node the backend cannot reach has nothing to clean
        return 0


# ---- the driver side ----------------------------------------------------------------------------

class RemoteTrialError(Exception):
    """A trial that raised in a Ray worker; its type name is the original's, its traceback a note."""


def _remote_error(msg: ErrorMessage) -> RemoteTrialError:
    cls = type(msg["type"], (RemoteTrialError,), {})
    e = cls(msg["message"])
    e.add_note("in the Ray worker:\n" + msg["traceback"])
    return e


class InfraRetriesExhausted(Exception):
    """Every attempt of a trial lost its node or worker."""


class RayExecutor:
    def __init__(self, exp, address: str = "local", num_cpus: int | None = None, retries: int = 2,
                 stream: str | bool = "auto", runtime_env: dict[str, Any] | None = None,
                 request_memory: bool = True, fast_health_check: bool = True, placement: str = "spread",
                 width: int = 1, **unknown: Any):
        if unknown:
            raise TbscaleError(f"executor: unknown option(s) for ray: {', '.join(sorted(unknown))} (known: address, "
                               "num_cpus, retries, stream, runtime_env, request_memory, fast_health_check, placement, width)")
        if placement not in ("spread", "task"):
            raise TbscaleError(f"executor.placement: {placement!r} is not one of spread, task")
        if runtime_env and "env_vars" in runtime_env:
            raise TbscaleError("executor.runtime_env.env_vars: not allowed (Ray shows them in its dashboard and "
                               "logs); keys reach workers through the models' api_key_env")
        self.exp, self.address, self.num_cpus, self.retries = exp, str(address), num_cpus, int(retries)
        self.stream = (not self.address.startswith("ray://")) if stream == "auto" else bool(stream)
        self.runtime_env = runtime_env or None
        self.request_memory, self.fast_health_check, self.placement = request_memory, fast_health_check, placement
        # Containers one trial runs side by side (best_of_n, pdr): its request is that many times the task's.
        self.width = max(1, int(width))
        self.ray = None
        self._owns_ray = False
        self._task_refs: dict[str, Any] = {}  # task id -> Ray object ref of its packed files
        self._pending: Counter = Counter()
        self._tags: dict[str, str] = {}
        self._cancelled: list = []
        self.infra_retries: list[InfraRetry] = []
        self.nodes_used: set[str] = set()
        self.trial_nodes: dict[str, str] = {}  # trial key -> node of its last attempt

    # ---- lifecycle -----------------------------------------------------------------------------
    def start(self) -> None:
        os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
        os.environ.setdefault("RAY_AUTH_MODE", "disabled")
        ray = _ray()
        self.ray = ray
        if not ray.is_initialized():
            common = {"log_to_driver": False, "logging_level": "WARNING"}
            if self.address == "local":  # never a bare ray.init(): that joins any cluster running here
                ray.init(address="local", num_cpus=self.num_cpus, include_dashboard=False,
                         _system_config=FAST_HEALTH_CHECK if self.fast_health_check else None, **common)
            else:
                for attempt in range(3):  # Ray Client's first connections to a fresh head can fail
                    try:
                        ray.init(address=self.address, runtime_env=self.runtime_env, **common)
                        break
                    except ConnectionAbortedError:
                        if attempt == 2:
                            raise
                        time.sleep(2)
            self._owns_ray = True
        opts = {"max_retries": 0}
        self._stream_task = ray.remote(num_returns="streaming", **opts)(trial_stream)
        self._collect_task = ray.remote(**opts)(trial_collect)
        self._cleanup_task = ray.remote(num_cpus=0, max_retries=0)(cleanup_node)
        from tbscale.runner.resolve import referenced_models

        names = sorted({m.api_key_env for m in referenced_models(self.exp).values() if m.api_key_env})
        values = {n: os.environ[n] for n in names if os.environ.get(n)}
        for v in values.values():
            register_secret(v)
        self._keys = ray.put(Keys(values))

    def shutdown(self) -> None:
        if self.ray is not None and self._owns_ray:
            self.ray.shutdown()
        self.ray = None
        self._owns_ray = False

    def summary(self) -> dict[str, ExecutorSummary]:
        """What the run's manifest records about this executor (its invocation's `executor`)."""
        retries = {"infra_retries": self.infra_retries} if self.infra_retries else {}
        return {"executor": ExecutorSummary(name="ray", address=self.address, nodes_used=len(self.nodes_used), **retries)}

    def _alive_nodes(self) -> list[dict[str, Any]]:
        return [n for n in self.ray.nodes() if n.get("Alive")]

    def _check_feasible(self, specs: list) -> None:
        """A request no node can meet would wait forever without an error: refuse it up front."""
        nodes = self._alive_nodes()
        best_cpu = max((n["Resources"].get("CPU", 0) for n in nodes), default=0)
        best_mem = max((n["Resources"].get("memory", 0) for n in nodes), default=0)
        for spec in specs:
            cpus, mem = self._resources(spec)
            if cpus > best_cpu or (mem and mem > best_mem):
                raise TbscaleError(
                    f"task {spec.task.id} asks for {cpus} CPUs and {mem / MB:.0f} MB, more than any node of the Ray "
                    f"cluster offers ({best_cpu} CPUs, {best_mem / MB:.0f} MB); lower environment.cpus/memory_mb "
                    "or add a bigger node")

    def _resources(self, spec) -> tuple[float, int]:
        env = self.exp.environment
        cpus = (env.cpus or spec.task.cpus) * self.width
        mem = (env.memory_mb or spec.task.memory_mb) * MB * self.width if self.request_memory else 0
        return cpus, mem

    async def _cleanup_nodes(self) -> int:
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        refs = [self._cleanup_task.options(scheduling_strategy=NodeAffinitySchedulingStrategy(n["NodeID"], soft=False))
                .remote(self.exp.environment) for n in self._alive_nodes()]
        done = await asyncio.gather(*refs, return_exceptions=True)
        return sum(d for d in done if isinstance(d, int))

    # ---- the executor protocol -------------------------------------------------------------------
    async def run(self, specs: list, run_one: Callable[[Any], Awaitable[None]]) -> None:
        """As LocalExecutor.run, on the cluster: at most `concurrency` trials in flight."""
        if not specs:
            return
        self.start()
        try:
            self._check_feasible(specs)
            await self._cleanup_nodes()
            self._pending = Counter(s.task.id for s in specs)
            # Task by task (plan order within a task): a task's image is needed for a stretch of the
            # run and then by no pending trial, so an image disk budget can evict it.
            specs = sorted(specs, key=lambda s: s.task.id)
            try:
                await run_bounded(specs, run_one, self.exp.concurrency)
            finally:
                await self._drain_cancelled()
        finally:
            self.shutdown()

    async def _drain_cancelled(self, timeout: float = 20.0) -> None:
        """Cancelled trials remove their containers in the worker; wait (a while) for that."""
        async def drain(ref) -> None:
            try:
                if self.stream:
                    async for r in ref:
                        await r
                else:
                    await ref
            except Exception:  # noqa: BLE001 - TaskCancelledError, the usual end
                pass

        if self._cancelled:
            await asyncio.wait([asyncio.create_task(drain(r)) for r in self._cancelled], timeout=timeout)
        self._cancelled = []

    def _keep_images(self) -> list[str]:
        """The images of tasks with trials still to run (a backend with a disk budget keeps them)."""
        return sorted(self._tags[t] for t, n in self._pending.items() if n > 0 and t in self._tags)

    def _strategy(self, avoid: set[str], task_id: str):
        """First attempts: SPREAD over the nodes, or (placement: task) every trial of a task on one
        node chosen by hashing the task id, so each node builds and stores only its share of the
        images (soft: a node that is gone passes its share on). Retries: away from failed nodes."""
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        from tbscale.seeds import derive_seed

        if not avoid and self.placement == "task":
            nodes = sorted(n["NodeID"] for n in self._alive_nodes())
            if nodes:
                return NodeAffinitySchedulingStrategy(nodes[derive_seed(task_id) % len(nodes)], soft=True)
        alive = [n["NodeID"] for n in self._alive_nodes()]
        if not avoid or not avoid.intersection(alive):  # the failed node is gone: Ray will not pick it
            return "SPREAD"
        others = [n for n in alive if n not in avoid]  # a worker crashed on a node that lives on
        if not others:
            return "DEFAULT"
        # Soft, and spilling to any node with room when this one is busy: away from the failed node
        # without waiting for one particular node.
        return NodeAffinitySchedulingStrategy(others[derive_seed(task_id, len(avoid)) % len(others)], soft=True,
                                              _spill_on_unavailable=True)

    async def run_trial(self, spec, trials) -> TrialResult:
        """Run one trial on the cluster; its lines land in the run folder through this process."""
        if self.ray is None:  # called outside run(): a one-off trial
            self.start()
        ray = self.ray
        if spec.task.id not in self._task_refs:
            self._task_refs[spec.task.id] = ray.put(await asyncio.to_thread(pack_task, spec.task))
            ref = await asyncio.to_thread(trials.backend.image_ref, spec.task)
            if ref:
                self._tags[spec.task.id] = ref
        final = trials.folder.path / spec.trajectory_relpath
        final.parent.mkdir(parents=True, exist_ok=True)
        partial = final.with_name(final.name + ".partial")
        cpus, mem = self._resources(spec)
        attempt, avoid = 0, set()
        retry: InfraRetry | None = None

        def started(node: str) -> None:
            avoid.add(node)
            self.trial_nodes[spec.key] = node
            if retry is not None:
                retry.retry_started_at = round(time.time(), 3)
        try:
            while True:
                payload = {"exp": self.exp, "spec": spec, "run_name": trials.folder.path.name,
                           "run_label": trials.folder.run_label, "keep_images": self._keep_images()}
                options = {"num_cpus": cpus, "scheduling_strategy": self._strategy(avoid, spec.task.id)}
                if mem:
                    options["memory"] = mem
                task = self._stream_task if self.stream else self._collect_task
                ref = task.options(**options).remote(payload, self._task_refs[spec.task.id], self._keys, attempt)
                try:
                    return await self._consume(ref, spec, trials, partial, final, started)
                except ray.exceptions.RayError as e:
                    name = type(e).__name__
                    if not any(isinstance(e, getattr(ray.exceptions, n, ())) for n in INFRA_ERRORS):
                        raise
                    partial.unlink(missing_ok=True)  # the lost attempt's lines never reach the run folder
                    retry = InfraRetry(trial_key=spec.key, attempt=attempt, error=name, at=round(time.time(), 3))
                    self.infra_retries.append(retry)
                    if attempt >= self.retries:
                        raise InfraRetriesExhausted(f"{name} on each of {attempt + 1} attempts; the next run "
                                                    "retries this trial") from None
                    attempt += 1
        finally:
            self._pending[spec.task.id] -= 1

    async def _consume(self, ref, spec, trials, partial: Path, final: Path, saw_node) -> TrialResult:
        """Read one attempt's messages: lines into the partial file, model calls to the spend
        ledger; on its result, the partial file becomes the trajectory."""
        end: EndMessage | None = None
        files: list[tuple[str, bytes]] = []
        with open(partial, "w", encoding="utf-8") as f:
            async def handle(msg: WorkerMessage) -> None:
                nonlocal end
                kind = msg["kind"]
                if kind == "start":
                    saw_node(msg["node"])
                    self.nodes_used.add(msg["node"])
                elif kind == "items":
                    for what, item in msg["items"]:
                        if what == "line":
                            f.write(redact(item) + "\n")
                        elif trials.on_call is not None:
                            trials.on_call(spec, item)  # a CallRecord
                    f.flush()
                elif kind == "files":
                    files.extend(msg["files"])
                else:
                    end = msg

            try:
                if self.stream:
                    async for r in ref:
                        await handle(await r)
                else:
                    for msg in await ref:
                        await handle(msg)
            except asyncio.CancelledError:
                self.ray.cancel(ref)  # the worker removes its containers on the way out
                self._cancelled.append(ref)
                raise
        if end is None:
            raise RemoteTrialError(f"the Ray task of trial {spec.key} ended without a result")
        os.replace(partial, final)  # as the local executor leaves it: a crashed trial's lines stay
        for rel, data in files:
            target = trials.folder.path / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
        if end["kind"] == "unavailable":
            raise ModelUnavailable(end["model"], end["cause"], end["tries"], end["detail"])
        if end["kind"] == "error":
            raise _remote_error(end)
        return TrialResult.model_validate(end["row"])


__all__ = ["Keys", "RayExecutor", "RemoteTrialError", "materialize_task", "pack_task"]
