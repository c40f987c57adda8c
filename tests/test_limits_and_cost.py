"""Limits that keep a run honest and alive: a pids limit per container, a cap on stored command
output, selector prompts that fit their model, unknown prices shown as unknown, and a ledger of
every call ever paid for."""

from __future__ import annotations

import asyncio
import json
import logging
from pathlib import Path

import pytest
import yaml

from tbscale.config import Limits, ModelConfig
from tbscale.environments import StartSpec
from tbscale.logs import AttemptRecorder, EventLog, read_jsonl
from tbscale.models.llm import LLM
from tbscale.secrets import register_secret
from tbscale.types import Completion

IMAGE = "debian:bookworm-slim"


@pytest.mark.docker
def test_pids_limit_holds() -> None:
    from tbscale.environments.docker import Container

    with Container.start(StartSpec(IMAGE, cpus=1, memory_mb=256, pids_limit=64)) as box:
        assert box.container.attrs["HostConfig"]["PidsLimit"] == 64
        # 400 background processes asked for; forks fail once the limit is reached.
        box.exec("for i in $(seq 400); do sleep 300 & done 2>/dev/null", 60)
        # Counted from outside (the engine's `top`): at the limit, a command that counts them
        # from inside may itself not start (an exec needs two processes of its own).
        procs = len(box.container.top()["Processes"])
    assert 30 < procs <= 64


@pytest.mark.docker
def test_a_50mb_output_stores_at_most_the_cap(tmp_path: Path) -> None:
    from tbscale.agent.loop import run_command
    from tbscale.environments.docker import Container

    log = EventLog(tmp_path / "t.jsonl", trial_key="k")
    rec = AttemptRecorder(log, attempt=0)
    rec.turn = 1
    limits = Limits(stored_output_max_bytes=1_000_000)
    with Container.start(StartSpec(IMAGE, cpus=1, memory_mb=512)) as box:
        res = asyncio.run(run_command(box, "yes | head -c 50000000", 120, limits, rec))
    log.close()
    assert res.output_bytes == 50_000_000 and res.elided_bytes >= 49_000_000
    (obs,) = [e for e in read_jsonl(tmp_path / "t.jsonl") if e["type"] == "observation"]
    assert len(obs["output"].encode()) <= 1_000_200 and obs["elided_bytes"] == res.elided_bytes
    assert "bytes of output elided" in obs["output"]
    assert (tmp_path / "t.jsonl").stat().st_size < 2_500_000  # JSON escapes each newline as two characters


@pytest.mark.docker
def test_full_output_goes_to_a_side_file_when_configured(tmp_path: Path) -> None:
    from tbscale.agent.loop import run_command
    from tbscale.environments.docker import Container

    log = EventLog(tmp_path / "t.jsonl", trial_key="k")
    rec = AttemptRecorder(log, attempt=0)
    rec.turn = 3
    limits = Limits(stored_output_max_bytes=10_000, keep_full_output=True)
    register_secret("side-file-secret-6")  # as a host value a task's ${VAR} gave the container
    with Container.start(StartSpec(IMAGE, cpus=1, memory_mb=256)) as box:
        asyncio.run(run_command(box, "seq 1 100000; echo key=side-file-secret-6", 60, limits, rec))
    log.close()
    (obs,) = [e for e in read_jsonl(tmp_path / "t.jsonl") if e["type"] == "observation"]
    side = tmp_path / obs["full_output"]
    lines = side.read_text().splitlines()
    assert lines[-2:] == ["100000", "key=***"] and len(lines) == 100_001 and len(obs["output"]) < 11_000
    assert obs["output"].endswith("key=***\n")


