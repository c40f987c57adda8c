"""Tests for tbscale.shell and tbscale.analysis.behaviours: Table 4 examples, Appendix D.1 extraction, Figure 4 shares."""

from __future__ import annotations

import numpy as np
import pytest

from tbscale.analysis.behaviours import TurnLabels, preference_by_task, preference_significance, preference_table
from tbscale.shell import BEHAVIOURS, HistoryState, contains_finish_marker, extract_commands, label_candidate, program_of
from tbscale.types.actions import command_from_tool_arguments

EMPTY = HistoryState()


def labels(command: str | None, history: HistoryState = EMPTY, **flags: bool) -> set[str]:
    return label_candidate(
        command,
        is_submission=flags.get("is_submission", False),
        cannot_run=flags.get("cannot_run", False),
        history=history,
    )


# --- Table 4 examples, labelled as the paper says ------------------------------------------------


def test_table4_edits_a_file() -> None:
    assert labels("sed -i 's/x/y/' app.py") == {"edits_file"}
    heredoc = "cat > solve.py <<EOF\nimport sys\nprint(sum(map(int, sys.stdin)))\nEOF"
    assert labels(heredoc) == {"edits_file"}


def test_table4_tests_its_last_edit() -> None:
    history = EMPTY.after("cat > solve.py <<EOF\nprint(42)\nEOF")
    assert history.last_edit_turn == 0 and not history.ran_since_last_edit
    assert "tests_last_edit" in labels("python solve.py", history)


def test_table4_runs_a_test_or_check() -> None:
    assert "runs_test_or_check" in labels("pytest tests/")
    assert "runs_test_or_check" in labels("diff -u out.txt expected.txt")


def test_table4_file_operations() -> None:
    assert labels("cp out.txt /app/") == {"file_operations"}
    assert labels("chmod +x run.sh") == {"file_operations"}


def test_table4_installs_a_package() -> None:
    assert labels("pip install numpy") == {"installs_package"}
    assert labels("apt-get install -y jq") == {"installs_package"}


def test_table4_only_reads() -> None:
    assert labels("ls /app") == {"only_reads"}
    assert labels("cat README.md") == {"only_reads"}


def test_table4_cannot_run_invalid_json_tool_arguments() -> None:
    command = command_from_tool_arguments('{"command": "ls /app"')  # truncated JSON
    assert command is None
    assert labels(command, cannot_run=command is None) == {"cannot_run"}
    assert command_from_tool_arguments('{"command": "ls /app"}') == "ls /app"
    assert command_from_tool_arguments('{"cmd": "ls"}') is None
    assert labels(None, cannot_run=True) == {"cannot_run"}


def test_table4_loops_on_a_command() -> None:
    history = EMPTY.after("cat > solve.py <<EOF\nprint(42)\nEOF").after("python solve.py")
    result = labels("python solve.py", history)
    assert "loops_on_command" in result
    assert "tests_last_edit" not in result  # the edit was already run once


# --- command extraction (Appendix D.1) ---------------------------------------------------------


def test_split_ignores_separators_inside_quotes() -> None:
    text = """echo 'a; b && c || d' && grep "x;y|z" f.txt; ls"""
    assert extract_commands(text) == ["echo 'a; b && c || d'", 'grep "x;y|z" f.txt', "ls"]
    assert labels(text) == {"only_reads"}


def test_split_at_newlines_and_pipes() -> None:
    assert extract_commands("cd /app\nls -la | head -n 5\n\n  pwd  ") == [
        "cd /app",
        "ls -la",
        "head -n 5",
        "pwd",
    ]
    # a pipeline's programs are all classified: tee writes a workspace file
    assert "edits_file" in labels("python gen.py | tee results.txt")


def test_heredoc_bodies_are_removed_and_not_classified() -> None:
    text = (
        "cat > setup.sh <<'EOF'\n"
        "pip install requests && rm -rf /app\n"
        "pytest\n"
        "EOF\n"
        "ls"
    )
    assert extract_commands(text) == ["cat > setup.sh <<'EOF'", "ls"]
    assert labels(text) == {"edits_file"}
    # <<"END" quoted, <<-END with a tab-indented terminator, any delimiter word
    for operator, terminator in (('<<"END"', "END"), ("<<-END", "\tEND"), ("<< END_OF_FILE", "END_OF_FILE")):
        text = f"cat > f.txt {operator}\n\tpip install x\n{terminator}\necho done"
        assert extract_commands(text) == [f"cat > f.txt {operator}", "echo done"], operator
        assert labels(text) == {"edits_file"}
    # a terminator that is indented without <<- does not end the body (as in bash)
    assert extract_commands("cat > f <<EOF\nx\n  EOF\nrm -rf /app") == ["cat > f <<EOF"]


