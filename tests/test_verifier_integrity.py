"""Agents that try to forge their verdict, through the real model path (litellm over HTTP to the
loopback server scripting the replies), real containers and the real verifiers: none of them
passes, each is recorded as tampering, and obstacles the agent made are its failure, never an
infrastructure error (docs/tasks.md, "Verification integrity")."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
import yaml

from tbscale.logs import read_jsonl
from tbscale.runner import Runner, load_experiment
from tbscale.tasks import load_tasks
from tbscale.types.actions import FINISH_MARKER
from tbscale_testing import LoopbackModel

pytestmark = [pytest.mark.docker, pytest.mark.usefixtures("docker_available")]

REPO = Path(__file__).resolve().parents[1]
BUNDLED = "fix-python-inventory"  # python3 -m pytest; 3 of its 4 tests fail until the bugs are fixed
SUBMIT = f"echo {FINISH_MARKER}"
WRITER = "while :; do echo '{\"reward\": 1}' > /logs/verifier/reward.json 2>/dev/null; sleep 0.02; done"


def fenced(command: str) -> str:
    return f"THOUGHT: next step.\n\n```bash\n{command}\n```"


def scripted(commands: list[str]):
    def reply(body: dict) -> str:
        turn = sum(m["role"] == "assistant" for m in body["messages"])
        return fenced(commands[turn] if turn < len(commands) else SUBMIT)
    return reply


def run(tmp_path: Path, srv: LoopbackModel, commands: list[str], *, tasks: Path = REPO / "tasks",
        task: str = BUNDLED, environment: dict | None = None) -> tuple[dict, Path]:
    srv.responder = scripted(commands)
    config = {
        "name": "adversary", "tasks": {"path": str(tasks), "include": [task]}, "trials": 1, "concurrency": 1,
        "output_dir": str(tmp_path / "results"),
        "models": {"m": {"model": "openai/scripted", "api_base": srv.base_url, "max_retries": 1,
                         "retry_backoff_sec": 0.01}},
        "settings": [{"name": "baseline", "generator": "m", "policy": {"name": "baseline"}}],
        "limits": {"max_turns": len(commands) + 2, "command_timeout_sec": 60},
        **({"environment": environment} if environment else {}),
    }
    path = tmp_path / "experiment.yaml"
    path.write_text(yaml.safe_dump(config))
    exp = load_experiment(path)
    found, _ = load_tasks(Path(exp.tasks.path), include=exp.tasks.include)
    run_dir = tmp_path / "results" / exp.name
    asyncio.run(Runner(exp, found, run_dir).run())
    (row,) = read_jsonl(run_dir / "trials.jsonl")
    return row, run_dir


def kinds(row: dict) -> set[str]:
    return {e["kind"] for e in row["tampering"]}


def failed_by_agent(row: dict) -> None:
    assert row["passed"] is False, row
    assert row["infra_error"] is False, row
    assert row["ending"] in ("wrong_submission", "tampered"), row


def test_pre_written_rewards_fail_and_are_recorded(tmp_path, loopback_model):
    row, _ = run(tmp_path, loopback_model, ["echo 1 > /logs/verifier/reward.txt",
                                            "echo '{\"reward\": 1}' > /logs/verifier/reward.json"])
    failed_by_agent(row)
    assert row["reward"] == 0.0
    assert {"reward_file_written", "writes_reward_path"} <= kinds(row)
    turns = sorted(e["turn"] for e in row["tampering"] if e["kind"] == "writes_reward_path")
    assert turns == [1, 2]


@pytest.mark.parametrize("launch", ["nohup sh -c {q} >/dev/null 2>&1 &",
                                    "setsid sh -c {q} >/dev/null 2>&1 < /dev/null &",
                                    "setsid su nobody -s /bin/sh -c {q} >/dev/null 2>&1 < /dev/null &"],
                         ids=["nohup", "setsid", "other-user"])
def test_a_detached_reward_writer_does_not_reach_verification(tmp_path, loopback_model, launch):
    import shlex

    # The agent's last command waits until the writer runs (as nobody, `su` can take seconds on a busy
    # machine), so the sweep has it to find.
    running = ("grep -qs '^Uid:.*65534' /proc/[0-9]*/status" if "nobody" in launch
               else "[ -s /logs/verifier/reward.json ]")
    row, run_dir = run(tmp_path, loopback_model, [launch.format(q=shlex.quote(WRITER)),
                                                  f"for i in $(seq 3000); do {running} && break; sleep 0.1; done"])
    failed_by_agent(row)
    assert row["reward"] == 0.0 and row["ending"] == "wrong_submission", row
    assert "reward_file_written" in kinds(row)
    (sweep,) = [e for e in read_jsonl(run_dir / row["trajectory_path"]) if e["type"] == "sweep"]
    assert sweep["method"] == "restart"
    assert any("while :" in p["cmd"] for p in sweep["agent_processes"]), sweep
    if "nobody" in launch:
        assert any(p["uid"] == "65534" for p in sweep["agent_processes"]), sweep


def test_replaced_python3_is_never_a_pass(tmp_path, loopback_model):
    # /usr/local/bin comes before /usr/bin on PATH: a script there shadows the image's python3
    row, run_dir = run(tmp_path, loopback_model, ["printf '#!/bin/sh\\nexit 0\\n' > /usr/local/bin/python3 && "
                                                  "chmod +x /usr/local/bin/python3"])
    assert row["passed"] is False and row["ending"] == "tampered", row
    assert row["reward"] == 1.0  # what the fooled verifier said, kept for the record
    (changed,) = [e for e in row["tampering"] if e["kind"] == "toolchain_replaced" and e["tool"] == "python3"]
    assert changed["before"]["real"] == "/usr/bin/python3.11" and changed["before"]["path"] == "/usr/bin/python3"
    assert changed["after"]["real"] == "/usr/local/bin/python3" and changed["after"]["first_line"] == "#!/bin/sh"
    assert "package" not in changed["after"]
    assert changed["by_command"]["turn"] == 1
    assert "replaces_test_tool" in kinds(row)


def test_reward_path_made_a_folder_is_the_agents_failure(tmp_path, loopback_model):
    row, _ = run(tmp_path, loopback_model, ["rm -rf /logs/verifier/reward.json && mkdir -p /logs/verifier/reward.json "
                                            "/logs/verifier/reward.txt && chmod 000 /logs/verifier"])
    failed_by_agent(row)
    assert row["reward"] == 0.0
    assert "verifier_path_obstructed" in kinds(row), row["tampering"]


def test_tests_edited_at_verify_time_by_a_leftover_process(tmp_path, loopback_model):
    import shlex

    editor = ("while :; do f=/tests/test_outputs.py; if [ -f $f ] && ! grep -q forged $f; then "
              "printf 'def test_forged():\\n    pass\\n' > $f; fi; sleep 0.005; done")
    row, _ = run(tmp_path, loopback_model, [f"nohup sh -c {shlex.quote(editor)} >/dev/null 2>&1 &"])
    failed_by_agent(row)
    assert row["reward"] == 0.0 and row["ending"] == "wrong_submission", row


CONFORMANCE = REPO / "tests" / "conformance"


def test_chmodded_logs_is_the_agents_failure_not_an_infra_error(tmp_path, loopback_model):
    # verifier-user's tests run as `checker`, who cannot write a reward under a /logs of mode 000
    row, _ = run(tmp_path, loopback_model, ["chmod 000 /logs"], tasks=CONFORMANCE, task="verifier-user")
    failed_by_agent(row)
    assert row["reward"] == 0.0 and row["stop_reason"] == "submitted", row
    (obstructed,) = [e for e in row["tampering"] if e["kind"] == "verifier_path_obstructed"]
    assert "/logs was 0:0:0" in obstructed["detail"]
    assert "writes_reward_path" in kinds(row)


def test_compose_main_is_swept_and_the_sidecar_keeps_its_state(tmp_path, loopback_model):
    import shlex

    solve = (CONFORMANCE / "compose-sidecar" / "solution" / "solve.sh").read_text().split("\n", 1)[1]
    row, run_dir = run(tmp_path, loopback_model, [f"nohup sh -c {shlex.quote(WRITER)} >/dev/null 2>&1 &", solve],
                       tasks=CONFORMANCE, task="compose-sidecar")
    # The verifier passed on the sidecar's in-memory state (the sidecar was not restarted), the
    # writer was stopped, and what it wrote keeps the trial from being a plain pass.
    assert row["reward"] == 1.0 and row["ending"] == "tampered" and row["passed"] is False, row
    assert "reward_file_written" in kinds(row)
    (sweep,) = [e for e in read_jsonl(run_dir / row["trajectory_path"]) if e["type"] == "sweep"]
    assert any("while :" in p["cmd"] for p in sweep["agent_processes"])
    (verdict,) = [e for e in read_jsonl(run_dir / row["trajectory_path"]) if e["type"] == "verifier"]
    assert verdict["details"]["reward_file"] == "reward.txt"


def test_a_kept_process_that_makes_the_verifier_folder_again_is_the_agents_failure(tmp_path, loopback_model):
    import shlex

    # Two root loops make /logs/verifier again as soon as it is moved away (one also forges a
    # reward): the fresh folder loses the race on some tries, never the verdict to an infra error.
    remake = "while :; do mkdir -p /logs/verifier 2>/dev/null; done"
    forge = "while :; do mkdir -p /logs/verifier 2>/dev/null; echo '{\"reward\": 1}' > /logs/verifier/reward.json 2>/dev/null; done"
    row, _ = run(tmp_path, loopback_model, [f"setsid sh -c {shlex.quote(remake)} >/dev/null 2>&1 < /dev/null &",
                                            f"setsid sh -c {shlex.quote(forge)} >/dev/null 2>&1 < /dev/null &"],
                 environment={"agent_processes": "keep"})
    failed_by_agent(row)
    assert "reward_file_written" in kinds(row), row


def test_a_kept_process_that_spoils_the_reward_file_is_the_agents_failure(tmp_path, loopback_model):
    import shlex

    # reward.json is read before reward.txt (Harbor's order), and a kept root loop keeps it empty:
    # the reward cannot be read, and that is the agent's doing, not an infrastructure error.
    spoil = "while :; do mkdir -p /logs/verifier 2>/dev/null; : > /logs/verifier/reward.json 2>/dev/null; done"
    row, run_dir = run(tmp_path, loopback_model, [f"setsid sh -c {shlex.quote(spoil)} >/dev/null 2>&1 < /dev/null &"],
                       environment={"agent_processes": "keep"})
    failed_by_agent(row)
    assert row["reward"] == 0.0 and "reward_file_written" in kinds(row), row
    (verifier,) = [e for e in read_jsonl(run_dir / row["trajectory_path"]) if e["type"] == "verifier"]
    if verifier["details"].get("bad_reward"):  # read while empty (else read between truncations: reward.txt's 0)
        assert verifier["details"]["verifier_error"] == "reward_missing"
        assert "reward file" in verifier["details"]["obstructed_by_agent"]


def test_agent_processes_keep_is_the_reference_behaviour(tmp_path, loopback_model):
    import shlex

    # A careful forger writes atomically, so the verifier never reads a half-written file.
    atomic = ("while :; do echo '{\"reward\": 1}' > /logs/verifier/.r 2>/dev/null && "
              "mv -f /logs/verifier/.r /logs/verifier/reward.json 2>/dev/null; sleep 0.02; done")
    row, run_dir = run(tmp_path, loopback_model, [f"setsid sh -c {shlex.quote(atomic)} >/dev/null 2>&1 < /dev/null &",
                                                  "for i in $(seq 3000); do [ -s /logs/verifier/reward.json ] && break; "
                                                  "sleep 0.1; done"], environment={"agent_processes": "keep"})
    # Kept running, the writer forges reward.json as it does under Harbor; it is still recorded.
    assert row["passed"] is False and row["ending"] == "tampered" and row["reward"] == 1.0, row
    assert "reward_file_written" in kinds(row) and "writes_reward_path" in kinds(row)
    (sweep,) = [e for e in read_jsonl(run_dir / row["trajectory_path"]) if e["type"] == "sweep"]
    assert sweep["method"] == "none"


def test_a_kept_root_process_cannot_end_the_guards_checks_early(tmp_path, loopback_model):
    """The agent leaves a root process that reads each exec's end token from its wrapper's memory
    and forges an end line (tests/fixtures/end_token_spy.py). It cuts the agent's own commands
    short, but the guard's and the verifier's execs, run with `hostile_peers` when the agent's
    processes are kept, read to the end of their output: the process listing still names it."""
    import base64

    spy = base64.b64encode((REPO / "tests" / "fixtures" / "end_token_spy.py").read_bytes()).decode()
    ticks = "sleep 1; for i in $(seq 1 40); do echo tick-$i; sleep 0.03; done"
    row, run_dir = run(tmp_path, loopback_model, [f"printf %s {spy} | base64 -d > /tmp/spy.py",
                                                  "setsid python3 /tmp/spy.py >/dev/null 2>&1 < /dev/null &", ticks],
                       environment={"agent_processes": "keep"})
    events = list(read_jsonl(run_dir / row["trajectory_path"]))
    (tick,) = [e for e in events if e["type"] == "observation" and e.get("turn") == 3]
    assert "tick-40" not in tick["output"], tick  # the spy was at work in this run
    (sweep,) = [e for e in events if e["type"] == "sweep"]
    assert sweep["method"] == "none" and any("spy.py" in p["cmd"] for p in sweep["agent_processes"]), sweep
    (verdict,) = [e for e in events if e["type"] == "verifier"]
    assert verdict["error"] is None and verdict["reward"] == 0.0, verdict  # 3 of the task's 4 tests fail
    assert "verifier_output_forged" not in kinds(row) and row["infra_error"] is False, row


def test_a_kept_root_process_that_writes_a_reward_line_into_the_verifiers_output_fails(tmp_path, loopback_model):
    """The agent leaves a root process that writes the line the verifier's reader takes a reward
    file from (reward.txt: 1) into every exec's output, after the command's own output
    (tests/fixtures/reward_line_injector.py). Before readers rejected a line given twice, it
    forged a pass 3 of 3 times. Such a line cannot be kept out of an exec's output, but it cannot
    replace the real one: the file's line comes twice with different values, the file is copied
    out instead, and the attempt is recorded as tampering (`verifier_output_forged`), a failure.

    The injector has to find the reader's exec while its command runs, polling /proc. On a busy
    machine a short command can end before it looks (once in a loaded suite): the file's real line
    then stands alone. So the trial runs again, up to 4 times, until the injector reaches the
    reader, and every trial must fail with the real reward."""
    import base64

    injector = base64.b64encode((REPO / "tests" / "fixtures" / "reward_line_injector.py").read_bytes()).decode()
    for attempt in range(4):
        (tmp_path / str(attempt)).mkdir()
        row, run_dir = run(tmp_path / str(attempt), loopback_model,
                           [f"printf %s {injector} | base64 -d > /tmp/inject.py",
                            "setsid python3 /tmp/inject.py >/dev/null 2>&1 < /dev/null &", "sleep 1; echo waited"],
                           environment={"agent_processes": "keep"})
        events = list(read_jsonl(run_dir / row["trajectory_path"]))
        (waited,) = [e for e in events if e["type"] == "observation" and e.get("turn") == 3]
        assert "reward.txt" in waited["output"], waited  # the injector was at work in this run
        assert row["passed"] is False and row["infra_error"] is False, row
        (verdict,) = [e for e in events if e["type"] == "verifier"]
        assert verdict["reward"] == 0.0, verdict
        if "output_conflicts" in verdict["details"]:
            break
    else:
        pytest.fail("in 4 trials the injector never wrote into the output of the verifier's reader")
    assert verdict["details"]["output_conflicts"] == ["file /logs/verifier/reward.txt"], verdict["details"]
    assert "verifier_output_forged" in kinds(row), row
    assert verdict["reward"] == 0.0, verdict  # the file copied out: 3 of the task's 4 tests fail


def test_a_kept_process_that_stops_the_guards_checks_cannot_hold_the_trial(tmp_path, loopback_model):
    """The agent leaves a root process that stops (SIGSTOP) the guard's commands, with their
    wrapper and `timeout` (tests/fixtures/wrapper_stopper.py). The guard's process
    listing before the restart was then never answered and the trial waited for ever; now the
    exec is abandoned at its timeout plus grace, the stall is recorded as `check_stalled` (an
    obstruction: never a pass), and the restart ends the stopper, so the verdict is the tests'."""
    import base64

    from tbscale.environments.docker import EXEC_GRACE_SEC

    stopper = base64.b64encode((REPO / "tests" / "fixtures" / "wrapper_stopper.py").read_bytes()).decode()
    # It spares the agent's own commands: it stops those that hold the guard's process listing's text.
    # With 200 idle processes beside it the listing runs for about 0.5 s, not a few ms: on a busy
    # machine a stopper that polls /proc missed the short one (CI, f58a8c6: no `check_stalled`).
    # It stops one command (the listing) and then idles: polling for the 80 s the listing waits
    # cost 50 CPU-seconds of a loaded Docker lane.
    row, run_dir = run(tmp_path, loopback_model, [f"printf %s {stopper} | base64 -d > /tmp/stop.py; "
                                                  "printf %s 'own=\" $$ \"' > /tmp/stop.match",
                                                  "setsid python3 /tmp/stop.py /tmp/stop.match 200 1 >/dev/null 2>&1 "
                                                  "< /dev/null &",
                                                  "until [ -e /tmp/stopper.ready ]; do sleep 0.1; done; echo waited"])
    events = list(read_jsonl(run_dir / row["trajectory_path"]))
    (sweep,) = [e for e in events if e["type"] == "sweep"]
    assert sweep["method"] == "restart", sweep
    (stalled,) = [e for e in row["tampering"] if e["kind"] == "check_stalled"]
    assert "the process listing (after" in stalled["detail"], stalled
    waited = float(stalled["detail"].split("(after ")[1].split(" s)")[0])
    assert waited >= 60 + EXEC_GRACE_SEC - 1, stalled  # the listing's own timeout and the grace, no longer
    (verdict,) = [e for e in events if e["type"] == "verifier"]
    assert verdict["error"] is None and verdict["reward"] == 0.0, verdict  # 3 of the task's 4 tests fail
    assert row["passed"] is False and row["infra_error"] is False and row["ending"] == "wrong_submission", row


