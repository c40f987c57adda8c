"""The build tools whose reads the verifier guard follows where the verifier's commands run them,
and the tests those commands run from where the agent worked: one module each, registered here
(docs/tasks.md, "Verification integrity").

A tool module gives:
* `folders(texts, tests_mount)`: where the verifier's scripts run the tool, as lines its shell
  block reads from `TBSCALE_<KEY>` (runner/verifier_reads.py asks it);
* `shell`: the guard shell's block, printing a `<TAG>\\tPATH\\tDIGEST` line for each file the tool
  reads there (`_fd`, guard_shell.PROJECT's), at the baseline and after the sweep;
* `read` and `parse`: the files read again from outside the environment (by name, or a function
  of the path; None: every file its block digested), and what of them counts (after the sweep,
  those whose digest changed; at the baseline, all, unless `read_at_baseline` is False);
* `changed(before, after, read_before, read_after, snapshot, actions, run)`: the tampering
  entries; `run` is a `ToolRun`, the lines `folders` gave and the workdir the shell took;
* `programs`: what the tool itself starts by name from PATH (a compiler, a linker), digested with
  the programs the scripts name; or a function of the lines `folders` gave, where that depends on
  what it runs (`started`);
* `carried`: what of its baseline's lines its shell block is given back after the sweep
  (`TBSCALE_<KEY>_BEFORE`), where it prints only what the baseline makes count.
npm has more than this protocol gives (the scripts it runs, its `node_modules` cleared by the
sweep, its own library) and stays in runner/npm_project.py, wired into the guard by hand."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from tbscale.runner.apt_settings import APT, apt_changed, apt_folders, read_settings as read_apt_settings
from tbscale.runner.apt_settings import settings_file as apt_settings_file
from tbscale.runner.cargo_project import CARGO, CARGO_READ, cargo_changed, cargo_folders, cargo_settings
from tbscale.runner.cmake_project import CMAKE, cmake_changed, cmake_folders
from tbscale.runner.dpkg_programs import DPKG_PROGRAMS, program_groups, programs_changed, programs_seen_outside
from tbscale.runner.dpkg_programs import baseline_names as dpkg_program_names
from tbscale.runner.git_settings import GIT, git_changed, git_folders, read_settings, settings_file as git_settings_file
from tbscale.runner.go_project import GO, GO_READ, go_changed, go_folders, go_settings
from tbscale.runner.make_project import MAKE, make_changed, make_folders, makefile_rules
from tbscale.runner.perl_path import PERL_PATH, baseline_folders, perl_changed, perl_groups, perl_lines, perl_seen_outside
from tbscale.runner.python_path import PYTHON_PATH, python_folders, shadowing_changed
from tbscale.runner.shared_libraries import (SHARED_LIBRARIES, baseline_names, libraries_changed, libraries_seen_outside,
                                             library_groups, loader_lines)
from tbscale.runner.repository_tests import REPOSITORY, read_text, repository_changed, repository_folders, settings_file
from tbscale.runner.verifier_tests import CONFIGS, TESTS, changed_tests, compilers, named_tests, pytest_settings
from tbscale.types.guard import GuardSnapshot, Tampering, ToolRun


@dataclass(frozen=True)
class BuildTool:
    key: str  # the snapshot's key, and `TBSCALE_<KEY>` (upper case) for its folders
    tag: str  # its shell block's line tag
    folders: Callable[[list[str], str | None], list[str]]
    shell: str
    # the files read from outside (`parse` of each): by name, or those a function of the path takes; None: all
    read: tuple[str, ...] | Callable[[str], bool] | None
    parse: Callable[[str, bytes], dict[str, Any]] | None
    changed: Callable[[dict[str, str], dict[str, str], dict, dict, GuardSnapshot, list[tuple[int, str]], ToolRun],
                      list[Tampering]]
    programs: tuple[str, ...] | Callable[[list[str]], tuple[str, ...]] = ()
    # whether the files `read` takes are read from outside at the baseline too; False where the
    # shell block prints what is needed of them then (no process of the agent's has run yet), which
    # saves an engine call a file at every baseline
    read_at_baseline: bool = True
    carried: Callable[[dict[str, str]], str] | None = None
    # the paths of its entries, for runner/debian_updates.py (files a package's install wrote are settled)
    groups: Callable[[GuardSnapshot | None, GuardSnapshot], dict[str, list[str]]] | None = None
    # under `environment.file_checks: outside`, its findings in the backend's own listing of changed
    # paths (path -> 0 changed, 1 added, 2 deleted) that the check inside did not report
    outside: Callable[[dict[str, int], dict[str, str] | None, dict[str, str] | None, list[Tampering],
                       list[tuple[int, str]]], list[Tampering]] | None = None

    def started(self, lines: list[str]) -> tuple[str, ...]:
        """The programs it starts by name where the verifier's scripts run it as `lines` say."""
        return self.programs(lines) if callable(self.programs) else self.programs

    @property
    def env(self) -> str:
        return f"TBSCALE_{self.key.upper()}"


