"""`tbscale clean`: remove what tbscale processes that are gone left behind, through the backend
that made it (environments/registry.py): the default backend, another one by name with its
options, or the one a config's `environment:` names."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from tbscale.cli.app import app, console, fail, out


def _flat_flags(args: list[str]) -> dict[str, str]:
    """The flags beside the command's own, `--some-key VALUE` or `--some-key=VALUE`: each is the
    backend's flat key `some_key` (its `flat_keys`), as a config spells it beside `options:`."""
    flat: dict[str, str] = {}
    rest = list(args)
    while rest:
        word = rest.pop(0)
        if not word.startswith("--") or len(word) < 3:
            fail(f"{word}: unexpected argument (see tbscale clean --help)")
        name, sep, value = word[2:].partition("=")
        if not sep:
            if not rest or rest[0].startswith("--"):
                fail(f"--{name}: needs a value")
            value = rest.pop(0)
        flat[name.replace("-", "_")] = value
    return flat


def _environment(config: Path | None, backend: str | None, option: list[str], flat: dict[str, str]):
    """The `environment:` section whose backend cleans: a config's, or one made of the flags."""
    from tbscale.config.experiment import EnvironmentConfig
    from tbscale.environments import DEFAULT_BACKEND, BackendOptionsError, backend_names
    from tbscale.environments.registry import UnknownFlatKey, environment_options

    if config is not None:
        if backend is not None or option or flat:
            fail("--config: give either a config or the backend's flags (--backend, --option, ...), not both")
        from tbscale.runner import load_experiment

        return load_experiment(config).environment
    name = backend or DEFAULT_BACKEND
    if name not in backend_names():
        fail(f"--backend: unknown backend {name!r} (known: {', '.join(backend_names())})")
    options = {}
    for text in option:
        key, sep, value = text.partition("=")
        if not sep or not key:
            fail(f"--option: {text!r} is not key=value")
        options[key] = value
    for key in flat:  # a key of the section itself (`network`, `pids_limit`) is no backend's
        if key in EnvironmentConfig.model_fields:
            fail(f"--{key.replace('_', '-')}: not an option of tbscale clean (see tbscale clean --help)")
    env = EnvironmentConfig.model_validate({"backend": name, "options": options, **flat})
    try:
        environment_options(env)
    except UnknownFlatKey as e:  # a flag is not a key of a section
        fail(f"--{e.key.replace('_', '-')}: the {name} backend takes no such option ({e.takes})")
    except BackendOptionsError as e:
        key, _, problem = str(e).partition(": ")
        flag = f"--{key.replace('_', '-')}" if not key.startswith("options.") else f"--option {key[8:]}"
        fail(f"{flag}: {problem}")
    return env


@app.command(context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
def clean(ctx: typer.Context,
          all_sessions: bool = typer.Option(False, "--all/--orphans",
                                           help="every tbscale environment the backend holds, live runs' too (asks "
                                                "first); default: only those whose owning process is gone"),
          yes: bool = typer.Option(False, "--yes", "-y", help="with --all: remove without asking"),
          run: Optional[list[Path]] = typer.Option(None, "--run", help="also remove this run folder's environments "
                                                                    "and networks while it is running (repeatable)"),
          label: Optional[list[str]] = typer.Option(None, "--label", help="only resources carrying this label "
                                                                        "(key or key=value; repeatable)"),
          images: bool = typer.Option(False, "--images", help="also remove images tbscale built whose builder is "
                                                             "gone, that no environment uses and no trial used lately"),
          config: Optional[Path] = typer.Option(None, "--config", help="clean where this experiment's "
                                                                     "`environment:` runs (its backend and options)"),
          backend: Optional[str] = typer.Option(None, "--backend", help="a registered backend (unset: the "
                                                                        "registry's default, docs/configuration.md)"),
          option: Optional[list[str]] = typer.Option(None, "--option", help="one of the backend's options, "
                                                                          "key=value (repeatable)")):
    """Remove what tbscale processes that are gone left behind: containers (a compose project whole),
    the networks made for them, and with --images the images they built. Every resource carries its
    owner (host, pid, process start time): a live run's are left alone unless the run is named.

    Any other flag, `--some-key VALUE`, is the backend's key `some_key` as a config gives it beside
    `options:` (each backend's are in docs/configuration.md)."""
    for text in label or []:
        if not text or "," in text or text.startswith("="):
            fail(f"--label: {text!r} is not key or key=value")
    from tbscale.environments import open_backend

    chosen = open_backend(_environment(config, backend, option or [], _flat_flags(ctx.args)))
    if all_sessions:
        if not yes:
            try:
                sure = typer.confirm("Remove every tbscale container on this engine, including those of runs in "
                                     "progress?", err=True)
            except typer.Abort:  # no answer (stdin closed): the prompt's line is ended first
                console.print()
                sure = False
            if not sure:
                fail("--all: not confirmed, nothing removed (add --yes to confirm without a prompt)")
        out.print(f"removed {chosen.clean(every=True, labels=label or []).containers} containers")
        return
    runs = [str(Path(r).resolve()) for r in run or []]
    result = chosen.clean(runs=runs, labels=label or [], images=images)
    out.print(f"removed {result.containers} containers and {result.networks} networks"
              + (f" and {result.images} images" if images else "")
              + (f" and {result.snapshots} snapshot images" if result.snapshots else ""), highlight=False)
    for who, n in sorted(result.kept.items()):
        out.print(f"kept {n} containers of a live or unknown owner ({who}); `tbscale clean --run RUN` removes a "
                  "live run's", highlight=False, soft_wrap=True)
