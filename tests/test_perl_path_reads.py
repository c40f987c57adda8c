"""Perl's module folders (runner/perl_path.py): at the baseline the folders of @INC and the module
files in them, and after the sweep the module files changed there under a path a folder had; the
guard shell run here with `sh`, its folders given through PERL5LIB (perl puts them first)."""

from __future__ import annotations

import os
import shutil
import subprocess
import time

import pytest

from tbscale.runner.build_tools import TOOLS, tool_groups
from tbscale.runner.guard_shell import PROJECT, parse_snapshot
from tbscale.runner.perl_path import (ALL, INC, KIND, LINK, MORE, NAMES, PERL, PERL_PATH, baseline_folders, perl_changed,
                                      perl_lines, perl_modules, perl_seen_outside)
from tbscale.types.guard import ToolRun

needs_perl = pytest.mark.skipif(shutil.which("perl") is None, reason="perl is not installed")


def _shell(env: dict[str, str]) -> dict[str, str]:
    run = subprocess.run(["sh", "-c", PROJECT + PERL_PATH], capture_output=True, text=True, check=True, timeout=60,
                         env={"PATH": os.environ["PATH"], "TBSCALE_PERL_PATH": PERL, **env})
    return parse_snapshot(run.stdout).get("perl_path", {})


@needs_perl
def test_the_guard_shell_lists_modules_written_under_a_path_a_folder_had(tmp_path):
    first, later = tmp_path / "first", tmp_path / "later"  # perl searches `first` before `later`
    (later / "Tb" / "auto").mkdir(parents=True)
    (later / "Tb" / "Kept.pm").write_text("package Tb::Kept; 1;\n")
    (later / "Tb" / "Beside.pm").write_text("package Tb::Beside; 1;\n")
    (later / "Tb" / "auto" / "x.so").write_bytes(b"\x7fELF")
    folders = f"{first}:{later}"  # `first` is not there yet: it counts all the same
    baseline = _shell({"PERL5LIB": folders})
    assert baseline[INC].split(":")[:2] == [str(first), str(later)]
    names = set(baseline[NAMES].split())
    assert {"Tb/Kept.pm", "Tb/Beside.pm", "Tb/auto/x.so", "strict.pm"} <= names, sorted(names)[:20]
    time.sleep(0.05)
    since = f"{time.time():.9f}"
    time.sleep(0.05)
    (first / "Tb").mkdir(parents=True)
    (first / "Tb" / "Kept.pm").write_text("die;\n")  # shadows the one in `later`
    (first / "strict.pm").write_text("die;\n")  # shadows the library's
    (later / "Tb" / "Beside.pmc").write_text("die;\n")  # perl takes a .pmc over the .pm beside it
    (later / "Tb" / "auto" / "x.so").write_bytes(b"\x7fELF the agent's")  # replaced in place
    (later / "Tb" / "New.pm").write_text("package Tb::New; 1;\n")  # a new module: an install
    (later / "notes.txt").write_text("not a module\n")
    after = _shell({"PERL5LIB": folders, "TBSCALE_SINCE": since, "TBSCALE_PERL_PATH_BEFORE": baseline_folders(baseline)})
    assert {p for p in after if not p.startswith(LINK)} == {str(first / "Tb" / "Kept.pm"), str(first / "strict.pm"), str(later / "Tb" / "Beside.pmc"),
                          str(later / "Tb" / "auto" / "x.so"), str(later / "Tb" / "New.pm")}, after
    found = perl_modules(baseline, after)
    assert found == sorted([str(first / "Tb" / "Kept.pm"), str(first / "strict.pm"), str(later / "Tb" / "Beside.pmc"),
                            str(later / "Tb" / "auto" / "x.so")])
    (entry,) = perl_changed(baseline, after, {}, {}, {}, [(2, f"cp x {first}/strict.pm")], ToolRun([PERL], "/"))
    assert entry["kind"] == KIND and entry["paths"] == found
    assert tool_groups({"perl_path": baseline}, {"perl_path": after}) == {KIND: found}


