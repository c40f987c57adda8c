"""The lookahead policy (strategies/lookahead.py) and the forks it runs on (runner/forks.py), over
forkable folders (tbscale_testing/forks.py) and real HTTP (tbscale -> litellm `openai/...` -> the
loopback server): every candidate runs in its own fork, the selector sees each outcome, the pick's
fork goes on as the attempt's environment, and nothing else is left running or unreleased."""

from __future__ import annotations

import asyncio
import threading
import json
import re

import pytest

from tests._recorders import CapturingRecorder
from tbscale.agent.loop import run_agent
from tbscale.config import Experiment
from tbscale.logs import event_line
from tbscale.models.llm import LLM
from tbscale.runner.environment import AttemptEnvironments
from tbscale.runner.forks import AttemptForks, ForkGate
from tbscale.runner.guard import VerifierGuard
from tbscale.runner.verification import AttemptVerification
from tbscale.strategies import entry, validate_component
from tbscale.strategies.base import TurnContext
from tbscale.tasks import Task
from tbscale.types.actions import FINISH_MARKER
from tbscale_testing import LoopbackModel
from tbscale_testing.forks import FolderBackend

SELECTOR_MARK = "You are the selector"
TASK = Task(id="fork-task", format="harbor", instruction="Write the word blue into colour.txt.")
MESSAGES = [{"role": "system", "content": "You are a capable software engineer."},
            {"role": "user", "content": f"Please solve this task:\n\n<task>\n{TASK.instruction}\n</task>"}]
SEED = 9000
EXP = Experiment.model_validate({"name": "la", "tasks": {"path": "tasks"}, "models": {"m": {"model": "sim/policy"}},
                                 "settings": [{"name": "b", "generator": "m"}]})


def fenced(command: str) -> str:
    return f"THOUGHT: next.\n\n```bash\n{command}\n```"


def is_selector(body: dict) -> bool:
    return str(body["messages"][0].get("content", "")).startswith(SELECTOR_MARK)


class Setup:
    """A folder backend, one attempt's environments and its forks, with the box they start from."""

    def __init__(self, tmp_path, gate: ForkGate | None = None, **backend):
        self.backend = FolderBackend(tmp_path / "folders", **backend)
        self.rec = CapturingRecorder()
        self.envs = AttemptEnvironments(EXP, self.backend, TASK, self.rec, labels={"org.tbscale.trial": "t"})
        self.checks = AttemptVerification(self.envs, self.rec, verifier_timeout_sec=None, sweep=True,
                                          artifacts_root=tmp_path / "artifacts")
        self.box = self.backend.start()
        self.envs.started.append(self.box)
        self.forks = AttemptForks(self.envs, self.checks, self.box, TASK.agent, self.rec, gate)

    def ctx(self, turn: int = 1) -> TurnContext:
        return TurnContext(turn=turn, seed=SEED, rec=self.rec, task=TASK, branches=self.forks,
                           command_timeout_sec=30, output_limit=100_000)

    def run(self, coro):
        """Run `coro` as the attempt does: what the forks let go of is removed before it ends."""
        async def go():
            try:
                return await coro
            finally:
                await self.forks.drain()
        return asyncio.run(go())

    def close(self) -> None:
        self.envs.close()
        self.forks.close()
        for type_, fields in self.rec.events:  # every event written is one of docs/formats.md's
            event_line(type_, {"attempt": 0, **fields})


def make_policy(srv: LoopbackModel, **params):
    configs = {"gen": srv.model_config(), "sel": srv.model_config("selector")}

    def models(key, role):
        return LLM(configs[key or "gen"], role)

    pentry = entry("policy", "lookahead")
    return pentry.factory(pentry.params.model_validate({"selector": "sel", **params}),
                          generator=models("gen", "generator"), models=models, seed=7)


