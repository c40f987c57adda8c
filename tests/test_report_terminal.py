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
from hypothesis import given, settings
from hypothesis import strategies as st
from rich.console import Console

from tbscale.analysis.context import Section
from tbscale.analysis.report import TERMINAL_COLUMNS, build_report, folded, column_widths, rich_table, table_width, terminal_table
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


@pytest.mark.parametrize("columns, width, process", [("80", 80, True), (None, 120, False)])
def test_cli_width_from_columns_or_120(tmp_path: Path, columns: str | None, width: int, process: bool) -> None:
    # COLUMNS as a shell gives it to a process of its own; without it, the same code in this process
    run = str(write_run(tmp_path))
    res = cli_process(run, columns=columns) if process else cli(run)
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


# Cell text as reports have it, and what could trip a count of widths: wide and combining
# characters, line breaks, markup-like brackets, empty cells.
CELL_TEXT = st.lists(st.sampled_from(list("ab1.%-, []/\n") + ["中", "é", "\u0301", "[bold]", "[/]", "✓"]),
                     max_size=8).map("".join)
# Headers are the report's own column names (markup is read in them, as rich reads a header).
HEADER = st.lists(st.sampled_from(["pass@1", " (95% CI)", " [95% CI]", "=", "中", "✓", "_", "k"]), max_size=4).map("".join)


@settings(max_examples=120, deadline=None)
@given(headers=st.lists(HEADER, min_size=1, max_size=6, unique=True),
       rows=st.integers(0, 4), cells=st.data(), console_width=st.integers(20, 200))
def test_table_width_is_what_rich_measures(headers: list[str], rows: int, cells, console_width: int) -> None:
    frame = pd.DataFrame({h: [cells.draw(CELL_TEXT) for _ in range(rows)] for h in headers}, dtype=object)
    table = rich_table(Section("t", "a title", frame, None, set()))
    console = Console(file=io.StringIO(), width=console_width)
    unbounded = console.options.update_width(1_000_000)
    assert table_width(table, column_widths(table, console)) == console.measure(table, options=unbounded).maximum


def test_terminal_table_drops_what_rich_measure_would(tmp_path: Path) -> None:
    """The columns each section keeps at each width are those a loop measuring with rich keeps."""
    run = write_run(tmp_path)
    sections = build_report([run], Console(file=io.StringIO(), width=200), plots=False,
                            compare=["turn_bon_n4", "turn_bon_n4_adaptive"]).sections
    assert len(sections) >= 8
    # Numbers first and text last: once the text is left out, pandas hands the rows over as floats
    # and 1234567 reads "1,234,567", wider than in the table that keeps the text.
    numbers = pd.DataFrame({"k": [1, 2], "n": [1234567, 99999], "m": [0.5, 0.25], "why": ["a long note " * 3] * 2})
    numbers = Section("numbers", "numbers", numbers, None, set())
    changed = 0

    def render(table) -> str:
        out = Console(file=io.StringIO(), width=400, color_system=None)
        out.print(table)
        return out.file.getvalue()

    for width in (40, 80, 120, *range(20, 40)):
        console = Console(file=io.StringIO(), width=width)
        unbounded = console.options.update_width(1_000_000)
        for section in sections if width in (40, 80, 120) else [numbers]:
            table, dropped = terminal_table(section, console)
            f = folded(section)
            keep = [c for c in TERMINAL_COLUMNS.get(f.key, ()) if c in f.frame.columns]
            keep += [str(c) for c in f.frame.columns if c not in keep]
            by_rich: list[str] = []
            while len(keep) > 2 and console.measure(rich_table(f, keep), options=unbounded).maximum > width:
                by_rich.insert(0, keep.pop())
            assert dropped == by_rich, (section.key, width)
            assert render(table) == render(rich_table(f, keep))  # the same table, cell for cell
            changed += bool(dropped)
    assert changed >= 6  # the widths do make sections drop columns
