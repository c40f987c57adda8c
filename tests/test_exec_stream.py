"""A command's output is never lost to the engine's attach race (moby/moby#27289): Container.exec
holds each command until its stream is attached. benchmarks/bench_exec_output.py measures the
race itself (it needs a loaded machine to show)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tbscale.environments import StartSpec

IMAGE = "debian:bookworm-slim"


@pytest.mark.docker
def test_a_command_starts_only_once_its_go_line_is_sent() -> None:
    from docker.utils.socket import frames_iter

    from tbscale.environments.docker import _GO_THEN_RUN, Container

    with Container.start(StartSpec(IMAGE, cpus=1, memory_mb=256)) as box:
        api = box.container.client.api
        exec_id = api.exec_create(box.container.id, ["bash", "-c", _GO_THEN_RUN, "30", "bash",
                                                     "touch /tmp/started; echo started; exit 5"], stdin=True)["Id"]
        sock = api.exec_start(exec_id, socket=True)
        try:
            time.sleep(1.0)
            assert box.exec("test -e /tmp/started && echo ran || echo waiting", 30).output == "waiting\n"
            getattr(sock, "_sock", sock).sendall(b"tok3n\n")  # the go line carries the end token
            output = b"".join(chunk for _, chunk in frames_iter(sock, tty=False))
        finally:
            sock.close()
        assert output == b"started\n\ntok3n 5 0\n"  # the command's output, then the end line: code, held
        assert box.exec("test -e /tmp/started && echo ran || echo waiting", 30).output == "ran\n"


@pytest.mark.docker
def test_exec_keeps_stdin_empty_and_returns_every_reply() -> None:
    from tbscale.environments.docker import Container

    with Container.start(StartSpec(IMAGE, cpus=1, memory_mb=256)) as box:
        # the go line is consumed by the wrapper, never read by the command; stdin is /dev/null
        res = box.exec("cat; echo rc=$?", 30)
        assert (res.output, res.exit_code, res.timed_out) == ("rc=0\n", 0, False)
        replies = [box.exec(f"echo reply-{i}", 30).output for i in range(40)]
        assert replies == [f"reply-{i}\n" for i in range(40)]
        late = box.exec("sleep 5; echo late", 1)
        assert late.timed_out and late.exit_code == 124 and late.output == ""
        both = box.exec("printf out; printf err >&2; exit 7", 30)
        assert both.output == "outerr" and both.exit_code == 7


@pytest.mark.docker
def test_stdout_and_stderr_come_back_in_the_order_they_were_written() -> None:
    """The engine copies an exec's stdout and stderr pipes separately, and their frames come back
    in whatever order it read them; a test script's "FAILED" line once landed inside a `cat:`
    error message, the parser did not see it, and a nop agent passed. The command's stderr is its
    stdout, so the order is the order of the writes (before: every one of 20 runs reordered)."""
    from tbscale.environments.docker import Container
    from tbscale.tasks.test_output import parse_test_output

    lines = 300
    alternating = 'for i in $(seq 1 %d); do echo "out-$i"; echo "err-$i" >&2; done' % lines
    expected = "".join(f"out-{i}\nerr-{i}\n" for i in range(1, lines + 1))
    # run-tests.sh of a legacy task: an error message of `cat` (stderr, in two writes) just
    # before a FAILED line (stdout)
    script = ('echo "=== short test summary info ==="\n'
              'if [ "$(cat /app/ok.txt)" = ok ]; then echo "PASSED t.py::test_ok"; else echo "FAILED t.py::test_ok"; fi\n'
              'echo "PASSED t.py::test_db"\n')
    with Container.start(StartSpec(IMAGE, cpus=1, memory_mb=256)) as box:
        for _ in range(5):
            assert box.exec(alternating, 60).output == expected
        for _ in range(20):
            res = box.exec(script, 60)
            assert "\nFAILED t.py::test_ok\n" in res.output, res.output
            assert parse_test_output("pytest", res.output).passed is False


def test_the_folder_test_double_keeps_the_order_of_writes_too(tmp_path) -> None:
    from tbscale_testing.forks import FolderBackend

    box = FolderBackend(tmp_path).start()
    assert box.exec("printf out; printf err >&2; printf out2", 30).output == "outerrout2"


@pytest.mark.docker
def test_a_background_process_that_keeps_the_output_is_seen_and_the_next_exec_is_not_held() -> None:
    """`server &` with no redirection leaves a process holding the exec's output. The wrapper's end
    line says so (held 1), and the exec reads on as `docker exec` does: what that process prints
    before the engine closes the stream is output too. The next exec's end line says nothing holds
    its output (held 0), so it ends there, though the engine would hold its stream as long. The
    process listing the guard takes leaves out the listing exec's own wrapper and `timeout`."""
    from docker.utils.socket import frames_iter

    from tbscale.environments.docker import _GO_THEN_RUN, Container
    from tbscale.runner.guard_shell import PROCESSES as _PROCESSES

    def end_line(box, command: str) -> bytes:
        api = box.container.client.api
        exec_id = api.exec_create(box.container.id, ["bash", "-c", _GO_THEN_RUN, "30", "bash", command],
                                  stdin=True)["Id"]
        sock = api.exec_start(exec_id, socket=True)
        try:
            getattr(sock, "_sock", sock).sendall(b"tok3n\n")
            output = b"".join(chunk for _, chunk in frames_iter(sock, tty=False))
        finally:
            sock.close()
        return output.split(b"\ntok3n ", 1)[1].split(b"\n", 1)[0]

    with Container.start(StartSpec(IMAGE, cpus=1, memory_mb=256)) as box:
        assert end_line(box, "sleep 1000 & echo started") == b"0 1"
        assert end_line(box, "echo next; exit 3") == b"3 0"
        res = box.exec("echo before; (echo late) & echo after; exit 4", 30)
        assert (sorted(res.output.split()), res.exit_code) == (["after", "before", "late"], 4), res.output
        res = box.exec("echo before; sleep 1000 & echo after; exit 5", 30)
        assert (res.output, res.exit_code, res.timed_out) == ("before\nafter\n", 5, False)
        assert box.exec("echo next", 30).output == "next\n"
        listing = box.exec(_PROCESSES, 30, user="0").output
        commands = sorted(line.split("\t")[4].strip() for line in listing.splitlines())
        assert commands == ["/sbin/docker-init -- sleep infinity", "sleep 1000", "sleep 1000",
                            "sleep infinity"], listing


