"""LLM.complete and a Turn-BoN turn over real HTTP: tbscale -> litellm `openai/...` -> httpx -> the
loopback server on 127.0.0.1. No Docker and no remote model."""

from __future__ import annotations

import asyncio
import json
import uuid

import pytest

from tbscale.types.actions import FINISH_MARKER
from tbscale.errors import ContextWindowExceeded, ModelCallError
from tests._recorders import CapturingRecorder
from tbscale.models.llm import LLM
from tbscale.strategies import entry
from tbscale.strategies.base import TurnContext
from tbscale.tasks import Task
from tbscale_testing import (LoopbackModel, Reply, Response, auth_error, context_length_error, rate_limit,
                             server_error, unavailable)
from tbscale_testing.openai_server import message_text

MESSAGES = [{"role": "system", "content": "You are a test model."},
            {"role": "user", "content": "Say something about the number 42, please."}]


class FakeSink:
    """A CallSink that keeps what it is told."""

    def __init__(self):
        self.calls: list[dict] = []

    def record_call(self, role, model, usage, latency_sec, *, n, retries, error=None, retry_causes=None):
        self.calls.append({"role": role, "model": model, "usage": usage, "latency_sec": latency_sec, "n": n,
                           "retries": retries, "error": error})


def complete(llm: LLM, messages=MESSAGES, **kw):
    return asyncio.run(llm.complete(messages, **kw))


# ---- LLM.complete -------------------------------------------------------------------------------

def test_complete_returns_text_usage_and_latency(loopback_model: LoopbackModel) -> None:
    srv = loopback_model
    srv.responder = lambda body: Reply(content="THOUGHT: 42.\n\n```bash\necho 42\n```",
                                       reasoning_content="The user wants 42." * 3,
                                       completion_tokens=40, reasoning_tokens=12)
    srv.cached_tokens = 5
    srv.latency = 0.05
    sink = FakeSink()
    result = complete(LLM(srv.model_config(), "generator"), sink=sink)

    assert len(srv.requests) == 1
    req = srv.requests[0]
    assert req.body["model"] == "scripted" and req.body["messages"] == MESSAGES
    assert "n" not in req.body or req.body["n"] == 1
    told = req.usage
    assert [c.text for c in result.completions] == ["THOUGHT: 42.\n\n```bash\necho 42\n```"]
    assert result.completions[0].reasoning == "The user wants 42." * 3
    assert result.completions[0].finish_reason == "stop"
    assert result.usage.input == told["prompt_tokens"] == len(message_text(req.body)) // 4
    assert result.usage.output == told["completion_tokens"] == 40
    assert result.usage.reasoning == 12
    assert result.usage.cached == 5
    assert result.usage.calls == 1 and result.retries == 0
    assert result.completions[0].output_tokens == 40 and result.completions[0].reasoning_tokens == 12
    assert result.latency_sec >= 0.05  # the server slept that long before answering
    assert sink.calls == [{"role": "generator", "model": "openai/scripted", "usage": result.usage,
                           "latency_sec": result.latency_sec, "n": 1, "retries": 0, "error": None}]


def test_tool_call_reply_comes_back_as_a_tool_call(loopback_model: LoopbackModel) -> None:
    loopback_model.responder = lambda body: Reply.bash_call("ls -la /app", call_id="call_1")
    result = complete(LLM(loopback_model.model_config(), "generator"))
    c = result.completions[0]
    assert c.finish_reason == "tool_calls"
    assert c.tool_calls == [{"id": "call_1", "name": "bash", "arguments": json.dumps({"command": "ls -la /app"})}]


def test_n_sampling_makes_one_request_with_n(loopback_model: LoopbackModel) -> None:
    srv = loopback_model
    srv.responder = lambda body: [f"candidate {i}" for i in range(body["n"])]
    result = complete(LLM(srv.model_config(sampling="n"), "generator"), n=4)
    assert [(r.n, r.status) for r in srv.requests] == [(4, 200)]
    assert [c.text for c in result.completions] == [f"candidate {i}" for i in range(4)]
    assert result.usage.calls == 1
    assert result.usage.output == srv.requests[0].usage["completion_tokens"]
    assert sum(c.output_tokens for c in result.completions) == result.usage.output


