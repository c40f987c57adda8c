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
        # stdout and stderr are two pipes: both arrive, in the order the engine read them
        both = box.exec("printf out; printf err >&2; exit 7", 30)
        assert both.output in ("outerr", "errout") and both.exit_code == 7
