"""Reading task files: UTF-8 only, one-line errors naming the file; docker compose files;
instruction text."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

from tbscale.errors import TbscaleError

COMPOSE_NAMES = ("docker-compose.yaml", "docker-compose.yml", "compose.yaml", "compose.yml")
_CANARY = re.compile(r"^(<!--.*canary.*-->|#.*canary.*)$", re.IGNORECASE)


def read_text(path: Path) -> str:
    """The file as text; a file that is not UTF-8 is a one-line error naming it."""
    try:
        data = path.read_bytes()
    except OSError as e:
        raise TbscaleError(f"{path}: cannot read ({e.strerror or e})") from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise TbscaleError(f"{path}: not UTF-8 text (invalid byte 0x{data[e.start]:02x} at offset {e.start})") from None


def strip_canary(text: str) -> str:
    """Drop leading canary comment lines (`# ... canary ...`, `<!-- ... canary ... -->`) and the
    blank lines after them: provenance markers that are not part of the instruction."""
    lines = text.split("\n")
    i = 0
    while i < len(lines) and _CANARY.match(lines[i].strip()):
        i += 1
    if i:
        while i < len(lines) and not lines[i].strip():
            i += 1
    return "\n".join(lines[i:])


def read_instruction(path: Path, what: str = "a Harbor task needs its instruction", allow_empty: bool = False) -> str:
    """The instruction text (leading canary lines dropped, stripped). An empty one is an error
    unless `allow_empty` (Harbor runs a task whose instruction.md is empty, as `harbor tasks init`
    writes it)."""
    if not path.is_file():
        raise TbscaleError(f"{path}: missing ({what})")
    text = strip_canary(read_text(path)).strip()
    if not text and not allow_empty:
        raise TbscaleError(f"{path}: empty instruction")
    return text


def find_compose_file(folder: Path) -> Path | None:
    found = [folder / n for n in COMPOSE_NAMES if (folder / n).is_file()]
    if len(found) > 1:
        raise TbscaleError(f"{folder}: more than one compose file ({', '.join(p.name for p in found)}); keep one")
    return found[0] if found else None


def read_compose(path: Path) -> dict[str, dict[str, Any]]:
    """The `services` mapping of a compose file (service name -> definition)."""
    try:
        data = yaml.safe_load(read_text(path))
    except yaml.YAMLError as e:
        raise TbscaleError(f"{path}: not valid YAML ({getattr(e, 'problem', None) or e})") from None
    if not isinstance(data, dict) or not isinstance(data.get("services"), dict) or not data["services"]:
        raise TbscaleError(f"{path}: a compose file needs a `services` mapping")
    services = data["services"]
    for name, spec in services.items():
        if spec is not None and not isinstance(spec, dict):
            raise TbscaleError(f"{path}: services.{name} must be a mapping")
    return {str(k): (v or {}) for k, v in services.items()}