def test_auto_sampling_uses_n_for_openai_compatible_servers(loopback_model: LoopbackModel) -> None:
    complete(LLM(loopback_model.model_config(), "generator"), n=3)
    assert [r.n for r in loopback_model.requests] == [3]


def test_server_that_ignores_n_is_topped_up(loopback_model: LoopbackModel) -> None:
    loopback_model.responder = lambda body: ["only one"]  # a list is returned as is: one choice
    result = complete(LLM(loopback_model.model_config(sampling="n"), "generator"), n=3)
    assert len(result.completions) == 3
    assert sorted(r.n for r in loopback_model.requests) == [1, 1, 3]


def test_parallel_sampling_makes_concurrent_requests(loopback_model: LoopbackModel) -> None:
    srv = loopback_model
    srv.latency = 0.2
    result = complete(LLM(srv.model_config(sampling="parallel"), "generator"), n=4)
    reqs = srv.requests
    assert len(reqs) == 4 and all(r.n == 1 and r.ok for r in reqs)
    assert len(result.completions) == 4 and result.usage.calls == 4
    # All four were in flight at once: each arrived before any other had been answered.
    assert srv.max_overlap() == 4
    assert max(r.arrived for r in reqs) < min(r.finished for r in reqs)


def test_rate_limit_and_server_error_are_retried(loopback_model: LoopbackModel) -> None:
    srv = loopback_model
    srv.fail_next(rate_limit(), server_error())
    srv.responder = lambda body: "fine now"
    sink = FakeSink()
    result = complete(LLM(srv.model_config(), "generator"), sink=sink)
    assert [r.status for r in srv.requests] == [429, 500, 200]
    assert [c.text for c in result.completions] == ["fine now"]
    assert result.retries == 2
    assert len(sink.calls) == 1
    assert sink.calls[0]["retries"] == 2 and sink.calls[0]["error"] is None and sink.calls[0]["usage"].calls == 1


def test_service_unavailable_is_retried_until_the_limit(loopback_model: LoopbackModel) -> None:
    srv = loopback_model
    srv.fail_next(*[unavailable()] * 4)
    sink = FakeSink()
    with pytest.raises(ModelCallError, match="gave up after 4 tries"):
        complete(LLM(srv.model_config(max_retries=3), "generator"), sink=sink)
    assert [r.status for r in srv.requests] == [503] * 4
    assert len(sink.calls) == 1 and sink.calls[0]["retries"] == 3 and sink.calls[0]["error"]


def test_auth_error_is_not_retried(loopback_model: LoopbackModel) -> None:
    srv = loopback_model
    srv.fail_next(auth_error(), auth_error())
    sink = FakeSink()
    with pytest.raises(ModelCallError, match="AuthenticationError"):
        complete(LLM(srv.model_config(), "generator"), sink=sink)
    assert [r.status for r in srv.requests] == [401]
    assert sink.calls[0]["error"].startswith("AuthenticationError") and sink.calls[0]["retries"] == 0


def test_context_length_error_raises_without_retry(loopback_model: LoopbackModel) -> None:
    srv = loopback_model
    srv.fail_next(context_length_error(), context_length_error())
    with pytest.raises(ContextWindowExceeded, match="maximum context length"):
        complete(LLM(srv.model_config(), "generator"))
    assert [r.status for r in srv.requests] == [400]


def test_api_key_never_appears_in_errors(loopback_model: LoopbackModel, monkeypatch) -> None:
    key = f"sk-loopback-{uuid.uuid4().hex}"
    monkeypatch.setenv("TBSCALE_LOOPBACK_TEST_KEY", key)
    srv = loopback_model
    srv.fail_next(auth_error(f"Incorrect API key provided: {key}. You can find your API key elsewhere."))
    sink = FakeSink()
    llm = LLM(srv.model_config(api_key_env="TBSCALE_LOOPBACK_TEST_KEY"), "generator")
    with pytest.raises(ModelCallError) as info:
        complete(llm, sink=sink)
    # The key did reach the server (so the echo really contained it) ...
    assert srv.requests[0].headers.get("authorization") == f"Bearer {key}"
    assert key in srv.requests[0].error
    # ... and never came back out.
    assert key not in str(info.value) and key not in repr(info.value.args)
    assert "***" in str(info.value)
    assert key not in sink.calls[0]["error"]


