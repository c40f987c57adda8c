"""The shared libraries the dynamic loader finds for the verifier's programs
(runner/shared_libraries.py): the names its folders hold at the baseline, and after the sweep the
libraries written there under one of those names; the guard shell run here with `sh`."""

from __future__ import annotations

import os
import shutil
import subprocess
import time

import pytest

from tbscale.runner.build_tools import TOOLS
from tbscale.runner.guard_shell import PROJECT, parse_snapshot
from tbscale.runner.shared_libraries import (FOLDERS, KIND, LOADER, NAMES, OPENSSL, OPENSSL_KIND, SHARED_LIBRARIES,
                                             baseline_names, libraries_changed, libraries_seen_outside, library_groups,
                                             loader_lines, openssl_settings, written_libraries)
from tbscale.types.guard import ToolRun


def _shell(env: dict[str, str], programs: str = "") -> dict[str, str]:
    # `_files`: the real paths of the programs the verifier runs, as the guard's SNAPSHOT leaves them
    script = f"_files='{programs}'\n" + PROJECT + SHARED_LIBRARIES
    run = subprocess.run(["sh", "-c", script], capture_output=True, text=True, check=True, timeout=60,
                         env={"PATH": os.environ["PATH"], "TBSCALE_SHARED_LIBRARIES": LOADER, **env})
    return parse_snapshot(run.stdout).get("shared_libraries", {})


def test_the_guard_shell_lists_libraries_written_under_a_name_the_loaders_folders_had(tmp_path):
    lib = tmp_path / "lib"  # a folder of LD_LIBRARY_PATH: one the loader searches
    (lib / "glibc-hwcaps" / "x86-64-v3").mkdir(parents=True)
    # names no program here loads (the shell's own programs run with this LD_LIBRARY_PATH)
    (lib / "libtbkept.so.1").write_bytes(b"\x7fELF kept")
    (lib / "libtbold.so.2").write_bytes(b"\x7fELF old")
    sh = os.path.realpath("/bin/sh")
    baseline = _shell({"LD_LIBRARY_PATH": str(lib)}, sh)
    names = set(baseline[NAMES].split())
    assert {"libtbkept.so.1", "libtbold.so.2"} <= names
    # the libraries the loader finds for the programs given, in the system's folders
    assert "libc.so.6" in names, sorted(names)[:20]
    assert set(baseline) == {NAMES, FOLDERS} and str(lib) in baseline[FOLDERS].split(":")
    time.sleep(0.05)
    since = f"{time.time():.9f}"
    time.sleep(0.05)
    (lib / "libtbkept.so.1").write_bytes(b"\x7fELF the agent's")  # replaced in place
    (lib / "glibc-hwcaps" / "x86-64-v3" / "libtbold.so.2").write_bytes(b"\x7fELF")  # where the loader looks first
    (lib / "libtbnew.so.4").write_bytes(b"\x7fELF")  # a new library: an install, not listed
    (lib / "libnss_tbtest.so.2").write_bytes(b"\x7fELF")  # a name service module: listed whatever its name
    after = _shell({"LD_LIBRARY_PATH": str(lib), "TBSCALE_SINCE": since,
                    "TBSCALE_SHARED_LIBRARIES_BEFORE": baseline_names(baseline)}, sh)
    assert after.pop(FOLDERS) == baseline[FOLDERS] and after.pop(OPENSSL).startswith(("s/", "m/"))
    assert after == {str(lib / "libtbkept.so.1"): "c", str(lib / "glibc-hwcaps" / "x86-64-v3" / "libtbold.so.2"): "c",
                     str(lib / "libnss_tbtest.so.2"): "c"}
    # more names than an exec's variable holds: every library written there is printed, and sorted here
    every = _shell({"LD_LIBRARY_PATH": str(lib), "TBSCALE_SINCE": since,
                    "TBSCALE_SHARED_LIBRARIES_BEFORE": baseline_names({NAMES: "x" * 100_001})}, sh)
    assert str(lib / "libtbnew.so.4") in every
    assert written_libraries(every, baseline[NAMES]) == sorted(after)
    # a folder the loader does not search is not looked at
    elsewhere = _shell({"TBSCALE_SINCE": since, "TBSCALE_SHARED_LIBRARIES_BEFORE": baseline_names(baseline)}, sh)
    assert set(elsewhere) == {FOLDERS, OPENSSL} and str(lib) not in elsewhere[FOLDERS].split(":")


