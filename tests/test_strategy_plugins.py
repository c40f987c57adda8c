"""Strategies own what the rest of tbscale needs to know about them.

A strategy from another package (tbscale_testing.strategy_plugin's `knockout`) registers through
the `tbscale.strategies` entry-point group with no change to tbscale; what it declares (a staged
record, an oracle pick under a parameter name of its own) is what the trial line, the report and
the viewer follow. tbscale's own strategies declare the same way, and the rules the runner and the
report used to spell out by name give the same answers. A plugin that cannot load, or takes a name
already taken, is an error that says so; no import is hidden from the layer contract."""

from __future__ import annotations

import ast
import csv
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tbscale.strategies import RECORD_CER, RECORD_STAGED, entry, names, oracle_selects, selector_key
from tbscale_testing.plugins import write_distribution

REPO = Path(__file__).resolve().parents[1]
PLUGIN = {"tbscale.strategies": {"knockout": "tbscale_testing.strategy_plugin"}}


def plugin_env(site: Path) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)}


def python(code: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)


def tbscale(args: list[str], env: dict[str, str], timeout: float = 600) -> subprocess.CompletedProcess:
    exe = Path(sys.executable).with_name("tbscale")
    return subprocess.run([str(exe), *args], capture_output=True, text=True, env=env, timeout=timeout)


# ---- tbscale's own strategies declare what the report and the trial line need ------------------------------
def test_builtin_declarations():
    assert {"best_of_n", "pdr"} <= set(names("trajectory", record=RECORD_STAGED))
    assert "cer" in names("trajectory", record=RECORD_CER) and "single" not in names("trajectory", record=RECORD_STAGED)
    assert names("policy", baseline=True) == ["baseline"] and names("trajectory", baseline=True) == ["single"]
    assert names("policy", adaptive=True) == ["lookahead", "turn_bon"]
    assert names("policy", forks=True) == ["lookahead"]
    # A record's `kind` is the name its strategy is registered under: the report finds records by it.
    for name in names("trajectory"):
        e = entry("trajectory", name)
        if e.record is not None:
            assert getattr(e.factory, "kind", None) == name, e.origin


def test_a_settings_adaptive_parameters_are_where_its_policy_declares_them():
    from tbscale.strategies import adaptive_settings

    assert adaptive_settings("turn_bon", {"n": 4, "adaptive": {"first": 2}}) == {"first": 2}
    assert adaptive_settings("lookahead", {"n": 4, "adaptive": {"mode": "all_agree"}}) == {"mode": "all_agree"}
    assert adaptive_settings("turn_bon", {"n": 4}) is None
    assert adaptive_settings("baseline", {"adaptive": {"first": 2}}) is None  # not an adaptive policy
    assert adaptive_settings("someone-elses-policy", {"adaptive": {"first": 2}}) is None  # a run made elsewhere


def _former_oracle_rule(params: dict) -> bool:  # what runner/trial.py read before strategies declared it
    return "oracle" in {params.get(k) for k in ("selector", "select", "final")}


@pytest.mark.parametrize("name, params", [
    ("single", {}), ("best_of_n", {}), ("best_of_n", {"selector": "oracle"}), ("best_of_n", {"selector": "random"}),
    ("pdr", {}), ("pdr", {"final": "oracle"}), ("pdr", {"select": "oracle"}),
    ("pdr", {"select": "oracle", "context": "random_k"}), ("pdr", {"select": "judge", "final": "random"}),
    ("cer", {})])
def test_oracle_selection_is_declared_by_the_strategy(name, params):
    assert oracle_selects(name, params) == _former_oracle_rule(params)


def _former_selector_rule(policy: str, params: dict, generator: str | None) -> str | None:
    return params.get("selector") or params.get("verifier") or (generator if policy != "baseline" else None)


@pytest.mark.parametrize("policy, params", [
    ("baseline", {}), ("turn_bon", {}), ("turn_bon", {"selector": "sel"}), ("verify_pointwise", {}),
    ("verify_pairwise", {"verifier": "ver"}), ("verify_listwise", {"verifier": "ver"})])
