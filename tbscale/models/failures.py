"""What a failed model call means, and when to stop calling a model at all.

litellm's exception classes do not say everything: a missing OpenAI key arrives as an
InternalServerError, a refused connection as an InternalServerError or an APIConnectionError. So
each failure is classified by class and message into a cause. Causes that no retry can fix (auth,
missing credentials, an unknown model, a refused connection) count towards a per-model circuit
breaker: when the same such cause ends several consecutive tries of one model, the model is
declared unavailable and the run stops with one message, instead of every trial burning its
retries and being scored as an agent failure.
"""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass

from tbscale.errors import ModelUnavailable

# Causes that retrying cannot fix while the run goes on.
FATAL_CAUSES = frozenset({"missing_credentials", "auth", "model_not_found", "connection_refused"})
_MISSING_KEY = re.compile(r"missing (credentials|.{0,40}api[ _-]?key)|no (api )?key is set|api_key client option must be set"
                          r"|set the `?[A-Z_]*API_KEY", re.IGNORECASE)
_REFUSED = re.compile(r"connection (error|refused)|cannot connect to host|connect call failed|"
                      r"failed to establish a new connection|name or service not known|nodename nor servname", re.IGNORECASE)


@dataclass(frozen=True)
class Failure:
    cause: str  # missing_credentials, auth, model_not_found, connection_refused, context_window, bad_request,
    #             rate_limit, timeout, server_error, other
    retryable: bool

    @property
    def fatal(self) -> bool:
        return self.cause in FATAL_CAUSES


def classify(exc: BaseException, litellm) -> Failure:
    text = str(exc)
    if _MISSING_KEY.search(text):
        return Failure("missing_credentials", False)
    if isinstance(exc, litellm.ContextWindowExceededError):
        return Failure("context_window", False)
    if isinstance(exc, (litellm.AuthenticationError, litellm.PermissionDeniedError)):
        return Failure("auth", False)
    if isinstance(exc, litellm.NotFoundError):
        return Failure("model_not_found", False)
    if isinstance(exc, litellm.BadRequestError):
        return Failure("bad_request", False)
    if _REFUSED.search(text):
        # Retried (a server that is restarting comes back), but it counts towards the breaker.
        return Failure("connection_refused", True)
    if isinstance(exc, litellm.RateLimitError):
        return Failure("rate_limit", True)
    if isinstance(exc, litellm.Timeout):
        return Failure("timeout", True)
    if isinstance(exc, (litellm.InternalServerError, litellm.ServiceUnavailableError, litellm.APIConnectionError,
                        litellm.APIError)):
        return Failure("server_error", True)
    return Failure("other", False)


class CircuitBreaker:
    """Counts consecutive tries of one model that ended in the same fatal cause; any success or
    other outcome resets it. Tripped once, it stays tripped for the process."""

    def __init__(self, model: str, threshold: int):
        self.model, self.threshold = model, threshold
        self._lock = threading.Lock()
        self._cause: str | None = None
        self._count = 0
        self.tripped: ModelUnavailable | None = None

    def check(self) -> None:
        if self.tripped is not None:
            raise self.tripped

    def record(self, failure: Failure | None, message: str = "") -> None:
        with self._lock:
            if failure is None or not failure.fatal:
                self._cause, self._count = None, 0
                return
            self._count = self._count + 1 if failure.cause == self._cause else 1
            self._cause = failure.cause
            if self._count >= self.threshold and self.tripped is None:
                self.tripped = ModelUnavailable(self.model, failure.cause, self._count, message)
        self.check()


_breakers: dict[tuple[str, str | None], CircuitBreaker] = {}
_breakers_lock = threading.Lock()


def breaker_for(model: str, api_base: str | None, threshold: int) -> CircuitBreaker:
    with _breakers_lock:
        key = (model, api_base)
        if key not in _breakers:
            _breakers[key] = CircuitBreaker(model, threshold)
        return _breakers[key]


def reset_breakers() -> None:
    """Forget every breaker (a new run in the same process starts afresh)."""
    with _breakers_lock:
        _breakers.clear()