def test_the_guard_shell_lists_openssls_settings_and_modules_changed(tmp_path):
    """OpenSSL reads the settings of the folder its libcrypto was built with (OPENSSLDIR) in every
    program that uses it (python3's hashlib, pip, curl) and loads the providers and engines they name:
    a module of the agent's runs its code there. A libcrypto here names folders of the test's own."""
    lib, ssl, mods, elsewhere = (tmp_path / n for n in ("lib", "ssl", "mods", "opt"))
    for d in (lib, ssl / "inc.d", ssl / "certs", mods, elsewhere):
        d.mkdir(parents=True)
    (lib / "libcrypto.so.3").write_bytes(b"\x7fELF..." + f'OPENSSLDIR: "{ssl}"\0MODULESDIR: "{mods}"\0'.encode())
    (ssl / "openssl.cnf").write_text(f"# a comment .include {elsewhere}/not.cnf\n.include inc.d\n"
                                     f"[openssl_init]\nproviders = p\n[p]\nfips = fips_sect\n[fips_sect]\n"
                                     f"module = {elsewhere}/fips.so\n")
    (ssl / "inc.d" / "a.cnf").write_text(f".include = {elsewhere}/deeper.cnf\n")
    (elsewhere / "deeper.cnf").write_text("[x]\n")
    for f in (elsewhere / "fips.so", elsewhere / "not.cnf", mods / "legacy.so", ssl / "certs" / "ca.pem",
              elsewhere / "other.so"):
        f.write_bytes(b"kept")
    sh = os.path.realpath("/bin/sh")
    baseline = _shell({"LD_LIBRARY_PATH": str(lib)}, sh)
    time.sleep(0.05)
    since = f"{time.time():.9f}"
    time.sleep(0.05)
    for f in (elsewhere / "fips.so", elsewhere / "deeper.cnf", elsewhere / "not.cnf", ssl / "certs" / "ca.pem",
              elsewhere / "other.so"):
        f.write_bytes(b"the agent's")
    (ssl / "inc.d" / "a.cnf").write_text(f".include = {elsewhere}/deeper.cnf\n[a]\n")
    (ssl / "new.cnf").write_text("[y]\n")  # a settings file beside openssl.cnf
    (mods / "tbforge.so").write_bytes(b"\x7fELF")  # a provider a setting names by its name alone
    after = _shell({"LD_LIBRARY_PATH": str(lib), "TBSCALE_SINCE": since,
                    "TBSCALE_SHARED_LIBRARIES_BEFORE": baseline_names(baseline)}, sh)
    # the folders are looked for after the sweep only (a libcrypto replaced is `shared_library_changed`)
    assert OPENSSL not in baseline and {f"s{ssl}", f"m{mods}"} <= set(after[OPENSSL].split(":")), after[OPENSSL]
    listed = openssl_settings(after)
    # the module a setting names by path, what they include (a folder's files; two levels deep), a
    # .cnf beside openssl.cnf, the module folder's new file; not what a comment names, a certificate,
    # or a library no setting names
    assert listed == sorted([str(elsewhere / "fips.so"), str(ssl / "inc.d" / "a.cnf"), str(elsewhere / "deeper.cnf"),
                             str(ssl / "new.cnf"), str(mods / "tbforge.so")]), listed
    (found,) = libraries_changed(baseline, after, {}, {}, {}, [(3, f"cp x {elsewhere}/fips.so")], ToolRun([LOADER], "/"))
    assert found["kind"] == OPENSSL_KIND and found["paths"] == listed
    assert found["by_command"] == {"turn": 3, "command": f"cp x {elsewhere}/fips.so"}
    assert library_groups({"shared_libraries": baseline}, {"shared_libraries": after}) == {OPENSSL_KIND: listed}
    # openssl.cnf made a link to a file of the agent's: the link and where it leads
    (elsewhere / "mine.cnf").write_text("[z]\n")
    (ssl / "openssl.cnf").unlink()
    (ssl / "openssl.cnf").symlink_to(elsewhere / "mine.cnf")
    linked = openssl_settings(_shell({"LD_LIBRARY_PATH": str(lib), "TBSCALE_SINCE": since,
                                      "TBSCALE_SHARED_LIBRARIES_BEFORE": baseline_names(baseline)}, sh))
    assert {str(ssl / "openssl.cnf"), str(elsewhere / "mine.cnf")} <= set(linked), linked
    # the module folder made a link to a folder of the agent's, with a provider in it
    (elsewhere / "mods").mkdir()
    (elsewhere / "mods" / "legacy.so").write_bytes(b"\x7fELF the agent's")
    mods.rename(tmp_path / "mods.old")
    mods.symlink_to(elsewhere / "mods")
    moved = openssl_settings(_shell({"LD_LIBRARY_PATH": str(lib), "TBSCALE_SINCE": since,
                                     "TBSCALE_SHARED_LIBRARIES_BEFORE": baseline_names(baseline)}, sh))
    assert str(elsewhere / "mods" / "legacy.so") in moved, moved


