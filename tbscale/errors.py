"""Exceptions that end an attempt, the one that stops a run, and the error users see for bad input.

The agent loop stops on the first AttemptStopped; its `stop_reason` is recorded, and
`tbscale.verifiers.classify_ending` maps it to one of the attempt endings of turn-bon Appendix D.2
(pass, wrong_submission, out_of_context, time_limit, agent_error; and verifier_error).
"""


class TbscaleError(Exception):
    """A problem with the user's input: shown as one line, exit code 2."""


class ForksUnsupported(TbscaleError):
    """The environment backend cannot snapshot a running environment or start forks from one
    (its Capabilities.snapshots is False): a setting that needs forks cannot run on it."""


class AttemptStopped(Exception):
    """Base for everything that stops an attempt before the agent submits."""

    stop_reason = "agent_error"


class ContextWindowExceeded(AttemptStopped):
    """The history no longer fits the model's context window (or the provider said so)."""

    stop_reason = "context_window"


class OutputLengthExceeded(AttemptStopped):
    """The chosen response was cut off at the output-length limit."""

    stop_reason = "output_length"


class SegmentDone(AttemptStopped):
    """A continuation ran the turns it was given without submitting: an unfinished prefix that a
    trajectory strategy (CER search) scores and may continue, not an ending of the trial."""

    stop_reason = "paused"


class StepLimitReached(AttemptStopped):
    """No submission within `limits.max_turns`."""

    stop_reason = "step_limit"


class AgentTimeout(AttemptStopped):
    """The attempt ran past its time budget."""

    stop_reason = "time_limit"


class FormatErrorLimit(AttemptStopped):
    """More responses than `limits.max_format_errors` named no runnable command."""

    stop_reason = "format_errors"


class SandboxError(AttemptStopped):
    """The environment failed: a container that would not start, an exec or a copy that broke."""

    stop_reason = "sandbox_error"


class ImageBuildError(SandboxError):
    """The task's image could not be built or pulled: an infrastructure failure, not the agent's."""

    stop_reason = "image_build_error"


class BuilderUnsupported(ImageBuildError):
    """The task's image needs what this backend's builder lacks (`needs`: a builder feature, in the
    backend's words): the task cannot run here as it stands, whatever the agent does. The message
    starts "needs NEEDS: " and its first line says why (`tasks check` shows both)."""

    def __init__(self, needs: str, why: str, detail: str = ""):
        self.needs, self.why, self.detail = needs, why, detail
        super().__init__(f"needs {needs}: {why}" + (f"\n{detail}" if detail else ""))

    def __reduce__(self):  # pickled with its three parts (a Ray worker's error reaches the driver)
        return type(self), (self.needs, self.why, self.detail)


class HealthcheckFailed(SandboxError):
    """The task's healthcheck did not pass before the agent: the environment never became ready."""

    stop_reason = "healthcheck_failed"


class TaskRefused(SandboxError):
    """The task asks for something this engine cannot give (a GPU, a storage quota, an allowlist
    entry it cannot enforce): refused with a one-line message naming the key, never run without it."""

    stop_reason = "task_refused"


class ModelCallError(AttemptStopped):
    """A model call failed after every retry (or with an error that is not retried). `cause` is
    the classified failure (models/failures.py): rate_limit, server_error, bad_request, ..."""

    stop_reason = "model_error"

    def __init__(self, message: str = "", cause: str | None = None):
        super().__init__(message)
        self.cause = cause



class ModelUnavailable(Exception):
    """A model failed the same unfixable way on several consecutive tries (a missing or rejected
    key, an unknown model, a refused connection): the run stops, keeping every finished trial.
    Not an AttemptStopped: no attempt may be scored as having ended this way."""

    CAUSE_TEXT = {"missing_credentials": "no API key reached it (missing credentials)",
                  "auth": "the provider rejected the key (authentication or permission error)",
                  "model_not_found": "the provider does not know this model",
                  "connection_refused": "its endpoint refused the connection"}

    def __init__(self, model: str, cause: str, tries: int, detail: str = ""):
        self.model, self.cause, self.tries, self.detail = model, cause, tries, detail
        why = self.CAUSE_TEXT.get(cause, cause)
        super().__init__(f"model {model}: {why} on {tries} consecutive tries; stopping the run"
                         + (f" ({detail[:200]})" if detail else ""))