def scripted(candidates: list[str], pick=0, seen: list | None = None):
    """The generator answers `candidates` (n of them); the selector picks `pick` (an index, or a
    function of the prompt), and its prompts are kept in `seen`."""
    def responder(body):
        if is_selector(body):
            prompt = body["messages"][-1]["content"]
            if seen is not None:
                seen.append(prompt)
            index = pick(prompt) if callable(pick) else pick
            return json.dumps({"rationale": "scripted", "selected_index": index})
        n = int(body.get("n") or 1)
        return [fenced(c) if c else "no command here" for c in candidates[:n]]
    return responder


def shown_index(prompt: str, command: str) -> int:
    """The index the selector's prompt gives the candidate running `command`."""
    for index, body in re.findall(r'<candidate index="(\d+)">\n(.*?)</candidate>', prompt, re.DOTALL):
        if f"```bash\n{command}\n```" in body:
            return int(index)
    raise AssertionError(f"{command!r} not shown")


# ---- one turn -------------------------------------------------------------------------------------

@pytest.mark.parametrize("prefork", [False, True])
def test_each_distinct_candidate_runs_in_its_own_fork_and_the_pick_goes_on(loopback_model, tmp_path, prefork) -> None:
    s = Setup(tmp_path)
    (s.box.root / "colour.txt").write_text("none\n")
    cands = ["echo red > colour.txt && cat colour.txt", "echo blue > colour.txt && cat colour.txt",
             "echo red > colour.txt && cat colour.txt   # again", "cat missing.txt"]
    seen: list[str] = []
    loopback_model.responder = scripted(cands, pick=lambda p: shown_index(p, cands[1]), seen=seen)
    try:
        decision = s.run(make_policy(loopback_model, n=4, prefork=prefork).decide(
            [dict(m) for m in MESSAGES], s.ctx()))
        # Three distinct commands (the two `red` ones share a fork): three forks, one snapshot; forks
        # started while the generator sampled are n of them, and the one not needed is released.
        assert s.backend.snapshots_taken == 1 and s.backend.forks_started == (4 if prefork else 3)
        (prompt,) = seen
        for c in (cands[0], cands[1], cands[3]):
            assert f"```bash\n{c}\n```" in prompt
        assert cands[2] not in prompt  # a duplicate is not shown twice
        assert re.search(r'<outcome exit_code="0"[^>]*>\n<output>\nblue\n</output>', prompt)
        assert re.search(r'<outcome exit_code="1"[^>]*>\n<output>\ncat: missing.txt: No such file', prompt)
        assert "Each was run in its own copy of the environment" in prompt
        # The pick: its completion and result, and its fork as the environment the attempt goes on in.
        assert decision.selected_index == 1 and decision.action.command == cands[1]
        assert decision.result.output.strip() == "blue" and decision.result.exit_code == 0
        assert decision.env is not None and s.forks.box is not s.box
        assert (s.forks.box.root / "colour.txt").read_text() == "blue\n"
        # The former environment and the other forks are stopped; the pick's snapshot is held.
        assert s.box.stopped and list(s.backend.live) == [s.forks.box.id]
        (la,) = s.rec.of("lookahead")
        assert la["path"] == "selected" and [r.candidates for r in la["ran"]] == [[0, 2], [1], [3]]
        assert [r.picked for r in la["ran"]] == [False, True, False]
        assert [r.exit_code for r in la["ran"]] == [0, 0, 1]
        assert la["exec_added_sec"] == pytest.approx(la["ran"][0].duration_sec + la["ran"][2].duration_sec,
                                                     abs=1e-3)
        (sel,) = s.rec.of("selection")
        assert sel["method"] == "lookahead" and sel["index"] == 1 and not sel["selector_failed"]
        assert s.rec.candidate_execs == 3
        assert [e["op"] for e in s.rec.of("fork")].count("fork") == (4 if prefork else 3)
    finally:
        s.close()
    assert s.backend.live == {} and s.backend.snapshots == {}  # everything released at the attempt's end


