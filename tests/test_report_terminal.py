"""`tbscale report` in the terminal and for scripts: tables laid out for the console's width (key
columns first, the rest left out and named), files that keep every column, and `--format md|csv|json`
printing one format alone on stdout."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from rich.console import Console

from tbscale.analysis.context import Section
from tbscale.analysis.report import build_report, folded, terminal_table
from test_adaptive_report import write_run


def render_at(run: Path, width: int, **kw) -> str:
    buf = io.StringIO()
    build_report([run], Console(file=buf, width=width, color_system=None), plots=False, **kw)
    return buf.getvalue()


@pytest.mark.parametrize("width", [80, 120])
def test_report_fits_the_width(tmp_path: Path, width: int) -> None:
    run = write_run(tmp_path)
    text = render_at(run, width, compare=["turn_bon_n4", "turn_bon_n4_adaptive"])
    lines = text.splitlines()
    too_long = [line for line in lines if len(line) > width]
    assert not too_long, "\n".join(too_long)
    # The key columns lead every table; the adaptive sections are there.
    header = next(line for line in lines if "setting" in line and "pass@1" in line)
    assert header.index("setting") < header.index("pass@1 (95% CI)")
    assert "Adaptive Turn-BoN: how choice turns were decided" in text
    assert "Adaptive vs plain Turn-BoN" in text
    assert "diff [95% CI]" in text  # a difference and its interval folded into one column
    # What the terminal leaves out is named, and is in the files.
    assert "Not shown here" in text
    summary = pd.read_csv(run / "report" / "summary.csv")
    assert {"trajectory", "generator", "selector", "turns_solved", "fallback"} <= set(summary.columns)
    compare = pd.read_csv(run / "report" / "compare.csv")
    assert {"diff", "ci_lo", "ci_hi"} <= set(compare.columns)


def test_narrower_consoles_leave_out_more(tmp_path: Path) -> None:
    run = write_run(tmp_path)
    frame = build_report([run], Console(file=io.StringIO(), width=200), plots=False).sections[0]
    assert frame.key == "summary"
    kept = {}
    for width in (80, 120, 250):
        table, dropped = terminal_table(frame, Console(file=io.StringIO(), width=width))
        kept[width] = [c.header for c in table.columns]
        assert kept[width][:2] == ["setting", "pass@1 (95% CI)"]
        if width == 250:
            assert dropped == []
    assert len(kept[80]) < len(kept[120]) < len(kept[250])


def test_long_values_fold_within_the_width() -> None:
    frame = pd.DataFrame({"setting": ["turn_bon_n4_adaptive_with_a_rather_long_name_" * 3],
                          "note": ["x" * 300], "value": [0.5]})
    buf = io.StringIO()
    console = Console(file=buf, width=60, color_system=None)
    table, _ = terminal_table(Section("other", "A table with long cells", frame), console)
    console.print(table)
    assert max(len(line) for line in buf.getvalue().splitlines()) <= 60


def test_fold_keeps_percentages_and_gaps() -> None:
    frame = pd.DataFrame({"behaviour": ["a", "b"], "difference": [0.1, float("nan")], "ci_lo": [0.05, 1.0],
                          "ci_hi": [0.2, 2.0], "p_value": [0.01, 1.0]})
    out = folded(Section("behaviour_preference", "t", frame, percent_cols=("difference",))).frame
    assert list(out.columns) == ["behaviour", "difference [95% CI]", "p_value"]
    assert list(out["difference [95% CI]"]) == ["10.0% [5.0%, 20.0%]", "-"]


# ---- the command line ---------------------------------------------------------------------------

def cli(*args: str):
    """`tbscale report ... --no-plots` in this process (stdout and stderr apart, neither a terminal)."""
    from typer.testing import CliRunner

    from tbscale.cli import app

    res = CliRunner().invoke(app, ["report", *args, "--no-plots"], env={"COLUMNS": None})
    res.returncode = res.exit_code
    return res


def cli_process(*args: str, columns: str | None = None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    if columns is not None:
        env["COLUMNS"] = columns
    return subprocess.run([sys.executable, "-m", "tbscale.cli", "report", *args, "--no-plots"],
                          capture_output=True, text=True, env=env)


@pytest.mark.parametrize("columns, width", [("80", 80), (None, 120)])
def test_cli_width_from_columns_or_120(tmp_path: Path, columns: str | None, width: int) -> None:
    res = cli_process(str(write_run(tmp_path)), columns=columns)
    assert res.returncode == 0, res.stderr
    lines = res.stdout.splitlines()
    assert max(len(line) for line in lines) <= width
    assert max(len(line) for line in lines) > width - 10  # the width is used, not a narrower default
    assert "SIMULATED MODELS" in res.stdout


def test_format_md_prints_report_md_alone(tmp_path: Path) -> None:
    run = write_run(tmp_path)
    res = cli(str(run), "--format", "md")
    assert res.returncode == 0, res.stderr
    assert res.stdout == (run / "report" / "report.md").read_text()
    assert res.stdout.startswith("# tbscale report")
    assert "SIMULATED MODELS" in res.stderr and "report written to" in res.stderr  # messages on stderr
    assert "┃" not in res.stdout  # no terminal table


def test_format_csv_prints_every_table_under_its_name(tmp_path: Path) -> None:
    run = write_run(tmp_path)
    res = cli(str(run), "--format", "csv", "--compare", "turn_bon_n4", "turn_bon_n4_adaptive")
    assert res.returncode == 0, res.stderr
    blocks = [b for b in res.stdout.split("# table: ") if b.strip()]
    assert not res.stdout.split("# table: ")[0].strip()  # nothing before the first table
    names = []
    for block in blocks:
        name, body = block.split("\n", 1)
        names.append(name)
        got = pd.read_csv(io.StringIO(body))
        pd.testing.assert_frame_equal(got, pd.read_csv(run / "report" / f"{name}.csv"))
    assert names[:2] == ["summary", "pass_at_k"]
    assert {"compare", "adaptive_paths", "adaptive_vs_plain"} <= set(names)
    assert "SIMULATED MODELS" in res.stderr


def test_format_json_prints_summary_json(tmp_path: Path) -> None:
    run = write_run(tmp_path)
    res = cli(str(run), "--format", "json")
    assert res.returncode == 0, res.stderr
    data = json.loads(res.stdout)
    assert data == json.loads((run / "report" / "summary.json").read_text())
    assert data["simulated"] and "adaptive_vs_plain" in data["tables"]


def test_unknown_format_is_one_line(tmp_path: Path) -> None:
    res = cli(str(write_run(tmp_path)), "--format", "xml")
    assert res.returncode == 2 and res.stdout == ""
    assert "--format: 'xml' is not one of md, csv, json" in res.stderr


def test_adaptive_pair_option(tmp_path: Path) -> None:
    run = write_run(tmp_path)
    res = cli(str(run), "--format", "json", "--adaptive-pair", "turn_bon_n4_random", "turn_bon_n4_adaptive")
    assert res.returncode == 0, res.stderr
    rows = json.loads(res.stdout)["tables"]["adaptive_vs_plain"]
    assert {(r["setting"], r["vs"]) for r in rows} == {("turn_bon_n4_adaptive", "turn_bon_n4_random")}
    bad = cli(str(run), "--adaptive-pair", "turn_bon_n4_adaptive", "turn_bon_n4")
    assert bad.returncode == 2 and "is not an adaptive Turn-BoN setting" in bad.stderr
