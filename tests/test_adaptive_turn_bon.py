"""Adaptive Turn-BoN: command agreement, the `adaptive` parameters, and turns over real HTTP
(tbscale -> litellm `openai/...` -> the loopback server on 127.0.0.1): which requests a turn makes
on each path, and the `path` its events record."""

from __future__ import annotations

import asyncio
import json

import pytest

from tests._recorders import CapturingRecorder
from tbscale.models.llm import LLM
from tbscale.strategies import entry, validate_component
from tbscale.strategies.agreement import all_agree, command_key, normalize_command
from tbscale.strategies.base import TurnContext
from tbscale.tasks import Task
from tbscale.types.actions import Action
from tbscale_testing import LoopbackModel

SELECTOR_MARK = "You are the selector"
TASK = Task(id="loopback-task", format="harbor", instruction="Print the number 42 to the terminal.")
MESSAGES = [{"role": "system", "content": "You are a capable software engineer."},
            {"role": "user", "content": f"Please solve this task:\n\n<task>\n{TASK.instruction}\n</task>"}]
SEED = 5000


# ---- agreement ----------------------------------------------------------------------------------

@pytest.mark.parametrize("a, b", [
    ("ls  -la", "ls -la"),
    ("  ls -la\n\n", "ls -la"),
    ("ls -la   # look first", "ls -la"),
    ("# look first\nls -la", "ls -la"),
    ("make&&./run", "make && ./run"),
    ("cat a|grep x ;echo done", "cat a | grep x; echo done"),
    ("python run.py \\\n    --fast", "python run.py --fast"),
    ("\tcd /app\n\tpytest -q", "cd /app\npytest -q"),
])
def test_insignificant_differences_agree(a: str, b: str) -> None:
    assert normalize_command(a) == normalize_command(b)
    assert all_agree([Action("command", a), Action("command", b)])


@pytest.mark.parametrize("a, b", [
    ('echo "a  b"', 'echo "a b"'),  # quoted text is data
    ("echo 'x  y'", "echo 'x y'"),
    ("make && ./run", "make; ./run"),  # different control flow
    ("cat a | grep x", "cat a; grep x"),
    ("cat > f.py <<EOF\nif x:\n    y()\nEOF", "cat > f.py <<EOF\nif x:\n  y()\nEOF"),  # here-doc bodies are data
    ("echo $(ls   -l)", "echo $(ls -l)"),
    ("echo a#b", "echo a"),  # `#` inside a word is not a comment
    ("echo 2 > f", "echo 2> f"),  # a file descriptor is not whitespace
    ("ls -la", "ls -al"),
])
def test_real_differences_disagree(a: str, b: str) -> None:
    assert normalize_command(a) != normalize_command(b)
    assert not all_agree([Action("command", a), Action("command", b)])


def test_unrunnable_responses_never_agree() -> None:
    bad = Action("invalid", error="found 0 ```bash blocks; give exactly one")
    assert command_key(bad) is None
    assert not all_agree([bad, bad])
    assert not all_agree([Action("command", "ls"), bad])
    assert not all_agree([Action("command", "ls")])  # one candidate agrees with nobody


def test_exact_match_keeps_whitespace() -> None:
    a, b = Action("command", "ls  -la"), Action("command", "ls -la")
    assert all_agree([a, b], "normalized") and not all_agree([a, b], "exact")
    assert all_agree([Action("command", " ls -la\n"), b], "exact")


# ---- parameters -----------------------------------------------------------------------------------

def validate(params: dict):
    return validate_component("policy", "turn_bon", params, {"sel": object()})


def test_adaptive_defaults() -> None:
    p = validate({"n": 4, "adaptive": {}})
    assert (p.adaptive.mode, p.adaptive.first, p.adaptive.match) == ("first", 2, "normalized")
    assert validate({"n": 4}).adaptive is None
    assert validate({"n": 8, "adaptive": {"first": 3, "match": "exact"}}).adaptive.first == 3
    assert validate({"n": 2, "adaptive": {"mode": "all_agree"}}).adaptive.mode == "all_agree"


@pytest.mark.parametrize("params, message", [
    ({"n": 4, "adaptive": {"first": 4}}, "adaptive: first (4) must be less than n (4)"),
    ({"n": 2, "adaptive": {}}, "adaptive: first (2) must be less than n (2)"),
    ({"n": 1, "adaptive": {"mode": "all_agree"}}, "adaptive: needs n of at least 2"),
    ({"n": 4, "adaptive": {"first": 1}}, "adaptive.first: Input should be greater than or equal to 2"),
    ({"n": 4, "adaptive": {"mode": "vote"}}, "adaptive.mode: Input should be 'first' or 'all_agree'"),
    ({"n": 4, "adaptive": {"match": "fuzzy"}}, "adaptive.match: Input should be 'normalized' or 'exact'"),
    ({"n": 4, "adaptive": {"frist": 2}}, "adaptive.frist: unknown key"),
    ({"n": 4, "adaptive": {"mode": "all_agree", "first": 2}}, "adaptive: `first` applies to mode `first` only"),
    ({"n": 4, "adaptive": True}, "adaptive: a mapping such as {first: 2} or {mode: all_agree}, not True"),
])
def test_adaptive_errors_name_the_key(params: dict, message: str) -> None:
    with pytest.raises(ValueError) as info:
        validate(params)
    assert str(info.value).startswith(message), str(info.value)


