"""The Terminal-Bench legacy parsers against hand-written test outputs, one behaviour each."""

import pytest

from tbscale.tasks.test_output import PARSERS, parse_test_output

PYTEST_OK = """\
root@c0ffee:/app# bash /tests/run-tests.sh
============================= test session starts ==============================
collected 4 items

../tests/test_outputs.py ..xs                                            [100%]

==================================== PASSES ====================================
=========================== short test summary info ============================
PASSED ../tests/test_outputs.py::test_file_exists
PASSED ../tests/test_outputs.py::test_content
XFAIL ../tests/test_outputs.py::test_future - not implemented yet
SKIPPED [1] ../tests/test_outputs.py:20: needs a GPU
=================== 2 passed, 1 skipped, 1 xfailed in 0.03s ====================
"""


def test_pytest_all_passed_with_xfail_and_skipped():
    r = parse_test_output("pytest", PYTEST_OK)
    assert r.tests == {"test_file_exists": "passed", "test_content": "passed",
                       "test_future - not implemented yet": "passed",
                       "[1] ../tests/test_outputs.py:20: needs a GPU": "passed"}
    assert r.verdict == "pass" and r.passed and r.legacy_resolved is True


def test_pytest_failed_line_drops_the_message_after_the_last_dash():
    text = ("=== short test summary info ===\n"
            "PASSED tests/t.py::test_a\n"
            "FAILED tests/t.py::test_b - AssertionError: assert 'a - b' == 'c'\n")
    r = parse_test_output("pytest", text)
    assert r.tests == {"test_a": "passed", "test_b - AssertionError: assert 'a": "failed"}
    assert r.verdict == "fail" and r.counts == {"passed": 1, "failed": 1}


def test_pytest_error_and_xpass_fail():
    text = ("==== short test summary info ====\n"
            "ERROR tests/test_x.py - ImportError: no module named foo\n"
            "XPASS tests/test_y.py::test_lucky unexpectedly passed\n")
    r = parse_test_output("pytest", text)
    assert set(r.tests.values()) == {"failed"} and r.verdict == "fail"


def test_pytest_reads_only_after_the_first_header_and_later_lines_win():
    text = ("FAILED tests/t.py::test_a - printed by an earlier command\n"
            "=========== SHORT TEST SUMMARY INFO ===========\n"
            "FAILED tests/t.py::test_a - first try\n"
            "PASSED tests/t.py::test_a\n"
            "passed tests/t.py::test_lowercase_is_ignored\n"
            "PASSED: tests/t.py::test_colon\n"
            "UNKNOWN tests/t.py::test_u\n"
            "PASSED tests/t.py::\n"
            "PASSED\n"
            "===== 2 passed in 0.1s =====\n")
    r = parse_test_output("pytest", text)
    assert r.tests == {"test_a": "passed", "test_colon": "passed"}
    assert r.verdict == "pass"


def test_pytest_without_summary_is_no_tests_parsed():
    r = parse_test_output("pytest", "collected 0 items\n\n==== no tests ran in 0.01s ====\n")
    assert r.verdict == "no_tests_parsed" and "short test summary info" in r.error
    assert r.legacy_resolved is None


def test_pytest_header_but_no_results_is_not_a_pass():
    # The legacy harness called this resolved (all() of nothing); here it is nothing parsed.
    r = parse_test_output("pytest", "===== short test summary info =====\n==== 0 passed in 0.01s ====\n")
    assert r.tests == {} and r.verdict == "no_tests_parsed" and r.legacy_resolved is True


SWEBENCH_RESOLVED = """\
root@c0ffee:/testbed# bash /tests/run-tests.sh
+ ./tests/runtests.py auth_tests.test_validators
FAILED tests/test_unrelated.py::test_flaky - noise from the repository's own test run
Ran 22 tests in 0.05s
FAILED (errors=1)
SWEBench results starts here
PASSED
SWEBench results ends here
root@c0ffee:/testbed#
"""


def test_swebench_reads_only_between_the_markers():
    r = parse_test_output("swebench", SWEBENCH_RESOLVED)
    assert r.tests == {"tests": "passed"} and r.verdict == "pass"


def test_swebench_bare_verdict_lines_are_not_test_names():
    text = "PASSED\nSWEBench results starts here\nFAILED\nSWEBench results ends here\nPASSED\n"
    r = parse_test_output("swebench", text)
    assert r.tests == {"tests": "failed"} and r.verdict == "fail"
    assert "SWEBench" not in r.tests


def test_swebench_first_start_last_end_and_exact_block():
    text = ("SWEBench results starts here\nPASSED\nSWEBench results ends here\n"
            "SWEBench results starts here\nPASSED\nSWEBench results ends here\n")
    # The block runs from the first start marker to the last end marker: it is not just "PASSED".
    assert parse_test_output("swebench", text).verdict == "fail"
    extra = "SWEBench results starts here\nPASSED\nsome wrapped text\nSWEBench results ends here\n"
    assert parse_test_output("swebench", extra).verdict == "fail"
    spaced = "SWEBench results starts here\n\n   PASSED  \n\nSWEBench results ends here"
    assert parse_test_output("swebench", spaced).verdict == "pass"


@pytest.mark.parametrize("text", ["PASSED\n", "SWEBench results starts here\nPASSED\n",
                                  "PASSED\nSWEBench results ends here\n"])
def test_swebench_missing_marker_is_no_tests_parsed(text):
    r = parse_test_output("swebench", text)
    assert r.verdict == "no_tests_parsed" and "markers" not in r.tests and r.error


def test_sweperf_markers():
    ok = "noise FAILED\nSWE-Perf results starts here\nPASSED\nSWE-Perf results ends here\n"
    assert parse_test_output("sweperf", ok).verdict == "pass"
    bad = "SWE-Perf results starts here\nFAILED\nSWE-Perf results ends here\n"
    assert parse_test_output("sweperf", bad).tests == {"tests": "failed"}
    swebench_markers = "SWEBench results starts here\nPASSED\nSWEBench results ends here\n"
    assert parse_test_output("sweperf", swebench_markers).verdict == "no_tests_parsed"


def test_mlebench_block_and_no_marker_check():
    ok = "training...\nMLEBench results starts here\nALL TESTS PASSED\nMLEBench results ends here\n"
    assert parse_test_output("mlebench", ok).verdict == "pass"
    bad = "MLEBench results starts here\nrow 3: 7 != 8\nMLEBench results ends here\n"
    assert parse_test_output("mlebench", bad).verdict == "fail"
    # No markers: the whole text is the block (not a parse error).
    assert parse_test_output("mlebench", "ALL TESTS PASSED\n").verdict == "pass"
    assert parse_test_output("mlebench", "it crashed\n").tests == {"tests": "failed"}


@pytest.mark.parametrize("text, verdict", [
    ("... SWE Lancer Success ...", "pass"),
    ("swe lancer failure", "fail"),
    ("swe lancer failure\nswe lancer success", "pass"),  # success is checked first
    ("user_tool run Completed", "pass"),
    ("user_tool started", "fail"),
    ("", "fail"),
])
def test_swelancer_indicators(text, verdict):
    r = parse_test_output("swelancer", text)
    assert r.verdict == verdict and list(r.tests) == ["swelancer_task"]


def test_every_legacy_parser_is_registered():
    assert set(PARSERS) == {"pytest", "swebench", "sweperf", "mlebench", "swelancer"}
    with pytest.raises(ValueError, match="unknown parser 'junit'.*pytest, swebench"):
        parse_test_output("junit", "")
