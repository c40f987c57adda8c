"""Test helpers that exercise the real code paths without remote services.

`openai_server.LoopbackModel` is a scriptable OpenAI-compatible chat-completions server on
127.0.0.1, for tests and benchmarks that drive litellm over real HTTP.
"""

from tbscale.testing.openai_server import (ErrorReply, LoopbackModel, Reply, RequestRecord, Response, auth_error,
                                           bad_request, context_length_error, rate_limit, server_error,
                                           unavailable)

__all__ = ["LoopbackModel", "Reply", "Response", "ErrorReply", "RequestRecord", "rate_limit", "server_error",
           "unavailable", "context_length_error", "auth_error", "bad_request"]