def test_a_submission_is_judged_by_its_outcome_and_ends_the_attempt_in_its_fork(loopback_model, tmp_path) -> None:
    s = Setup(tmp_path)
    submit = f"echo {FINISH_MARKER}"
    cands = ["echo blue > colour.txt", f"echo blue > colour.txt && {submit}"]
    seen: list[str] = []
    loopback_model.responder = scripted(cands, pick=lambda p: shown_index(p, cands[1]), seen=seen)
    try:
        out = s.run(run_agent(TASK, s.box, make_policy(loopback_model, n=2), EXP.limits, s.rec, seed=1,
                                    branches=s.forks))
        assert out.stop_reason == "submitted" and out.turns == 1 and out.actions == [cands[1]]
        assert f"<output>\n{FINISH_MARKER}\n</output>" in seen[0]  # shown like any other outcome
        # The verifier would run in the fork the submission ran in: it holds the submission's work.
        assert (s.forks.box.root / "colour.txt").read_text() == "blue\n"
        (action,) = s.rec.of("action")
        assert action["ran_in_fork"] is True
        (obs,) = s.rec.of("observation")
        assert obs["output"].strip() == FINISH_MARKER
        assert all(c.count("colour.txt") <= 1 for c in s.forks.box.commands)  # the pick did not run twice
    finally:
        s.close()


def test_the_environment_carries_over_from_turn_to_turn(loopback_model, tmp_path) -> None:
    s = Setup(tmp_path)
    turns = {1: ["echo 1 >> log.txt", "echo X >> log.txt"], 2: ["echo 2 >> log.txt && cat log.txt", "rm log.txt"],
             3: [f"echo {FINISH_MARKER}", f"echo {FINISH_MARKER}"]}

    def responder(body):
        turn = 1 + sum(m["role"] == "assistant" for m in body["messages"])
        if is_selector(body):
            prompt = body["messages"][-1]["content"]
            turn = 1 + prompt.count("<action turn=")
            return json.dumps({"selected_index": shown_index(prompt, turns[turn][0])})
        return [fenced(c) for c in turns[turn][:int(body.get("n") or 1)]]

    loopback_model.responder = responder
    try:
        out = s.run(run_agent(TASK, s.box, make_policy(loopback_model, n=2), EXP.limits, s.rec, seed=1,
                                    branches=s.forks))
        assert out.stop_reason == "submitted" and out.turns == 3
        assert (s.forks.box.root / "log.txt").read_text() == "1\n2\n"
        obs = s.rec.of("observation")
        assert obs[1]["output"] == "1\n2\n"
        # Turn 3's two candidates were identical: one fork, no selector call.
        assert [e["path"] for e in s.rec.of("lookahead")] == ["selected", "selected", "single"]
        assert len(s.rec.of("selection")) == 2
        # The pick; and every adopted fork's snapshot, a chain (each taken in a fork of the one before),
        # kept to the attempt's end and released newest first (the folder backend, like an engine,
        # refuses to remove a snapshot while one taken in a fork of it is there).
        assert len(s.backend.live) == 1 and len(s.backend.snapshots) == 3
    finally:
        s.close()
    assert s.backend.live == {} and s.backend.snapshots == {}


def test_forks_per_turn_and_top_k_run_the_most_proposed_commands(loopback_model, tmp_path) -> None:
    s = Setup(tmp_path)
    cands = ["echo a", "echo b", "echo b", "echo c", "echo c", "echo c"]
    seen: list[str] = []
    loopback_model.responder = scripted(cands, pick=1, seen=seen)
    try:
        d = s.run(make_policy(loopback_model, n=6, forks_per_turn=2, prefork=False).decide([dict(m) for m in MESSAGES],
                                                                                  s.ctx()))
        assert s.backend.forks_started == 2
        assert "echo a" not in seen[0] and shown_index(seen[0], "echo c") == 0 and shown_index(seen[0], "echo b") == 1
        assert d.action.command == "echo b" and d.selected_index == 1
        d = s.run(make_policy(loopback_model, n=6, top_k=1, prefork=False).decide([dict(m) for m in MESSAGES], s.ctx(2)))
        assert s.backend.forks_started == 3 and len(seen) == 1  # one command: no selector call
        assert d.action.command == "echo c" and d.result.output == "c\n"
    finally:
        s.close()


