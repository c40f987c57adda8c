"""What the BSR judge compares: a trajectory's steps (its final attempt's actions and
observations), Table 9's behaviour statistics, the compact summary the judge reads, and the judge's
prompt and reply."""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from typing_extensions import TypedDict

from tbscale.runfiles import read_events
from tbscale.models.replies import parse_json_reply
from tbscale.posthoc.bsr.params import PASS, BsrParams
from tbscale.shell import HistoryState, extract_commands, label_candidate, program_of
from tbscale.types.actions import FINISH_MARKER
from tbscale.types.events import ActionEvent, FormatError, Observation, Start
from tbscale.types.posthoc import Judgment

SEARCH_PROGRAMS = frozenset({"grep", "egrep", "fgrep", "rg", "ag", "ack", "find", "fd", "locate", "git-grep"})
READ_FILE_PROGRAMS = frozenset({"cat", "head", "tail", "less", "more", "nl", "bat", "sed", "awk", "wc", "view"})


# ---------------------------------------------------------------------------------------------
# Trajectories: events of the final attempt, behaviour statistics, summaries
# ---------------------------------------------------------------------------------------------


@dataclass
class Step:
    turn: int
    command: str | None  # None: the turn had no runnable action (format error)
    exit_code: int | None = None
    output: str = ""
    timed_out: bool = False


def load_steps(path: Path, attempt: int) -> tuple[list[Step], str]:
    """Steps of one attempt (action + observation per turn) and the task instruction (if logged)."""
    steps: dict[int, Step] = {}
    instruction = ""
    for ev in read_events(path):
        if isinstance(ev, Start):
            instruction = ev.instruction or ""
            continue
        if ev.attempt != attempt or ev.turn is None:
            continue
        turn = ev.turn
        if isinstance(ev, ActionEvent):
            steps[turn] = Step(turn, ev.command or "")
        elif isinstance(ev, Observation) and turn in steps:
            s = steps[turn]
            s.exit_code, s.output, s.timed_out = ev.exit_code, ev.output or "", ev.timed_out
        elif isinstance(ev, FormatError) and turn not in steps:
            steps[turn] = Step(turn, None, output=str(ev.error or ""))
    return [steps[k] for k in sorted(steps)], instruction


def _paths_in(command: str) -> tuple[set[str], set[str]]:
    """(files read, files edited) named in one command: a deliberately small rule set (positional
    arguments of file viewers; output redirections, tee, and sed/perl -i targets)."""
    read, edited = set(), set()
    for cmd in extract_commands(command):
        program = program_of(cmd)
        try:
            words = shlex.split(cmd, posix=True)
        except ValueError:
            words = cmd.split()
        # output redirections
        for i, w in enumerate(words):
            m = re.match(r"^\d*(>>?|&>>?)(.*)$", w)
            if m:
                target = m.group(2) or (words[i + 1] if i + 1 < len(words) else "")
                if target and not target.startswith(("/dev/", "&", "/tmp/", "/var/tmp/")):
                    edited.add(target)
        try:
            start = words.index(program) + 1 if program in words else 1
        except ValueError:
            start = 1
        args = [w for w in words[start:] if not re.match(r"^\d*(>>?|&>>?|<)", w)]
        positional = [a for a in args if not a.startswith("-")]
        if program == "tee":
            edited.update(a for a in positional if not a.startswith(("/dev/", "/tmp/")))
        elif program in ("sed", "perl") and any(a.startswith(("-i", "-pi")) for a in args):
            edited.update(positional[1:])
        elif program in READ_FILE_PROGRAMS:
            files = positional[1:] if program in ("sed", "awk") else positional
            if program in ("head", "tail"):  # -n N takes a value
                files = [a for k, a in enumerate(args) if not a.startswith("-")
                         and not (k > 0 and args[k - 1] in ("-n", "-c"))]
            read.update(f for f in files if not f.isdigit() and f not in ("EOF",))
    return read, edited


