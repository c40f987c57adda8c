"""Commands that read a repository's history past its HEAD: where a SWE-bench-style image that kept
the clone's later commits gives the fix away (runner/repository_history.py).

What an agent did there, as public runs show it (SWE-bench issue #465, mini-swe-agent issue #787):
`git log --all --grep=#1234` or `git log --all -S name` to find the fix, then `git show <commit>`,
`git diff`, `git cherry-pick` or `git checkout <commit> -- file` to take it. This module finds, in a
command's text, the git invocations (and reads of the git folder) that reach past HEAD whatever the
repository holds:
* options that walk every ref or the reflogs: `--all`, `--branches`, `--remotes`, `--tags`, `--glob`,
  `--reflog`, `-g` / `--walk-reflogs`, and `git reflog`;
* listings of the refs or the object store: `for-each-ref`, `show-ref`, `branch -a` / `-r` /
  `--contains`, `tag` as a listing, `fsck` (it prints the commits nothing names), `cat-file
  --batch-all-objects`, `verify-pack`, `show-index`, `ls-remote`;
* history from elsewhere: `fetch`, `pull`, `clone` (a remote the image kept, or the project's URL
  where the network is open), and any program given a URL of a pull request, a commit, a
  comparison, a file at a revision or a patch on GitHub or GitLab (`curl -L .../pull/123.diff`);
* a revision written with the reflog's `@{...}`, or a pseudo-ref a fetch or a merge leaves
  (`FETCH_HEAD`, `ORIG_HEAD`, ...);
* a path in the git folder's refs, logs, objects or packed-refs (`cat .git/packed-refs`);
and, given the names of the refs a repository keeps beyond its HEAD (a trial's check), any argument
that names one of them (`git log origin/main`, `git show v2.0:src/x.py`).
It cannot tell a commit id from a commit's past or its future without the repository: `git show
1a2b3c4` is not reported. Nor does it follow what a program reads (a Python script reading the
packs). It is evidence, not a guard: `environment.repository_history: scrub` removes what is
there to read.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from tbscale.shell.parse import invocation, match_paren, split_segments

MAX_READS = 20  # commands kept per trial
_GLOBAL_WITH_VALUE = frozenset({"-C", "-c", "--git-dir", "--work-tree", "--namespace", "--super-prefix",
                                "--config-env"})
_WALKS_EVERY_REF = ("--all", "--branches", "--remotes", "--tags", "--glob", "--reflog", "--walk-reflogs",
                    "--exclude-hidden", "--bisect")
_ALWAYS_READS = frozenset({"for-each-ref", "show-ref", "fsck", "verify-pack", "show-index", "ls-remote", "reflog",
                    "fsck-objects", "unpack-objects",
                    # history from elsewhere: a remote the image kept (SWE-bench Pro's keep `origin`), a URL
                    "fetch", "pull", "clone"})
_BRANCH_LISTING = ("-a", "--all", "-r", "--remotes", "--contains", "--no-merged", "--merged", "--points-at")
PSEUDO_REFS = ("FETCH_HEAD", "ORIG_HEAD", "MERGE_HEAD", "CHERRY_PICK_HEAD", "REVERT_HEAD", "REBASE_HEAD",
               "AUTO_MERGE", "BISECT_HEAD")
# A project's history on its host, over HTTP: a pull request, a commit, a comparison, a file at a
# revision, a patch (`curl -L https://github.com/O/R/pull/123.diff`), through any program.
_PROJECT_HOST = re.compile(r"https?://(?:www\.)?(?:github\.com/[^/\s]+/[^/\s]+/(?:pull|commit|commits|compare|blob|raw|"
                           r"tree|archive|releases)\b|gitlab\.com/\S+/-/(?:commit|merge_requests|compare|blob|raw)\b|"
                           r"(?:raw|patch-diff|codeload)\.githubusercontent\.com/|api\.github\.com/repos/)")
_GIT_FOLDER = re.compile(r"(?:^|/)\.git/(?:packed-refs|refs|logs|objects|FETCH_HEAD|ORIG_HEAD|info/refs)")
_REFLOG_REVISION = re.compile(r"@\{")


def _git_words(args: list[str]) -> tuple[str, list[str]]:
    """(subcommand, its arguments) past git's own options."""
    i = 0
    while i < len(args):
        a = args[i]
        if a in _GLOBAL_WITH_VALUE:
            i += 2
            continue
        if a.startswith("-"):
            i += 1
            continue
        return a, args[i + 1:]
    return "", []


