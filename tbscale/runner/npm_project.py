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
  module planted there is gone. The guard shell's part: guard_shell.NPM and NPM_CLEAR."""

from __future__ import annotations

import json
import posixpath
import re
from pathlib import PurePosixPath
from typing import Any

from tbscale.runner.findings import entry
from tbscale.shell.parse import invocation, skip_options, split_segments
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


def npm_commands(texts: list[str], tests_mount: str | None = None, cd_target=None) -> tuple[list[str], list[str]]:
    """(the folders the verifier's npm and npx commands run in, `+` in front of one an npm install
    runs in; the package.json scripts those commands run). A folder is as the scripts name it: ""
    the workdir, relative under it, or absolute; one under the tests mount is the verifier's own and
    is left out, and so is one after a `cd` to a folder the script does not name. `cd_target` is
    verifier_reads' `_moved`."""
    folders: dict[str, bool] = {}
    scripts: list[str] = []
    for text in texts:
        cwds: list[str | None] = [""]  # where the script may be: `cd /app || cd /testbed` gives two
        for segment in split_segments(_EITHER_CD.sub(_either, text)):
            inv = invocation(segment)
            if inv.raw_program in ("cd", _CD_ANY) and cd_target is not None:
                targets = (inv.args or ["~"]) if inv.raw_program == _CD_ANY else (inv.args or ["~"])[:1]
                cwds = list(dict.fromkeys(cd_target(cwd, t) for cwd in cwds for t in targets))
                continue
            if inv.program not in ("npm", "npx"):
                continue
            installs, run = _npm_effect(inv)
            places = [cwd for cwd in cwds if cwd is not None and not (tests_mount and cwd.startswith("/") and (
                cwd == tests_mount or cwd.startswith(tests_mount.rstrip("/") + "/")))]
            for cwd in places:
                folders[cwd] = folders.get(cwd, False) or installs
            scripts += run if places else []
    out = [("+" if installs else "") + folder for folder, installs in folders.items()]
    return out[:8], sorted(set(scripts))


# `cd A || cd B || cd C` (SWE-bench Pro's Harbor adapters: `cd /app || cd /testbed || cd /workspace`):
# the script is in one of them, whichever exists; read as one command naming all (`_CD_ANY`).
_CD_ANY = "tbscale-cd-any"
_EITHER_CD = re.compile(r"^([ \t]*)cd[ \t]+([^\s;&|]+)((?:[ \t]*\|\|[ \t]*cd[ \t]+[^\s;&|]+)+)[ \t]*$", re.M)


def _either(match: re.Match) -> str:
    return f"{match.group(1)}{_CD_ANY} {match.group(2)} " + " ".join(re.findall(r"cd[ \t]+([^\s;&|]+)", match.group(3)))


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
        state = "removed" if now == "-" else "added" if was == "-" else "a link, not a plain file, or over 4 MB" \
            if now == "other" else "changed"
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
    out = []
    for kind, found, what in (
            ("installer_config_changed", settings, "a setting npm reads (where the verifier's npm installs from, the "
             "shell its scripts run in, the options node starts with) was added, changed or removed"),
            ("npm_script_changed", changed_scripts, "a package.json script the verifier's npm commands run was added "
             "or changed"),
            ("test_config_planted", runner, "a JavaScript test runner's configuration (jest, babel, mocha, vitest) "
             "where the verifier's npm commands run was added or changed"),
            ("project_source_added", sources, "the project the verifier's npm installs now takes a package from "
             "outside the registry")):
        if found:
            paths = sorted({f.split(" (")[0].split(" scripts.")[0].split(": ")[0] for f in found})
            out.append(entry(kind, f"{what}: " + "; ".join(found[:5])[:700], paths=paths[:20],
                             by_command=attribute_command(actions, PurePosixPath(paths[0]).name, paths[:5])))
    return out


def node_library_changed(changes: dict[str, int], roots: list[str], actions: list[tuple[int, str]]) -> list[Tampering]:
    """The changed files (`changes`, the listing's) of the Node packages the verifier's npm commands
    start (`roots`, guard_shell's `GL` lines: npm's own, a global jest): `test_library_changed`."""
    found = sorted(p for p in changes if any(p.startswith(r.rstrip("/") + "/") for r in roots))
    if not found:
        return []
    return [entry("test_library_changed", "files of the Node packages the verifier's npm commands start changed: "
                  + ", ".join(found[:5]) + (f" and {len(found) - 5} more" if len(found) > 5 else ""),
                  paths=found[:20], by_command=attribute_command(actions, PurePosixPath(found[0]).name, found[:5]))]