def test_selector_prompt_fits_a_200_turn_transcript(loopback_model) -> None:
    """A 200-turn history is far beyond the selector's 16k-token window; the selector still sees
    the task and the latest turns, and selects: no context error, no fallback."""
    from tbscale.strategies import entry
    from tbscale.strategies.base import TurnContext
    from tbscale_testing import Reply, context_length_error

    window = 16_000
    seen = []

    def responder(body):
        chars = sum(len(str(m.get("content") or "")) for m in body["messages"])
        if "selected_index" in body["messages"][-1]["content"]:
            seen.append(chars)
            if chars > window * 4:
                return context_length_error(window, chars // 4)
            return '{"rationale": "the latest state", "selected_index": 1}'
        return [Reply(f"THOUGHT: next\n\n```bash\necho {i}\n```") for i in range(int(body.get("n") or 1))]

    loopback_model.responder = responder
    gen = LLM(ModelConfig(model="openai/gen", api_base=loopback_model.base_url), "generator")
    sel_cfg = ModelConfig(model="openai/sel", api_base=loopback_model.base_url, context_window=window)
    history = [{"role": "system", "content": "You are an agent."},
               {"role": "user", "content": "Please solve this task:\n\n<task>\nCount the lines.\n</task>"}]
    for t in range(200):
        history.append({"role": "assistant", "content": f"THOUGHT: look\n\n```bash\ncat part{t}.log\n```"})
        history.append({"role": "user", "content": "<returncode>0</returncode>\n<output>\n" + "x" * 2000 + "\n</output>"})
    e = entry("policy", "turn_bon")
    policy = e.factory(e.params.model_validate({"n": 3, "selector": "s"}), generator=gen,
                       models=lambda key, role: LLM(sel_cfg, role), seed=0)
    events: list[dict] = []

    class Rec(AttemptRecorder):
        def event(self, type, **fields):
            events.append({"type": type, **fields})
            super().event(type, **fields)

    decision = asyncio.run(policy.decide(history, TurnContext(turn=201, seed=1, rec=Rec(None, 0), task=None)))
    (selection,) = [ev for ev in events if ev["type"] == "selection"]
    assert not selection["selector_failed"] and decision.selected_index == 1
    assert selection["prompt_elided_chars"] > 300_000 and max(seen) <= window * 4
    selector_prompt = loopback_model.requests[-1].messages[-1]["content"]
    assert "<task_prompt>" in selector_prompt and "cat part199.log" in selector_prompt and "<elided" in selector_prompt


def test_unknown_price_is_nan_with_a_warning(loopback_model, caplog) -> None:
    loopback_model.responder = lambda body: "hello"
    llm = LLM(ModelConfig(model="openai/tbscale-no-such-priced-model", api_base=loopback_model.base_url), "generator")
    with caplog.at_level(logging.WARNING, logger="tbscale"):
        res = asyncio.run(llm.complete([{"role": "user", "content": "hi"}]))
    assert res.usage.cost_usd is None and res.usage.as_dict()["cost_usd"] is None
    assert "tbscale-no-such-priced-model" in caplog.text and "prices" in caplog.text
    priced = LLM(ModelConfig(model="openai/tbscale-no-such-priced-model", api_base=loopback_model.base_url,
                             prices={"input_per_mtok": 1.0, "output_per_mtok": 2.0}), "generator")
    assert asyncio.run(priced.complete([{"role": "user", "content": "hi"}])).usage.cost_usd > 0


def test_hidden_reasoning_tokens_are_split_evenly() -> None:
    from tbscale.models.llm import split_usage
    from tbscale.types import Usage

    comps = [Completion(text="a" * 10), Completion(text="b" * 30), Completion(text="c" * 60), Completion(text="")]
    split_usage(comps, Usage(output=400, reasoning=400))
    assert [c.reasoning_tokens for c in comps] == [100, 100, 100, 100]


def test_usage_totals_add_the_rounded_numbers_their_parts_show() -> None:
    """sum_usage (a trial line's `tokens`, a strategy's `stage_usage`) adds each part as its record
    holds it, cost rounded to a millionth, and rounds after every part; an unknown cost stays unknown."""
    from tbscale.types import Usage, sum_usage

    attempt = {"selector": Usage(cost_usd=4e-7, calls=1), "generator": Usage(input=3, cost_usd=0.1234564, calls=1)}
    total = sum_usage(attempt, attempt, {"judge": Usage(cost_usd=None, calls=1)}, attempt)
    assert list(total) == ["selector", "generator", "judge"]
    assert [u.as_dict()["cost_usd"] for u in attempt.values()] == [0.0, 0.123456]
    assert total["selector"] == Usage(cost_usd=0.0, calls=3)  # 3 x 4e-7 rounded once would be 0.000001
    assert total["generator"] == Usage(input=9, cost_usd=0.370368, calls=3)  # rounded once: 0.370369
    assert total["judge"].cost_usd is None
    assert sum_usage(total, {"judge": Usage(cost_usd=0.5)})["judge"].cost_usd is None
    assert attempt["selector"] == Usage(cost_usd=4e-7, calls=1)  # the parts are left as they were


@pytest.mark.docker
def test_spend_ledger_counts_a_crashed_attempt(tmp_path: Path, loopback_model, monkeypatch) -> None:
    from tbscale.rundata.spend import spend_totals
    from tbscale.runner import Runner, load_experiment
    from tbscale.runner import verification as verification_module
    from tbscale.tasks import load_tasks
    from tbscale_testing.tasks import write_harbor_task

    loopback_model.responder = lambda body: "THOUGHT: done\n\n```bash\necho done > /app/out.txt\n```"
    write_harbor_task(tmp_path / "tasks", "write-done")
    cfg = tmp_path / "exp.yaml"
    cfg.write_text(yaml.safe_dump({
        "name": "ledger", "tasks": {"path": str(tmp_path / "tasks")}, "trials": 1,
        "models": {"m": {"model": "openai/m", "api_base": loopback_model.base_url,
                         "prices": {"input_per_mtok": 1.0, "output_per_mtok": 1.0}}},
        "settings": [{"name": "base", "generator": "m"}], "limits": {"max_turns": 2}}))
    exp = load_experiment(cfg)
    tasks, _ = load_tasks(tmp_path / "tasks")

    def broken_verifier(ctx):
        raise RuntimeError("the verifier's host went away")

    monkeypatch.setattr(verification_module, "verify_attempt", broken_verifier)
    run = tmp_path / "run"
    counters = asyncio.run(Runner(exp, tasks, run).run())
    assert counters.crashed == 1 and not (run / "trials.jsonl").exists()
    crashed = spend_totals(run)
    assert crashed.calls == 2 and crashed.cost_usd > 0  # paid for, though the trial is not counted
    monkeypatch.undo()
    asyncio.run(Runner(exp, tasks, run).run())
    after = spend_totals(run)
    (row,) = [json.loads(x) for x in (run / "trials.jsonl").read_text().splitlines()]
    assert after.calls == crashed.calls + row["tokens"]["generator"]["calls"]


def test_a_kept_whole_output_is_redacted_byte_for_byte_across_its_chunks(tmp_path: Path) -> None:
    """redact_file reads a whole command output in chunks: a secret cut by a chunk's end is still
    hidden, and every other byte (not UTF-8 included) is kept as it was."""
    from tbscale.secrets import redact_file

    register_secret("chunk-straddler-7")
    register_secret("second-secret-value-8")
    raw = b"\xff\xfe head " + b"x" * 13 + b"chunk-straddler-7" + b" mid second-secret-value-8" + b" \x00tail"
    for chunk in (1, 5, 16, 17, 4096):
        f = tmp_path / f"out{chunk}.txt"
        f.write_bytes(raw)
        redact_file(f, chunk_bytes=chunk)
        assert f.read_bytes() == b"\xff\xfe head " + b"x" * 13 + b"*** mid *** \x00tail", chunk
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".redacting")] == []