# ---- a Turn-BoN turn ----------------------------------------------------------------------------

SELECTOR_MARK = "You are the selector"
TASK = Task(id="loopback-task", format="harbor", instruction="Print the number 42 to the terminal.")
TURN_MESSAGES = [{"role": "system", "content": "You are a capable software engineer."},
                 {"role": "user", "content": f"Please solve this task:\n\n<task>\n{TASK.instruction}\n</task>"}]


def is_selector(body: dict) -> bool:
    return str(body["messages"][0].get("content", "")).startswith(SELECTOR_MARK)


def candidates(n: int) -> list[str]:
    """Candidate i runs `echo cand<i>`, except candidate 1, which cannot be run."""
    return [f"THOUGHT: try {i}.\n\n```bash\necho cand{i}\n```" if i != 1 else "I would rather not run anything."
            for i in range(n)]


def make_turn_bon(srv: LoopbackModel, *, n: int, sampling: str = "n", **params):
    """The policy exactly as Runner._act builds it, over two model keys on the same server."""
    configs = {"gen": srv.model_config(sampling=sampling), "sel": srv.model_config("selector")}

    def models(key, role):
        return LLM(configs[key or "gen"], role)

    pentry = entry("policy", "turn_bon")
    return pentry.factory(pentry.params.model_validate({"n": n, "selector": "sel", **params}),
                          generator=models("gen", "generator"), models=models, seed=7)


def run_turn(policy, seed: int = 1234):
    rec = CapturingRecorder()
    decision = asyncio.run(policy.decide([dict(m) for m in TURN_MESSAGES],
                                         TurnContext(turn=1, seed=seed, rec=rec, task=TASK)))
    return decision, rec


@pytest.mark.parametrize("sampling", ["n", "parallel"])
def test_turn_bon_turn_samples_once_and_selects_once(loopback_model: LoopbackModel, sampling: str) -> None:
    srv = loopback_model
    srv.latency = 0.2

    def responder(body):
        if is_selector(body):
            return json.dumps({"rationale": "candidate 2 prints it", "selected_index": 2})
        if sampling == "n":
            return candidates(body["n"])
        # Parallel requests carry seeds seed, seed+1, ...: request i answers candidate i.
        return candidates(4)[body["seed"] - 1234]

    srv.responder = responder
    decision, rec = run_turn(make_turn_bon(srv, n=4, sampling=sampling), seed=1234)

    gen = [r for r in srv.requests if not is_selector(r.body)]
    sel = [r for r in srv.requests if is_selector(r.body)]
    if sampling == "n":
        assert [r.n for r in gen] == [4]
    else:
        assert [r.n for r in gen] == [1, 1, 1, 1]
        assert srv.max_overlap(gen) == 4
    assert len(sel) == 1 and sel[0].body["model"] == "selector"
    assert sel[0].arrived >= max(r.finished for r in gen)  # the selector saw all N candidates
    prompt = sel[0].messages[-1]["content"]
    assert all(f'<candidate index="{i}">' in prompt for i in range(4))
    assert decision.selected_index == 2 and decision.n_candidates == 4 and not decision.selector_failed
    assert decision.action.command == "echo cand2"
    assert f"echo cand{2}" in prompt.split('<candidate index="2">', 1)[1].split("</candidate>", 1)[0]
    assert rec.usage["generator"].calls == len(gen) and rec.usage["selector"].calls == 1
    assert rec.usage["generator"].output == sum(r.usage["completion_tokens"] for r in gen)
    selection = [f for t, f in rec.events if t == "selection"]
    assert selection == [{"index": 2, "rationale": "candidate 2 prints it", "selector_failed": False, "tries": 1,
                          "method": "listwise", "model": "openai/selector"}]


@pytest.mark.parametrize("garbage", ["I like the third one best.", '{"selected_index": 9}',
                                     '{"selected_index": true}', '{"rationale": "no index"}'])