class BehaviourStats(TypedDict):
    """Table 9 statistics of one attempt (`behaviour_stats`); stats.csv has a column for each."""

    steps: int
    commands: int
    first_edit_step: int | None
    search: int
    read: int
    edit: int
    test: int
    post_edit_tests: int
    post_edit_test_rate: float | None
    search_to_edit: float | None
    duplicate_rate: float
    errors: int
    files_read: int
    files_edited: int
    commands_before_final_edit: int
    commands_after_final_edit: int


def behaviour_stats(steps: Sequence[Step], conversion_window: int = 5) -> BehaviourStats:
    """Table 9 statistics of one attempt. Classification comes from tbscale.analysis.behaviours:
    edit = `edits_file`, test = `runs_test_or_check`, post-edit test = `tests_last_edit`, duplicate =
    `loops_on_command` (a repeat since the last edit, waits excluded); search = a read-only step whose
    commands include a search program (grep, rg, find, ...); read = any other read-only step."""
    history = HistoryState()
    kinds: list[set[str]] = []
    files_read: set[str] = set()
    files_edited: set[str] = set()
    errors = 0
    executed = 0
    for step in steps:
        cmd = step.command
        if cmd is None:
            kinds.append({"format_error"})
            continue
        submission = FINISH_MARKER in cmd
        labels = label_candidate(cmd, is_submission=submission, cannot_run=False, history=history)
        history = history.after(cmd)
        k: set[str] = set()
        if submission:
            k.add("submission")
        else:
            executed += 1
            k.add("cmd")
            programs = {program_of(c) for c in extract_commands(cmd)}
            if "git" in programs and re.search(r"\bgit\s+grep\b", cmd):
                programs.add("git-grep")
            if "edits_file" in labels:
                k.add("edit")
            if "runs_test_or_check" in labels:
                k.add("test")
            if "tests_last_edit" in labels:
                k.add("post_edit_test")
            if "loops_on_command" in labels:
                k.add("duplicate")
            if "edit" not in k and programs & SEARCH_PROGRAMS:
                k.add("search")
            elif "only_reads" in labels:
                k.add("read")
            r, e = _paths_in(cmd)
            files_read |= r
            files_edited |= e
        if step.exit_code not in (None, 0) or step.timed_out:
            errors += 1
        kinds.append(k)
    edit_idx = [i for i, k in enumerate(kinds) if "edit" in k]
    search_idx = [i for i, k in enumerate(kinds) if "search" in k]
    n_edit = len(edit_idx)
    converted = sum(any("edit" in kinds[j] for j in range(i + 1, min(len(kinds), i + 1 + conversion_window)))
                    for i in search_idx)
    last_edit = edit_idx[-1] if edit_idx else None
    return {
        "steps": len(steps),
        "commands": executed,
        "first_edit_step": edit_idx[0] + 1 if edit_idx else None,
        "search": len(search_idx),
        "read": sum("read" in k for k in kinds),
        "edit": n_edit,
        "test": sum("test" in k for k in kinds),
        "post_edit_tests": sum("post_edit_test" in k for k in kinds),
        "post_edit_test_rate": (min(1.0, sum("post_edit_test" in k for k in kinds) / n_edit) if n_edit else None),
        "search_to_edit": converted / len(search_idx) if search_idx else None,
        "duplicate_rate": sum("duplicate" in k for k in kinds) / executed if executed else 0.0,
        "errors": errors,
        "files_read": len(files_read),
        "files_edited": len(files_edited),
        "commands_before_final_edit": (sum("cmd" in k for k in kinds[:last_edit]) if last_edit is not None
                                       else executed),
        "commands_after_final_edit": sum("cmd" in k for k in kinds[last_edit + 1:]) if last_edit is not None else 0,
    }


_ERROR_RE = re.compile(r"Traceback|Error\b|Exception|error:|FAILED|fatal:|No such file|command not found", re.IGNORECASE)


def render_action(command: str | None) -> str:
    """Compact function-style action: bash(command="...") (JSON-escaped; multiline kept multiline)."""
    if command is None:
        return "(no runnable action: the reply had no valid command)"
    if "\n" in command:
        return 'bash(command="""\n' + command + '\n""")'
    return f"bash(command={json.dumps(command, ensure_ascii=False)})"


