"""The programs dpkg, its maintainer scripts and apt's hooks start by name (runner/dpkg_programs.py):
at the baseline the names in dpkg's PATH folders, after the sweep the files written under one of
those names there or in /usr/local's folders before them, and the programs whose alternative was
pointed elsewhere. The guard shell runs in a Debian container, where those folders are."""

from __future__ import annotations

import subprocess
import time

import pytest

from tbscale.runner.build_tools import TOOLS, tool_groups
from tbscale.runner.dpkg_programs import (ALL, DPKG_PROGRAMS, KIND, LISTED_MAX, MORE, NAMES, baseline_names,
                                          program_groups, programs_changed, programs_seen_outside)
from tbscale.runner.guard_shell import PROJECT, parse_snapshot
from tbscale.types.guard import ToolRun

IMAGE = "python:3.11-slim-bookworm"
GIO = "/usr/lib/x86_64-linux-gnu/gio/modules"
RUN = ToolRun(["a:"], "/")


def test_the_shell_part_is_valid_sh() -> None:
    for shell in ("sh", "bash"):
        res = subprocess.run([shell, "-n", "-c", PROJECT + DPKG_PROGRAMS], capture_output=True, text=True)
        assert res.returncode == 0, (shell, res.stderr)


def test_it_runs_where_the_scripts_run_apt_or_dpkg() -> None:
    [tool] = [t for t in TOOLS if t.key == "dpkg_programs"]
    assert tool.folders(["apt-get update\napt-get install -y curl\n"], None) == ["a:curl"]
    assert tool.folders(["python3 -m pytest /tests\n"], None) == []


def test_programs_written_under_a_name_the_baseline_had_count_and_settle_only_when_all_were_listed() -> None:
    before = {NAMES: "rm awk sed "}
    after = {"/usr/sbin/rm": "c", "/usr/bin/awk": "c"}
    [entry] = programs_changed(before, after, {}, {}, {}, [(3, "cp /opt/rm /usr/sbin/rm")], RUN)
    assert entry["kind"] == KIND and entry["paths"] == ["/usr/bin/awk", "/usr/sbin/rm"]
    assert entry["by_command"]["turn"] == 3
    assert program_groups({"dpkg_programs": before}, {"dpkg_programs": after}) == {KIND: ["/usr/bin/awk", "/usr/sbin/rm"]}
    assert tool_groups({"dpkg_programs": before}, {"dpkg_programs": after})[KIND] == ["/usr/bin/awk", "/usr/sbin/rm"]
    # more written than listed: the entry says so, and nothing settles it (an unlisted one may be the agent's)
    flooded = {**after, MORE: "1"}
    [entry] = programs_changed(before, flooded, {}, {}, {}, [], RUN)
    assert f"more than {LISTED_MAX} written: not all were looked at" in entry["detail"]
    assert program_groups({"dpkg_programs": before}, {"dpkg_programs": flooded}) == {}
    assert programs_changed(before, {}, {}, {}, {}, [], RUN) == []


def test_the_outside_listing_finds_what_the_check_inside_did_not_report() -> None:
    before = {NAMES: "rm awk "}
    changed = {"/usr/sbin/rm": 1, "/usr/local/bin/awk": 1, "/usr/bin/newtool": 1, "/usr/bin/awk": 2,
               "/usr/lib/x/rm": 1, "/usr/local/bin/pip": 0}
    [entry] = programs_seen_outside(changed, before, {}, [], [])
    assert entry["paths"] == ["/usr/local/bin/awk", "/usr/sbin/rm"] and "from outside" in entry["detail"]
    reported = [{"kind": KIND, "source": "environment", "detail": "x", "paths": ["/usr/sbin/rm", "/usr/local/bin/awk"]}]
    assert programs_seen_outside(changed, before, {}, reported, []) == []
    [entry] = programs_seen_outside(changed, {NAMES: ALL}, {}, [], [])
    assert entry["paths"] == ["/usr/bin/newtool", "/usr/local/bin/awk", "/usr/local/bin/pip", "/usr/sbin/rm"]


