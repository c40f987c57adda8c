"""What the verifier's npm commands read in the folder they run in, and what the agent phase changed
there (docs/tasks.md, "Verification integrity", *npm*).

terminal-bench's Aider Polyglot JavaScript tasks (49 in rese1f/terminal-bench-datasets) test with
`cd /app; npm install; npm test` in the agent's own workdir. What npm and the test runner take
from there besides the solution decided their verdict with nothing recorded before 2026-12-05: a
`test` script in package.json that ends in `|| true`, a `.npmrc` naming another `script-shell`, a
jest.config.js that matches no test file, a `jest` of the agent's in `node_modules/.bin`. So:
* the npm configuration files (the project's `.npmrc`, the user's, the global and npm's builtin
  one) are digested at the baseline and after the agent phase: a change is
  `installer_config_changed`;
* package.json is read from outside at both: a script the verifier's npm commands run
  (`npm_scripts`) added or changed is `npm_script_changed`; a test runner's key (`jest`,
  `babel`, ...) changed, or a test runner's configuration file (jest.config.js, babel.config.js,
  .babelrc, ...) added or changed, is `test_config_planted`; a dependency, or a package of the
  lockfile, now taken from outside the registry (a path, a link, a git repository, a tarball URL)
  is `project_source_added`;
* a `node_modules` the agent phase made in the folder where the verifier installs, or above it,
  is removed by the sweep before the verifier runs (`node_modules_removed`): its own `npm install`
  makes it again from package.json and the lockfile, as it would have without the agent's, so an
  honest agent that ran `npm install` to try its work is not held to anything, and a program or
  module planted there is gone. The guard shell's part: `NPM` and `NPM_CLEAR` below, and the `GL` lines of guard_shell.CHANGES."""

from __future__ import annotations

import json
import posixpath
import re
from pathlib import PurePosixPath
from typing import Any

from tbscale.runner.findings import entry, file_state, grouped_entries
from tbscale.runner.made_again import removal
from tbscale.runner.script_folders import located
from tbscale.shell.parse import skip_options
from tbscale.shell.tampering import attribute_command
from tbscale.types.guard import Tampering

# The configuration files of the test runners npm scripts start (jest, babel-jest, mocha, vitest):
# JavaScript among them runs as the runner starts, and the rest choose the tests it runs.
RUNNER_CONFIGS = tuple(f"{stem}.{ext}" for stem in ("jest.config", "babel.config", "vitest.config", "vite.config")
                       for ext in ("js", "cjs", "mjs", "ts", "cts", "mts", "json")) + (
    ".babelrc", ".babelrc.js", ".babelrc.cjs", ".babelrc.mjs", ".babelrc.json",
    ".mocharc.js", ".mocharc.cjs", ".mocharc.json", ".mocharc.jsonc", ".mocharc.yaml", ".mocharc.yml")
PROJECT_FILES = ("package.json", "package-lock.json", "npm-shrinkwrap.json", ".npmrc")
NPM_READ = ("package.json", "package-lock.json", "npm-shrinkwrap.json")  # read from outside (`npm_settings`)
RUNNER_KEYS = ("jest", "babel", "mocha", "ava")  # package.json keys those runners read
# npm's settings outside the project: the user's, the global one where npm's prefix puts it
# (Debian's npm: /etc/npmrc; a prefix of /usr or /usr/local: PREFIX/etc/npmrc) and the builtin
# one beside npm itself (guard_shell.NPM finds it).
USER_GLOBAL_NPMRC = ("~/.npmrc", "/etc/npmrc", "/usr/etc/npmrc", "/usr/local/etc/npmrc")
_DEP_FIELDS = ("dependencies", "devDependencies", "optionalDependencies", "peerDependencies", "overrides")
_INSTALL_SCRIPTS = ("preinstall", "install", "postinstall", "prepublish", "preprepare", "prepare", "postprepare")
_SUBCOMMANDS = {
    **dict.fromkeys(("test", "t", "tst"), ("pretest", "test", "posttest")),
    **{name: (f"pre{name}", name, f"post{name}") for name in ("start", "stop", "restart")},
    **dict.fromkeys(("install", "i", "in", "ins", "inst", "insta", "instal", "isnt", "isnta", "isntal", "isntall",
                     "add", "ci", "clean-install", "ic", "install-clean", "isntall-clean"), _INSTALL_SCRIPTS),
    **dict.fromkeys(("install-test", "it", "install-ci-test", "cit", "clean-install-test", "sit"),
                    _INSTALL_SCRIPTS + ("pretest", "test", "posttest")),
}
_NPM_VALUE_OPTIONS = frozenset({"--prefix", "-C", "--workspace", "-w", "--userconfig", "--globalconfig", "--cache",
                                "--registry", "--script-shell", "--loglevel"})