def reduce_observation(output: str, p: BsrParams) -> str:
    """Short outputs whole; outputs with errors/tracebacks whole up to error_obs_chars (then head +
    tail); other long outputs head + tail with an omission marker. Deterministic: the paper's LLM
    summary fallback for long leftovers is replaced by this head + tail truncation."""
    if len(output) <= p.short_obs_chars:
        return output
    limit = p.error_obs_chars if _ERROR_RE.search(output) else 2 * p.head_tail_chars
    if len(output) <= limit:
        return output
    keep = max(p.head_tail_chars, limit // 2)
    omitted = len(output) - 2 * keep
    return f"{output[:keep]}\n[... {omitted} characters omitted ...]\n{output[-keep:]}"


def summarize(steps: Sequence[Step], stats: BehaviourStats, p: BsrParams) -> str:
    """The judge's view of one trajectory: a statistics block, then step by step action + outcome."""
    shown = {k: stats[k] for k in ("steps", "first_edit_step", "search", "read", "edit", "test", "post_edit_tests",
                                    "post_edit_test_rate", "duplicate_rate", "errors", "files_read", "files_edited",
                                    "commands_before_final_edit", "commands_after_final_edit")}
    parts = []
    for s in steps:
        block = f"[step {s.turn}] {render_action(s.command)}"
        if s.command is not None:
            code = "timeout" if s.timed_out else s.exit_code
            block += f"\n-> exit {code}\n{reduce_observation(s.output, p)}".rstrip()
        parts.append(block)
    body = "\n".join(parts)
    if len(body) > p.max_summary_chars:
        half = p.max_summary_chars // 2
        body = f"{body[:half]}\n[... {len(body) - 2 * half} characters of steps omitted ...]\n{body[-half:]}"
    return f"<stats>{json.dumps(shown)}</stats>\n{body}"


# ---------------------------------------------------------------------------------------------
# Judge prompts and calls
# ---------------------------------------------------------------------------------------------

SYSTEM_FAIL = (
    "You compare two attempts by a terminal agent at the same task. BOTH attempts FAILED the task's tests. "
    "Decide which attempt shows more useful progress toward eventual success: did it search the right part "
    "of the environment, gather useful evidence, make directionally plausible edits, verify them, and fail in a "
    "recoverable way? Judge the observable actions and their outcomes, not writing style or confidence.")
SYSTEM_PASS = (
    "You compare two attempts by a terminal agent at the same task. BOTH attempts PASSED the task's tests. "
    "Decide which attempt solved the task better: acted efficiently, made a targeted change, avoided brittle or "
    "unnecessary changes, and verified the result. Judge the observable actions and their outcomes, not writing "
    "style or confidence.")
ANSWER = ('Answer with JSON only: {"winner": "A" or "B", "strength": 1, 2 or 3 (slight, clear, strong preference), '
          '"reason": "one sentence"}')


def judge_messages(instruction: str, bucket: int, summary_a: str, summary_b: str) -> list[dict[str, str]]:
    user = (f"<task>\n{instruction.strip() or '(instruction not recorded)'}\n</task>\n\n"
            f"Shared verifier outcome: {'PASSED' if bucket == PASS else 'FAILED'}\n\n"
            f'<trajectory label="A">\n{summary_a}\n</trajectory>\n\n'
            f'<trajectory label="B">\n{summary_b}\n</trajectory>\n\n{ANSWER}')
    return [{"role": "system", "content": SYSTEM_PASS if bucket == PASS else SYSTEM_FAIL},
            {"role": "user", "content": user}]


def parse_judgment(text: str) -> Judgment | None:
    obj = parse_json_reply(text)
    if obj is None:
        return None
    winner = str(obj.get("winner", "")).strip().upper()
    try:
        strength = int(obj.get("strength", 1))
    except (TypeError, ValueError):
        return None
    if winner not in ("A", "B"):
        return None
    return {"winner": winner, "strength": min(3, max(1, strength)), "reason": str(obj.get("reason", ""))[:500]}
