"""The suite is handed out longest first (tests/conftest.py): an xdist group stays whole and counts
the sum of its tests; a test never measured counts a little, or 30 s when marked `slow`."""

from __future__ import annotations

import pytest

from conftest import UNMEASURED_SLOW_SEC, base_id, longest_first


class Item:
    def __init__(self, nodeid: str, *marks):
        self.nodeid, self.marks = nodeid, {m.name: m for m in marks}

    def get_closest_marker(self, name):
        return self.marks.get(name)


def test_units_go_longest_first_and_groups_stay_whole():
    ray = pytest.mark.xdist_group("ray").mark
    items = [Item("a.py::short"), Item("r.py::one", ray), Item("b.py::waits"), Item("r.py::two", ray),
             Item("c.py::new"), Item("c.py::new_slow", pytest.mark.slow.mark)]
    known = {"a.py::short": 2.0, "r.py::one": 50.0, "r.py::two": 40.0, "b.py::waits": 85.0}
    order = [i.nodeid for i in longest_first(items, known)]
    assert order == ["r.py::one", "r.py::two", "b.py::waits", "c.py::new_slow", "a.py::short", "c.py::new"]
    assert UNMEASURED_SLOW_SEC > 2.0


def test_the_group_suffix_is_left_out_of_a_tests_id():
    assert base_id("tests/t.py::test_x@ray-cluster-a") == "tests/t.py::test_x"
    assert base_id("tests/t.py::test_x@tests/t.py") == "tests/t.py::test_x"
    assert base_id("tests/t.py::test_p[a@b]") == "tests/t.py::test_p[a@b]"
    assert base_id("tests/t.py::test_plain") == "tests/t.py::test_plain"