def test_the_selector_model_is_declared_by_the_policy(policy, params):
    assert selector_key(policy, params, "gen") == _former_selector_rule(policy, params, "gen")


@pytest.mark.parametrize("policy, params, n", [
    ("baseline", {}, 1), ("turn_bon", {}, 4), ("turn_bon", {"n": 8}, 8), ("lookahead", {}, 4),
    ("lookahead", {"n": 2}, 2), ("verify_pointwise", {}, 4), ("verify_listwise", {"n": 6}, 6)])
def test_a_trial_lines_n_is_the_policys_with_its_defaults(policy, params, n):
    """The trial line's `n` (runner/trial_line.py) is what the turn samples: a config that leaves
    `n` out runs the policy's default, and its trial line says so (it said 1)."""
    from tbscale.strategies import candidates_per_turn

    assert candidates_per_turn(policy, params) == n


def test_a_name_is_registered_once():
    from tbscale.strategies import register_trajectory
    from tbscale.strategies.base import Params

    class P(Params):
        pass

    with pytest.raises(ValueError, match=r"trajectory 'pdr' is registered twice: by tbscale\.strategies\.pdr\.PDR "
                                         r"and by .*test_a_name_is_registered_once.<locals>.Impostor"):
        @register_trajectory("pdr", P)
        class Impostor:
            pass
    assert entry("trajectory", "pdr").factory.__module__ == "tbscale.strategies.pdr"
    with pytest.raises(ValueError, match="record must be one of staged, cer or None"):
        register_trajectory("odd", P, record="tree")


# ---- a plugin, through its entry point ----------------------------------------------------------------------
PROBE = """
import json, sys
from tbscale.strategies import RECORD_STAGED, entry, names, oracle_selects
out = {"trajectories": names("trajectory"), "staged": names("trajectory", record=RECORD_STAGED),
       "plugin_imported": "tbscale_testing.strategy_plugin" in sys.modules}
if "knockout" in out["trajectories"]:
    out["oracle"] = [oracle_selects("knockout", {"pick": p}) for p in ("rtv", "oracle")]
    out["origin"] = entry("trajectory", "knockout").origin
print(json.dumps(out))
"""


def test_a_plugin_registers_through_its_entry_point(tmp_path):
    write_distribution(tmp_path / "site", "acme-strategies", PLUGIN)
    with_plugin = json.loads(python(PROBE, plugin_env(tmp_path / "site")).stdout)
    assert with_plugin == {"trajectories": ["best_of_n", "cer", "knockout", "pdr", "single"],
                           "staged": ["best_of_n", "knockout", "pdr"], "plugin_imported": True,
                           "oracle": [False, True], "origin": "tbscale_testing.strategy_plugin.Knockout"}
    without = json.loads(python(PROBE).stdout)
    assert without == {"trajectories": ["best_of_n", "cer", "pdr", "single"], "staged": ["best_of_n", "pdr"],
                       "plugin_imported": False}


def _config(tmp_path: Path, settings: list[dict]) -> Path:
    cfg = {"name": "plugin", "tasks": {"path": str(REPO / "tasks"), "include": ["extract-emails"]}, "trials": 1,
           "concurrency": 4, "output_dir": str(tmp_path / "results"),
           "models": {"policy": {"model": "sim/refiner", "sim": {"skill": 0.6}}, "judge": {"model": "sim/judge"},
                      "summarizer": {"model": "sim/summarizer"}},
           "settings": settings, "limits": {"max_turns": 15, "command_timeout_sec": 30}}
    path = tmp_path / "plugin.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def test_a_plugin_that_cannot_load_is_a_one_line_error(tmp_path):
    write_distribution(tmp_path / "site", "acme-broken", {"tbscale.strategies": {"broken": "acme_not_installed.strats"}})
    config = _config(tmp_path, [{"name": "s", "generator": "policy"}])
    res = tbscale(["run", str(config), "--no-preflight"], plugin_env(tmp_path / "site"))
    assert res.returncode == 2, res.stdout + res.stderr
    lines = [x for x in (res.stdout + res.stderr).splitlines() if x.strip()]
    assert len(lines) == 1 and "strategy plugin 'broken'" in lines[0] and "acme_not_installed" in lines[0], lines
    assert "from acme-broken" in lines[0] and not (tmp_path / "results").exists()


