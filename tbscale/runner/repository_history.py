"""What a repository the agent is asked to fix keeps beyond its HEAD: commits its base commit does not
lead to, which may hold the fix (docs/swebench.md, "The repository's history").

SWE-bench-style images start from a clone of the project at the instance's base commit. Images built
before swebench 4.1's time-safe clone (and SWE-bench Pro's, and Multi-SWE-bench's) keep the rest of the
clone too: tags at later releases, remote branches, the reflog entry of the tip the clone first
checked out, and their objects. `git log --all --grep=#1234` then finds the fix, and `git show` gives
it, with no network. swebench's own image builder now removes that state and refuses an image that
keeps a commit dated after the base (`git_clone_timesafe`); the harnesses that run an image (Harbor,
terminal-bench, mini-swe-agent) run it as it is.

Before the agent's first command, one exec as root in each repository of the task (a SWE-bench
instance's `repo_dir`; the folders a verifier script applies its test patch in) counts:
* the commit objects the repository holds that HEAD does not lead to (`beyond_head`), reachable from
  a ref or a reflog or from nothing at all (`git cat-file --batch-all-objects`: a pack keeps a commit
  no ref names, and `git fsck` or a pack reader finds it), and of those the ones committed after
  HEAD was (`after_head`, swebench's own test of a time-safe image), where a fix may be: an older
  release branch's commits are beyond HEAD too, and hold no fix of what HEAD got wrong;
* the refs whose tips HEAD does not lead to (`for-each-ref --no-merged=HEAD`).
A trial whose repository was left with commits after its HEAD is `history_exposed` in the report.
With `environment.repository_history: scrub` it first removes them: the remotes, every ref HEAD does
not lead to, the pseudo-refs a fetch or a merge leaves, every reflog entry, then every object no ref
reaches (`repack -a -d`, `prune`) and the commit graph's file (it keeps the ids and dates of removed
commits); what it counts after is what the agent is given. The git folder is given back to its
owner, and to every user again where it was every user's (swebench's images `chmod -R 777` the
repository so that a user other than root can run the tests): the scrub runs as root, and an agent
running as the owner must still be able to commit. Refs HEAD leads
to (the branch it is on, older tags) are kept, so `git log`, `git describe` and the eval script's
`git checkout <base> -- <tests>` work as before.
"""

from __future__ import annotations

import shlex

from tbscale.environments import Environment
from tbscale.runner.repository_tests import repository_folders
from tbscale.runner.verifier_reads import script_texts
from tbscale.tasks import Task
from tbscale.types.results import RepositoryHistory

MAX_REFS = 20  # ref names kept per repository (their count is kept whole)
TIMEOUT_SEC = 600.0  # ample: the scrub took at most 4.7 CPU-s on sympy's 102,294 commits (docs/swebench.md)

# The pseudo-refs a fetch, a merge, a rebase or a cherry-pick leaves in the git folder: each names a
# commit, and none is a ref for-each-ref lists.
PSEUDO_REFS = ("FETCH_HEAD", "ORIG_HEAD", "MERGE_HEAD", "CHERRY_PICK_HEAD", "REVERT_HEAD", "REBASE_HEAD",
               "AUTO_MERGE", "BISECT_HEAD")