def test_turn_bon_garbage_selector_falls_back(loopback_model: LoopbackModel, garbage: str) -> None:
    srv = loopback_model
    srv.responder = lambda body: garbage if is_selector(body) else candidates(body["n"])
    decision, rec = run_turn(make_turn_bon(srv, n=4, selector_tries=3))

    sel = [r for r in srv.requests if is_selector(r.body)]
    assert len(sel) == 3
    assert [r.n for r in srv.requests if not is_selector(r.body)] == [4]
    assert decision.selector_failed
    assert decision.selected_index in (0, 2, 3) and decision.action.runnable  # a runnable candidate
    (selection,) = [f for t, f in rec.events if t == "selection"]
    assert selection["selector_failed"] is True and selection["tries"] == 3
    assert selection["rationale"].startswith("fallback (random_runnable)")


def test_turn_bon_selector_recovers_on_a_later_try(loopback_model: LoopbackModel) -> None:
    srv = loopback_model
    replies = iter(["no JSON here", '```json\n{"rationale": "r", "selected_index": 3}\n```'])
    srv.responder = lambda body: next(replies) if is_selector(body) else candidates(body["n"])
    decision, rec = run_turn(make_turn_bon(srv, n=4, selector_tries=3))
    assert sum(is_selector(r.body) for r in srv.requests) == 2
    assert decision.selected_index == 3 and not decision.selector_failed
    assert [f["tries"] for t, f in rec.events if t == "selection"] == [2]


def test_turn_bon_selector_http_errors_count_as_failed_tries(loopback_model: LoopbackModel) -> None:
    srv = loopback_model
    srv.responder = lambda body: auth_error() if is_selector(body) else candidates(body["n"])
    decision, _ = run_turn(make_turn_bon(srv, n=4, selector_tries=2, fallback="first"))
    assert sum(is_selector(r.body) for r in srv.requests) == 2
    assert decision.selector_failed and decision.selected_index == 0


def test_turn_bon_submission_candidate_is_selectable(loopback_model: LoopbackModel) -> None:
    srv = loopback_model
    submit = f"THOUGHT: done.\n\n```bash\necho {FINISH_MARKER}\n```"
    srv.responder = lambda body: ('{"selected_index": 1}' if is_selector(body)
                                  else Response(["```bash\nls\n```", submit], usage={"completion_tokens": 77}))
    decision, rec = run_turn(make_turn_bon(srv, n=2))
    assert decision.action.is_submission and decision.selected_index == 1
    assert rec.usage["generator"].output == 77


# ---- the loopback server itself ---------------------------------------------------------------

