"""What the guard's check exec costs the machine, part by part (benchmarks/README.md).

The check after the agent phase (runner/guard.py: the toolchain's digests, the mount points,
the changed paths, the removal of compiled modules, the process listing, the artifacts probe) is one exec, and so is the
baseline before it. This runs the whole check and each part alone in one container per image,
interleaved with a bare exec (`true`), and reports the machine's CPU (/proc/stat) per exec: what
each part adds to a bare exec. With `--other PATH` (another checkout's runner/guard_shell.py, or its
runner/guard.py before 11fe6f9 moved the scripts out of it) the whole check of that version runs
interleaved too, so two versions compare within the same minutes. A later checkout's guard.py
would import this checkout's guard_shell, and so compare the check with itself.

Writes benchmarks/out/guard_snapshot.json. Run:
    .venv/bin/python benchmarks/bench_guard_snapshot.py [--reps 30] [--other OLD/tbscale/runner/guard_shell.py]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import shlex
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_sandbox import MachineCPU  # noqa: E402
from tbscale.runner import build_tools, guard_shell, npm_project, verifier_reads  # noqa: E402

OUT = Path(__file__).resolve().parent / "out"
IMAGES = ("debian:bookworm-slim", "python:3.11-slim-bookworm")
TESTS = "mkdir -p /logs/verifier /tests && printf '#!/bin/sh\\necho hi\\n' > /tests/test.sh && chmod +x /tests/test.sh"


def scripts(module) -> dict[str, str]:
    """The whole check as VerifierGuard._snapshot(since=..., processes=True, probe=True, bytecode=True)
    runs it for the trivial task's verifier, and its parts. `module` is runner/guard_shell.py, or
    an older version's runner/guard.py, where the scripts had a leading underscore (and a version
    from before the clock and the mount points had their own has them at the end of its snapshot)."""
    def part(name: str) -> str:
        return getattr(module, name, None) or getattr(module, "_" + name, "")

    names = [*verifier_reads.DEFAULT_TOOLS, "/tests/test.sh", "grep"]
    head = "set -- " + " ".join(shlex.quote(n) for n in names) + "\n"
    # the seal's removal of compiled modules (after the changes' listing), and of a node_modules the agent made
    bytecode = part("BYTECODE") + (npm_project.NPM_CLEAR if module is guard_shell else "")
    # the scripts sourced, the workdir's project, npm's and the build tools' files (go, cargo, cmake;
    # since 2026-12-05, in their own modules): each runs only where its variable is set (HARBOR)
    npm_go = (npm_project.NPM + "".join(t.shell for t in build_tools.TOOLS)) if module is guard_shell else ""
    sourced = part("SOURCED") + part("PROJECT") + npm_go
    copies = part("STARTUP_COPIES")  # setuptools' start-up files, digested (since 2026-12-05), after CHANGES
    return {"check": head + part("SNAPSHOT") + part("CLOCK") + part("MOUNTS") + sourced + part("CHANGES") + copies + bytecode
            + part("PROCESSES") + part("ARTIFACTS_PROBE"),
            "tools": head + part("SNAPSHOT"), "clock": part("CLOCK"), "mounts": part("MOUNTS"),
            "changes": part("CHANGES"), "bytecode": part("CHANGES") + bytecode,
            "processes": part("PROCESSES"), "probe": part("ARTIFACTS_PROBE"), "bare": "true"}


# Harbor's test script (its cookbook's, the installer's URL kept): the check for it digests its
# programs in the folder its env script puts first on PATH too, and that script's lines.
HARBOR_TEST = ("#!/bin/bash\napt-get update\napt-get install -y curl\ncurl -LsSf https://astral.sh/uv/0.9.7/install.sh | sh\n"
               "source $HOME/.local/bin/env\nuvx -p 3.13 -w pytest==8.4.1 pytest /tests/test_outputs.py -rA\n")
ENV_SCRIPT = "case \":${PATH}:\" in\n*:\"$HOME/.local/bin\":*)\n;;\n*)\nexport PATH=\"$HOME/.local/bin:$PATH\"\n;;\nesac\n"


def harbor(check: str, this_version: bool = True) -> tuple[str, dict[str, str]]:
    """`check` with HARBOR_TEST's programs, and the variable that has it digest the env script; for
    a version before 2026-12-05 (`this_version` False), the programs as it named them: none in the
    env script's folder, no env script."""
    import tempfile
    from types import SimpleNamespace

    with tempfile.TemporaryDirectory() as tests:
        (Path(tests) / "test.sh").write_text(HARBOR_TEST)
        spec = SimpleNamespace(command="bash /tests/test.sh", tests_dirs=[Path(tests)], tests_mount="/tests")
        names, sourced = verifier_reads.tool_names(spec), verifier_reads.sourced_scripts(spec)
    body = check.split("\n", 1)[1]  # what follows the `set --` line of the names
    if not this_version:
        names, sourced = [n for n in names if not n.startswith("~/")], []
    return "set -- " + " ".join(shlex.quote(n) for n in names) + "\n" + body, {"TBSCALE_SOURCED": "\n".join(sourced)}


