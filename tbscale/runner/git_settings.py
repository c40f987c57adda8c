"""What git runs, and whether it can run at all, in a repository where the verifier runs git
(docs/tasks.md, "Verification integrity", *git's hooks and settings*).

A verifier script of SWE-bench's shape runs git in the repository the agent worked in: terminal-bench's
SWE-bench Verified adapter `git checkout`s the test file at the base commit and `git apply`s the test
patch; SWE-bench Pro's Harbor scripts `git apply` it. git then runs what the repository's and the
user's settings tell it to, after the guard's last look: a hook (`post-checkout` runs after a file's
checkout too), an fsmonitor hook (when git refreshes the index), a filter driver (`git apply` runs
the file it patches through its clean and smudge commands), a diff driver's `textconv`. And where git
cannot run there (its settings unreadable, `.git` replaced, a lock left on the index), the
checkout that resets the test file and the test patch do not happen, and the tests that run are the
old ones; where the base commit is replaced (`git replace`), the checkout writes the agent's copy. On 2026-12-06, in tasks of both shapes (tests/test_git_settings_integrity.py), each of
these passed a trial with the bug in place and nothing recorded.

So where the scripts run git (`g:` lines: each folder, `git -C` taken; and then the workdir too, where
a test's own git runs unless told otherwise), the guard shell takes, at the baseline and after the
sweep, for the repository holding each (the nearest folder up with a `.git`):
* its `.git` (a folder: `other`; a file naming the git folder elsewhere: its digest);
* in its git folder (and the common one of a worktree): `config`, `config.worktree`, `index.lock`, and
  each executable file in `hooks/` but git's samples;
* whether git can read the repository (`TOP/.git?runs`: HEAD's tree and the index), with fsmonitor
  off, and the object of each file the scripts check out at a commit named by its id (`k:` lines;
  `git replace` makes the commit another, whose file the checkout then writes);
* the user's and the system's settings files.
The settings files are parsed (dulwich): at the baseline as the shell prints them (`PATH?text`, in
hex: no process of the agent's has run yet), after the sweep read from outside where their digest
changed. Only what makes git run a command, or moves what it works on, counts (`_runs`). Only repositories that were there at the baseline
count: one the agent made is its own work, hooks and all. What changed is `git_hook_planted`.

A task whose solution is such a hook, in a repository where its verifier runs git, would have it
recorded as well; none of the public tasks read (docs/tasks.md) is one. Not read: git started by the
tests themselves where the scripts run none (a Python test's subprocess): the scripts are the shell
text this guard reads.
"""

from __future__ import annotations

import posixpath
import re
from io import BytesIO
from typing import Any

from tbscale.runner.findings import entry, file_state, texts_at_baseline, under
from tbscale.runner.script_folders import located
from tbscale.shell.tampering import attribute_command
from tbscale.types.guard import GuardSnapshot, Tampering, ToolRun

KIND = "git_hook_planted"
# git's options before its command that take a value as the next word
_VALUED = frozenset({"-C", "-c", "--git-dir", "--work-tree", "--namespace", "--config-env", "--exec-path"})
_BOOLEANS = frozenset({"", "true", "yes", "on", "1", "false", "no", "off", "0"})
SETTINGS_NAMES = frozenset({"config", "config.worktree", ".gitconfig", "gitconfig"})
RUNS = "?runs"  # the pseudo-path of whether git reads a repository: `TOP/.git?runs`, ok or fails
GIT_DIR = "?dir"  # `TOP/.git?dir`: the repository's git folder (and `?common`: a worktree's common one)


def _join(cwd: str, path: str) -> str:
    return posixpath.normpath(path if path.startswith("/") else posixpath.join(cwd or ".", path))


