"""What the post-hoc LLM pipelines (`tbscale judge`, `tbscale rewards`) share: which model judges,
one judgement call (retried until the reply parses, with its usage metered), a store of
judgements that a rerun finds and does not ask again, and the manifest of their history. Both
files are written and read through their models (tbscale/types/posthoc.py)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Generic

from tbscale.config import ModelConfig, format_validation_error
from tbscale.errors import TbscaleError
from tbscale.logs import dumps
from tbscale.models.replies import ask_json
from tbscale.runfiles import (JudgementLineT, PosthocManifestT, manifest_json, manifest_of, read_judgements,
                              read_posthoc_manifest)
from tbscale.secrets import redact
from tbscale.types import Usage
from tbscale.types.completion import UsageJSON
from tbscale.types.messages import ChatMessage
from tbscale.types.posthoc import BsrInvocation, JudgeInvocation


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
class JudgementStore(Generic[JudgementLineT]):
    """A JSONL file of judgement lines, each a `line_type`. Lines made by the same judge
    (`judge_key`) without an error are kept, keyed by `key_of(line)`; a rerun skips them and
    appends only what is new."""

    path: Path
    judge_key: str
    line_type: type[JudgementLineT]
    key_of: Callable[[JudgementLineT], tuple]
    done: dict[tuple, JudgementLineT] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.path.is_file():
            for line in read_judgements(self.path, self.line_type):
                if line.judge_key == self.judge_key and not line.error:
                    self.done[self.key_of(line)] = line

    def has(self, key: tuple) -> bool:
        return key in self.done

    def add(self, **fields: Any) -> JudgementLineT:
        """Append a judgement made by this store's judge: validated through the line's model first
        (a wrong or unknown field is a bug, raised here rather than written; a reader keeps unknown
        keys, which lines of other versions may have), written with the fields given."""
        line = self.line_type(judge_key=self.judge_key, **fields)
        if line.model_extra:
            raise ValueError(f"{self.line_type.__name__} has no field {', '.join(line.model_extra)}")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.path, "a", encoding="utf-8") as f:
            f.write(redact(dumps(line.model_dump(mode="json", exclude_unset=True))) + "\n")
        if not line.error:
            self.done[self.key_of(line)] = line
        return line


def record_history(path: Path, manifest_type: type[PosthocManifestT], entry: JudgeInvocation | BsrInvocation,
                   **fields: Any) -> PosthocManifestT:
    """Update a pipeline's manifest.json: the latest fields (validated as they are set; keys this
    invocation does not give stay as they were), and one history entry per invocation."""
    manifest = read_posthoc_manifest(path, manifest_type) or manifest_type(history=[])
    for name, value in fields.items():
        setattr(manifest, name, value)
    entry.finished_at = datetime.now(timezone.utc).isoformat()
    manifest.history = [*manifest.history, entry]  # assigned, so an entry of the other pipeline is refused
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(manifest_json(manifest))
    return manifest