def test_comments_are_removed() -> None:
    text = (
        "# install deps first\n"
        "  # indented comment\n"
        "ls /app  # trailing comment && rm -rf /\n"
        "echo 'not # a comment'"
    )
    assert extract_commands(text) == ["ls /app", "echo 'not # a comment'"]
    assert labels(text) == {"only_reads"}
    assert extract_commands("echo ${#arr[@]} x#y") == ["echo ${#arr[@]} x#y"]


def test_command_substitution_is_not_split() -> None:
    assert extract_commands("echo $(date; whoami) && ls") == ["echo $(date; whoami)", "ls"]


@pytest.mark.parametrize(
    "command,program",
    [
        ("FOO=bar timeout 10 python x.py", "python"),
        ("sudo -u app python3.11 -m pytest", "python"),
        ("timeout 30 ./run_tests.sh", "run_tests.sh"),
        ("timeout -s KILL 5m make test", "make"),
        ("env X=1 Y=2 node index.js", "node"),
        ("env", "env"),
        ("nohup /usr/bin/python3 server.py", "python"),
        ("time nice -n 10 gcc -O2 a.c", "gcc"),
        ("xargs -I{} grep foo {}", "grep"),
        ("uv run pytest -q", "pytest"),
        ("if [ -f x ]", "["),
        ("! grep -q err log", "grep"),
        ("pip3.11 install numpy", "pip"),
        ("for f in *.py", ""),
    ],
)
def test_program_of_skips_assignments_and_wrappers(command: str, program: str) -> None:
    assert program_of(command) == program


def test_wrapped_commands_are_classified_by_their_program() -> None:
    assert labels("sudo apt-get install -y jq") == {"installs_package"}
    assert labels("timeout 30 pytest -x tests/") == {"runs_test_or_check"}
    assert labels("env PYTHONPATH=/app FOO=1 python -m pytest") == {"runs_test_or_check"}
    assert labels("FOO=bar cat notes.txt") == {"only_reads"}


def test_chain_cd_make_run() -> None:
    assert extract_commands("cd /app && make && ./prog") == ["cd /app", "make", "./prog"]
    history = EMPTY.after("sed -i 's/int/long/' counts.c")
    result = labels("cd /app && make && ./prog", history)
    assert result == {"tests_last_edit"}
    result = labels("cd /app && make test", history)
    assert result == {"tests_last_edit", "runs_test_or_check"}


# --- edits vs scratch writes --------------------------------------------------------------------


def test_writes_into_tmp_are_not_edits() -> None:
    assert "edits_file" not in labels("echo hi > /tmp/x")
    # ... but they are writes, so not "only reads" either
    assert labels("echo hi > /tmp/x") == set()
    assert labels("echo hi > notes.txt") == {"edits_file"}
    assert labels("echo hi >> /app/notes.txt") == {"edits_file"}


def test_python_open_for_write_depends_on_path() -> None:
    assert "edits_file" not in labels("""python -c "open('/tmp/o','w').write('x')" """)
    assert "edits_file" in labels("""python -c "open('/app/o','w').write('x')" """)
    assert "edits_file" in labels("""python3 -c "open('/app/o', mode='a')" """)
    assert "edits_file" not in labels("""python -c "print(open('/app/o').read())" """)
    assert "edits_file" in labels("python3 -c \"from pathlib import Path; Path('a.txt').write_text('x')\"")
    scratch = "python3 -c \"from pathlib import Path; Path('/tmp/a').write_text('x')\""
    assert "edits_file" not in labels(scratch)
    heredoc = "python3 - <<'PY'\nwith open('/app/result.json', 'w') as f:\n    f.write('{}')\nPY"
    assert "edits_file" in labels(heredoc)
    reading = "python3 - <<'PY'\nprint(open('/app/result.json').read())\nPY"
    assert "edits_file" not in labels(reading)


def test_redirects_to_devices_do_not_count_as_writes() -> None:
    assert labels("grep -rn TODO src 2>/dev/null | head -20") == {"only_reads"}
    assert labels("ls /app >/dev/null 2>&1") == {"only_reads"}


def test_other_edit_commands() -> None:
    assert "edits_file" in labels("perl -pi -e 's/a/b/g' main.c")
    assert "edits_file" in labels("patch -p1 < fix.diff")
    assert "edits_file" in labels("git apply fix.patch")
    assert "edits_file" not in labels("sed -n '1,20p' app.py")
    assert labels("sed -n '1,20p' app.py") == {"only_reads"}
    assert labels("sed -i.bak -e 's/a/b/' /tmp/scratch.txt") == set()


# --- other categories ---------------------------------------------------------------------------