def git_folders(texts: list[str], tests_mount: str | None = None) -> list[str]:
    """Where the scripts run git: `g:FOLDER` for each folder they run it in, and
    `k:FOLDER<TAB>REV<TAB>PATH` for each file they check out at a commit named by its id there (`git
    checkout REV [--] PATH...`), the folders as the scripts name them ("" the workdir); with `g:` for the
    workdir first, where a test's own git runs unless told otherwise. None where they run no git."""
    out = ["g:"]
    for places, inv in located(texts, tests_mount):
        if inv.program != "git":
            continue
        words, folder, i = inv.args, "", 0
        while i < len(words) and words[i].startswith("-"):
            if words[i] == "-C" and i + 1 < len(words):
                folder = _join(folder, words[i + 1])
            i += 2 if words[i] in _VALUED else 1
        command, rest = (words[i], words[i + 1:]) if i < len(words) else ("", [])
        checked_out: list[tuple[str, str]] = []
        if command == "checkout":
            named = [w for w in rest if not w.startswith("-") or w == "--"]
            if "--" in named:
                cut = named.index("--")
                rev, paths = (named[0] if cut == 1 else None), named[cut + 1:]
            else:
                rev, paths = (named[0], named[1:]) if len(named) > 1 else (None, [])
            # at a commit named by its id, which nothing but a replacement (`git replace`) makes another
            # file: a branch the agent's own commits move is left out
            checked_out = [(rev, p) for p in paths if rev and re.fullmatch(r"[0-9a-f]{7,40}", rev)
                           and "\t" not in p and "\n" not in p and "?" not in p]
        for place in places:
            where = _join(place, folder) if (place or folder) else ""
            where = "" if where == "." else where
            out.append(f"g:{where}")
            out += [f"k:{where}\t{rev}\t{path}" for rev, path in checked_out]
    return [line for line in dict.fromkeys(out) if not line[2:].startswith("..")][:40] if len(out) > 1 else []


def read_settings(path: str, data: bytes) -> dict[str, Any]:
    """A settings file's lines that make git run a command or move what it works on, as
    `section[.subsection].key=value` (`runs`), or why it cannot be read (`error`)."""
    from dulwich.config import ConfigFile

    try:
        config = ConfigFile.from_file(BytesIO(data))
    except Exception as e:  # noqa: BLE001  (the parser's errors are ValueError and friends; git refuses such a file too)
        return {"error": f"{type(e).__name__}: {e}"[:200]}
    runs = []
    for section in config.sections():
        name = section[0].decode("utf-8", "replace").lower()
        sub = section[1].decode("utf-8", "replace") if len(section) > 1 else None
        for key, value in config[section].items():
            key_s = key.decode("utf-8", "replace")
            value_s = value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)
            if _runs(name, sub, key_s.lower(), value_s):  # the key as written: the command that set it names it so
                runs.append(f"{name}{'.' + sub if sub is not None else ''}.{key_s}={value_s}")
    return {"runs": sorted(runs)}


def _runs(section: str, sub: str | None, key: str, value: str) -> bool:
    """Whether a setting makes git run a command (git-config(1)), or moves what git works on
    (`core.worktree`, `core.bare`, `submodule.recurse`, `core.useReplaceRefs`). Left out: the
    editor and pager (git runs them only at a terminal or when it asks for an edit, and agents set
    `core.pager cat` for themselves), and what runs only for transport (`core.sshCommand`,
    credential helpers)."""
    if section == "core":
        return key in ("hookspath", "worktree", "bare", "alternaterefscommand", "usereplacerefs") or (
            key == "fsmonitor" and value.strip().lower() not in _BOOLEANS)
    if section == "diff":
        return key == "external" if sub is None else key in ("command", "textconv")
    if section == "merge":
        return sub is not None and key == "driver"
    if section == "filter":
        return key in ("clean", "smudge", "process")
    if section == "gpg":  # gpg.program, gpg.<format>.program, gpg.ssh.defaultKeyCommand
        return key in ("program", "defaultkeycommand")
    if section == "hook":  # hooks given in the settings (hook.<name>.command)
        return key == "command"
    if section in ("include", "includeif"):
        return key == "path"
    if section == "submodule":  # `recurse`: git's commands go into the submodules, and run their hooks
        return (key == "update" and value.lstrip().startswith("!")) or (sub is None and key == "recurse")
    return section == "uploadpack" and key == "packobjectshook"


