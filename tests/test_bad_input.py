"""Bad input ends in one line naming the file and the key, and exit code 2, before any container
starts; never a traceback. Broken files are read around with a warning naming file and line.
The cases are tbscale_testing/bad_inputs.py's list, the one scripts/bad_input_table.py prints."""

from __future__ import annotations

from pathlib import Path

import pytest

from tbscale_testing.bad_inputs import CASES, can_mount_read_only, fill, inputs, run_case

MOUNTS = can_mount_read_only()


def folders(root: Path) -> set[Path]:
    return {p for p in root.rglob("*") if p.is_dir() and not p.is_symlink()}


@pytest.fixture(scope="module")
def subs(tmp_path_factory):
    with inputs(tmp_path_factory.mktemp("bad-input") / "in") as found:
        yield found


@pytest.mark.parametrize("case", [pytest.param(c, marks=[pytest.mark.litellm] if c.litellm else [], id=c.name)
                                  for c in CASES])
def test_bad_input(subs, case) -> None:
    if case.readonly and not MOUNTS:
        pytest.skip("needs `unshare -m` to mount a folder read-only")
    before = folders(Path(subs["root"]))
    got = run_case(case, subs, in_process=True)
    assert not got.traceback, got.output
    assert got.code == case.code, got.output
    assert fill(case.first_line, subs) in got.output, got.output
    if case.code == 2:  # one line, and it is the error; and no folder is left behind
        errors = [ln for ln in got.output.splitlines() if ln.startswith("error:")]
        assert len(errors) == 1 and fill(case.first_line, subs) in errors[0], got.output
        assert folders(Path(subs["root"])) == before, sorted(map(str, folders(Path(subs["root"])) - before))
    if case.check is not None:
        assert case.check(Path(subs["root"])), f"{case.name}: what must survive did not"
    if case.absent is not None:
        assert case.absent not in got.output


def test_the_list_holds_every_input_of_the_issue_and_at_least_40() -> None:
    names = {c.name for c in CASES if c.from_issue}
    assert len(CASES) >= 40 and len(names) >= 20
    for needed in ("import --name ../../victim --force", "run --run-name ../escaped", "api_base: not-a-url",
                   "trials: 1000000000", "YAML alias bomb in extra_params", "duplicate YAML key", 'model: ""',
                   "empty key variable", "missing prompt file", "broken Jinja template",
                   "report on a read-only run", "history --check, no readable line", "report: reward NaN"):
        assert needed in names
