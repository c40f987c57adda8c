"""A scriptable OpenAI-compatible chat-completions server on the loopback interface.

Tests and benchmarks drive the real model path (LLM.complete -> litellm `openai/<name>` ->
httpx -> HTTP) against it, with no remote model and no key:

    with LoopbackModel(lambda body: "```bash\\nls\\n```", latency=0.2) as srv:
        cfg = ModelConfig(model="openai/scripted", api_base=srv.base_url)
        ...
        assert srv.requests[0].n == 4

What it does:
- `POST /v1/chat/completions` (and `/chat/completions`): answers in the OpenAI wire format, with
  `choices` (message content and/or tool calls, finish_reason) and `usage` (prompt, completion and
  total tokens, completion_tokens_details.reasoning_tokens, prompt_tokens_details.cached_tokens).
  `n` is honoured: a responder's single reply is repeated n times.
- The `responder` (request body -> reply) scripts the model. It may return a string, a `Reply`
  (tool calls, finish_reason "length", reasoning, token counts), a list of those (one choice
  each, returned as given, even if that is not n of them), a `Response` (choices plus usage
  overrides), or an `ErrorReply` (that request fails with it).
- `latency`: seconds (or a function of the body) that each completion sleeps in its handler
  thread; requests are served concurrently, one thread each.
- `fail_next(...)`: the next requests, in arrival order, answer with the given errors
  (`rate_limit()` 429 with Retry-After 0, `server_error()` 500, `unavailable()` 503,
  `context_length_error()` 400 in OpenAI's format, `auth_error()` 401, or a bare status code).
- `api_key`: when given, every request (the model list too) without `Authorization: Bearer
  <api_key>` is refused with 401 in OpenAI's format, the refused key echoed in the message (worse
  than OpenAI, which masks it: what a client shows must never carry it).
- Every request is recorded (`requests`): body, arrival and finish times (time.monotonic), status,
  n and the usage it was told; `max_overlap()` is the largest number served at once.

It binds 127.0.0.1 only and never opens a connection itself. It stops on leaving the `with`
block, on `close()`, or by itself after `max_lifetime_sec`; its threads are daemons, so a server
nobody closed never keeps the interpreter alive.
"""

from __future__ import annotations

import json
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable, Union

HOST = "127.0.0.1"
PATHS = ("/v1/chat/completions", "/chat/completions")