def test_config_error_names_the_setting(tmp_path) -> None:
    from tbscale.runner import load_experiment

    (tmp_path / "tasks").mkdir()
    path = tmp_path / "exp.yaml"
    path.write_text("name: x\ntasks: {path: tasks}\nmodels: {m: {model: openai/x}}\nsettings:\n"
                    "  - {name: ad, generator: m, policy: {name: turn_bon, n: 4, adaptive: {first: 5}}}\n")
    with pytest.raises(Exception) as info:
        load_experiment(path)
    assert "settings[0].policy.adaptive: first (5) must be less than n (4)" in str(info.value)


# ---- turns over the loopback server -------------------------------------------------------------

def is_selector(body: dict) -> bool:
    return str(body["messages"][0].get("content", "")).startswith(SELECTOR_MARK)


def fenced(command: str) -> str:
    return f"THOUGHT: next.\n\n```bash\n{command}\n```"


def make_policy(srv: LoopbackModel, *, sampling: str = "n", **params):
    """The policy exactly as the runner builds it, over two model keys on the same server."""
    configs = {"gen": srv.model_config(sampling=sampling), "sel": srv.model_config("selector")}

    def models(key, role):
        return LLM(configs[key or "gen"], role)

    pentry = entry("policy", "turn_bon")
    return pentry.factory(pentry.params.model_validate({"selector": "sel", **params}),
                          generator=models("gen", "generator"), models=models, seed=7)


def run_turn(policy, turn: int = 1):
    rec = CapturingRecorder()
    decision = asyncio.run(policy.decide([dict(m) for m in MESSAGES],
                                         TurnContext(turn=turn, seed=SEED, rec=rec, task=TASK)))
    return decision, rec


def scripted(by_seed: dict[int, list[str]], pick: int = 0):
    """Generator requests answer by their seed (one choice per sample asked for); the selector picks `pick`."""
    def responder(body):
        if is_selector(body):
            return json.dumps({"rationale": "scripted", "selected_index": pick})
        n = int(body.get("n") or 1)
        return [fenced(c) if c else "no command here" for c in by_seed[body["seed"]][:n]]
    return responder


def generator_requests(srv: LoopbackModel):
    return [r for r in srv.requests if not is_selector(r.body)]


def selector_requests(srv: LoopbackModel):
    return [r for r in srv.requests if is_selector(r.body)]


def test_first_two_agree_runs_without_selector(loopback_model: LoopbackModel) -> None:
    srv = loopback_model
    srv.responder = scripted({SEED: ["ls  -la", "ls -la  # look"]})
    decision, rec = run_turn(make_policy(srv, n=4, adaptive={"first": 2}))

    assert [r.n for r in generator_requests(srv)] == [2]  # only two samples asked for
    assert selector_requests(srv) == []
    assert decision.selected_index == 0 and decision.n_candidates == 2 and decision.action.command == "ls  -la"
    (cands,) = rec.of("candidates")
    assert cands["path"] == "agreed_first" and len(cands["candidates"]) == 2
    assert rec.of("selection") == [] and rec.selections == 0
    assert rec.usage["generator"].calls == 1 and rec.usage["selector"].calls == 0


def test_disagreement_samples_the_rest_and_selects_once(loopback_model: LoopbackModel) -> None:
    srv = loopback_model
    srv.responder = scripted({SEED: ["ls", "pwd"], SEED + 2: ["echo 42", "cat x"]}, pick=2)
    decision, rec = run_turn(make_policy(srv, n=4, adaptive={"first": 2}))

    gen = generator_requests(srv)
    assert [(r.n, r.body["seed"]) for r in gen] == [(2, SEED), (2, SEED + 2)]  # the first two are kept
    (sel,) = selector_requests(srv)
    assert sel.arrived >= max(r.finished for r in gen)
    prompt = sel.messages[-1]["content"]
    assert all(f'<candidate index="{i}">' in prompt for i in range(4)) and '<candidate index="4">' not in prompt
    assert decision.selected_index == 2 and decision.n_candidates == 4 and decision.action.command == "echo 42"
    (cands,) = rec.of("candidates")  # one event per turn, with every candidate
    assert cands["path"] == "selected"
    assert [c["command"] for c in cands["candidates"]] == ["ls", "pwd", "echo 42", "cat x"]
    (selection,) = rec.of("selection")
    assert selection["path"] == "selected" and selection["index"] == 2 and selection["tries"] == 1
    assert rec.usage["generator"].calls == 2 and rec.usage["selector"].calls == 1