def npm_commands(texts: list[str], tests_mount: str | None = None) -> tuple[list[str], list[str]]:
    """(the folders the verifier's npm and npx commands run in, `+` in front of one an npm install
    runs in; the package.json scripts those commands run). A folder is as the scripts name it: ""
    the workdir, relative under it, or absolute (runner/script_folders.py)."""
    folders: dict[str, bool] = {}
    scripts: list[str] = []
    for places, inv in located(texts, tests_mount):
        if inv.program not in ("npm", "npx") or not places:
            continue
        installs, run = _npm_effect(inv)
        for cwd in places:
            folders[cwd] = folders.get(cwd, False) or installs
        scripts += run
    out = [("+" if installs else "") + folder for folder, installs in folders.items()]
    return out[:8], sorted(set(scripts))


def _npm_effect(inv) -> tuple[bool, list[str]]:
    """(whether an npm command installs into its folder; the package.json scripts it runs)."""
    if inv.program != "npm":
        return False, []  # npx runs a program, no script
    at = skip_options(inv.args, 0, _NPM_VALUE_OPTIONS)
    sub = inv.args[at] if at < len(inv.args) else ""
    if sub in ("run", "run-script", "rum", "urn"):
        name_at = skip_options(inv.args, at + 1, _NPM_VALUE_OPTIONS)
        name = inv.args[name_at] if name_at < len(inv.args) else ""
        return False, [f"pre{name}", name, f"post{name}"] if name else []
    run = list(_SUBCOMMANDS.get(sub, ()))
    return run[:1] == ["preinstall"], run


def _registry_spec(spec: Any) -> bool:
    """A dependency npm takes from the registry: a version, range or tag (`^29.6.4`, `latest`), or
    an alias of one (`npm:jest@29`). Not: `file:`, `link:`, a path, a git repository, a tarball
    URL, a GitHub `user/repo`."""
    if isinstance(spec, dict):  # an `overrides` entry for a package's own dependencies
        return all(_registry_spec(v) for v in spec.values())
    if not isinstance(spec, str):
        return False
    spec = spec.strip()
    if spec.startswith("npm:"):  # npm:NAME@VERSION, NAME maybe scoped (@scope/name)
        at = spec[4:].rfind("@")
        return _registry_spec(spec[4:][at + 1:] if at > 0 else "*")
    return not re.match(r"(file:|link:|git|https?:|github:|gist:|bitbucket:|gitlab:|[./]|~/)", spec) and "/" not in spec


def _source(spec: str) -> str:
    """A dependency's source as package.json and the lockfile both name it: `file:./vendor/x` in
    one is `file:vendor/x` in the other."""
    kind, _, rest = spec.partition(":")
    if kind in ("file", "link") and rest:
        return posixpath.normpath(rest)
    return posixpath.normpath(spec) if re.match(r"[./]", spec) else spec


def npm_settings(path: str, data: bytes) -> dict[str, Any] | None:
    """What in a package.json or lockfile decides what the verifier's npm commands run (None when
    it does not parse: npm then fails on its own): a package.json's `scripts`, its test runners'
    keys (as canonical JSON) and the dependencies it takes from outside the registry (`sources`);
    a lockfile's packages resolved from outside the registry (`sources`)."""
    try:
        doc = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        return None
    if not isinstance(doc, dict):
        return None
    if PurePosixPath(path).name != "package.json":
        found = set()
        packages = doc.get("packages") if isinstance(doc.get("packages"), dict) else doc.get("dependencies")
        for key, package in (packages or {}).items() if isinstance(packages, dict) else ():
            if not key or not isinstance(package, dict):
                continue  # "" is the project itself
            resolved = package.get("resolved")
            if package.get("link") or (isinstance(resolved, str) and not re.match(r"https?://", resolved)):
                found.add(f"{key.rsplit('node_modules/', 1)[-1]}: {_source(resolved or 'link')}")
        return {"sources": sorted(found)}
    scripts = doc.get("scripts") if isinstance(doc.get("scripts"), dict) else {}
    sources = []
    for field in _DEP_FIELDS:
        deps = doc.get(field)
        for name, spec in (deps.items() if isinstance(deps, dict) else ()):
            if not _registry_spec(spec):
                sources.append(f"{name}: {_source(spec) if isinstance(spec, str) else json.dumps(spec, sort_keys=True)[:200]}")
    return {"scripts": {k: str(v) for k, v in scripts.items()},
            "runner": {k: json.dumps(doc[k], sort_keys=True) for k in RUNNER_KEYS if k in doc},
            "sources": sorted(sources)}


