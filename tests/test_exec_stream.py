"""A command's output is never lost to the engine's attach race (moby/moby#27289): Container.exec
holds each command until its stream is attached. benchmarks/bench_exec_output.py measures the
race itself (it needs a loaded machine to show)."""

from __future__ import annotations

import time

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
                                                     "touch /tmp/started; echo started"], stdin=True)["Id"]
        sock = api.exec_start(exec_id, socket=True)
        try:
            time.sleep(1.0)
            assert box.exec("test -e /tmp/started && echo ran || echo waiting", 30).output == "waiting\n"
            getattr(sock, "_sock", sock).sendall(b"go\n")
            output = b"".join(chunk for _, chunk in frames_iter(sock, tty=False))
        finally:
            sock.close()
        assert output == b"started\n"
        assert api.exec_inspect(exec_id)["ExitCode"] == 0
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