@pytest.mark.parametrize("text", [b"", b"x", b"no newline", b"a\nb\n", b"\n\n", b"tok tok\n", b"\ntok", b"\ntok\n",
                                  b"\ntok3 1\n", b"z" * 5000])
@pytest.mark.parametrize("held", [b"0", b"1"])
def test_the_end_line_is_found_wherever_the_stream_splits(text: bytes, held: bytes) -> None:
    from tbscale.environments.base import BoundedOutput
    from tbscale.environments.docker import _UntilEndLine

    later = b"what a background process printed later\n"
    stream = text + b"\ntok 17 " + held + b"\n" + later
    for cut in range(len(stream) + 1):
        for second_cut in (cut, min(cut + 1, len(stream)), min(cut + 7, len(stream))):
            out = BoundedOutput(None)
            until = _UntilEndLine("tok", out)
            chunks = [c for c in (stream[:cut], stream[cut:second_cut], stream[second_cut:]) if c]
            rest = b""
            for i, c in enumerate(chunks):  # as Container.exec reads
                if until.feed(c):
                    rest = until.after + b"".join(chunks[i + 1:])
                    break
            assert bytes(out.head) == text and until.code == 17, (cut, second_cut)
            assert until.held == (held == b"1") and rest == later, (cut, second_cut)


def test_a_stream_that_ends_without_the_end_line_keeps_every_byte() -> None:
    from tbscale.environments.base import BoundedOutput
    from tbscale.environments.docker import _UntilEndLine

    out = BoundedOutput(None)
    until = _UntilEndLine("tok", out)
    for chunk in (b"partial\nto", b"k 1"):  # cut short: the wrapper was killed mid end line
        assert not until.feed(chunk)
    until.close()
    assert bytes(out.head) == b"partial\ntok 1" and until.code is None


SPY = Path(__file__).parent / "fixtures" / "end_token_spy.py"
SLOW = "for i in $(seq 1 60); do echo line-$i; sleep 0.03; done; exit 3"
SLOW_OUTPUT = "".join(f"line-{i}\n" for i in range(1, 61))