def test_agreement_costs_no_fork_and_no_selector(loopback_model, tmp_path) -> None:
    s = Setup(tmp_path)
    loopback_model.responder = scripted(["ls", "ls  # look"], pick=0)
    try:
        d = s.run(make_policy(loopback_model, n=4, adaptive={"first": 2}).decide(
            [dict(m) for m in MESSAGES], s.ctx()))
        assert d.result is None and d.env is None  # the loop runs it in the environment itself
        assert s.backend.forks_started == 0 and s.backend.snapshots_taken == 0
        assert [r for r in loopback_model.requests if is_selector(r.body)] == []
        assert s.rec.of("candidates")[0]["path"] == "agreed_first"
    finally:
        s.close()


def test_a_failed_selector_falls_back_and_still_goes_on_in_a_fork(loopback_model, tmp_path) -> None:
    s = Setup(tmp_path)

    def responder(body):
        if is_selector(body):
            return "I cannot decide."
        return [fenced(c) for c in ["echo one", "echo two"][:int(body.get("n") or 1)]]

    loopback_model.responder = responder
    try:
        d = s.run(make_policy(loopback_model, n=2, selector_tries=2).decide([dict(m) for m in MESSAGES],
                                                                                  s.ctx()))
        assert d.selector_failed and d.env is not None and d.result.output in ("one\n", "two\n")
        assert d.result.output == f"{d.action.command.split()[1]}\n"
        (sel,) = s.rec.of("selection")
        assert sel["selector_failed"] and sel["tries"] == 2 and "fallback" in sel["rationale"]
        assert len(s.backend.live) == 1
    finally:
        s.close()


def test_no_runnable_candidate_releases_every_fork(loopback_model, tmp_path) -> None:
    s = Setup(tmp_path)
    loopback_model.responder = scripted(["", ""], pick=0)
    try:
        d = s.run(make_policy(loopback_model, n=2).decide([dict(m) for m in MESSAGES], s.ctx()))
        assert not d.action.runnable and d.env is None and d.result is None
        assert s.backend.live == {s.box.id: s.box} and s.backend.snapshots == {}
        assert s.rec.of("lookahead")[0]["path"] == "none_runnable"
    finally:
        s.close()


def test_a_snapshot_that_cannot_be_released_is_said_with_its_error(loopback_model, tmp_path, monkeypatch) -> None:
    """A failed release does not stop the attempt: a `fork` event says so (`release_failed`, the
    error in `error`, the purpose kept), and the run's clean-up removes what it left."""
    s = Setup(tmp_path)
    cands = ["echo red > colour.txt", "echo blue > colour.txt"]
    loopback_model.responder = scripted(cands, pick=1)

    def refuse(snapshot):
        raise RuntimeError("image is being used by a running container")

    try:
        s.run(make_policy(loopback_model, n=2).decide([dict(m) for m in MESSAGES], s.ctx()))
        monkeypatch.setattr(s.backend, "release", refuse)
    finally:
        s.close()  # validates every event against its model (an unknown op would fail here)
    (failed,) = [e for e in s.rec.of("fork") if e["op"] == "release_failed"]
    assert failed["error"] == "RuntimeError: image is being used by a running container"
    assert failed["purpose"] == "lookahead" and failed["snapshot"]