def test_parallel_sampling_asks_for_the_seeds_plain_turn_bon_uses(loopback_model: LoopbackModel) -> None:
    srv = loopback_model
    srv.responder = scripted({SEED: ["ls"], SEED + 1: ["pwd"], SEED + 2: ["echo 42"], SEED + 3: ["cat x"]}, pick=2)
    decision, rec = run_turn(make_policy(srv, n=4, sampling="parallel", adaptive={"first": 2}))
    gen = generator_requests(srv)
    assert all(r.n == 1 for r in gen)
    assert sorted(r.body["seed"] for r in gen[:2]) == [SEED, SEED + 1]
    assert sorted(r.body["seed"] for r in gen[2:]) == [SEED + 2, SEED + 3]
    assert len(selector_requests(srv)) == 1 and decision.action.command == "echo 42"


def test_unrunnable_first_candidates_never_agree(loopback_model: LoopbackModel) -> None:
    srv = loopback_model
    srv.responder = scripted({SEED: [None, None], SEED + 2: ["echo 42", "echo 42"]}, pick=3)
    decision, rec = run_turn(make_policy(srv, n=4, adaptive={}))
    assert [r.n for r in generator_requests(srv)] == [2, 2]
    assert len(selector_requests(srv)) == 1
    assert rec.of("candidates")[0]["path"] == "selected" and decision.selected_index == 3


def test_first_three_of_six(loopback_model: LoopbackModel) -> None:
    srv = loopback_model
    srv.responder = scripted({SEED: ["ls", "ls", "pwd"], SEED + 3: ["a", "b", "c"]}, pick=1)
    decision, rec = run_turn(make_policy(srv, n=6, adaptive={"first": 3}))
    assert [(r.n, r.body["seed"]) for r in generator_requests(srv)] == [(3, SEED), (3, SEED + 3)]
    assert len(selector_requests(srv)) == 1 and len(rec.of("candidates")[0]["candidates"]) == 6


def test_all_agree_mode_skips_the_selector_only_when_all_n_agree(loopback_model: LoopbackModel) -> None:
    srv = loopback_model
    srv.responder = scripted({SEED: ["ls -la"] * 3 + ["ls   -la"]})
    decision, rec = run_turn(make_policy(srv, n=4, adaptive={"mode": "all_agree"}))
    assert [r.n for r in generator_requests(srv)] == [4] and selector_requests(srv) == []
    assert decision.selected_index == 0 and decision.n_candidates == 4
    assert rec.of("candidates")[0]["path"] == "agreed_all" and rec.of("selection") == []

    srv.reset()
    srv.responder = scripted({SEED: ["ls -la"] * 3 + ["pwd"]}, pick=3)
    decision, rec = run_turn(make_policy(srv, n=4, adaptive={"mode": "all_agree"}))
    assert [r.n for r in generator_requests(srv)] == [4] and len(selector_requests(srv)) == 1
    assert decision.selected_index == 3
    assert rec.of("candidates")[0]["path"] == "selected" and rec.of("selection")[0]["path"] == "selected"


def test_selector_failure_on_the_selected_path_falls_back(loopback_model: LoopbackModel) -> None:
    srv = loopback_model
    base = scripted({SEED: ["ls", "pwd"], SEED + 2: ["echo 42", "cat x"]})
    srv.responder = lambda body: "no JSON" if is_selector(body) else base(body)
    decision, rec = run_turn(make_policy(srv, n=4, adaptive={}, selector_tries=2, fallback="first"))
    assert len(selector_requests(srv)) == 2 and decision.selector_failed and decision.selected_index == 0
    (selection,) = rec.of("selection")
    assert selection["path"] == "selected" and selection["selector_failed"] and rec.fallbacks == 1


def test_outside_the_window_one_sample_and_no_path(loopback_model: LoopbackModel) -> None:
    srv = loopback_model
    srv.responder = scripted({SEED: ["ls"]})
    decision, rec = run_turn(make_policy(srv, n=4, first_turn=2, adaptive={}), turn=1)
    assert [r.n for r in generator_requests(srv)] == [1] and selector_requests(srv) == []
    (cands,) = rec.of("candidates")
    assert "path" not in cands and decision.n_candidates == 1


def test_plain_turn_bon_events_carry_no_path(loopback_model: LoopbackModel) -> None:
    srv = loopback_model
    srv.responder = scripted({SEED: ["ls", "ls", "ls", "ls"]})
    _, rec = run_turn(make_policy(srv, n=4))
    assert [r.n for r in generator_requests(srv)] == [4] and len(selector_requests(srv)) == 1
    assert "path" not in rec.of("candidates")[0] and "path" not in rec.of("selection")[0]