def git_changed(before: dict[str, str], after: dict[str, str], read_before: dict, read_after: dict,
                snap: GuardSnapshot, actions: list[tuple[int, str]], run: ToolRun) -> list[Tampering]:
    """The entries for what changed in the repositories the baseline had where the verifier runs
    git (`before`, `after`: path -> digest, `-` absent, `other` a folder or link, and the
    pseudo-paths `?runs` and `?dir`), with the settings files as `read_settings` gives them: at the
    baseline from the shell's `PATH?text` lines (`read_before` is not used), after the sweep read
    from outside."""
    repos = [p[:-len("/.git")] for p, d in before.items() if p.endswith("/.git") and d != "-"]
    if not repos:
        return []
    read_before = texts_at_baseline(before, read_settings)
    # the git folders of those repositories, as the baseline had them: what the agent phase added to
    # the git folder of a repository it made is its own
    folders = [d for p, d in before.items() if p.endswith((GIT_DIR, "?common")) and d not in ("-", "")]
    found: list[str] = []
    keys: list[str] = []  # the settings changed, which the command that changed them names
    for top in repos:
        dot = f"{top}/.git"
        if after.get(dot, "-") != before[dot]:
            found.append(f"{dot} ({file_state(before[dot], after.get(dot, '-'))}: git now takes another repository "
                         f"there, or none)")
        if before.get(dot + RUNS) == "ok" and after.get(dot + RUNS, "fails") != "ok":
            found.append(f"{dot} (git no longer reads the repository: its HEAD or its index)")
    for path, was in before.items():
        if "?at=" in path and after.get(path, "missing") != was:
            file, _, rev = path.partition("?at=")
            now = after.get(path, "missing")
            found.append(f"{file} (the verifier checks it out at {rev}, where it is now "
                         f"{'missing' if now == 'missing' else 'another file: the commit was replaced'})")
    for path in sorted(set(before) | set(after)):
        if "?" in path:
            continue
        was, now = before.get(path, "-"), after.get(path, "-")
        name = posixpath.basename(path)
        user = _user_settings(path)
        if was == now or not (user or any(under(path, f) for f in folders)):
            continue
        if name == "index.lock":
            if now != "-":
                found.append(f"{path} (added: git's checkout and every command that writes the index stop there)")
        elif posixpath.basename(posixpath.dirname(path)) == "hooks" and name not in SETTINGS_NAMES:
            if now != "-":
                found.append(f"{path} (a hook, {file_state(was, now)})")
        elif name in SETTINGS_NAMES:
            more, changed = _settings_changed(path, was, now, read_before.get(path), read_after.get(path),
                                              repository=not user)
            found += more
            keys += changed
    if not found:
        return []
    paths = sorted({f.split(" (", 1)[0] for f in found})
    return [entry(KIND, "what git runs where the verifier runs git was changed, or git made unable to run there (a "
                  "hook, a setting that runs a command, the repository's git folder): " + "; ".join(found[:5])[:700],
                  paths=paths[:20], by_command=attribute_command(actions, posixpath.basename(paths[0]),
                                                                 [*keys[:5], *paths[:5]]))]


def _user_settings(path: str) -> bool:
    """The user's or the system's settings file (the shell's last lines), not a repository's."""
    return posixpath.basename(path) in (".gitconfig", "gitconfig") or path.endswith("/git/config")


def _settings_changed(path: str, was: str, now: str, read_was: dict | None, read_now: dict | None, *,
                      repository: bool) -> tuple[list[str], list[str]]:
    """What a settings file's change did (`read_settings` before and after), and the keys changed."""
    if now == "-":
        return ([f"{path} (removed: git no longer takes it for a repository)"] if repository else []), []
    if now == "other":
        return [f"{path} ({file_state(was, now)})"], []
    read_now = read_now or {}
    if read_now.get("error"):
        return [f"{path} (git cannot read it: {read_now['error']})"], []
    old, current = set((read_was or {}).get("runs") or []), set(read_now.get("runs") or [])
    new, gone = sorted(current - old), sorted(old - current)
    if not new and not gone:
        return [], []
    said = "; ".join([*new, *("removed " + g for g in gone)])
    return [f"{path} ({said[:300]})"], [line.split("=", 1)[0] for line in [*new, *gone]]