def test_the_entry_names_the_libraries_written_under_the_baselines_names():
    before = {NAMES: "libc.so.6 libexpat.so.1 libexpat.so.1.8.10"}
    after = {"/usr/local/lib/libexpat.so.1": "c", "/usr/lib/x86_64-linux-gnu/libexpat.so.1.8.10": "c",
             "/usr/local/lib/libnotes.so.1": "c", "/usr/lib/x86_64-linux-gnu/libnss_evil.so.2": "c"}
    actions = [(2, "cp /tmp/e.so /usr/local/lib/libexpat.so.1 && ldconfig")]
    (found,) = libraries_changed(before, after, {}, {}, {}, actions, ToolRun([LOADER], "/app"))
    assert found["kind"] == KIND and found["source"] == "environment"
    assert found["paths"] == ["/usr/lib/x86_64-linux-gnu/libexpat.so.1.8.10", "/usr/lib/x86_64-linux-gnu/libnss_evil.so.2",
                              "/usr/local/lib/libexpat.so.1"]
    assert found["by_command"] == {"turn": 2, "command": actions[0][1]}
    assert library_groups({"shared_libraries": before}, {"shared_libraries": after}) == {KIND: found["paths"]}
    # a name the baseline did not have is an install; with no baseline, only a name service module counts
    assert libraries_changed(before, {"/usr/local/lib/libnotes.so.1": "c"}, {}, {}, {}, [], ToolRun([], None)) == []
    assert library_groups(None, {"shared_libraries": after}) == {KIND: ["/usr/lib/x86_64-linux-gnu/libnss_evil.so.2"]}


def test_every_verifier_with_a_script_has_the_check():
    assert loader_lines(["#!/bin/bash\ncd /app\npython3 -m pytest\n"]) == [LOADER]
    assert loader_lines(["", "  \n"]) == []
    tool = next(t for t in TOOLS if t.key == "shared_libraries")
    assert tool.carried is not None and tool.carried({NAMES: "libz.so.1"}) == "libz.so.1"


