"""Exceptions that end an attempt, and the error users see for bad input.

The agent loop stops on the first of these; `verify.classify_ending` maps each to one of the
attempt endings of turn-bon Appendix D.2 (pass, wrong_submission, out_of_context, time_limit,
agent_error).
"""


class TbscaleError(Exception):
    """A problem with the user's input: shown as one line, exit code 2."""


class AttemptStopped(Exception):
    """Base for everything that stops an attempt before the agent submits."""

    stop_reason = "agent_error"


class ContextWindowExceeded(AttemptStopped):
    stop_reason = "context_window"


class OutputLengthExceeded(AttemptStopped):
    stop_reason = "output_length"


class SegmentDone(AttemptStopped):
    """A continuation ran the turns it was given without submitting: an unfinished prefix that a
    trajectory strategy (CER search) scores and may continue, not an ending of the trial."""

    stop_reason = "paused"


class StepLimitReached(AttemptStopped):
    stop_reason = "step_limit"


class AgentTimeout(AttemptStopped):
    stop_reason = "time_limit"


class FormatErrorLimit(AttemptStopped):
    stop_reason = "format_errors"


class SandboxError(AttemptStopped):
    stop_reason = "sandbox_error"


class ModelCallError(AttemptStopped):
    """A model call failed after every retry (or with an error that is not retried)."""

    stop_reason = "model_error"