def test_bash_c_and_find_exec_are_classified_by_their_contents() -> None:
    assert labels("bash -c 'cd /app && pytest tests/'") == {"runs_test_or_check"}
    assert labels("find . -name '*.pyc' -exec rm {} \\;") == {"file_operations"}
    assert labels("find . -name '*.py' | xargs grep -n main") == {"only_reads"}


def test_localhost_curl_is_a_check_but_remote_curl_is_not() -> None:
    assert labels("curl -s http://localhost:8000/health") == {"runs_test_or_check"}
    assert labels("curl -sL https://example.com/data.csv") == set()


def test_unknown_programs_are_not_reads() -> None:
    assert labels("frobnicate --all") == set()
    assert labels("ls && frobnicate") == set()


def test_install_variants() -> None:
    for command in (
        "python -m pip install -e .",
        "uv pip install pandas",
        "npm install",
        "cargo install ripgrep",
        "conda install -y scipy",
    ):
        assert labels(command) == {"installs_package"}, command
    assert labels("pip list") == {"only_reads"}
    assert labels("apt-get update") == set()


# --- history-dependent behaviours ---------------------------------------------------------------


def test_rerun_after_an_edit_is_not_a_loop() -> None:
    history = HistoryState.replay(["python solve.py", "sed -i 's/1/2/' solve.py"])
    result = labels("python solve.py", history)
    assert "loops_on_command" not in result
    assert "tests_last_edit" in result


def test_repeat_without_edit_is_a_loop_up_to_whitespace() -> None:
    history = HistoryState.replay(["ls /app", "python  solve.py"])
    assert history.last_edit_turn is None
    assert labels("python solve.py", history) == {"loops_on_command"}
    assert "loops_on_command" in labels("cd /app&&ls", HistoryState.replay(["cd /app && ls"]))
    assert "loops_on_command" not in labels("python solve.py --fast", history)


def test_repeat_of_the_edit_turn_itself_is_not_since_the_edit() -> None:
    edit = "sed -i 's/1/2/' solve.py"
    history = HistoryState.replay([edit])
    assert "loops_on_command" not in labels(edit, history)


def test_waiting_and_monitoring_commands_are_not_loops() -> None:
    history = HistoryState.replay(["sleep 5", "tail -n 20 server.log"])
    assert "loops_on_command" not in labels("sleep 5", history)
    assert "loops_on_command" not in labels("tail -n 20 server.log", history)
    assert "loops_on_command" not in labels("cd /app && sleep 5", HistoryState.replay(["cd /app && sleep 5"]))


def test_tests_last_edit_needs_an_untested_edit() -> None:
    assert "tests_last_edit" not in labels("python solve.py")  # nothing edited yet
    history = HistoryState.replay(["echo x > a.py", "pytest -q"])
    assert history.ran_since_last_edit
    assert "tests_last_edit" not in labels("python a.py", history)
    # reading after an edit does not test it, so a later run still does
    history = HistoryState.replay(["echo x > a.py", "cat a.py"])
    assert not history.ran_since_last_edit
    assert "tests_last_edit" in labels("python a.py", history)
    assert "tests_last_edit" not in labels("cat a.py", history)


def test_edit_and_run_in_the_same_candidate_tests_that_edit() -> None:
    text = "cat > solve.py <<'EOF'\nprint(1)\nEOF\npython solve.py"
    assert labels(text) == {"edits_file", "tests_last_edit"}
    # running first, then editing, leaves the new edit untested
    after = EMPTY.after("python solve.py && sed -i 's/1/2/' solve.py")
    assert after.last_edit_turn == 0 and not after.ran_since_last_edit
    assert labels("python solve.py && sed -i 's/1/2/' solve.py") == {"edits_file"}


def test_history_ignores_turns_that_executed_nothing() -> None:
    history = EMPTY.after("ls").after(None)
    assert history.commands == ["ls"]


# --- submission and cannot-run --------------------------------------------------------------------


def test_submission_gets_no_labels() -> None:
    text = "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"
    assert contains_finish_marker(text)
    history = HistoryState.replay(["echo x > a.py", text])
    assert labels(text, history, is_submission=True) == set()
    assert labels(None, is_submission=True, cannot_run=True) == set()


def test_blank_command_cannot_run_but_comment_only_runs_and_does_nothing() -> None:
    assert labels("   \n") == {"cannot_run"}
    assert labels("# just thinking out loud") == set()


# --- preference tables --------------------------------------------------------------------------


def _three_turns() -> list[TurnLabels]:
    return [
        # turn 1: 4 candidates; selector picks the editing one
        TurnLabels([{"only_reads"}, {"edits_file"}, {"only_reads"}, {"cannot_run"}], 1, "t1"),
        # turn 2: 2 candidates; picks the one that tests the edit and runs a check
        TurnLabels([{"tests_last_edit", "runs_test_or_check"}, {"only_reads"}], 0, "t1"),
        # turn 3: 4 candidates; picks a read
        TurnLabels([{"only_reads"}, {"only_reads"}, {"edits_file"}, {"loops_on_command"}], 0, "t2"),
    ]