def test_the_outside_listing_reports_libraries_the_check_inside_did_not():
    """`file_checks: outside`: a libc or loader of the agent's can make every program inside lie
    (the check inside then lists nothing); the backend's listing of changed paths cannot."""
    before = {NAMES: "libc.so.6 libexpat.so.1 libexpat.so.1.8.10", FOLDERS: "/usr/lib/x86_64-linux-gnu:/usr/local/lib:"}
    after = {FOLDERS: "/usr/lib/x86_64-linux-gnu:/usr/local/lib:/opt/l:"}  # a folder the cache points into now
    changed = {"/usr/lib/x86_64-linux-gnu/libc.so.6": 0,  # replaced
               "/usr/lib/x86_64-linux-gnu/glibc-hwcaps/x86-64-v2/libexpat.so.1": 1,  # searched first
               "/opt/l/libexpat.so.1": 1,
               "/usr/local/lib/libnotes.so.1": 1,  # a new name: an install
               "/usr/lib/x86_64-linux-gnu/libexpat.so.1.8.10": 2,  # removed: what loaded it fails
               "/usr/share/doc/libc.so.6": 1,  # no folder of the loader's
               "/usr/lib/x86_64-linux-gnu/a/b/c/d/libexpat.so.1": 1}  # below one, not a capability folder
    actions = [(2, "cp /tmp/e.so /opt/l/libexpat.so.1")]
    (found,) = libraries_seen_outside(changed, before, after, [], actions)
    assert found["kind"] == KIND and "as seen from outside the environment" in found["detail"]
    assert found["paths"] == ["/opt/l/libexpat.so.1", "/usr/lib/x86_64-linux-gnu/glibc-hwcaps/x86-64-v2/libexpat.so.1",
                              "/usr/lib/x86_64-linux-gnu/libc.so.6"]
    # what the check inside reported already is not reported again
    inside = [{"kind": KIND, "source": "environment", "detail": "", "paths": found["paths"]}]
    assert libraries_seen_outside(changed, before, after, inside, actions) == []
    assert libraries_seen_outside(changed, None, None, [], actions) == []


def test_the_outside_listing_reports_openssls_settings_the_check_inside_did_not():
    before = {NAMES: "libc.so.6", FOLDERS: "/usr/lib:", OPENSSL: "s/usr/lib/ssl:s/etc/ssl:m/usr/lib/ossl-modules:"}
    changed = {"/etc/ssl/openssl.cnf": 0, "/usr/lib/ossl-modules/tbforge.so": 1, "/etc/ssl/certs/ca.pem": 1,
               "/etc/ssl/private/x.key": 1, "/usr/lib/ssl/openssl.cnf": 2, "/opt/forge.so": 1}
    (found,) = libraries_seen_outside(changed, before, {}, [], [])
    # what they include or name by path is not followed from outside: /opt/forge.so
    assert found["kind"] == OPENSSL_KIND and found["paths"] == ["/etc/ssl/openssl.cnf", "/usr/lib/ossl-modules/tbforge.so"]
    assert "as seen from outside the environment" in found["detail"]
    inside = [{"kind": OPENSSL_KIND, "source": "environment", "detail": "", "paths": found["paths"]}]
    assert libraries_seen_outside(changed, before, {}, inside, []) == []
    # with no folders from inside (a check made to say nothing), the settings folders distributions use still count
    (found,) = libraries_seen_outside(changed, {}, {}, [], [])
    assert found["paths"] == ["/etc/ssl/openssl.cnf"]


@pytest.mark.skipif(shutil.which("gcc") is None, reason="gcc is not installed: no program with an RPATH to build")
def test_the_folder_a_programs_rpath_names_is_one_of_the_loaders(tmp_path):
    """A program outside the system's bin folders (a conda environment's python) may find its
    libraries through its own RPATH: the loader's `--list` of it names that folder."""
    rlib, prog = tmp_path / "rlib", tmp_path / "opt" / "bin" / "tool"
    rlib.mkdir()
    prog.parent.mkdir(parents=True)
    (tmp_path / "r.c").write_text("int tbr(void) { return 1; }\n")
    (tmp_path / "m.c").write_text("int tbr(void);\nint main(void) { return tbr() - 1; }\n")
    subprocess.run(["gcc", "-shared", "-fPIC", "-o", str(rlib / "libtbr.so.1"), "-Wl,-soname,libtbr.so.1",
                    str(tmp_path / "r.c")], check=True, timeout=120)
    subprocess.run(["gcc", "-o", str(prog), str(tmp_path / "m.c"), str(rlib / "libtbr.so.1"), f"-Wl,-rpath,{rlib}"],
                   check=True, timeout=120)
    assert subprocess.run([str(prog)], timeout=30).returncode == 0
    baseline = _shell({}, str(prog))
    assert str(rlib) in baseline[FOLDERS].split(":") and "libtbr.so.1" in baseline[NAMES].split()
    # the folder is the program's: without it, none of the loader's
    assert str(rlib) not in _shell({}, "")[FOLDERS].split(":")