def _go_changed(before, after, read_before, read_after, snap: GuardSnapshot, actions, run: ToolRun) -> list[Tampering]:
    return go_changed(before, after, read_before, read_after, snap.get("go_test_mains", []), actions)


def _files_only(changed: Callable[..., list[Tampering]]) -> Callable[..., list[Tampering]]:
    """A tool whose findings need only the files read (cargo, cmake), not where it runs."""
    def run_changed(before, after, read_before, read_after, snap: GuardSnapshot, actions, run: ToolRun):
        return changed(before, after, read_before, read_after, snap, actions)
    return run_changed


TOOLS: tuple[BuildTool, ...] = (
    BuildTool("go", "GO", go_folders, GO, GO_READ, go_settings, _go_changed),
    # cargo starts rustc and rustdoc, and links with `cc`; cmake's Makefiles run make and the compilers
    BuildTool("cargo", "CG", cargo_folders, CARGO, CARGO_READ, cargo_settings, _files_only(cargo_changed),
              ("rustc", "rustdoc", "cc")),
    BuildTool("cmake", "CM", cmake_folders, CMAKE, (), None, _files_only(cmake_changed), ("make", "c++", "cc", "g++", "gcc")),
    BuildTool("make", "MK", make_folders, MAKE, None, makefile_rules, make_changed, ("make",)),
    # not a build tool: the test files pytest is given and the test scripts run by path, where the agent worked;
    # a makefile for tests compiles them with the C and C++ compilers make starts by name
    BuildTool("tests_here", "WT", named_tests, TESTS, CONFIGS, pytest_settings, changed_tests, compilers),
    # nor this: what the tests read, besides the tests, in a repository the verifier patches and tests (SWE-bench style)
    BuildTool("repository_tests", "RT", repository_folders, REPOSITORY, settings_file, read_text, repository_changed),
    # nor this: what git runs, and whether it runs, where the verifier runs git
    BuildTool("git", "GI", git_folders, GIT, git_settings_file, read_settings, git_changed, read_at_baseline=False),
    # nor this: what apt and dpkg run where the verifier runs them (Terminal-Bench's `apt-get install curl`)
    BuildTool("apt", "AP", apt_folders, APT, apt_settings_file, read_apt_settings, apt_changed, read_at_baseline=False),
    # nor this: the programs dpkg and its maintainer scripts start by name there
    BuildTool("dpkg_programs", "DP", apt_folders, DPKG_PROGRAMS, (), None, programs_changed, carried=dpkg_program_names,
              groups=program_groups, outside=programs_seen_outside),
    # nor this: the folders the verifier's Python searches before its library (`python3 -m pytest` where it runs)
    BuildTool("python_path", "PS", python_folders, PYTHON_PATH, (), None, shadowing_changed),
    # nor this: the shared libraries the dynamic loader finds for the verifier's programs
    BuildTool("shared_libraries", "SL", loader_lines, SHARED_LIBRARIES, (), None, libraries_changed,
              carried=baseline_names, groups=library_groups, outside=libraries_seen_outside),
    # nor this: the Perl modules where the verifier's perl finds them (debconf's, under apt-get install)
    BuildTool("perl_path", "PL", perl_lines, PERL_PATH, (), None, perl_changed, carried=baseline_folders,
              groups=perl_groups, outside=perl_seen_outside),
)
TAGS = {tool.tag: tool.key for tool in TOOLS}


def seen_outside(changed: dict[str, int], before: GuardSnapshot | None, after: GuardSnapshot, inside: list[Tampering],
                 actions: list[tuple[int, str]]) -> list[Tampering]:
    """Every tool's findings in the backend's own listing that the check inside did not report."""
    return [e for tool in TOOLS if tool.outside
            for e in tool.outside(changed, (before or {}).get(tool.key), after.get(tool.key), inside, actions)]  # type: ignore[misc]


def tool_groups(before: GuardSnapshot | None, after: GuardSnapshot) -> dict[str, list[str]]:
    """Every tool's entries' paths, by kind (runner/debian_updates.py settles them)."""
    return {kind: paths for tool in TOOLS if tool.groups for kind, paths in tool.groups(before, after).items()}