@dataclass
class Reply:
    """One choice. Token counts default to ~4 characters a token (at least 1 output token)."""

    content: str | None = None
    tool_calls: list[dict[str, Any]] = field(default_factory=list)  # {"name", "arguments" (str|dict), "id"?}
    finish_reason: str | None = None  # default: "tool_calls" when there are tool calls, else "stop"
    reasoning_content: str | None = None
    completion_tokens: int | None = None  # this choice's output tokens, reasoning included
    reasoning_tokens: int | None = None

    @classmethod
    def bash_call(cls, command: str, *, content: str | None = None, call_id: str | None = None) -> "Reply":
        """A reply that calls the `bash` tool with `command`."""
        return cls(content=content, tool_calls=[{"id": call_id, "name": "bash", "arguments": {"command": command}}])

    def as_choice(self, index: int, request_index: int) -> dict[str, Any]:
        message: dict[str, Any] = {"role": "assistant", "content": self.content}
        if self.tool_calls:
            message["tool_calls"] = [
                {"id": tc.get("id") or f"call_{request_index}_{index}_{j}", "type": "function",
                 "function": {"name": tc["name"], "arguments": tc["arguments"] if isinstance(tc["arguments"], str)
                              else json.dumps(tc["arguments"])}}
                for j, tc in enumerate(self.tool_calls)]
        if self.reasoning_content is not None:
            message["reasoning_content"] = self.reasoning_content
        finish = self.finish_reason or ("tool_calls" if self.tool_calls else "stop")
        return {"index": index, "message": message, "finish_reason": finish, "logprobs": None}

    def tokens(self) -> tuple[int, int]:
        """(completion tokens, reasoning tokens) of this choice."""
        reasoning = self.reasoning_tokens if self.reasoning_tokens is not None else len(self.reasoning_content or "") // 4
        if self.completion_tokens is not None:
            return self.completion_tokens, reasoning
        chars = len(self.content or "") + sum(len(json.dumps(tc.get("arguments"))) for tc in self.tool_calls)
        return max(1, chars // 4) + reasoning, reasoning


@dataclass
class Response:
    """Several choices and, optionally, usage fields that replace the computed ones: any of
    prompt_tokens, completion_tokens, reasoning_tokens, cached_tokens."""

    choices: list[Union[str, Reply]]
    usage: dict[str, int] | None = None


@dataclass
class ErrorReply:
    """An HTTP error in OpenAI's error format."""

    status: int
    message: str
    type: str = "server_error"
    code: str | None = None
    headers: dict[str, str] = field(default_factory=dict)

    def body(self) -> dict[str, Any]:
        return {"error": {"message": self.message, "type": self.type, "param": None, "code": self.code}}


def rate_limit(message: str = "Rate limit reached for requests. Please try again in 0s.",
               retry_after: str = "0") -> ErrorReply:
    return ErrorReply(429, message, "requests", "rate_limit_exceeded", {"Retry-After": retry_after})


def server_error(message: str = "The server had an error while processing your request.") -> ErrorReply:
    return ErrorReply(500, message, "server_error", None)


def unavailable(message: str = "The engine is currently overloaded, please try again later.") -> ErrorReply:
    return ErrorReply(503, message, "server_error", None)


def context_length_error(max_tokens: int = 8192, requested: int = 9000) -> ErrorReply:
    return ErrorReply(400, f"This model's maximum context length is {max_tokens} tokens. However, your messages "
                           f"resulted in {requested} tokens. Please reduce the length of the messages.",
                      "invalid_request_error", "context_length_exceeded")


def auth_error(message: str = "Incorrect API key provided. You can find your API key at "
                              "https://platform.openai.com/account/api-keys.") -> ErrorReply:
    return ErrorReply(401, message, "invalid_request_error", "invalid_api_key")


def bad_request(message: str = "Invalid request.") -> ErrorReply:
    return ErrorReply(400, message, "invalid_request_error", None)


_BY_STATUS: dict[int, Callable[[], ErrorReply]] = {429: rate_limit, 500: server_error, 503: unavailable,
                                                   401: auth_error, 400: bad_request}

ReplyLike = Union[str, Reply, Response, ErrorReply, list]
Responder = Callable[[dict[str, Any]], ReplyLike]


@dataclass
class RequestRecord:
    index: int
    path: str
    body: dict[str, Any] | None
    arrived: float  # time.monotonic()
    finished: float | None = None
    status: int | None = None
    n: int = 1
    usage: dict[str, Any] | None = None  # what the response reported (successful requests)
    choices: int = 0
    error: str | None = None
    headers: dict[str, str] = field(default_factory=dict, repr=False)  # names lower-cased

    @property
    def messages(self) -> list[dict[str, Any]]:
        return list((self.body or {}).get("messages") or [])

    @property
    def ok(self) -> bool:
        return self.status == 200

    @property
    def duration(self) -> float | None:
        return None if self.finished is None else self.finished - self.arrived


def message_text(body: dict[str, Any]) -> str:
    """All message contents of a request, joined (for responders that route on the prompt)."""
    parts = []
    for m in body.get("messages") or []:
        c = m.get("content")
        if isinstance(c, list):  # content parts
            parts.extend(str(p.get("text", "")) for p in c if isinstance(p, dict))
        elif c is not None:
            parts.append(str(c))
    return "\n".join(parts)


def max_overlap(records: list[RequestRecord]) -> int:
    """The largest number of the given requests that were in flight at one moment."""
    points = []
    for r in records:
        if r.finished is not None:
            points += [(r.arrived, 1), (r.finished, -1)]
    points.sort(key=lambda p: (p[0], p[1]))  # a finish at the same instant as an arrival does not overlap
    peak = cur = 0
    for _, d in points:
        cur += d
        peak = max(peak, cur)
    return peak


class _Handler(BaseHTTPRequestHandler):
    server_version = "tbscale-loopback/1"
    protocol_version = "HTTP/1.1"

    def log_message(self, format, *args):  # quiet
        pass

    @property
    def owner(self) -> "LoopbackModel":
        return self.server.owner  # type: ignore[attr-defined]

    def _send(self, status: int, payload: dict[str, Any], headers: dict[str, str] | None = None) -> None:
        data = json.dumps(payload).encode()
        self.close_connection = True
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.send_header("Connection", "close")
            for k, v in (headers or {}).items():
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(data)
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError, ValueError):
            pass  # the client went away (or the server is closing)

    def _refused(self) -> bool:
        """Answer 401 when the server wants a key and the request lacks it."""
        expected = self.owner.api_key
        sent = (self.headers.get("Authorization") or "").removeprefix("Bearer ").strip()
        if expected is None or sent == expected:
            return False
        self._send(401, auth_error(f"Incorrect API key provided: {sent or '(none)'}. You can find your API key "
                                   "at https://platform.example/account/api-keys.").body())
        return True

    def do_GET(self):
        if self._refused():
            return
        if self.path.rstrip("/") in ("/v1/models", "/models"):
            self._send(200, {"object": "list", "data": [{"id": self.owner.model_name, "object": "model",
                                                         "owned_by": "tbscale-loopback"}]})
        else:
            self._send(404, ErrorReply(404, f"no route {self.path}", "invalid_request_error").body())

    def do_POST(self):
        owner = self.owner
        arrived = time.monotonic()
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        if self._refused():
            return
        try:
            body = json.loads(raw) if raw else {}
        except json.JSONDecodeError:
            body = None
        rec = owner._arrive(self.path, body, arrived, {k.lower(): v for k, v in self.headers.items()})
        try:
            status, payload, headers = owner._answer(rec, body, self.path)
        except Exception as e:  # a broken responder: a 500 the test can see, and kept in `errors`
            owner.errors.append(e)
            status, payload, headers = 500, ErrorReply(500, f"responder raised {type(e).__name__}: {e}").body(), {}
        # Record first: a client that has its answer must find the request complete in `requests`.
        owner._finish(rec, status, payload)
        self._send(status, payload, headers)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 128