def _revision_names(arg: str) -> list[str]:
    """The ref-like names in a revision argument: `a..b`, `a...b`, `x^`, `x~2`, `x:path`, `^x`."""
    head = arg.split(":", 1)[0] if not arg.startswith(":") else ""
    names = []
    for part in re.split(r"\.\.\.?", head):
        part = part.lstrip("^")
        part = re.split(r"[~^]", part, maxsplit=1)[0]
        if part:
            names.append(part)
    return names


def _short_names(refs: Iterable[str]) -> set[str]:
    """Every name git takes for each of `refs`: `refs/tags/v1` is also `tags/v1` and `v1`;
    `refs/remotes/origin/main` also `remotes/origin/main` and `origin/main`."""
    out: set[str] = set()
    for ref in refs:
        out.add(ref)
        if ref.startswith("refs/"):
            rest = ref[len("refs/"):]
            out.add(rest)
            kind, _, name = rest.partition("/")
            if kind in ("heads", "tags", "remotes") and name:
                out.add(name)
            if ref == "refs/stash":
                out.add("stash")
    return out


def _invocation_reads(sub: str, rest: list[str], names: set[str]) -> bool:
    if sub in _ALWAYS_READS:
        return not (sub == "reflog" and rest[:1] in (["expire"], ["delete"]))
    if sub == "describe":  # the tags HEAD leads to, unless asked which contain it
        return "--contains" in rest
    if sub == "stash" and "stash" in names and rest[:1] in (["list"], ["show"], ["apply"], ["pop"], ["branch"]):
        return True
    if any(a == opt or a.startswith(opt + "=") for a in rest for opt in _WALKS_EVERY_REF):
        return True
    if sub in ("log", "rev-list", "shortlog", "whatchanged", "show") and "-g" in rest:
        return True
    if sub == "cat-file" and "--batch-all-objects" in rest:
        return True
    if sub == "branch" and any(a == opt or a.startswith(opt + "=") for a in rest for opt in _BRANCH_LISTING):
        return True
    if sub == "tag" and (not rest or any(a in ("-l", "--list", "-n") or a.startswith(("--contains", "--points-at",
                                                                                    "--merged", "--no-merged", "-n"))
                                        for a in rest)):
        return True
    if sub == "name-rev" and any(a in ("--all", "--tags") for a in rest):
        return True
    for a in rest:
        if a.startswith("-") and "=" not in a:
            continue
        value = a.split("=", 1)[1] if a.startswith("-") else a
        if _REFLOG_REVISION.search(value):
            return True
        if any(n in PSEUDO_REFS or n in names for n in _revision_names(value)):
            return True
    return False


def _substitutions(text: str) -> list[str]:
    """The bodies of `$(...)` in `text` (backticks too), which split_segments keeps whole."""
    bodies = re.findall(r"`([^`]*)`", text)
    i = text.find("$(")
    while i != -1:
        end = match_paren(text, i + 1)
        if end <= i:
            break
        bodies.append(text[i + 2:end - 1])
        i = text.find("$(", end)
    return bodies


def history_reads(command: str, refs: Iterable[str] = ()) -> list[str]:
    """The commands in `command` that read past HEAD (see the module's docstring); `refs`: the names
    of the refs the repository keeps beyond its HEAD, when known."""
    return _reads(command, _short_names(refs), 0)


def _reads(command: str, names: set[str], depth: int) -> list[str]:
    """history_reads with the refs' names made once; `depth`: how deep in `bash -c` and `$(...)`."""
    found: list[str] = []
    for segment in split_segments(command):
        inv = invocation(segment)
        hit = False
        if inv.program == "git":
            sub, rest = _git_words(inv.args)
            hit = _invocation_reads(sub, rest, names)
        elif inv.program in ("bash", "sh", "dash", "zsh") and "-c" in inv.args:
            body = inv.args[inv.args.index("-c") + 1:inv.args.index("-c") + 2]
            hit = bool(body and depth < 3 and _reads(body[0], names, depth + 1))
        if not hit:
            hit = any(_GIT_FOLDER.search(w) or _PROJECT_HOST.search(w)
                      for w in (*inv.args, *(t for _, t in inv.redirects)))
        if not hit and depth < 3:
            hit = any(_reads(body, names, depth + 1) for body in _substitutions(segment.text))
        if hit:
            found.append(segment.text[:300])
    return found


def trial_history_reads(actions: Iterable[str], refs: Iterable[str] = ()) -> list[str]:
    """Each command of a trial that reads past HEAD, in order, at most MAX_READS."""
    names = _short_names(refs)
    out: list[str] = []
    for action in actions:
        for hit in _reads(action, names, 0):
            if hit not in out:
                out.append(hit)
            if len(out) >= MAX_READS:
                return out
    return out