@pytest.mark.docker
@pytest.mark.usefixtures("docker_available")
def test_the_guard_shell_lists_programs_replaced_put_first_or_pointed_elsewhere():
    import docker

    engine = docker.from_env()
    box = engine.containers.run(IMAGE, ["sleep", "600"], detach=True, labels={"tbscale.test": "dpkg-programs"})
    try:
        def shell(env: dict[str, str]) -> dict[str, str]:
            res = box.exec_run(["sh", "-c", PROJECT + DPKG_PROGRAMS], environment={"TBSCALE_DPKG_PROGRAMS": "a:", **env})
            assert res.exit_code == 0, res.output
            return parse_snapshot(res.output.decode()).get("dpkg_programs", {})

        def run(command: str) -> None:
            res = box.exec_run(["sh", "-c", command])
            assert res.exit_code == 0, (command, res.output)

        run("printf '#!/bin/sh\\n' > /usr/local/bin/zlocal && chmod 755 /usr/local/bin/zlocal")
        baseline = shell({})
        names = set(baseline[NAMES].split())
        assert {"rm", "awk", "sed", "dpkg", "ldconfig"} <= names and "zlocal" not in names, sorted(names)[:30]
        time.sleep(0.05)
        since = f"{time.time():.9f}"
        time.sleep(0.05)
        # (not the programs the guard shell itself runs: the check inside believes those, the outside one does not)
        run("set -e; w='#!/bin/sh\\nexec /bin/true\\n'"
            "; printf \"$w\" > /usr/sbin/basename; chmod 755 /usr/sbin/basename"  # before /usr/bin/basename on dpkg's PATH
            "; printf \"$w\" > /usr/local/bin/mktemp; chmod 755 /usr/local/bin/mktemp"  # before /usr/bin/mktemp on root's
            # a folder made a link to one of the agent's, walked where it leads
            "; mkdir /opt/lsb; printf \"$w\" > /opt/lsb/chmod; rmdir /usr/local/sbin; ln -s /opt/lsb /usr/local/sbin"
            "; cp /usr/bin/touch /tmp/touch && cat /tmp/touch > /usr/bin/touch"  # written in place
            "; printf \"$w\" > /opt/which; chmod 755 /opt/which; ln -sfn /opt/which /etc/alternatives/which"
            "; printf \"$w\" > /usr/local/bin/zlocal"  # a name only /usr/local had (pip's, upgraded)
            "; printf \"$w\" > /usr/bin/newtool; chmod 755 /usr/bin/newtool"  # a new name: an install
            # a module under a folder a package's file trigger watches (libglib's, in dpkg's registry; one
            # in a triggers file of a package's), whatever its name; not one under a folder none watches
            f"; mkdir -p {GIO} /opt/watched /opt/unwatched; printf x > {GIO}/libzz.so; printf x > /opt/watched/libw.so.1"
            "; printf x > /opt/unwatched/libu.so"
            f"; echo '{GIO} libglib2.0-0:amd64/noawait' >> /var/lib/dpkg/triggers/File"
            "; echo 'interest-noawait /opt/watched' > /var/lib/dpkg/info/zw.triggers")
        after = shell({"TBSCALE_SINCE": since, "TBSCALE_DPKG_PROGRAMS_BEFORE": baseline_names(baseline)})
        assert sorted(after) == sorted(["/opt/lsb/chmod", "/opt/watched/libw.so.1", f"{GIO}/libzz.so", "/usr/bin/touch",
                                        "/usr/bin/which", "/usr/local/bin/mktemp", "/usr/sbin/basename"]), after
        # given no names (more than NAMES_MAX at the baseline), every program written counts
        after = shell({"TBSCALE_SINCE": since, "TBSCALE_DPKG_PROGRAMS_BEFORE": ALL})
        assert {"/usr/bin/newtool", "/usr/local/bin/zlocal", "/usr/sbin/basename"} <= set(after), after
    finally:
        box.remove(force=True)
