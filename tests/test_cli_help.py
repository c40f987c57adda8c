"""The help pages read as prose: a docstring's line breaks do not break a sentence there."""

from __future__ import annotations

import typer
from typer.testing import CliRunner

from tbscale.cli import app


def help_of(*args: str) -> str:
    res = CliRunner().invoke(app, [*args, "--help"], env={"COLUMNS": "250"})
    assert res.exit_code == 0, res.output
    return res.output


def test_each_command_row_of_the_listing_is_its_first_paragraph_on_one_line() -> None:
    rows = [line.strip("│ ").rstrip() for line in help_of().splitlines() if line.startswith("│ ")]
    # Wide enough that no row wraps: each command's description is one row, and it is the whole
    # first paragraph of the command's help (before, `clean` took five rows at the docstring's breaks).
    clean = [r for r in rows if r.startswith("clean ")]
    assert len(clean) == 1 and "containers (a compose project whole), the networks made for them, and with " \
                                "--images the images they built." in clean[0], rows
    names = [r.split()[0] for r in rows if r and not r.startswith("--")]
    assert {"run", "report", "clean", "view", "tasks"} <= set(names) and len(names) == len(set(names)), names


def test_a_commands_own_page_reflows_every_paragraph() -> None:
    text = " ".join(help_of("run").split())
    assert "2 bad input; 3 some trials ended in an infrastructure error; 4 a model" in text
    (line,) = [x for x in help_of("run").splitlines() if "2 bad input;" in x]
    assert "3 some trials" in line, line  # before, the docstring's break came after "2 bad input;"


def test_no_help_text_keeps_a_line_break_inside_a_paragraph() -> None:
    root = typer.main.get_command(app)

    context = type(root.context_class(root))  # Typer's own click (it vendors one)

    def walk(group, ctx):
        for name in group.list_commands(ctx):
            command = group.get_command(ctx, name)
            yield name, command
            if hasattr(command, "list_commands"):
                yield from walk(command, context(command, parent=ctx))

    commands = list(walk(root, context(root)))
    assert len(commands) > 20
    for name, command in commands:
        for paragraph in (command.help or "").split("\n\n"):
            assert "\n" not in paragraph or paragraph.startswith("\b"), (name, paragraph)
