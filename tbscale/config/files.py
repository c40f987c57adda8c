"""Reading YAML files into validated models; every problem is one line naming the file and key."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from tbscale.config.experiment import Experiment
from tbscale.config.yamlfile import read_yaml_file
from tbscale.errors import TbscaleError


def format_validation_error(path: Path | str, err: ValidationError) -> str:
    """`<file>: <key.path>: <problem>` for the first error, with a count of the others."""
    first = err.errors()[0]
    loc = ".".join(str(p) if not isinstance(p, int) else f"[{p}]" for p in first["loc"]).replace(".[", "[")
    msg = first["msg"].removeprefix("Value error, ")
    if first["type"] == "extra_forbidden":
        msg = "unknown key"
    where = f"{path}: {loc}: " if loc else f"{path}: "
    more = f" (and {len(err.errors()) - 1} more)" if len(err.errors()) > 1 else ""
    return f"{where}{msg}{more}"


def read_yaml_mapping(path: str | Path) -> dict[str, Any]:
    """A YAML file whose top level is a mapping, read strictly (config/yamlfile.py: duplicate keys,
    size and alias bounds); every problem is a one-line TbscaleError."""
    path = Path(path)
    raw = read_yaml_file(path)
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise TbscaleError(f"{path}: the top level must be a mapping of keys")
    return raw


def validate_file(model: type[BaseModel], raw: dict[str, Any], path: Path | str) -> Any:
    try:
        return model.model_validate(raw)
    except ValidationError as e:
        raise TbscaleError(format_validation_error(path, e)) from None


def read_experiment(path: str | Path, overrides: dict[str, Any] | None = None) -> Experiment:
    """Read and validate an experiment YAML against the schema (names are resolved later).

    A relative `tasks.path` and the relative files under `prompts:` are read from the config's
    folder when they exist there (a config names paths beside itself), else from the working
    directory."""
    path = Path(path)
    raw = read_yaml_mapping(path)
    raw.update(overrides or {})
    exp: Experiment = validate_file(Experiment, raw, path)
    exp.tasks.path = beside_config(path, exp.tasks.path)
    if exp.tasks.registry is not None and "://" not in exp.tasks.registry:
        exp.tasks.registry = beside_config(path, exp.tasks.registry)
    exp.prompts = {name: beside_config(path, file) for name, file in exp.prompts.items()}
    return exp


def beside_config(config: Path, name: str | None) -> str | None:
    """A relative path named in a config: beside the config when it exists there, else as given."""
    if name is None or Path(name).is_absolute():
        return name
    candidate = config.parent / name
    return str(candidate) if candidate.exists() else name


def check_tasks_path(exp: Experiment, config: Path | str, where: str | None = None) -> None:
    """A `tasks.path` that names nothing, as a one-line error naming the config (or `where`, a
    sweep's grid point) and where it looked. `tbscale run` and `sweep` check it before they make
    anything; `models check` and `clean --config` do not need the tasks."""
    name = exp.tasks.path
    if name is None or Path(name).exists():
        return
    looked = "" if Path(name).is_absolute() else \
        f" (looked beside the config, {os.path.abspath(Path(config).parent / name)}, and in the working directory)"
    raise TbscaleError(f"{where or config}: tasks.path: {name}: no such file or directory{looked}")