def test_a_config_names_a_plugin_strategy_only_where_it_is_installed(tmp_path):
    config = _config(tmp_path, [{"name": "ko", "generator": "policy", "trajectory": {"name": "knockout", "keep": 4}}])
    res = tbscale(["run", str(config)], dict(os.environ))
    assert res.returncode == 2 and "settings[0].trajectory.name: unknown trajectory 'knockout'" in res.stdout + res.stderr
    write_distribution(tmp_path / "site", "acme-strategies", PLUGIN)
    res = tbscale(["run", str(config)], plugin_env(tmp_path / "site"))  # the plugin's own parameter check
    assert res.returncode == 2 and res.stderr == f"error: {config}: settings[0].trajectory.keep: keep (4) cannot " \
                                                 "exceed n (3)\n", res.stdout + res.stderr
    assert not (tmp_path / "results").exists()


# ---- the report follows the declarations, not names ------------------------------------------------------------
def _staged_row(kind: str) -> dict:
    atts = [{"index": i, "stage": "iter0", "passed": i == 1, "ending": "pass" if i == 1 else "wrong_submission",
             "turns": 3} for i in range(3)]
    tour = {"method": "rtv", "target": 1, "entrants": [0, 1], "rounds": [{"round": 1, "groups": [
        {"members": [0, 1], "bye": False, "votes": [], "counts": {"0": 0, "1": 2}, "winners": [1]}], "survivors": [1]}],
        "survivors": [1]}
    record = {"kind": kind, "final": 1, "stage_usage": {}, "stages": [
        {"stage": "iter0", "kind": "iteration", "attempts": [0, 1, 2]},
        {"stage": "final", "kind": "select", "selected": [1], "tournament": tour}]}
    return {"task_id": "t", "trial": 0, "passed": True, "attempts": atts, "strategy_record": record}


def test_stage_tables_read_every_strategy_that_declares_a_staged_record():
    import tbscale_testing.strategy_plugin  # noqa: F401  (registers `knockout` by its decorator)
    from tbscale.analysis import stages

    wide_pdr, _ = stages.stage_table([_staged_row("pdr")])
    wide_ko, _ = stages.stage_table([_staged_row("knockout")])
    assert wide_ko.to_dict() == wide_pdr.to_dict() and list(wide_ko.columns) == ["Iter 0", "Final"]
    assert stages.stage_table([_staged_row("not_registered")])[0].empty


# ---- the whole way: a plugin strategy runs, and the report and the viewer honour it --------------------------
def _trial_pages(view: Path) -> dict[str, dict]:
    out = {}
    for p in (view / "trials").glob("*.js"):
        m = re.fullmatch(r"tbvTrial\((\"[^\"]*\"),(.*)\);\n", p.read_text(encoding="utf-8"), re.S)
        data = json.loads(m.group(2))
        out[data["row"]["setting"]] = data
    return out


