"""Checks for tb-pytest: the agent's module, and the legacy test environment itself.

(Not named test_*.py, so that the project's own pytest run does not collect it.)
"""
import os
import pwd
import sys


def xfail(reason):
    def mark(fn):
        fn.xfail_reason = reason
        return fn
    return mark


def skip(reason):
    def mark(fn):
        fn.skip_reason = reason
        return fn
    return mark


def calc():
    sys.path.insert(0, "/app")
    import calc as module
    return module


def test_add():
    assert calc().add(2, 3) == 5


def test_mul():
    assert calc().mul(4, 5) == 20


def test_written_by_the_image_user():
    assert pwd.getpwuid(os.stat("/app/calc.py").st_uid).pw_name == "agent"


def test_runs_as_root():
    assert os.getuid() == 0


def test_test_dir():
    assert os.environ.get("TEST_DIR") == "/tests" and os.path.isfile("/tests/run-tests.sh")


def test_cwd_is_image_workdir():
    assert os.getcwd() == "/app"


def test_legacy_network_on():
    # The legacy harness ran every task on the default bridge network: a default route exists.
    with open("/proc/net/route") as f:
        assert any(line.split()[1] == "00000000" for line in f.readlines()[1:])


@xfail("division is not part of this task")
def test_div():
    assert calc().div(6, 3) == 2


@skip("documented as out of scope")
def test_pow():
    assert calc().pow(2, 3) == 8