# terminal-bench's task template: `uv add` and `uv run` use the workdir's `.venv` (made in the
# container where it has a Python), whose programs and Python folders the check takes too.
TEMPLATE_TEST = "#!/bin/bash\nuv init\nuv add pytest==8.4.1\nuv run pytest /tests/test_outputs.py -rA\n"


def template(check: str, this_version: bool = True) -> tuple[str, dict[str, str]]:
    """`check` with TEMPLATE_TEST's programs, and the variable that names the `.venv` its uv commands
    use; for a version before 2026-12-05, the programs it named (none in the `.venv`)."""
    import tempfile
    from types import SimpleNamespace

    with tempfile.TemporaryDirectory() as tests:
        (Path(tests) / "test.sh").write_text(TEMPLATE_TEST)
        spec = SimpleNamespace(command="bash /tests/test.sh", tests_dirs=[Path(tests)], tests_mount="/tests")
        names = verifier_reads.tool_names(spec)
        envs = verifier_reads.project_envs([TEMPLATE_TEST], "/tests")
    body = check.split("\n", 1)[1]
    if not this_version:
        names, envs = [n for n in names if not n.startswith(".venv/")], []
    return "set -- " + " ".join(shlex.quote(n) for n in names) + "\n" + body, {"TBSCALE_PROJECT_ENVS": "\n".join(envs)}


def measure(image: str, runs: dict[str, str | tuple[str, dict[str, str]]], reps: int) -> dict[str, float]:
    import docker

    from tbscale.environments.owner import owner_labels

    # this process's, so that a run's orphan sweep meanwhile leaves it (an image's labels are its builder's)
    box = docker.from_env().containers.run(image, "sleep infinity", detach=True, init=True, labels=owner_labels())
    try:
        box.exec_run(["sh", "-c", TESTS + " && mkdir -p /root/.local/bin /app && printf '%s' \"$E\" > /root/.local/bin/env"
                      " && { ! command -v python3 >/dev/null || python3 -m venv /app/.venv; }"],
                     environment={"E": ENV_SCRIPT})
        env = {"TBSCALE_TESTS": "/tests", "TBSCALE_SINCE": f"{time.time() - 5:.3f}", "TBSCALE_WORKDIR": "/app"}
        cpu: dict[str, list[float]] = {k: [] for k in runs}
        for _ in range(reps):
            for name, run in runs.items():
                script, more = run if isinstance(run, tuple) else (run, {})
                with MachineCPU() as used:
                    box.exec_run(["sh", "-c", script], environment={**env, **more})
                cpu[name].append(used.user + used.system)
        return {name: round(statistics.mean(v), 4) for name, v in cpu.items()}
    finally:
        box.remove(force=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=30)
    ap.add_argument("--other", type=Path, help="another checkout's tbscale/runner/guard_shell.py (its guard.py before 11fe6f9)")
    args = ap.parse_args()
    runs: dict[str, str | tuple[str, dict[str, str]]] = {**scripts(guard_shell)}
    runs["check_harbor"] = harbor(runs["check"])
    runs["check_template"] = template(runs["check"])
    if args.other:
        spec = importlib.util.spec_from_file_location("other_guard", args.other)
        other = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(other)
        runs["other_check"] = scripts(other)["check"]
        runs["other_check_harbor"] = harbor(runs["other_check"], this_version=False)
        runs["other_check_template"] = template(runs["other_check"], this_version=False)
    out = {}
    for image in IMAGES:
        out[image] = measure(image, runs, args.reps)
        bare = out[image]["bare"]
        print(f"{image}: CPU-s an exec (mean of {args.reps}); what each adds to a bare exec ({bare:.3f})")
        for name, value in out[image].items():
            print(f"  {name:12s} {value:.3f}  +{value - bare:.3f}")
    OUT.mkdir(exist_ok=True)
    (OUT / "guard_snapshot.json").write_text(json.dumps({"reps": args.reps, "images": out}, indent=1))


if __name__ == "__main__":
    main()