class LoopbackModel:
    """A scriptable OpenAI-compatible server on 127.0.0.1 (see the module docstring)."""

    def __init__(self, responder: Responder | None = None, *, latency: float | Callable[[dict], float] = 0.0,
                 model_name: str = "scripted", cached_tokens: int | Callable[[dict], int] = 0,
                 max_lifetime_sec: float = 900.0, api_key: str | None = None):
        self.responder = responder or (lambda body: "ok")
        self.api_key = api_key
        self.latency = latency
        self.model_name = model_name
        self.cached_tokens = cached_tokens
        self.max_lifetime_sec = max_lifetime_sec
        self.errors: list[BaseException] = []  # exceptions raised by the responder
        self._records: list[RequestRecord] = []
        self._errors: deque[ErrorReply] = deque()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._in_flight = 0
        self.peak_in_flight = 0
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None
        self._watchdog: threading.Timer | None = None

    # ---- lifecycle ---------------------------------------------------------------------------
    def start(self) -> "LoopbackModel":
        if self._server is not None:
            return self
        server = _Server((HOST, 0), _Handler)
        server.owner = self  # type: ignore[attr-defined]
        self._server = server
        self._thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05},
                                        name=f"loopback-model:{self.port}", daemon=True)
        self._thread.start()
        self._watchdog = threading.Timer(self.max_lifetime_sec, self.close)
        self._watchdog.daemon = True
        self._watchdog.start()
        return self

    def close(self) -> None:
        """Stop serving (idempotent). Handlers still sleeping out a latency wake up and answer."""
        with self._lock:
            server, self._server = self._server, None
        if server is None:
            return
        self._stop.set()
        if self._watchdog is not None and self._watchdog is not threading.current_thread():
            self._watchdog.cancel()
        server.shutdown()
        server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> "LoopbackModel":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.close()

    @property
    def running(self) -> bool:
        return self._server is not None

    @property
    def port(self) -> int:
        if self._server is None:
            raise RuntimeError("the loopback model is not running")
        return self._server.server_address[1]

    @property
    def base_url(self) -> str:
        """For `api_base`: http://127.0.0.1:PORT/v1"""
        return f"http://{HOST}:{self.port}/v1"

    def model_config(self, name: str | None = None, **overrides: Any):
        """A tbscale ModelConfig for this server (`openai/<name>`), with quick retries."""
        from tbscale.config import ModelConfig

        values = {"model": f"openai/{name or self.model_name}", "api_base": self.base_url, "max_retries": 3,
                  "retry_backoff_sec": 0.01, **overrides}
        return ModelConfig(**values)

    # ---- scripting -----------------------------------------------------------------------------
    def fail_next(self, *errors: ErrorReply | int) -> None:
        """Queue errors: each of the next requests (in arrival order) answers with one of them."""
        with self._lock:
            for e in errors:
                self._errors.append(e if isinstance(e, ErrorReply) else _BY_STATUS.get(e, lambda: ErrorReply(
                    e, f"injected HTTP {e}"))())

    @property
    def pending_errors(self) -> int:
        with self._lock:
            return len(self._errors)

    # ---- records -------------------------------------------------------------------------------
    @property
    def requests(self) -> list[RequestRecord]:
        """Every request so far, in arrival order (a copy of the list)."""
        with self._lock:
            return list(self._records)

    def completed(self) -> list[RequestRecord]:
        """Requests answered with 200."""
        return [r for r in self.requests if r.ok]

    def max_overlap(self, records: list[RequestRecord] | None = None) -> int:
        return max_overlap(self.requests if records is None else records)

    def reset(self) -> None:
        """Forget the records, queued errors and responder errors."""
        with self._lock:
            self._records.clear()
            self._errors.clear()
            self.errors.clear()
            self.peak_in_flight = 0

    # ---- request handling (handler threads) ------------------------------------------------------
    def _arrive(self, path: str, body: dict | None, arrived: float, headers: dict[str, str]) -> RequestRecord:
        with self._lock:
            n = int((body or {}).get("n") or 1) if isinstance(body, dict) else 1
            rec = RequestRecord(len(self._records), path, body, arrived, n=n, headers=headers)
            self._records.append(rec)
            self._in_flight += 1
            self.peak_in_flight = max(self.peak_in_flight, self._in_flight)
            return rec

    def _finish(self, rec: RequestRecord, status: int, payload: dict[str, Any]) -> None:
        with self._lock:
            rec.finished, rec.status = time.monotonic(), status
            if status == 200:
                rec.usage, rec.choices = payload.get("usage"), len(payload.get("choices") or [])
            else:
                rec.error = str((payload.get("error") or {}).get("message"))
            self._in_flight -= 1

    def _answer(self, rec: RequestRecord, body: dict | None, path: str) -> tuple[int, dict, dict]:
        if path.split("?", 1)[0].rstrip("/") not in PATHS:
            return 404, ErrorReply(404, f"no route {path}", "invalid_request_error").body(), {}
        with self._lock:
            queued = self._errors.popleft() if self._errors else None
        if queued is not None:
            return queued.status, queued.body(), dict(queued.headers)
        if not isinstance(body, dict) or not isinstance(body.get("messages"), list):
            return 400, bad_request("the body must be a JSON object with `messages`").body(), {}
        if body.get("stream"):
            return 400, bad_request("the loopback model does not stream").body(), {}
        out = self.responder(body)
        if isinstance(out, ErrorReply):
            return out.status, out.body(), dict(out.headers)
        latency = self.latency(body) if callable(self.latency) else self.latency
        if latency:
            self._stop.wait(latency)
        return 200, self._completion(rec, body, out), {}

    def _completion(self, rec: RequestRecord, body: dict, out: ReplyLike) -> dict[str, Any]:
        overrides: dict[str, int] = {}
        if isinstance(out, Response):
            overrides, out = dict(out.usage or {}), out.choices
        if isinstance(out, (str, Reply)):
            out = [out] * rec.n
        replies = [Reply(content=o) if isinstance(o, str) else o for o in out]
        if not all(isinstance(r, Reply) for r in replies):
            raise TypeError(f"responder returned {out!r}; expected str, Reply, Response, ErrorReply or a list")
        prompt = max(1, len(message_text(body)) // 4)
        counts = [r.tokens() for r in replies]
        completion = sum(c for c, _ in counts)
        reasoning = sum(r for _, r in counts)
        cached = self.cached_tokens(body) if callable(self.cached_tokens) else self.cached_tokens
        prompt = overrides.get("prompt_tokens", prompt)
        completion = overrides.get("completion_tokens", completion)
        usage = {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion,
                 "completion_tokens_details": {"reasoning_tokens": overrides.get("reasoning_tokens", reasoning)},
                 "prompt_tokens_details": {"cached_tokens": overrides.get("cached_tokens", min(cached, prompt))}}
        return {"id": f"chatcmpl-loopback-{rec.index}", "object": "chat.completion", "created": int(time.time()),
                "model": body.get("model") or self.model_name, "system_fingerprint": None,
                "choices": [r.as_choice(i, rec.index) for i, r in enumerate(replies)], "usage": usage}