# Lines: `RH TOP HEAD BEYOND AFTER REFS` per repository, then `RR REF` for up to MAX_REFS of its refs
# beyond HEAD; after a scrub `RS BEYOND AFTER REFS` again; `RE TOP WHAT` for a step that failed.
# `-c safe.directory=*` (`_git`): the repository may belong to another user than root, and git refuses to
# read such a repository unless told (a protected setting: the command line is one).
_COUNT = r'''
_ht=$(_git log -1 --format=%ct HEAD 2>/dev/null)
_beyond=$({ _git rev-list HEAD 2>/dev/null | sed 's/^/h /'
  _git cat-file --batch-all-objects --batch-check='%(objecttype) %(objectname)' 2>/dev/null | sed -n 's/^commit /a /p'
} | awk '$1 == "h" { h[$2]; next } !($2 in h) { print $2 }')
_n=0; _f=0
if [ -n "$_beyond" ]; then
  _n=$(printf '%s\n' "$_beyond" | wc -l)
  _f=$(printf '%s\n' "$_beyond" | _git log --no-walk=unsorted --format=%ct --stdin 2>/dev/null | awk -v t="$_ht" '$1 > t' | wc -l)
fi
_r=$(_git for-each-ref --no-merged=HEAD --format='%(refname)' 2>/dev/null | wc -l)
'''
_SCRUB = r'''
_d=$(_git rev-parse --absolute-git-dir 2>/dev/null)
_own=$(stat -c %u:%g "$_d" 2>/dev/null); _mode=$(stat -c %a "$_d" 2>/dev/null)
for _rem in $(_git remote 2>/dev/null); do _git remote remove "$_rem" >/dev/null 2>&1 || printf 'RE\t%s\tremote %s\n' "$_top" "$_rem"; done
_git for-each-ref --no-merged=HEAD --format='delete %(refname)' | _git update-ref --stdin || printf 'RE\t%s\tupdate-ref\n' "$_top"
[ -n "$_d" ] && for _p in PSEUDO; do rm -f "$_d/$_p"; done
_git reflog expire --expire=now --expire-unreachable=now --all || printf 'RE\t%s\treflog expire\n' "$_top"
_git repack -a -d -q || printf 'RE\t%s\trepack\n' "$_top"
_git prune --expire=now || printf 'RE\t%s\tprune\n' "$_top"
[ -n "$_d" ] && rm -rf "$_d/objects/info/commit-graph" "$_d/objects/info/commit-graphs"
[ -n "$_own" ] && chown -R "$_own" "$_d" 2>/dev/null
case "$_mode" in *7) chmod -R a+rwX "$_d" 2>/dev/null ;; esac
'''.replace("PSEUDO", " ".join(PSEUDO_REFS))
_EACH = r'''
command -v git >/dev/null 2>&1 || { printf 'RG\n'; exit 0; }
_git() { git -c safe.directory='*' -C "$_top" "$@"; }
_seen=
for _p in PATHS; do
  [ -d "$_p" ] || continue
  _top=$(git -c safe.directory='*' -C "$_p" rev-parse --show-toplevel 2>/dev/null) || continue
  case " $_seen " in *" $_top "*) continue ;; esac
  _seen="$_seen $_top"
  _head=$(_git rev-parse -q --verify HEAD 2>/dev/null) || continue
  COUNT
  printf 'RH\t%s\t%s\t%s\t%s\t%s\n' "$_top" "$_head" "$_n" "$_f" "$_r"
  _git for-each-ref --no-merged=HEAD --format='RR	%(refname)' 2>/dev/null | head -n MAX
  if [ "$SCRUB" = 1 ] && [ "$_n" != 0 -o "$_r" != 0 ]; then
    SCRUB_STEPS
    COUNT
    printf 'RS\t%s\t%s\t%s\n' "$_n" "$_f" "$_r"
  fi
done
'''


def repository_paths(task: Task) -> list[str]:
    """Where the task's repositories are: a SWE-bench instance's `repo_dir`, or each folder its verifier
    scripts apply a patch in (`repository_tests.repository_folders`, relative ones the workdir's)."""
    grading = task.extra.get("grading") if isinstance(task.extra, dict) else None
    if grading and grading.get("repo_dir"):
        return [grading["repo_dir"]]
    if task.verifier is None:
        return []
    folders = repository_folders(script_texts(task.verifier), task.verifier.tests_mount)
    return [line[2:] for line in folders if line.startswith("r:")]


def history_script(paths: list[str], scrub: bool) -> str:
    """The shell that counts (and with `scrub` first removes) what each repository holding one of
    `paths` keeps beyond its HEAD. Paths that are not in a repository are passed over."""
    body = (_EACH.replace("SCRUB_STEPS", _SCRUB).replace("COUNT", _COUNT).replace("MAX", str(MAX_REFS))
            .replace("PATHS", " ".join(shlex.quote(p) for p in paths)))  # last: a path is text, never a marker
    return f"SCRUB={int(scrub)}\n{body}"


def parse_history(output: str, scrub: bool) -> list[RepositoryHistory]:
    """The repositories `history_script` printed, in its order."""
    found: list[RepositoryHistory] = []
    for line in output.splitlines():
        tag, _, rest = line.partition("\t")
        fields = rest.split("\t")
        try:
            if tag == "RH" and len(fields) == 5:
                beyond, after, refs = (int(x) for x in fields[2:])
                found.append(RepositoryHistory(path=fields[0], head=fields[1], beyond_head=beyond, after_head=after,
                                               refs_beyond_head=refs, scrubbed=scrub, left_beyond_head=beyond,
                                               left_after_head=after, left_refs=refs))
            elif tag == "RR" and found and len(found[-1].refs) < MAX_REFS:
                found[-1].refs.append(rest)
            elif tag == "RS" and found and len(fields) == 3:
                last = found[-1]
                last.left_beyond_head, last.left_after_head, last.left_refs = (int(x) for x in fields)
            elif tag == "RE" and found:
                found[-1].errors.append(fields[-1])
        except ValueError:  # a count that is not one: git printed something else; the line is left out
            continue
    return found


def check_history(box: Environment, paths: list[str], scrub: bool) -> list[RepositoryHistory]:
    """Run the check (and the scrub) in `box`, as root, before the agent's first command."""
    if not paths:
        return []
    res = box.exec(history_script(paths, scrub), TIMEOUT_SEC, user="0")
    return parse_history(res.output, scrub)
