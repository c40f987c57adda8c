"""The package's shape: layers that only point down (the import-linter contract in
pyproject.toml), no import cycles, no module over 600 lines, and production code that never
loads the simulator unless a config names a sim/ model."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
MAX_MODULE_LINES = 600


def test_layer_contract_holds() -> None:
    lint = shutil.which("lint-imports", path=str(Path(sys.executable).parent)) or shutil.which("lint-imports")
    assert lint, "import-linter is a dev dependency: pip install -e '.[dev]'"
    res = subprocess.run([lint], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stdout[-3000:]
    assert "2 kept, 0 broken" in res.stdout


def test_no_import_cycles() -> None:
    """Strongly connected components of the module graph, function-level imports included."""
    import grimp

    from tbscale.strategies.catalog import builtin_modules

    graph = grimp.build_graph("tbscale", include_external_packages=False)
    modules = sorted(graph.modules)
    edges = {m: graph.find_modules_directly_imported_by(m) for m in modules}
    # The catalog imports its package's modules by name (strategies/catalog.py): edges all the same.
    edges["tbscale.strategies.catalog"] = edges["tbscale.strategies.catalog"] | set(builtin_modules())
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []
    counter = [0]

    def visit(v: str) -> None:  # Tarjan's algorithm
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in edges[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                cycles.append(sorted(comp))

    sys.setrecursionlimit(10_000)
    for m in modules:
        if m not in index:
            visit(m)
    assert cycles == []


def test_no_module_is_over_600_lines() -> None:
    sizes = {str(p.relative_to(ROOT)): p.read_text().count("\n")
             for pkg in ("tbscale", "tbscale_sim", "tbscale_testing") for p in (ROOT / pkg).rglob("*.py")}
    assert {p: n for p, n in sizes.items() if n > MAX_MODULE_LINES} == {}


# String constants outside environments/ that equal a backend's name but do not name the backend:
# the docker SDK's package, whose version the manifest records, and SWE-bench's `build: docker`
# (build a task repository's Dockerfile with the engine's builder).
NOT_A_BACKEND = {("tbscale/runner/rundir.py", "docker"), ("tbscale/tasks/swebench/config.py", "docker")}


def test_no_backend_is_named_outside_environments() -> None:
    """Issue 20's backend-neutral runtime: the config's default backend, the CLI's flags and the
    runner name no concrete backend or backend option; environments/registry.py holds the names."""
    import ast

    from tbscale.environments.registry import _BUILTIN, _docker

    flat_keys = set(_docker().flat_keys)
    names = set(_BUILTIN) | flat_keys
    found = set()
    for path in sorted((ROOT / "tbscale").rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        if rel.startswith("tbscale/environments/"):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Constant) and node.value in names:
                found.add((rel, node.value))
            elif isinstance(node, ast.arg) and node.arg in flat_keys:  # a CLI flag is a parameter's name
                found.add((rel, node.arg))
    assert names >= {"docker", "compose", "docker_host"}
    assert found - NOT_A_BACKEND == set()


PROBE = textwrap.dedent("""
    import asyncio, json, sys
    from pathlib import Path
    import yaml
    from tbscale_testing import LoopbackModel
    from tbscale_testing.tasks import write_harbor_task
    root = Path(sys.argv[1])
    write_harbor_task(root / "tasks", "write-done")
    with LoopbackModel(lambda body: "THOUGHT: done\\n\\n```bash\\necho done > /app/out.txt\\n```") as srv:
        model = {"model": sys.argv[2]} if sys.argv[2].startswith("sim/") else \\
            {"model": sys.argv[2], "api_base": srv.base_url}
        (root / "exp.yaml").write_text(yaml.safe_dump({
            "name": "probe", "tasks": {"path": str(root / "tasks")}, "output_dir": str(root / "results"),
            "models": {"m": model}, "settings": [{"name": "s", "generator": "m"}], "limits": {"max_turns": 2}}))
        from tbscale.cli import app
        from typer.testing import CliRunner
        res = CliRunner().invoke(app, ["run", str(root / "exp.yaml")])
    print(json.dumps({"exit": res.exit_code, "sim": sorted(m for m in sys.modules if m.startswith("tbscale_sim"))}))
""")


@pytest.mark.docker
@pytest.mark.parametrize("model, expect_sim", [("openai/real-model", False), ("sim/policy", True)])
def test_the_simulator_is_loaded_only_for_sim_models(tmp_path: Path, model: str, expect_sim: bool) -> None:
    import json

    env = {**os.environ, "NO_PROXY": "127.0.0.1,localhost"}
    res = subprocess.run([sys.executable, "-c", PROBE, str(tmp_path), model], capture_output=True, text=True,
                         timeout=600, env=env)
    assert res.returncode == 0, res.stderr[-3000:]
    got = json.loads(res.stdout.strip().splitlines()[-1])
    assert got["exit"] in (0, 3), res.stdout[-2000:]  # the run went through (the model may fail the task)
    assert bool(got["sim"]) is expect_sim, got