@pytest.mark.docker
@pytest.mark.slow
def test_a_plugin_strategy_runs_and_is_reported_with_no_change_to_tbscale(tmp_path):
    site = tmp_path / "site"
    write_distribution(site, "acme-strategies", PLUGIN)
    env = plugin_env(site)
    knockout = {"name": "knockout", "n": 3, "keep": 2, "votes": 2, "judge": "judge", "summarizer": "summarizer"}
    config = _config(tmp_path, [{"name": "ko_rtv", "generator": "policy", "trajectory": knockout},
                                {"name": "ko_oracle", "generator": "policy",
                                 "trajectory": {"name": "knockout", "n": 3, "keep": 2, "pick": "oracle"}}])
    res = tbscale(["run", str(config), "--no-report"], env, timeout=1200)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    run = tmp_path / "results" / "plugin"
    rows = {r["setting"]: r for r in map(json.loads, (run / "trials.jsonl").read_text().splitlines())}
    assert set(rows) == {"ko_rtv", "ko_oracle"}
    for r in rows.values():
        assert r["trajectory"] == "knockout" and r["n_attempts"] == 3 and r["strategy_record"]["kind"] == "knockout"
        assert [s["stage"] for s in r["strategy_record"]["stages"]] == ["iter0", "select_k", "final"]
    assert rows["ko_oracle"]["oracle_selection"] is True and rows["ko_rtv"]["oracle_selection"] is False

    res = tbscale(["report", str(run), "--out", str(tmp_path / "report")], env)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    with open(tmp_path / "report" / "stages.csv") as f:
        stages_rows = list(csv.DictReader(f))
    assert {r["setting"] for r in stages_rows} == {"ko_rtv", "ko_oracle (oracle upper bound)"}
    assert list(stages_rows[0]) == ["setting", "Iter 0", "Select-K", "Final"]
    assert (tmp_path / "report" / "rtv_rounds.csv").is_file()

    res = tbscale(["view", str(run)], env)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    pages = _trial_pages(run / "view")
    assert [(t["stage"], t["method"]) for t in pages["ko_rtv"]["tournaments"]] == [("select_k", "rtv"), ("final", "rtv")]
    assert pages["ko_rtv"]["tournaments"][0]["rounds"] and len(pages["ko_rtv"]["tournaments"][0]["selected"]) == 2
    assert [t["method"] for t in pages["ko_oracle"]["tournaments"]] == ["oracle", "oracle"]

    # Where the plugin is not installed the report still reads the run; only the plugin's own tables go.
    res = tbscale(["report", str(run), "--out", str(tmp_path / "report-without")], dict(os.environ))
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    assert not (tmp_path / "report-without" / "stages.csv").exists()
    assert "ko_oracle (oracle upper bound)" in (tmp_path / "report-without" / "report.md").read_text()


# ---- a new strategy of tbscale's own is one module ------------------------------------------------------------
def test_a_module_added_to_the_strategies_package_is_registered_with_no_other_change(tmp_path):
    (tmp_path / "zz_probe.py").write_text(
        "from tbscale.strategies.baseline import Baseline, BaselineParams\n"
        "from tbscale.strategies.registry import register_policy\n"
        "register_policy('zz_probe', BaselineParams)(Baseline)\n")
    code = ("import tbscale.strategies as p; p.__path__.append(%r)\n"  # as if the file were in the package's folder
            "from tbscale.strategies import entry, names\n"
            "print(names('policy')); print(entry('policy', 'zz_probe').origin)" % str(tmp_path))
    res = python(code)
    assert res.returncode == 0, res.stderr
    listed, origin = res.stdout.splitlines()
    assert "zz_probe" in listed and "'baseline'" in listed and origin == "tbscale.strategies.baseline.Baseline"


# ---- nothing hidden from the layer contract ---------------------------------------------------------------------
# environments/registry.py resolves the "module:factory" import paths a user registers a backend with
# (as Harbor's import_path does); tbscale's own backends are plain imports there. strategies/catalog.py
# imports every module of its own package, which cannot cross a layer (the test below), and the
# cycle check counts those imports (tests/test_layers.py).
IMPORTS_BY_NAME_ALLOWED = {"tbscale/environments/registry.py", "tbscale/strategies/catalog.py"}


def test_the_catalog_imports_by_name_only_the_modules_of_its_own_package():
    from tbscale.strategies import catalog

    mods = catalog.builtin_modules()
    assert {"tbscale.strategies.turn_bon", "tbscale.strategies.cer", "tbscale.strategies.registry"} <= set(mods)
    assert all(m.startswith("tbscale.strategies.") and m.count(".") == 2 for m in mods)
    files = {p.stem for p in (REPO / "tbscale" / "strategies").glob("*.py") if p.stem != "__init__"}
    assert {m.rsplit(".", 1)[1] for m in mods} == files


def test_no_module_is_imported_by_a_name_the_contract_cannot_see():
    found = set()
    for path in sorted((REPO / "tbscale").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Call):
                fn = node.func
                called = fn.attr if isinstance(fn, ast.Attribute) else fn.id if isinstance(fn, ast.Name) else ""
                if called in ("import_module", "__import__"):
                    found.add(str(path.relative_to(REPO)))
    assert found <= IMPORTS_BY_NAME_ALLOWED