def _post(url: str, body: dict, timeout: float = 10.0) -> tuple[int, dict]:
    import urllib.error
    import urllib.request

    req = urllib.request.Request(url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # straight to 127.0.0.1
    try:
        with opener.open(req, timeout=timeout) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def test_server_binds_loopback_only_and_speaks_the_wire_format() -> None:
    with LoopbackModel(lambda body: Reply(content="hi", reasoning_content="hmm..", completion_tokens=9,
                                          reasoning_tokens=2), cached_tokens=1) as srv:
        assert srv._server.server_address[0] == "127.0.0.1" and srv.base_url.startswith("http://127.0.0.1:")
        status, payload = _post(f"{srv.base_url}/chat/completions",
                                {"model": "m", "n": 2, "messages": [{"role": "user", "content": "x" * 40}]})
        assert status == 200 and payload["object"] == "chat.completion" and payload["model"] == "m"
        assert [c["message"]["content"] for c in payload["choices"]] == ["hi", "hi"]
        assert [c["index"] for c in payload["choices"]] == [0, 1]
        assert payload["usage"] == {"prompt_tokens": 10, "completion_tokens": 18, "total_tokens": 28,
                                    "completion_tokens_details": {"reasoning_tokens": 4},
                                    "prompt_tokens_details": {"cached_tokens": 1}}
        status, _ = _post(f"http://127.0.0.1:{srv.port}/chat/completions", {"messages": []})  # without /v1
        assert status == 200
        status, payload = _post(f"http://127.0.0.1:{srv.port}/v1/embeddings", {"input": "x"})
        assert status == 404 and "error" in payload
        srv.fail_next(429)
        status, payload = _post(f"{srv.base_url}/chat/completions", {"messages": []})
        assert status == 429 and payload["error"]["code"] == "rate_limit_exceeded"
        assert [r.status for r in srv.requests] == [200, 200, 404, 429]


def test_server_closes_promptly_with_a_request_in_flight() -> None:
    import threading
    import time

    srv = LoopbackModel(latency=600.0).start()
    port = srv.port
    result = {}
    t = threading.Thread(target=lambda: result.update(r=_post(f"{srv.base_url}/chat/completions",
                                                              {"messages": [{"role": "user", "content": "x"}]},
                                                              timeout=900)), daemon=True)
    t.start()
    deadline = time.monotonic() + 300
    while not srv.requests and time.monotonic() < deadline:
        time.sleep(0.01)
    assert srv.requests, "the request never arrived"
    srv.close()
    t.join(120)
    assert not t.is_alive() and result["r"][0] == 200  # the 600 s sleep was cut short, and answered
    assert not srv.running
    with pytest.raises(OSError):
        _post(f"http://127.0.0.1:{port}/v1/chat/completions", {"messages": []}, timeout=2)


def test_server_stops_by_itself_after_its_lifetime() -> None:
    import time

    srv = LoopbackModel(max_lifetime_sec=0.2).start()
    deadline = time.monotonic() + 120
    while srv.running and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not srv.running
    srv.close()  # idempotent



@pytest.mark.litellm
def test_a_simulated_run_asks_no_context_window_of_litellm_and_imports_it_off_the_event_loop(monkeypatch) -> None:
    """litellm takes seconds of CPU to import: the simulated model's context window is not looked
    up in litellm's model map (it is not there), and the first call imports it in a worker thread,
    so the loop (the other trials, the progress display) is not stopped meanwhile."""
    import threading

    from tbscale.config import ModelConfig
    from tbscale.models import llm

    imports: list[bool] = []  # for each import: was it on the main (the loop's) thread?
    module = object()
    loop_ran = threading.Event()

    def importing():  # an import that lasts until the loop has run meanwhile
        imports.append(threading.current_thread() is threading.main_thread())
        if not loop_ran.wait(120):
            raise AssertionError("the event loop did not run while litellm was imported")
        llm._litellm = module
        return module

    monkeypatch.setattr(llm, "_litellm", None)
    monkeypatch.setattr(llm, "_prefetch", None)
    monkeypatch.setattr(llm, "litellm_module", importing)
    assert llm.LLM(ModelConfig(model="sim/policy"), "generator").context_window() is None
    assert imports == []

    async def main():
        ticks = 0

        async def tick():
            nonlocal ticks
            while True:
                ticks += 1
                if ticks == 3:
                    loop_ran.set()
                await asyncio.sleep(0)

        ticker = asyncio.create_task(tick())
        got = await llm.litellm_async()
        again = await llm.litellm_async()
        ticker.cancel()
        return got, again, ticks

    got, again, ticks = asyncio.run(main())
    assert got is module and again is module and imports == [False] and ticks >= 3
    assert llm.prefetch_litellm().result() is module and imports == [False]  # a run's prefetch: the same import


def test_an_exit_during_the_litellm_prefetch_waits_for_the_import_to_end() -> None:
    """The prefetch thread is not a daemon: an interpreter that exits meanwhile (Ctrl-C early in a
    run) lets the import end first. A daemon thread stopped by the exit while it held the import
    lock hung the process for good in its next import (`tbscale run` never exited in CI). The
    callback runs after the interpreter has waited for its threads and before it finalizes."""
    import subprocess
    import sys

    script = ("import atexit, sys\n"
              "from tbscale.models import llm\n"
              "future = llm.prefetch_litellm()\n"
              "atexit.register(lambda: print('import ended at exit:', future.done(), flush=True))\n"
              "sys.exit(130)\n")
    res = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=600)
    assert res.returncode == 130, res.stderr[-2000:]
    assert "import ended at exit: True" in res.stdout, (res.stdout, res.stderr[-2000:])
