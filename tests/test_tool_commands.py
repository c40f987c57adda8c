"""Non-shell tools of other harnesses (Claude Code, OpenHands' editor) rendered as shell commands
for analysis: each rendering is run in a real shell and must do what the tool did."""

from __future__ import annotations

import subprocess
from pathlib import Path

from tbscale.ingest.harbor import parse_atif
from tbscale.ingest.tool_commands import tool_command
from tbscale.shell.classify import command_kind_list


def _sh(command: str, cwd: Path) -> str:
    done = subprocess.run(["bash", "-c", command], cwd=cwd, capture_output=True, text=True, check=True)
    return done.stdout


def test_write_edit_multiedit_read_do_what_the_tools_do(tmp_path: Path) -> None:
    f = tmp_path / "hello.txt"
    # content holding the default heredoc delimiter and quotes must survive
    content = "Hello, world!\nTBSCALE_EOF\nit's \"quoted\" $HOME\n"
    _sh(tool_command("Write", {"file_path": str(f), "content": content}), tmp_path)
    assert f.read_text() == content
    _sh(tool_command("Edit", {"file_path": str(f), "old_string": "world", "new_string": "there"}), tmp_path)
    assert f.read_text().startswith("Hello, there!\n")
    f.write_text("a a a\n")
    _sh(tool_command("Edit", {"file_path": str(f), "old_string": "a", "new_string": "b", "replace_all": True}),
        tmp_path)
    assert f.read_text() == "b b b\n"
    _sh(tool_command("MultiEdit", {"file_path": str(f), "edits": [
        {"old_string": "b", "new_string": "c"}, {"old_string": "b b", "new_string": "d"}]}), tmp_path)
    assert f.read_text() == "c d\n"
    # regex characters, the sed delimiter, & and backslashes are literal; strings may span lines
    tricky = "x = a[0].b * 2 $ ^ / & \\n+?(|)\nnext line\n"
    f.write_text("head\n" + tricky + "tail\n")
    _sh(tool_command("Edit", {"file_path": str(f), "old_string": tricky, "new_string": "y & z \\1 /\n  kept\n"}),
        tmp_path)
    assert f.read_text() == "head\ny & z \\1 /\n  kept\ntail\n"
    f.write_text("1\n2\n3\n4\n")
    assert _sh(tool_command("Read", {"file_path": str(f)}), tmp_path) == "1\n2\n3\n4\n"
    assert _sh(tool_command("Read", {"file_path": str(f), "offset": 2, "limit": 2}), tmp_path) == "2\n3\n"


def test_openhands_editor_is_not_mistaken_for_a_shell_command(tmp_path: Path) -> None:
    f = tmp_path / "m.py"
    # `command` here is the editor's sub-command, not a shell command
    create = tool_command("str_replace_editor", {"command": "create", "path": str(f), "file_text": "x = 1\n"})
    assert create is not None and create != "create"
    _sh(create, tmp_path)
    assert f.read_text() == "x = 1\n"
    _sh(tool_command("str_replace_editor", {"command": "str_replace", "path": str(f),
                                             "old_str": "x = 1", "new_str": "x = 2"}), tmp_path)
    _sh(tool_command("str_replace_editor", {"command": "insert", "path": str(f), "insert_line": 0,
                                             "new_str": "import os"}), tmp_path)
    _sh(tool_command("str_replace_editor", {"command": "insert", "path": str(f), "insert_line": 2,
                                             "new_str": "def f():\n    return '\\\\'"}), tmp_path)
    assert f.read_text() == "import os\nx = 2\ndef f():\n    return '\\\\'\n"
    assert _sh(tool_command("str_replace_editor", {"command": "view", "path": str(f), "view_range": [2, 2]}),
               tmp_path) == "x = 2\n"
    assert tool_command("str_replace_editor", {"command": "undo_edit", "path": str(f)}) is None


def test_search_tools_and_kinds(tmp_path: Path) -> None:
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "a.py").write_text("def target():\n    pass\n")
    (tmp_path / "src" / "b.txt").write_text("target\n")
    assert _sh(tool_command("Grep", {"pattern": "def target", "path": "src"}), tmp_path) == "src/a.py:1:def target():\n"
    assert _sh(tool_command("Glob", {"pattern": "**/*.py", "path": "."}), tmp_path).strip() == "./src/a.py"
    assert _sh(tool_command("LS", {"path": "src"}), tmp_path).split() == ["a.py", "b.txt"]
    # the renderings classify as what the tools are: a write is an edit, a read is a read
    def kinds(command: str) -> set[str]:
        return set().union(*command_kind_list(command)[1])

    assert "edit" in kinds(tool_command("Write", {"file_path": "/app/x.py", "content": "print(1)\n"}))
    # an edit tool is an edit, not a run of code (which would count as testing the last edit)
    assert kinds(tool_command("Edit", {"file_path": "/app/x.py", "old_string": "1", "new_string": "2"})) == {"edit"}
    assert kinds(tool_command("Read", {"file_path": "/app/x.py"})) == {"read"}
    assert tool_command("TodoWrite", {"todos": [{"content": "plan"}]}) is None
    assert tool_command("Bash", {"command": "  pytest -q \n", "description": "run tests"}) == "pytest -q"


def test_claude_code_atif_steps_become_commands() -> None:
    # the shape of Harbor's ATIF examples (a Write call) and of Claude Code runs (Bash, TodoWrite)
    data = {"schema_version": "ATIF-v1.7", "steps": [
        {"step_id": 1, "source": "user", "message": "Write hello.txt"},
        {"step_id": 2, "source": "agent", "message": "plan", "tool_calls": [
            {"tool_call_id": "a", "function_name": "TodoWrite", "arguments": {"todos": []}}]},
        {"step_id": 3, "source": "agent", "message": "write", "tool_calls": [
            {"tool_call_id": "b", "function_name": "Write",
             "arguments": {"file_path": "/app/hello.txt", "content": "Hello, world!\n"}}]},
        {"step_id": 4, "source": "agent", "message": "check", "tool_calls": [
            {"tool_call_id": "c", "function_name": "Bash", "arguments": '{"command": "cat /app/hello.txt"}'}]},
    ]}
    turns, instruction = parse_atif(data)
    assert instruction == "Write hello.txt"
    assert [t.runnable for t in turns] == [False, True, True]
    assert turns[1].command.startswith("cat > /app/hello.txt <<'TBSCALE_EOF'\nHello, world!\n")
    assert turns[1].tool_calls[0]["name"] == "Write"  # the original call is kept beside the rendering
    assert turns[2].command == "cat /app/hello.txt"