def test_a_fork_that_fails_to_start_is_a_sandbox_error_and_leaks_nothing(loopback_model, tmp_path) -> None:
    from tbscale.errors import SandboxError

    s = Setup(tmp_path)
    calls = {"n": 0}
    real = s.backend.fork

    def flaky(snapshot, **kw):
        calls["n"] += 1
        if calls["n"] == 2:
            raise SandboxError("engine said no")
        return real(snapshot, **kw)

    s.backend.fork = flaky
    loopback_model.responder = scripted(["echo a", "echo b"], pick=0)
    try:
        with pytest.raises(SandboxError, match="engine said no"):
            s.run(make_policy(loopback_model, n=2).decide([dict(m) for m in MESSAGES], s.ctx()))
        assert s.backend.live == {s.box.id: s.box} and s.backend.snapshots == {}
    finally:
        s.close()


# ---- the verifier guard follows the environment -----------------------------------------------------

class FakeGuard(VerifierGuard):
    """The real guard's bookkeeping (`go_on_in`, the reference clock, the carried changes), with
    its container probes stood in for."""

    def __init__(self, box):  # noqa: D107 - no verifier: the probes below stand in for its execs
        from types import SimpleNamespace

        super().__init__(box, SimpleNamespace(command="", tests_dirs=[]), tests_dirs=[])
        self.before = {"now": "100.0", "tools": {"bash": {"sha256": "x"}}, "processes": [{"pid": 7}],
                       "sidecar_processes": {}}
        self.left: list = []

    def processes_of(self, box):
        return {"processes": [{"pid": 1, "of": box.id}], "sidecar_processes": {}, "now": f"200.{box.id}"}

    def carry_changes(self, box):
        self.left.append((box, self._reference()))
        self.carried[f"/logs/verifier/changed-in-{box.id}"] = 0


def test_adopting_a_fork_points_the_guard_at_it_and_keeps_its_baseline(loopback_model, tmp_path) -> None:
    s = Setup(tmp_path)
    s.checks.guard = guard = FakeGuard(s.box)
    loopback_model.responder = scripted(["echo a", "echo b"], pick=1)
    try:
        s.run(make_policy(loopback_model, n=2).decide([dict(m) for m in MESSAGES], s.ctx()))
        assert guard.box is s.forks.box and guard.box is not s.box
        # The toolchain baseline is the one from before the agent phase; the processes are the
        # fork's own, listed as it started, and so is the clock its own changes are found against.
        assert guard.before["now"] == "100.0" and guard.before["tools"] == {"bash": {"sha256": "x"}}
        assert guard.before["processes"] == [{"pid": 1, "of": s.forks.box.id}]
        assert guard.since == f"200.{s.forks.box.id}" and guard._reference() == guard.since
        # What changed in the environment the turn left was found there, against the baseline's clock,
        # and is kept for the check after the agent phase.
        assert guard.left == [(s.box, "100.0")]
        after = guard._with_carried({"changes": {"/app/x": 0}})
        assert after["changes"] == {f"/logs/verifier/changed-in-{s.box.id}": 0, "/app/x": 0}
    finally:
        s.close()


# ---- parameters and the simulated selector -----------------------------------------------------------

def test_parameters() -> None:
    p = validate_component("policy", "lookahead", {"n": 4, "selector": "sel", "top_k": 2}, {"sel": object()})
    assert p.forks_at_most(4) == 2 and p.observation_chars == 2000 and p.prefork
    assert validate_component("policy", "lookahead", {"n": 8, "forks_per_turn": 3}, {}).forks_at_most(8) == 3
    with pytest.raises(ValueError, match="top_k: Input should be greater than or equal to 1"):
        validate_component("policy", "lookahead", {"n": 4, "top_k": 0}, {})
    with pytest.raises(ValueError, match="adaptive: first \\(4\\) must be less than n \\(4\\)"):
        validate_component("policy", "lookahead", {"n": 4, "adaptive": {"first": 4}}, {})
    assert entry("policy", "lookahead").forks and not entry("policy", "turn_bon").forks