def test_preference_table_hand_computed() -> None:
    table = preference_table(_three_turns())
    assert list(table.index) == list(BEHAVIOURS)
    # edits_file: selected in turn 1 only -> 1/3; uniform: 1/4, 0/2, 1/4 -> (0.25 + 0 + 0.25)/3 = 1/6
    assert table.loc["edits_file", "selected_share"] == pytest.approx(1 / 3)
    assert table.loc["edits_file", "uniform_share"] == pytest.approx(1 / 6)
    assert table.loc["edits_file", "difference"] == pytest.approx(1 / 6)
    # only_reads: selected in turn 3 -> 1/3; uniform: 2/4, 1/2, 2/4 -> 1.5/3 = 0.5
    assert table.loc["only_reads", "selected_share"] == pytest.approx(1 / 3)
    assert table.loc["only_reads", "uniform_share"] == pytest.approx(0.5)
    # tests_last_edit: selected in turn 2 -> 1/3; uniform: 0, 1/2, 0 -> 1/6
    assert table.loc["tests_last_edit", "selected_share"] == pytest.approx(1 / 3)
    assert table.loc["tests_last_edit", "uniform_share"] == pytest.approx(1 / 6)
    # cannot_run: never selected; uniform: 1/4, 0, 0 -> 1/12
    assert table.loc["cannot_run", "selected_share"] == 0.0
    assert table.loc["cannot_run", "uniform_share"] == pytest.approx(1 / 12)
    # loops_on_command: uniform 0, 0, 1/4 -> 1/12
    assert table.loc["loops_on_command", "uniform_share"] == pytest.approx(1 / 12)
    assert table.loc["installs_package", "uniform_share"] == 0.0
    assert (table["n_turns"] == 3).all()


def test_preference_table_skips_turns_with_unknown_selection() -> None:
    turns = [*_three_turns(), TurnLabels([{"edits_file"}, {"edits_file"}], None, "t2")]
    assert preference_table(turns).loc["edits_file", "selected_share"] == pytest.approx(1 / 3)
    mapping_turn = {"candidate_labels": [{"edits_file"}], "selected_index": 0}
    assert preference_table([mapping_turn]).loc["edits_file", "selected_share"] == 1.0
    with pytest.raises(ValueError):
        preference_table([TurnLabels([{"edits_file"}], 3)])


def test_preference_by_task_hand_computed_and_pools_back() -> None:
    by_task = preference_by_task(_three_turns())
    row = by_task[(by_task.task == "t1") & (by_task.behaviour == "edits_file")].iloc[0]
    # t1 has turns 1 and 2: selected 1, 0 -> 0.5; uniform 1/4, 0 -> 1/8
    assert row.selected_share == pytest.approx(0.5)
    assert row.uniform_share == pytest.approx(0.125)
    assert row.n_turns == 2
    row = by_task[(by_task.task == "t2") & (by_task.behaviour == "only_reads")].iloc[0]
    assert (row.selected_share, row.uniform_share, row.n_turns) == (1.0, 0.5, 1)
    assert len(by_task) == 2 * len(BEHAVIOURS)
    # weighting tasks by turns gives back the pooled Figure 4 shares
    table = preference_table(_three_turns())
    for behaviour in BEHAVIOURS:
        part = by_task[by_task.behaviour == behaviour]
        pooled = np.average(part.selected_share, weights=part.n_turns)
        assert pooled == pytest.approx(table.loc[behaviour, "selected_share"])
    with pytest.raises(ValueError):
        preference_by_task([TurnLabels([{"edits_file"}], 0)])  # no task id


def test_preference_significance_detects_a_consistent_preference() -> None:
    rng = np.random.default_rng(0)
    turns = []
    for task in range(40):
        for _ in range(5):
            candidates = [{"edits_file"} if rng.random() < 0.3 else {"only_reads"} for _ in range(4)]
            editing = [i for i, c in enumerate(candidates) if "edits_file" in c]
            selected = editing[0] if editing else 0  # a selector that always prefers editing
            turns.append(TurnLabels(candidates, selected, f"task{task}"))
    result = preference_significance(turns, n_resamples=2000)
    assert result.loc["edits_file", "difference"] == pytest.approx(
        preference_table(turns).loc["edits_file", "difference"]
    )
    assert result.loc["edits_file", "difference"] > 0.2
    assert result.loc["edits_file", "p_value"] < 0.01
    assert result.loc["only_reads", "difference"] < 0
    assert result.loc["installs_package", "p_value"] == 1.0  # never occurs: no difference at all