@needs_perl
def test_folders_that_are_links_are_walked_where_they_lead(tmp_path):
    # `core` leads to `core.real`, as Debian's /usr/share/perl/5.36 to 5.36.0; `first` is not there
    # at the baseline and the agent makes it a link to a folder of its own
    first, core, real, agent = tmp_path / "first", tmp_path / "core", tmp_path / "core.real", tmp_path / "agent"
    real.mkdir()
    (real / "Core.pm").write_text("package Core; 1;\n")
    core.symlink_to("core.real")
    folders = f"{first}:{core}"
    baseline = _shell({"PERL5LIB": folders})
    assert "Core.pm" in baseline[NAMES].split()  # the folder's modules, read through its link
    time.sleep(0.05)
    since = f"{time.time():.9f}"
    time.sleep(0.05)
    agent.mkdir()
    (agent / "Core.pm").write_text("die;\n")
    first.symlink_to(agent)
    (real / "Core.pm").write_text("die;\n")  # replaced in place, under the path dpkg lists
    after = _shell({"PERL5LIB": folders, "TBSCALE_SINCE": since, "TBSCALE_PERL_PATH_BEFORE": baseline_folders(baseline)})
    assert after[LINK + str(first)] == str(agent) and after[LINK + str(core)] == str(real)
    assert perl_modules(baseline, after) == sorted([str(agent / "Core.pm"), str(real / "Core.pm")])
    (found,) = perl_seen_outside({str(agent / "Core.pm"): 1}, baseline, after, [], [])
    assert found["paths"] == [str(agent / "Core.pm")]


def test_the_entry_and_its_limits():
    before = {INC: "/etc/perl:/usr/share/perl5:/usr/lib/x86_64-linux-gnu/perl-base", NAMES: "strict.pm Debconf/Db.pm"}
    after = {"/etc/perl/strict.pm": "c", "/usr/share/perl5/Debconf/Db.pm": "c", "/usr/share/perl5/JSON.pm": "c",
             "/opt/elsewhere/strict.pm": "c"}
    assert perl_modules(before, after) == ["/etc/perl/strict.pm", "/usr/share/perl5/Debconf/Db.pm"]
    # new paths that count all the same: any module in /etc/perl, and those debconf loads by name or
    # when they are there
    loaded = {"/etc/perl/Tb/Own.pm": "c", "/usr/share/perl5/Debconf/FrontEnd/Zz.pm": "c",
              "/usr/share/perl5/Locale/gettext.pmc": "c", "/usr/share/perl5/Locale/Other.pm": "c"}
    assert perl_modules(before, loaded) == sorted(set(loaded) - {"/usr/share/perl5/Locale/Other.pm"})
    # more names at the baseline than were given: every module file changed counts
    assert perl_modules({**before, NAMES: ALL}, after) == ["/etc/perl/strict.pm", "/usr/share/perl5/Debconf/Db.pm",
                                                            "/usr/share/perl5/JSON.pm"]
    # more changed than listed: said, even with none of the listed under a known path
    (flooded,) = perl_changed(before, {"/usr/share/perl5/JSON.pm": "c", MORE: "1"}, {}, {}, {}, [], ToolRun([], None))
    assert flooded["kind"] == KIND and "not all were looked at" in flooded["detail"] and "paths" not in flooded
    # and nothing settles it: the archive's copies of those listed say nothing of the rest
    assert tool_groups({"perl_path": before}, {"perl_path": {**after, MORE: "1"}}).get(KIND) is None
    assert tool_groups({"perl_path": before}, {"perl_path": after})[KIND] == perl_modules(before, after)
    assert perl_changed(before, {"/usr/share/perl5/JSON.pm": "c"}, {}, {}, {}, [], ToolRun([], None)) == []
    # no baseline (no perl then): nothing to go by
    assert perl_modules({}, after) == []


def test_every_verifier_with_a_script_has_the_check():
    assert perl_lines(["#!/bin/bash\napt-get install -y curl\n"]) == [PERL]
    assert perl_lines(["", " \n"]) == []
    tool = next(t for t in TOOLS if t.key == "perl_path")
    assert tool.carried is not None and tool.carried({INC: "/etc/perl:/usr/share/perl5"}) == "/etc/perl:/usr/share/perl5"


def test_the_outside_listing_reports_modules_the_check_inside_did_not():
    before = {INC: "/etc/perl:/usr/share/perl5:/usr/lib/x86_64-linux-gnu/perl-base",
              NAMES: "strict.pm Debconf/Db.pm auto/POSIX/POSIX.so"}
    changed = {"/etc/perl/strict.pm": 1, "/usr/share/perl5/Debconf/Db.pm": 0, "/etc/perl/auto/POSIX/POSIX.so": 1,
               "/usr/share/perl5/JSON.pm": 1,  # a new path: an install
               "/usr/lib/x86_64-linux-gnu/perl-base/strict.pm": 2,  # removed: what loads it fails
               "/etc/perl/notes.txt": 1}
    (found,) = perl_seen_outside(changed, before, None, [], [])
    assert found["kind"] == KIND and "as seen from outside the environment" in found["detail"]
    assert found["paths"] == ["/etc/perl/auto/POSIX/POSIX.so", "/etc/perl/strict.pm", "/usr/share/perl5/Debconf/Db.pm"]
    inside = [{"kind": KIND, "source": "environment", "detail": "", "paths": found["paths"]}]
    assert perl_seen_outside(changed, before, None, inside, []) == []
    assert perl_seen_outside(changed, None, None, [], []) == []