def test_the_simulated_selector_never_prefers_a_failed_outcome() -> None:
    import random

    from tbscale_sim.provider import lookahead_pick, parse_lookahead_prompt
    from tbscale.strategies.lookahead import render_ran
    from tbscale.environments import ExecResult

    shown = render_ran(["ls_typo", "ls", "sleep 99"], [ExecResult(127, "ls_typo: command not found", False, 0.01),
                                                       ExecResult(0, "a\nb\n", False, 0.01),
                                                       ExecResult(124, "", True, 30.0)], 2000)
    ran = parse_lookahead_prompt(shown)
    assert ran == [("ls_typo", 127, False), ("ls", 0, False), ("sleep 99", 124, True)]
    for accuracy in (0.0, 1.0):
        picks = {lookahead_pick(None, [], ran, random.Random(i), accuracy)[0] for i in range(50)}
        assert picks == {1}
    # With the answer key, the expected step wins among the clean ones, and loses when it failed.
    steps = ["make", "make test"]
    ok = [("make", 0, False), ("ls", 0, False)]
    assert {lookahead_pick(steps, [], ok, random.Random(i), 1.0)[0] for i in range(20)} == {0}
    failed = [("make", 2, False), ("ls", 0, False)]
    assert {lookahead_pick(steps, [], failed, random.Random(i), 1.0)[0] for i in range(20)} == {1}


def test_a_backend_without_snapshots_is_refused_before_anything_starts(tmp_path) -> None:
    from tbscale.errors import TbscaleError
    from tbscale.runner.checks import check_forks

    exp = Experiment.model_validate({"name": "la", "tasks": {"path": "tasks"}, "models": {"m": {"model": "sim/policy"}},
                                     "settings": [{"name": "b", "generator": "m"},
                                                  {"name": "la", "generator": "m", "policy": {"name": "lookahead"}}]})
    check_forks(exp, "exp.yaml", FolderBackend(tmp_path / "a"))
    with pytest.raises(TbscaleError) as info:
        check_forks(exp, "exp.yaml", FolderBackend(tmp_path / "b", snapshots=False))
    assert str(info.value) == ("exp.yaml: settings[1].policy: lookahead runs every candidate in a fork of the "
                               "environment, and the folder backend cannot take snapshots of an environment")


def test_a_turn_cancelled_mid_way_leaves_nothing_after_the_attempt(loopback_model, tmp_path) -> None:
    """Ctrl-C while the generator samples and the forks start: the turn releases its forks, and the
    attempt's end releases the rest (the Docker side of this is the fork backend's own tests)."""
    s = Setup(tmp_path, fork_delay_sec=0.3)
    loopback_model.latency = 5.0
    loopback_model.responder = scripted(["echo a", "echo b"], pick=0)

    async def cancelled():
        task = asyncio.create_task(make_policy(loopback_model, n=2).decide([dict(m) for m in MESSAGES], s.ctx()))
        while s.backend.forks_started < 1:  # the forks are starting while the generator is still out
            await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    try:
        s.run(cancelled())
        assert s.backend.live == {s.box.id: s.box} and s.backend.snapshots == {}
    finally:
        s.close()
    assert s.backend.live == {} and s.backend.snapshots == {}


# ---- the run's bound on forks alive at once (fork_concurrency) --------------------------------------

