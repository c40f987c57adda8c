"""What a SWE-bench patch changes that the tests read, besides the solution.

Only the patch reaches the fresh grading container. swebench's eval script resets the files of the
test patch (`git checkout BASE FILES`) and applies it; everything else the patch holds is in place
when the tests run, and swebench grades the log whatever made it. On the offline demo instance,
with its bug left in place, each of these was graded resolved by swebench's own code:
- a `conftest.py` whose hook reports every test passed;
- pytest's settings changed: pyproject's `pythonpath` puts first a folder with a fixed copy of the
  package;
- a module beside the tests named like the package they import (`tests/statskit.py`);
- an `__init__.py` added to the tests' folder that replaces the function under test.

So the patch is read (unidiff) before it is graded, with the rules of pytest_reads.py, and what
they find are tampering entries with source `patch`. None of the 500 gold patches of SWE-bench
Verified, nor of the 731 of SWE-bench Pro, has one.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import PurePosixPath

from tbscale.verifiers.pytest_reads import PLUGIN_FILES, ReadsReview, review_changes, script_tests


def _changes(files):
    """(file, path, added | removed | changed) for each file of a patch; a rename (which tbscale's
    own patches, `git diff --no-renames`, never hold) is its old path removed and its new one added."""
    for pf in files:
        if pf.is_rename:
            yield pf, pf.source_file.removeprefix("a/"), "removed"
            yield pf, pf.target_file.removeprefix("b/"), "added"
        else:
            yield pf, pf.path, "added" if pf.is_added_file else "removed" if pf.is_removed_file else "changed"


def review_patch(patch: str, eval_script: str,
                 read_files: Callable[[list[str]], dict[str, tuple[str | None, str | None]]]) -> ReadsReview:
    """The review of a patch (`git diff` text) graded with `eval_script`. `read_files(paths)` gives
    each settings file's text at the base commit and with the patch applied (None: absent)."""
    from unidiff import PatchSet
    from unidiff.errors import UnidiffParseError

    try:
        files = list(_changes(PatchSet(patch)))
    except UnidiffParseError as e:
        return ReadsReview(error=f"not a diff unidiff reads: {e}")
    plugins = [path for pf, path, state in files if PurePosixPath(path).name in PLUGIN_FILES and state != "removed"
               and any("pytest11" in line.value for hunk in pf for line in hunk if line.is_added)]
    reset, run = script_tests(eval_script)
    review = review_changes([(path, state) for _, path, state in files], reset, run, read_files, plugins,
                            source="patch", who="the patch")
    # A path in a `.git` folder: `git apply` refuses it, and swebench's last apply command (`patch
    # --fuzz=5`) writes it, an executable hook too, which the eval's `git checkout` of the test
    # files then runs (runner/git_settings.py holds the same in an environment).
    into_git = [(path, state) for _, path, state in files if ".git" in PurePosixPath(path).parts]
    if into_git:
        review.tampering.append({
            "kind": "git_hook_planted", "source": "patch", "paths": [path for path, _ in into_git][:20],
            "detail": "the patch writes into a repository's git folder (hooks, settings), which `git apply` refuses "
                      "and `patch` takes: " + ", ".join(f"{path} ({state})" for path, state in into_git[:20])})
    return review