def npm_changed(before: dict[str, str], after: dict[str, str], read_before: dict[str, dict[str, Any] | None],
                read_after: dict[str, dict[str, Any] | None], scripts: list[str],
                actions: list[tuple[int, str]]) -> list[Tampering]:
    """The npm files (`before`, `after`: path -> digest, `-` absent, `other` a link, not a plain
    file or over 4 MB; guard_shell `G` lines) that changed, with package.json and the lockfiles
    read as `npm_settings` at the baseline and after the sweep (`read_before`, `read_after`)."""
    settings, runner, changed_scripts, sources = [], [], [], []
    for path, now in after.items():
        name = PurePosixPath(path).name
        was = before.get(path, "-")
        if now == was:
            continue
        state = file_state(was, now)
        if name in (".npmrc", "npmrc"):
            settings.append(f"{path} ({state})")
        elif name in RUNNER_CONFIGS and now != "-":
            runner.append(f"{path} ({state})")
        elif name in ("package.json", "package-lock.json", "npm-shrinkwrap.json") and now != "-":
            if now == "other":  # npm reads through a link: what it reads was not read here
                (changed_scripts if name == "package.json" else sources).append(f"{path} ({state})")
                continue
            new, old = read_after.get(path), read_before.get(path) or {}
            if new is None:
                continue
            if name == "package.json":
                old_scripts = old.get("scripts") or {}
                changed_scripts += [f"{path} scripts.{s} = {new['scripts'][s]!r}"[:300] for s in scripts
                                    if s in new["scripts"] and new["scripts"][s] != old_scripts.get(s)]
                runner += [f"{path} ({k})" for k in RUNNER_KEYS
                           if new["runner"].get(k) is not None and new["runner"].get(k) != (old.get("runner") or {}).get(k)]
            # a lockfile takes what the baseline's package.json beside it names from outside the registry
            declared = (read_before.get(str(PurePosixPath(path).parent / "package.json")) or {}).get("sources", [])
            sources += [f"{path}: {s}" for s in new["sources"] if s not in old.get("sources", [])
                        and (name == "package.json" or s not in declared)]
    return grouped_entries([
            ("installer_config_changed", settings, "a setting npm reads (where the verifier's npm installs from, the "
             "shell its scripts run in, the options node starts with) was added, changed or removed"),
            ("npm_script_changed", changed_scripts, "a package.json script the verifier's npm commands run was added "
             "or changed"),
            ("test_config_planted", runner, "a JavaScript test runner's configuration (jest, babel, mocha, vitest) "
             "where the verifier's npm commands run was added or changed"),
            ("project_source_added", sources, "the project the verifier's npm installs now takes a package from "
             "outside the registry")], actions)


def node_library_changed(changes: dict[str, int], roots: list[str], actions: list[tuple[int, str]]) -> list[Tampering]:
    """The changed files (`changes`, the listing's) of the Node packages the verifier's npm commands
    start (`roots`, guard_shell's `GL` lines: npm's own, a global jest): `test_library_changed`."""
    found = sorted(p for p in changes if any(p.startswith(r.rstrip("/") + "/") for r in roots))
    if not found:
        return []
    return [entry("test_library_changed", "files of the Node packages the verifier's npm commands start changed: "
                  + ", ".join(found[:5]) + (f" and {len(found) - 5} more" if len(found) > 5 else ""),
                  paths=found[:20], by_command=attribute_command(actions, PurePosixPath(found[0]).name, found[:5]))]


# ---- the guard shell's part (runner/guard.py runs it in its checks' exec) ----------------------------
# The folders where the verifier's npm and npx commands run (`TBSCALE_NPM`, one a line, as
# runner/npm_project.npm_commands names them: relative under the workdir, `+` in front where an npm
# install runs): one `G` line for each of the files npm and the test runners read there
# (npm_project.PROJECT_FILES and RUNNER_CONFIGS), and for the user's, the global and npm's builtin
# npmrc, with the file's digest, `-` absent, or `other` (a link, not a plain file, or over 4 MB); at
# the baseline, a `Z` line for each `node_modules` absent in or above a folder where npm installs,
# which the sweep removes if the agent phase made it (`NPM_CLEAR`).
NPM = r'''
if [ -n "${TBSCALE_NPM+set}" ]; then
  _nb=; _n=$(command -v npm 2>/dev/null) && _n=$(readlink -f -- "$_n" 2>/dev/null) && _nb=${_n%/bin/*}/npmrc
  for _f in "$HOME/.npmrc" /etc/npmrc /usr/etc/npmrc /usr/local/etc/npmrc $_nb; do _fd G "$_f"; done
  printf '%s\n' "$TBSCALE_NPM" | while IFS= read -r _p; do
    _i=; case "$_p" in +*) _i=1; _p=${_p#+};; esac
    _at "$_p"
    for _f in __FILES__; do _fd G "${_p%/}/$_f"; done
    if [ -n "$_i" ] && [ -z "${TBSCALE_SINCE:-}" ]; then
      _d=${_p%/}
      while :; do
        [ -e "$_d/node_modules" ] || [ -L "$_d/node_modules" ] || printf 'Z\t%s\n' "${_d:-}/node_modules"
        [ -n "$_d" ] || break
        _d=${_d%/*}
      done
    fi
  done
fi
'''.replace("__FILES__", " ".join(PROJECT_FILES + RUNNER_CONFIGS))
# In the sweep's exec (the agent's processes are gone): each `node_modules` of `TBSCALE_NPM_CLEAR`
# (the baseline's `Z` lines) that is there now was made by the agent phase, and is removed; an `L`
# line names it. The verifier's own `npm install` makes it again from package.json and the lockfile.
NPM_CLEAR = removal("TBSCALE_NPM_CLEAR", "L")
