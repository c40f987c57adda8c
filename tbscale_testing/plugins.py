"""Installing a plugin the way pip would, as far as Python's entry points go: a distribution's
metadata (`<name>-<version>.dist-info` with METADATA and entry_points.txt) in a folder that is then
put on `sys.path` or PYTHONPATH. `importlib.metadata.entry_points()` finds it there like any
installed package, so a test reaches tbscale's plugin loading through the real path without
`pip install` and without touching the environment it runs in."""

from __future__ import annotations

from pathlib import Path


def write_distribution(site: Path, name: str, entry_points: dict[str, dict[str, str]], version: str = "0.1") -> Path:
    """`entry_points`: group -> {entry point name: "module" or "module:attr"}. Returns the dist-info folder."""
    info = site / f"{name.replace('-', '_')}-{version}.dist-info"
    info.mkdir(parents=True, exist_ok=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    lines = []
    for group, eps in entry_points.items():
        lines.append(f"[{group}]")
        lines += [f"{ep} = {target}" for ep, target in eps.items()]
        lines.append("")
    (info / "entry_points.txt").write_text("\n".join(lines))
    return info
