"""The Terminal-Bench legacy parsers: test output text -> per-test results and a verdict.

A task.yaml task names one of these in `parser_name` (default "pytest"). Each parser reads the text
the tests printed (the legacy harness read the whole test terminal, so the echoed command line and
anything the script printed before the results are part of it) and returns {test name: "passed" |
"failed"} exactly as the legacy harness decided it:

  pytest     the lines after the first "short test summary info" header (pytest -rA);
             PASSED/XFAIL/SKIPPED pass, FAILED/XPASS/ERROR fail; no header is a parse error
  swebench   only the text between the first "SWEBench results starts here" and the last
             "SWEBench results ends here"; exactly "PASSED" there is one passing test "tests",
             anything else one failing "tests"; a missing marker is a parse error
  sweperf    the same with "SWE-Perf results starts here" / "... ends here"
  mlebench   the same with "MLEBench results starts here" / "... ends here" and "ALL TESTS PASSED";
             missing markers are not an error (the whole text is the block)
  swelancer  "swe lancer success" passes, else "swe lancer failure" fails, else "user_tool" and
             "completed" both present pass, else fail (case-insensitive); one test "swelancer_task"

The legacy harness called a task resolved when every parsed test passed, which made a parse that
found no tests at all "resolved". Here the verdict keeps that case apart: "pass" (at least one test
and all passed), "fail" (some test failed), "no_tests_parsed" (a parse error or nothing parsed), so
a runner can report a verifier error instead of a wrong answer. `legacy_resolved` records what the
legacy harness itself would have concluded (None where it recorded a parse error).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Callable, Literal

PASSED, FAILED = "passed", "failed"
Verdict = Literal["pass", "fail", "no_tests_parsed"]


class ParseError(ValueError):
    """The output does not contain what the parser needs (the legacy harness's parse_error)."""


@dataclass
class ParsedTests:
    parser: str
    tests: dict[str, str] = field(default_factory=dict)  # name -> "passed" | "failed"
    error: str | None = None  # why nothing could be parsed

    @property
    def verdict(self) -> Verdict:
        if self.error is not None or not self.tests:
            return "no_tests_parsed"
        return "pass" if all(s == PASSED for s in self.tests.values()) else "fail"

    @property
    def passed(self) -> bool:
        return self.verdict == "pass"

    @property
    def legacy_resolved(self) -> bool | None:
        if self.error is not None:
            return None
        return all(s == PASSED for s in self.tests.values())

    @property
    def counts(self) -> dict[str, int]:
        values = list(self.tests.values())
        return {PASSED: values.count(PASSED), FAILED: values.count(FAILED)}


# ---- pytest -------------------------------------------------------------------------------------

_SUMMARY_HEADER = re.compile(r"=+\s*short test summary info\s*=+", re.IGNORECASE)
_PYTEST_OUTCOME = {"PASSED": PASSED, "XFAIL": PASSED, "SKIPPED": PASSED,
                   "FAILED": FAILED, "XPASS": FAILED, "ERROR": FAILED}
_PYTEST_KNOWN = set(_PYTEST_OUTCOME) | {"UNKNOWN"}


def _pytest_line(line: str) -> tuple[str, str] | None:
    if line.startswith("FAILED"):
        # "FAILED path::test - message": the message is everything after the last " - ".
        head, sep, _ = line.rpartition(" - ")
        if sep:
            line = head
    words = line.split(maxsplit=1)
    if len(words) < 2:
        return None
    status = words[0].strip().strip(":")
    if status not in _PYTEST_KNOWN or status == "UNKNOWN":
        return None
    name = words[1].strip().split("::", 1)[-1]
    if not name:
        return None
    return name, _PYTEST_OUTCOME[status]


def parse_pytest(text: str) -> dict[str, str]:
    parts = _SUMMARY_HEADER.split(text, maxsplit=1)
    if len(parts) < 2:
        raise ParseError("no pytest \"short test summary info\" section (run pytest with -rA)")
    results: dict[str, str] = {}
    for line in parts[1].splitlines():
        parsed = _pytest_line(line)
        if parsed is not None:
            results[parsed[0]] = parsed[1]
    return results


# ---- marker-block parsers -----------------------------------------------------------------------

def _block(text: str, start: str, end: str) -> str:
    """What lies after the first `start` and before the last `end` (a missing marker leaves that
    side of the text as it is)."""
    after = text.split(start, 1)[-1]
    return after.rsplit(end, 1)[0].strip()


def _marker_parser(start: str, end: str, expected: str, require_markers: bool, label: str):
    def parse(text: str) -> dict[str, str]:
        if require_markers and (start not in text or end not in text):
            raise ParseError(f"no {label} results between \"{start}\" and \"{end}\"")
        return {"tests": PASSED if _block(text, start, end) == expected else FAILED}
    return parse


parse_swebench = _marker_parser("SWEBench results starts here", "SWEBench results ends here", "PASSED",
                                True, "SWEBench")
parse_sweperf = _marker_parser("SWE-Perf results starts here", "SWE-Perf results ends here", "PASSED",
                               True, "SWE-Perf")
parse_mlebench = _marker_parser("MLEBench results starts here", "MLEBench results ends here",
                                "ALL TESTS PASSED", False, "MLEBench")


# ---- swelancer ----------------------------------------------------------------------------------

def parse_swelancer(text: str) -> dict[str, str]:
    low = text.lower()
    if "swe lancer success" in low:
        ok = True
    elif "swe lancer failure" in low:
        ok = False
    else:
        ok = "user_tool" in low and "completed" in low
    return {"swelancer_task": PASSED if ok else FAILED}


PARSERS: dict[str, Callable[[str], dict[str, str]]] = {
    "pytest": parse_pytest,
    "swebench": parse_swebench,
    "swelancer": parse_swelancer,
    "mlebench": parse_mlebench,
    "sweperf": parse_sweperf,
}


def parse_test_output(parser_name: str, text: str) -> ParsedTests:
    try:
        parser = PARSERS[parser_name]
    except KeyError:
        raise ValueError(f"unknown parser {parser_name!r} (known: {', '.join(PARSERS)})") from None
    try:
        return ParsedTests(parser_name, parser(text))
    except ParseError as e:
        return ParsedTests(parser_name, {}, str(e))