def test_the_fork_gate_gives_a_turn_all_its_places_at_once_in_the_order_turns_asked() -> None:
    async def go():
        gate, got = ForkGate(3), []

        async def turn(name, count, hold, from_thread=False):
            await gate.take(count)
            got.append((name, gate.free))
            await hold.wait()
            if from_thread:  # as an attempt's closing gives them back, from a worker thread
                await asyncio.to_thread(gate.give, count)
            else:
                gate.give(count)

        holds = {k: asyncio.Event() for k in "abcd"}
        a = asyncio.create_task(turn("a", 2, holds["a"]))
        await asyncio.sleep(0)
        b = asyncio.create_task(turn("b", 3, holds["b"]))  # waits: only one place is free
        await asyncio.sleep(0)
        c = asyncio.create_task(turn("c", 1, holds["c"]))  # fits, but waits behind b (first asked, first served)
        await asyncio.sleep(0.05)
        assert got == [("a", 1)]
        holds["a"].set()
        await a
        await asyncio.sleep(0.05)
        assert got == [("a", 1), ("b", 0)]  # b's three places at once; c still behind
        d = asyncio.create_task(turn("d", 2, holds["d"], from_thread=True))
        await asyncio.sleep(0)
        c.cancel()  # a turn cancelled while it waits leaves the queue and holds nothing
        with pytest.raises(asyncio.CancelledError):
            await c
        holds["b"].set()
        await b
        await asyncio.sleep(0.05)
        assert got == [("a", 1), ("b", 0), ("d", 1)]
        holds["d"].set()
        await d
        await asyncio.sleep(0.05)
        return gate.free

    assert asyncio.run(go()) == 3  # every place back, the thread's too


def test_fork_concurrency_below_a_turns_forks_is_refused_in_one_line() -> None:
    from tbscale.errors import TbscaleError
    from tbscale.runner.checks import check_forks

    def exp(fork_concurrency, **policy):
        return Experiment.model_validate({
            "name": "la", "tasks": {"path": "tasks"}, "models": {"m": {"model": "sim/policy"}},
            "fork_concurrency": fork_concurrency,
            "settings": [{"name": "b", "generator": "m"},
                         {"name": "la", "generator": "m", "policy": {"name": "lookahead", **policy}}]})

    check_forks(exp(4, n=4), "exp.yaml", None)
    check_forks(exp(2, n=4, forks_per_turn=2), "exp.yaml", None)
    check_forks(exp(None, n=8), "exp.yaml", None)
    with pytest.raises(TbscaleError) as info:
        check_forks(exp(3, n=8, top_k=4), "exp.yaml", None)
    assert str(info.value) == ("exp.yaml: fork_concurrency: 3 is less than the 4 forks a turn of settings[1] (la, "
                               "lookahead) starts at once; raise it, or lower the policy's forks_per_turn or top_k")


@pytest.mark.parametrize("limit", [None, 2])
def test_turns_of_two_attempts_keep_within_the_runs_fork_bound(loopback_model, tmp_path, limit) -> None:
    """Two attempts' lookahead turns at once, each with two forks: with fork_concurrency 2 at most
    two forks are alive beside the attempts' environments at any moment (the second turn waits for
    the first's to be removed), and both turns still run both their candidates; with no bound all
    four are alive together."""
    gate = ForkGate(limit)
    setups = [Setup(tmp_path / name, gate, fork_delay_sec=0.3) for name in "ab"]
    peak, lock = [0], threading.Lock()
    for s in setups:  # environments alive across both attempts, as each fork starts
        def counting_fork(snapshot, *, labels=None, _fork=s.backend.fork):
            box = _fork(snapshot, labels=labels)
            with lock:
                peak[0] = max(peak[0], sum(len(x.backend.live) for x in setups))
            return box

        s.backend.fork = counting_fork
    loopback_model.responder = scripted(["echo a", "echo b"], pick=1)

    async def both():
        policy = make_policy(loopback_model, n=2)
        try:
            return await asyncio.gather(*(policy.decide([dict(m) for m in MESSAGES], s.ctx()) for s in setups))
        finally:
            for s in setups:
                await s.forks.drain()

    try:
        decisions = asyncio.run(both())
        assert [d.action.command for d in decisions] == ["echo b", "echo b"]
        assert [s.rec.candidate_execs for s in setups] == [2, 2]
        # Each attempt's own environment, and the forks beside them: an adopted fork takes the place
        # of the environment it replaces, which is removed with the turn's other forks.
        assert peak[0] == 2 + (4 if limit is None else 2)
        assert gate.free == (limit or 0)  # every place given back once the forks were removed
    finally:
        for s in setups:
            s.close()
    assert all(s.backend.live == {} and s.backend.snapshots == {} for s in setups)
