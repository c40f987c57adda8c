"""The agent's prompt templates (Jinja files in agent/prompts/), replaceable by the user's own
files through the config's `prompts:` mapping, and the observation the model is shown."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Any

import jinja2

PROMPT_DIR = Path(__file__).parent / "prompts"


@lru_cache(maxsize=None)
def _template(path: str) -> jinja2.Template:
    return jinja2.Template(Path(path).read_text(), undefined=jinja2.StrictUndefined, keep_trailing_newline=False)


# The values the agent renders each template with: every template a user gives is rendered once
# with these (both ways round for the values templates branch on) before the first container
# starts, so a misspelt variable or a broken tag is an error at load time, not in a trial.
_SAMPLES: dict[str, list[dict[str, Any]]] = {
    "system": [{"workdir": "/app", "finish_marker": "DONE", "action_format": f} for f in ("fenced", "tool")],
    "instance": [{"instruction": "Do it.", "context": c, "max_turns": 50, "time_budget": "10 minutes"}
                 for c in (None, "summaries of earlier attempts")],
    "format_error": [{"error": "no command found", "finish_marker": "DONE"}],
    "observation": [{"exit_code": 0, "timed_out": t, "timeout": 180, "truncated": t, "output": "out", "head": "o",
                     "tail": "t", "elided": 1} for t in (False, True)],
    "context_summaries": [{"summaries": s} for s in ([], ["a summary"])],
}
TEMPLATE_NAMES = tuple(_SAMPLES)


def template_problem(name: str, path: Path) -> str | None:
    """Why the user's file for template `name` would fail when the agent renders it, or None."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        return "no such file"
    except IsADirectoryError:
        return "is a folder, not a template file"
    except UnicodeDecodeError as e:
        return f"not UTF-8 text (byte {e.start})"
    except OSError as e:
        return f"cannot be read ({e.strerror or type(e).__name__})"
    try:
        template = jinja2.Template(text, undefined=jinja2.StrictUndefined, keep_trailing_newline=False)
    except jinja2.TemplateSyntaxError as e:
        return f"line {e.lineno}: not a valid Jinja template ({e.message})"
    for values in _SAMPLES[name]:
        try:
            template.render(**values)
        except jinja2.UndefinedError as e:
            return f"does not render ({e.message}; it is given {', '.join(sorted(values))})"
        except Exception as e:  # noqa: BLE001 - a filter or test that fails on the values it is given
            return f"does not render ({type(e).__name__}: {e})"
    return None


def render(name: str, overrides: dict[str, str] | None = None, **values: Any) -> str:
    """Render a prompt template: the user's file from config `prompts:` if given, else ours."""
    path = (overrides or {}).get(name) or str(PROMPT_DIR / f"{name}.j2")
    return _template(path).render(**values).strip()


def format_observation(output: str, exit_code: int, timed_out: bool, timeout: float, max_chars: int,
                       prompts: dict[str, str] | None = None) -> str:
    """Return code and output; a long output keeps its head and tail (errors are usually at the end)."""
    truncated = len(output) > max_chars
    half = max_chars // 2
    return render("observation", prompts, exit_code=exit_code, timed_out=timed_out, timeout=round(timeout),
                  truncated=truncated, output=output, head=output[:half], tail=output[-half:],
                  elided=len(output) - 2 * half)