# ---- the guard shell's part (runner/guard.py runs it in its checks' exec) ----------------------------
# `TBSCALE_GIT`, `git_folders`' lines; `_fd`, `_ft` (a settings file, with its text at the baseline) and `_at` are guard_shell.PROJECT's. `GI PATH DIGEST` for
# each file above, and `GI TOP/.git?dir GITDIR`, `GI TOP/.git?common DIR`, `GI TOP/.git?runs ok|fails`.
GIT = r'''
if [ -n "${TBSCALE_GIT+set}" ]; then
  _tab=$(printf '\t')
  # the repositories holding the folders git runs in: the nearest folder up with a `.git`, each once
  _gi_tops=$(printf '%s\n' "$TBSCALE_GIT" | while IFS= read -r _p; do
    case $_p in g:*) _p=${_p#g:} ;; *) continue ;; esac
    _at "$_p"; _d=$(cd "$_p" 2>/dev/null && pwd -P) || continue
    while :; do
      if [ -e "$_d/.git" ] || [ -L "$_d/.git" ]; then printf '%s\n' "$_d"; break; fi
      [ "$_d" = / ] && break
      _d=$(dirname -- "$_d")
    done
  done | sort -u)
  # git with nothing of the agent's run (no fsmonitor hook; these commands run no other hook or
  # filter), and a time limit where the image has `timeout` (an include naming a fifo would block it)
  _gi_git() { if command -v timeout >/dev/null 2>&1; then timeout 60 git -c core.fsmonitor=false "$@"
              else git -c core.fsmonitor=false "$@"; fi; }
  _gi_dir() {
    _ft GI "$1/config"; _ft GI "$1/config.worktree"; _fd GI "$1/index.lock"
    for _h in "$1"/hooks/*; do
      case $_h in *.sample) continue ;; esac
      { [ -f "$_h" ] || [ -L "$_h" ]; } && [ -x "$_h" ] && _fd GI "$_h"
    done
    return 0
  }
  if [ -n "$_gi_tops" ]; then
    printf '%s\n' "$_gi_tops" | while IFS= read -r _t; do
      _fd GI "$_t/.git"
      _g=$_t/.git
      if [ -f "$_g" ] && [ ! -L "$_g" ]; then
        _l=$(head -n 1 "$_g" 2>/dev/null)
        case $_l in 'gitdir: '*) _g=${_l#gitdir: }; case $_g in /*) ;; *) _g=$_t/$_g ;; esac ;; *) continue ;; esac
      fi
      _g=$(cd "$_g" 2>/dev/null && pwd -P) || continue
      printf 'GI\t%s\t%s\n' "$_t/.git?dir" "$_g"
      _gi_dir "$_g"
      if [ -f "$_g/commondir" ]; then
        _c=$(head -n 1 "$_g/commondir" 2>/dev/null); case $_c in /*) ;; *) _c=$_g/$_c ;; esac
        _c=$(cd "$_c" 2>/dev/null && pwd -P) && [ "$_c" != "$_g" ] && { printf 'GI\t%s\t%s\n' "$_t/.git?common" "$_c"; _gi_dir "$_c"; }
      fi
      # whether git reads it, with nothing of the agent's run: HEAD's tree and the index; and the
      # object of each file the scripts check out at a commit in a folder of this repository
      # (`FOLDER/PATH?at=REV`: a replacement of the commit gives another)
      command -v git >/dev/null 2>&1 || continue
      _ok=ok
      ( cd "$_t" && _gi_git rev-parse -q --verify 'HEAD^{tree}' && _gi_git ls-files -s ) >/dev/null 2>&1 || _ok=fails
      printf 'GI\t%s\t%s\n' "$_t/.git?runs" "$_ok"
      printf '%s\n' "$TBSCALE_GIT" | while IFS= read -r _k; do
        case $_k in k:*) _k=${_k#k:} ;; *) continue ;; esac
        _f=${_k%%"$_tab"*}; _k=${_k#*"$_tab"}; _rev=${_k%%"$_tab"*}; _path=${_k#*"$_tab"}
        _at "$_f"; _f=$(cd "$_p" 2>/dev/null && pwd -P) || continue
        case $_f/ in "$_t"/*) ;; *) continue ;; esac
        # its id, and whether the object is there to be checked out
        _b=$(cd "$_f" && _gi_git rev-parse -q --verify "$_rev:./$_path" 2>/dev/null) \
          && (cd "$_f" && _gi_git cat-file -e "$_b") 2>/dev/null || _b=
        printf 'GI\t%s\t%s\n' "$_f/$_path?at=$_rev" "${_b:-missing}"
      done
    done
    for _f in "${HOME:-/root}/.gitconfig" "${XDG_CONFIG_HOME:-${HOME:-/root}/.config}/git/config" /etc/gitconfig \
        /usr/local/etc/gitconfig; do
      _ft GI "$_f"
    done
  fi
fi
'''


def settings_file(path: str) -> bool:
    """What is read again from outside: the settings files."""
    return posixpath.basename(path) in SETTINGS_NAMES and "?" not in path
