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