# Busybox's find has no -newerXY tests and its date (without FEATURE_DATE_NANO) prints %N as it
# is: these stand-ins give a Debian image the same two limits.
BUSYBOX_FIND = """#!/bin/sh
for a in "$@"; do case "$a" in -newer?*) echo "find: unrecognized: $a" >&2; exit 1;; esac; done
exec /usr/bin/find "$@"
"""
BUSYBOX_DATE = """#!/bin/sh
case "$1" in +*%N*) exec /bin/date "$(printf '%s' "$1" | sed 's/%N/%%N/g')";; esac
exec /bin/date "$@"
"""


def test_a_conftest_planted_under_busyboxs_find_and_date_is_found(tmp_path, loopback_model):
    """The changed paths are listed by status change time. Where find has no -newerct and date no
    %N (busybox, as in Alpine images), the guard reads each path's status change second from stat
    against a clock taken at a whole second: before, the listing came back empty there, and a
    conftest.py the agent planted was not seen."""
    from tbscale_testing.tasks import write_harbor_task

    task = write_harbor_task(tmp_path / "tasks", "busybox-tools", dockerfile=(
        "FROM debian:bookworm-slim\nWORKDIR /app\nCOPY find date /bb/\nRUN chmod 755 /bb/find /bb/date\n"
        "ENV PATH=/bb:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin\n"))
    (task / "environment" / "find").write_text(BUSYBOX_FIND)
    (task / "environment" / "date").write_text(BUSYBOX_DATE)
    row, run_dir = run(tmp_path, loopback_model, ["date +%s.%N; find / -maxdepth 0 -newerct @0 || echo no-newerct",
                                                  "echo 'import os' > /conftest.py && echo done > /app/out.txt"],
                       tasks=tmp_path / "tasks", task="busybox-tools")
    events = list(read_jsonl(run_dir / row["trajectory_path"]))
    first = next(e for e in events if e["type"] == "observation")
    assert "%N" in first["output"] and "no-newerct" in first["output"], first  # the stand-ins act as busybox's
    planted = [e for e in row["tampering"] if e["kind"] == "test_config_planted"]
    assert planted and planted[0]["paths"] == ["/conftest.py"], row["tampering"]
    # nothing the environment's own preparation changed before the clock is reported
    assert kinds(row) <= {"test_config_planted"}, row["tampering"]
