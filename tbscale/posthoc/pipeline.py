"""What the post-hoc LLM pipelines (`tbscale judge`, `tbscale rewards`) share: which model judges,
one judgement call (retried until the reply parses, with its usage metered), a store of
judgements that a rerun finds and does not ask again, and the manifest of their history."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable

from tbscale.config import ModelConfig, format_validation_error
from tbscale.errors import TbscaleError
from tbscale.jsonl import read_jsonl
from tbscale.logs import dumps
from tbscale.models.replies import ask_json
from tbscale.runfiles import manifest_of
from tbscale.secrets import redact
from tbscale.types import Usage
from tbscale.types.completion import UsageJSON
from tbscale.types.messages import ChatMessage


def resolve_judge_model(model: str, models: dict[str, Any] | None, run_dir: Path | None,
                        where: str = "judge model") -> ModelConfig:
    """The judge's ModelConfig: a key of the given `models` (a judge config's) or of the run's own
    models (its manifest), else a litellm model string (provider/model)."""
    from pydantic import ValidationError

    known = dict(models or {})
    manifest = manifest_of(Path(run_dir)) if run_dir else None
    if manifest is not None:
        known = {**(manifest.experiment.get("models") or {}), **known}
    try:
        if model in known:
            value = known[model]
            return value if isinstance(value, ModelConfig) else ModelConfig.model_validate(value)
        if "/" in model:
            return ModelConfig(model=model)
    except ValidationError as e:
        raise TbscaleError(format_validation_error(where, e)) from None
    raise TbscaleError(f"{where} {model!r}: not a key of the config's or the run's models, and not a litellm "
                       "model string (provider/model)")


class UsageMeter:
    """A call sink that only sums usage (the judgement's cost goes into its own line)."""

    def __init__(self) -> None:
        self.usage = Usage()

    def record_call(self, role, model, usage: Usage, latency_sec, *, n, retries, error=None, retry_causes=None):
        self.usage.add(usage)


@dataclass
class Judgement:
    parsed: Any
    reply: str
    usage: UsageJSON
    error: str | None
    latency_sec: float


async def judge(llm, messages: list[ChatMessage], parse: Callable[[str], Any | None], *, seed: int,
                tries: int) -> Judgement:
    """One judgement: call until the reply parses (at most `tries` calls)."""
    meter, t0 = UsageMeter(), time.monotonic()
    parsed, reply, problem, _ = await ask_json(llm, messages, parse, seed=seed, sink=meter, tries=tries)
    return Judgement(parsed, reply or "", meter.usage.as_dict(), problem if parsed is None else None,
                     round(time.monotonic() - t0, 3))


@dataclass
class JudgementStore:
    """A JSONL file of judgement lines. Lines made by the same judge (`judge_key`) without an error
    are kept, keyed by `key_of(line)`; a rerun skips them and appends only what is new."""

    path: Path
    judge_key: str
    key_of: Callable[[dict[str, Any]], tuple]
    done: dict[tuple, dict[str, Any]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.path.is_file():
            for line in read_jsonl(self.path):
                if line.get("judge_key") == self.judge_key and not line.get("error"):
                    self.done[self.key_of(line)] = line

    def has(self, key: tuple) -> bool:
        return key in self.done

    def add(self, line: dict[str, Any]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.path, "a", encoding="utf-8") as f:
            f.write(redact(dumps({"judge_key": self.judge_key, **line})) + "\n")
        if not line.get("error"):
            self.done[self.key_of({"judge_key": self.judge_key, **line})] = line


def record_history(path: Path, entry: dict[str, Any], **fields: Any) -> dict[str, Any]:
    """Update a pipeline's manifest.json: the latest fields, and one history entry per invocation."""
    manifest = json.loads(path.read_text()) if path.is_file() else {"history": []}
    manifest.update(fields)
    manifest.setdefault("history", []).append({**entry, "finished_at": datetime.now(timezone.utc).isoformat()})
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(manifest, indent=2, default=str))
    return manifest
