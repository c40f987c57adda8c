"""Adaptive Turn-BoN in whole trials through the Runner: real litellm HTTP calls to the loopback
server, real containers, real verifiers; then its report section against plain Turn-BoN."""

from __future__ import annotations

import io
import threading
from collections import Counter
from pathlib import Path

import pytest
from rich.console import Console

from tbscale.analysis.report import build_report
from test_agent_loopback import (STEPS, SUBMIT, WRONG, events, fenced, is_selector, run_experiment, solver,
                                 turn_of)
from tbscale_testing import LoopbackModel

pytestmark = [pytest.mark.docker, pytest.mark.usefixtures("docker_available")]

PLAIN = {"name": "turn_bon_n4", "generator": "m", "policy": {"name": "turn_bon", "n": 4, "selector": "sel"}}
ADAPTIVE = {"name": "turn_bon_n4_adaptive", "generator": "m",
            "policy": {"name": "turn_bon", "n": 4, "selector": "sel", "adaptive": {"first": 2}}}


def test_adaptive_trial_and_its_report(tmp_path: Path, loopback_model: LoopbackModel) -> None:
    """Turn 1: the first two candidates agree (after normalisation); turn 2: they differ, two more
    are sampled and the selector picks; turn 3: both submit."""
    assert len(STEPS) == 2
    lock, first_seen = threading.Lock(), set()

    def responder(body):
        n = int(body.get("n") or 1)
        if is_selector(body) or n != 2:  # the selector, and plain Turn-BoN's n=4 requests
            return solver(body)
        turn = turn_of(body)
        with lock:
            first = turn not in first_seen
            first_seen.add(turn)
        if turn == 1:
            return [fenced(STEPS[0]), fenced(STEPS[0] + "   # keep the unique addresses")]
        if turn == 2:
            return [fenced(WRONG), fenced(STEPS[1])] if first else [fenced(WRONG), fenced("ls /app")]
        return [fenced(SUBMIT), fenced(SUBMIT)]

    srv = loopback_model
    srv.responder = responder
    rows, run_dir = run_experiment(tmp_path, srv, [PLAIN, ADAPTIVE])
    by = {r["setting"]: r for r in rows}
    for row in rows:
        assert row["passed"] is True and row["ending"] == "pass", row
        assert row["turns"] == 3

    ad = by["turn_bon_n4_adaptive"]
    evs = events(run_dir, ad)
    cands = [e for e in evs if e["type"] == "candidates"]
    assert [(len(e["candidates"]), e["path"]) for e in cands] == [(2, "agreed_first"), (4, "selected"),
                                                                  (2, "agreed_first")]
    (selection,) = [e for e in evs if e["type"] == "selection"]
    assert selection["path"] == "selected" and selection["turn"] == 2 and selection["index"] == 1
    actions = [e for e in evs if e["type"] == "action"]
    assert [a["command"] for a in actions] == [STEPS[0], STEPS[1], SUBMIT]
    assert [a["n_candidates"] for a in actions] == [2, 4, 2]
    assert ad["selection_turns"] == 1 and ad["tokens"]["selector"]["calls"] == 1
    assert by["turn_bon_n4"]["selection_turns"] == 3 and by["turn_bon_n4"]["tokens"]["selector"]["calls"] == 3

    gen = [r for r in srv.requests if not is_selector(r.body)]
    assert Counter(r.n for r in gen) == Counter({4: 3, 2: 4})  # plain: n=4 per turn; adaptive: 2+0, 2+2, 2+0
    assert sum(is_selector(r.body) for r in srv.requests) == 3 + 1

    ctx = build_report([run_dir], Console(file=io.StringIO(), width=100), plots=False)
    by_key = {s.key: s.frame for s in ctx.sections}
    paths = by_key["adaptive_paths"].set_index("setting")
    assert paths.loc["turn_bon_n4_adaptive", ["choice_turns", "agreed_first", "selected"]].tolist() == [3, 2, 1]
    assert paths.loc["turn_bon_n4", ["choice_turns", "selected"]].tolist() == [3, 3]
    cmp = by_key["adaptive_vs_plain"].set_index("metric")
    assert cmp.loc["selector calls / trial", "diff"] == -2 and cmp.loc["pass@1", "diff"] == 0
