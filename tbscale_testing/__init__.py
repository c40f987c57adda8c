"""Helpers that exercise tbscale's real code paths without remote services, for tests, benchmarks
and trying things out; not part of the production package.

- `openai_server.LoopbackModel`: a scriptable OpenAI-compatible chat-completions server on
  127.0.0.1, to drive litellm over real HTTP;
- `tasks.write_harbor_task`: small Harbor task folders;
- `cli.tbscale`, `cli.Started`: the CLI run to its end, or in the background to be watched and
  interrupted (Ctrl-C, kill -9) as a user would; `engine.containers`: a test's own containers;
  `waiting.wait_for`: wait on a condition, not the clock;
- `swebench_demo`: a tiny SWE-bench-format benchmark made offline (`tbscale swebench demo`);
- `browser.Browser`: one headless Chromium that loads many pages (the viewer and report tests).
"""

from tbscale_testing.openai_server import (ErrorReply, LoopbackModel, Reply, RequestRecord, Response, auth_error,
                                           bad_request, context_length_error, rate_limit, server_error,
                                           unavailable)

__all__ = ["LoopbackModel", "Reply", "Response", "ErrorReply", "RequestRecord", "rate_limit", "server_error",
           "unavailable", "context_length_error", "auth_error", "bad_request"]