@pytest.mark.docker
def test_a_kept_root_process_can_forge_an_end_line_but_not_end_an_exec_with_hostile_peers() -> None:
    """A root process left running reads each exec's end token from its wrapper's memory and
    prints a forged end line into its output (tests/fixtures/end_token_spy.py). An exec that
    trusts its end line ends there, its output cut short; one run with `hostile_peers` (the
    guard's and the verifier's, when the agent's processes are kept) reads its output to the end
    of the stream and takes the exit code from the engine."""
    from tbscale.environments.docker import Container
    from tbscale_testing.waiting import wait_for

    with Container.start(StartSpec("python:3.11-slim-bookworm", cpus=1, memory_mb=256)) as box:
        box.put_archive({"spy.py": SPY.read_bytes()}, "/tmp")
        box.exec("setsid python3 /tmp/spy.py >/dev/null 2>&1 </dev/null &", 30, user="0")
        # The attack works: a trusting exec is cut short with a forged exit code (within 5 tries;
        # the spy must find the token in the wrapper's heap while the command runs).
        cut = [box.exec(SLOW, 60) for _ in range(5)]
        assert any(r.output != SLOW_OUTPUT and r.exit_code == 0 for r in cut), [r.output[-40:] for r in cut]
        forged_before = box.exec("wc -l < /tmp/spy.log", 30, hostile_peers=True).output.strip()
        for _ in range(5):
            res = box.exec(SLOW, 60, hostile_peers=True)
            assert (res.output, res.exit_code, res.timed_out) == (SLOW_OUTPUT, 3, False), res.output[-80:]
        # The spy is still alive and still finds tokens in the trusting execs.
        box.exec(SLOW, 60)
        assert wait_for(lambda: box.exec("wc -l < /tmp/spy.log", 30, hostile_peers=True).output.strip() != forged_before,
                        timeout=60)
        assert box.exec("exit 7", 30, hostile_peers=True).exit_code == 7


STOPPER = Path(__file__).parent / "fixtures" / "wrapper_stopper.py"


@pytest.mark.docker
def test_an_exec_something_stopped_is_abandoned_at_its_timeout_plus_grace() -> None:
    """A root process left running stops every exec's wrapper and `timeout` (SIGSTOP,
    tests/fixtures/wrapper_stopper.py): neither the end line nor the end of the stream ever
    comes, and the exec waited for ever. Now this side hangs up at the command's timeout plus
    EXEC_GRACE_SEC, trusting the end line or not, and says so (`abandoned`)."""
    from concurrent.futures import ThreadPoolExecutor

    from tbscale.environments.docker import EXEC_GRACE_SEC, Container
    from tbscale_testing.waiting import wait_for

    with Container.start(StartSpec("python:3.11-slim-bookworm", cpus=1, memory_mb=256)) as box:
        # it stops the commands that hold "echo hi", so that the one starting it ends first
        box.put_archive({"stop.py": STOPPER.read_bytes(), "stop.match": b"echo hi"}, "/tmp")
        box.exec("setsid python3 /tmp/stop.py /tmp/stop.match >/dev/null 2>&1 </dev/null &", 30, user="0")
        assert wait_for(lambda: box.exec("ls /tmp/stopper.ready", 30).exit_code == 0, timeout=120)
        # (the sleep: a command the stopper can find running however busy the machine is)
        with ThreadPoolExecutor(2) as pool:  # side by side: one wait of the grace, not two
            results = list(pool.map(lambda hostile: box.exec("sleep 1; echo hi", 2, hostile_peers=hostile),
                                    (False, True)))
        for res in results:
            assert res.abandoned and res.timed_out and res.exit_code == -1, res
            assert res.duration_sec >= 2 + EXEC_GRACE_SEC - 0.5, res
        # the stopper did it (the two wrappers are in its log), and the container still answers. (It
        # may log a third: a wrapper's child caught between its fork and its exec of `timeout` still
        # has the wrapper's command line; seen once, in a loaded run.)
        assert int(box.exec("wc -l < /tmp/stopper.log", 30).output.strip()) >= 2
        assert box.exec("echo back", 30).output == "back\n"


@pytest.mark.docker
def test_a_copy_out_stops_at_its_limit(tmp_path) -> None:
    """What the agent left may be any size: a copy out past its limit stops with SandboxError, a
    file read is capped unless told otherwise, and a folder comes out through a file."""
    from tbscale.environments.base import READ_LIMIT
    from tbscale.environments.docker import Container
    from tbscale.errors import SandboxError

    with Container.start(StartSpec(IMAGE, cpus=1, memory_mb=256)) as box:
        box.exec("mkdir -p /d && head -c 3000000 /dev/zero > /d/big && echo small > /d/small", 30)
        assert box.read_file("/d/small", limit=1024) == b"small\n"
        assert len(box.read_file("/d/big")) == 3_000_000 and READ_LIMIT > 3_000_000
        with pytest.raises(SandboxError, match="is over"):
            box.read_file("/d/big", limit=1_000_000)
        with pytest.raises(SandboxError, match="is over"):
            box.get_dir("/d", tmp_path / "a", limit=1_000_000)
        assert box.get_dir("/d", tmp_path / "b") and (tmp_path / "b" / "d" / "big").stat().st_size == 3_000_000
        assert box.read_file("/d/none", limit=10) is None
        # a device file or a link out of the folder, as the agent may leave one: a refused copy
        box.exec("mkdir -p /e && mknod /e/dev c 1 3 && ln -s /etc/passwd /e/out", 30, user="0")
        with pytest.raises(SandboxError, match="refused"):
            box.get_dir("/e", tmp_path / "c")
