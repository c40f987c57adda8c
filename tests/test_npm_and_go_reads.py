"""What the verifier's npm commands read (runner/npm_project.py), without an engine: the folders and
package.json scripts read off a test script, package.json and lockfiles read for what decides the
verdict, the findings from two looks, and the guard shell's part run here with `sh`. The same
against real npm in containers: tests/test_npm_and_go_integrity.py."""

from __future__ import annotations

import json
import subprocess

from tbscale.runner.guard_shell import PROJECT, parse_snapshot
from tbscale.runner.npm_project import NPM, NPM_CLEAR
from tbscale.runner.npm_project import _registry_spec, npm_changed, npm_commands, npm_settings

# The shape of terminal-bench's Aider Polyglot JavaScript test scripts (rese1f/terminal-bench-datasets)
POLYGLOT = """set -Eeuo pipefail
cd /app
if [ -f package.json ]; then
    npm install
fi
find $TEST_DIR -name "*test*.js" | xargs -I {} cp {} . 2>/dev/null || echo none
if [ -f "package.json" ] && grep -q "jest" package.json; then
    npm test
elif command -v jest >/dev/null 2>&1; then
    jest
fi
"""


def test_the_folders_npm_runs_in_and_the_scripts_it_runs():
    folders, scripts = npm_commands([POLYGLOT], "/tests")
    assert folders == ["+/app"]
    assert {"pretest", "test", "posttest", "preinstall", "install", "postinstall", "prepare"} <= set(scripts)
    # `npm run X` runs preX, X and postX; npx runs a program, no script; the workdir is ""
    assert npm_commands(["npm run --silent build && npx jest"], None) == ([""], ["build", "postbuild", "prebuild"])
    assert npm_commands(["cd web && npm ci", "npm t"], None) == (["+web", ""], sorted(
        {"pretest", "test", "posttest", "preinstall", "install", "postinstall", "prepublish", "preprepare", "prepare",
         "postprepare"}))
    # the tests folder is the verifier's own; a folder the script does not name is not followed
    assert npm_commands(['cd /tests && npm test', 'cd "$TEST_DIR" && npm install'], "/tests") == ([], [])
    assert npm_commands(["pytest /tests/test_outputs.py"], "/tests") == ([], [])
    # SWE-bench Pro's Harbor adapters: `cd /app || cd /testbed || cd /workspace`, whichever exists
    assert npm_commands(["cd /app || cd /testbed || cd /workspace\necho x\nnpm test 2>&1 | tee log"], "/tests") == (["/app", "/testbed", "/workspace"], ["posttest", "pretest", "test"])


def test_dependencies_from_outside_the_registry():
    for spec in ("^29.6.4", "~3.37.1", "latest", "1.x", "npm:jest@^29", "npm:@babel/core@^7", "npm:@scope/x", "*", ">=1 <2"):
        assert _registry_spec(spec), spec
    for spec in ("file:/tmp/evil", "link:../x", "./vendor/x", "/tmp/x.tgz", "git+https://h/r.git", "user/repo",
                 "https://h/x.tgz", "github:u/r", "npm:jest@file:/tmp/x", "~/x", 3):
        assert not _registry_spec(spec), spec


def test_package_json_and_lockfiles_are_read_for_what_decides_the_verdict():
    doc = {"scripts": {"test": "jest ./*", "lint": "eslint ."}, "jest": {"testMatch": ["**/*.spec.js"]},
           "devDependencies": {"jest": "^29.7.0", "checker": "file:./vendor/checker"}}
    read = npm_settings("/app/package.json", json.dumps(doc).encode())
    assert read == {"scripts": {"test": "jest ./*", "lint": "eslint ."},
                    "runner": {"jest": json.dumps(doc["jest"], sort_keys=True)},
                    "sources": ["checker: vendor/checker"]}
    lock = {"lockfileVersion": 3, "packages": {"": {"name": "x"}, "node_modules/jest": {
        "resolved": "https://registry.npmjs.org/jest/-/jest-29.7.0.tgz"}, "node_modules/evil": {"resolved": "file:/tmp/e.tgz"},
        "node_modules/linked": {"link": True, "resolved": "vendor/linked"}}}
    assert npm_settings("/app/package-lock.json", json.dumps(lock).encode()) == {
        "sources": ["evil: /tmp/e.tgz", "linked: vendor/linked"]}
    assert npm_settings("/app/package.json", b"{not json") is None
    assert npm_settings("/app/package.json", b"[]") is None


def test_what_changed_is_told_by_kind_and_what_did_not_is_not_told():
    run = ["posttest", "pretest", "test"]
    before = {"/app/package.json": "a", "/app/.npmrc": "-", "/root/.npmrc": "-", "/app/jest.config.js": "-",
              "/app/package-lock.json": "-"}
    base = {"scripts": {"test": "jest ./*", "lint": "eslint ."}, "runner": {}, "sources": []}
    read_before = {"/app/package.json": base}

    def kinds(after: dict, read_after: dict) -> dict[str, str]:
        return {e["kind"]: e["detail"] for e in npm_changed(before, {**before, **after}, read_before, read_after, run,
                                                            [(1, "cmd")])}

    # nothing changed, or a script the verifier does not run (lint), or a lockfile from the registry
    assert kinds({}, {}) == {}
    assert kinds({"/app/package.json": "b"}, {"/app/package.json": {**base, "scripts": {"test": "jest ./*",
                                                                                          "lint": "x"}}}) == {}
    assert kinds({"/app/package-lock.json": "c"}, {"/app/package-lock.json": {"sources": []}}) == {}
    found = kinds({"/app/package.json": "b"}, {"/app/package.json": {**base, "scripts": {"test": "jest ./* || true"}}})
    assert list(found) == ["npm_script_changed"] and "scripts.test = 'jest ./* || true'" in found["npm_script_changed"]
    found = kinds({"/app/package.json": "b"}, {"/app/package.json": {**base, "scripts": {**base["scripts"],
                                                                                          "posttest": "true"}}})
    assert "scripts.posttest" in found["npm_script_changed"]
    assert list(kinds({"/app/.npmrc": "d", "/root/.npmrc": "e"}, {})) == ["installer_config_changed"]
    assert list(kinds({"/app/jest.config.js": "f"}, {})) == ["test_config_planted"]
    assert list(kinds({"/app/package.json": "b"}, {"/app/package.json": {**base, "runner": {"jest": "{}"}}})) == [
        "test_config_planted"]
    assert list(kinds({"/app/package.json": "b"}, {"/app/package.json": {**base, "sources": ["x"]}})) == [
        "project_source_added"]
    assert list(kinds({"/app/package.json": "other"}, {})) == ["npm_script_changed"]  # a link: npm reads through it
    assert list(kinds({"/app/package-lock.json": "other"}, {})) == ["project_source_added"]
    assert list(kinds({"/app/package-lock.json": "c"}, {"/app/package-lock.json": {"sources": ["evil: /x"]}})) == [
        "project_source_added"]
    # the lockfile an honest `npm install` writes takes from a path what package.json named so already
    read_before["/app/package.json"] = {**base, "sources": ["checker: vendor/checker"]}
    assert kinds({"/app/package-lock.json": "c"}, {"/app/package-lock.json": {"sources": ["checker: vendor/checker"]}}) == {}
    assert list(kinds({"/app/package-lock.json": "c"}, {"/app/package-lock.json": {"sources": ["checker: /tmp/evil"]}})) \
        == ["project_source_added"]


def test_the_guard_shell_lists_npms_files_and_clears_only_a_node_modules_made_since(tmp_path):
    app, home = tmp_path / "app", tmp_path / "home"
    app.mkdir(), home.mkdir()
    (app / "package.json").write_text('{"scripts": {"test": "checker"}}')
    env = {"PATH": "/usr/bin:/bin", "HOME": str(home), "TBSCALE_NPM": "+", "TBSCALE_WORKDIR": str(app)}
    base = parse_snapshot(subprocess.run(["sh", "-c", PROJECT + NPM], capture_output=True, text=True, check=True, env=env).stdout)
    assert base["npm"][f"{app}/.npmrc"] == "-" and base["npm"][f"{home}/.npmrc"] == "-"
    assert len(base["npm"][f"{app}/package.json"]) == 64
    # every node_modules from the folder npm installs in up to / that was not there
    assert f"{app}/node_modules" in base["npm_absent"] and "/node_modules" in base["npm_absent"]
    (app / "node_modules" / ".bin").mkdir(parents=True)
    (app / ".npmrc").write_text("script-shell=/tmp/ok.sh\n")
    keep = tmp_path / "node_modules"  # not in the list given: left alone
    keep.mkdir()
    env = {**env, "TBSCALE_SINCE": "1", "TBSCALE_NPM_CLEAR": f"{app}/node_modules\n{tmp_path}/nothing/node_modules"}
    after = parse_snapshot(subprocess.run(["sh", "-c", PROJECT + NPM + NPM_CLEAR], capture_output=True, text=True, check=True,
                                          env=env).stdout)
    assert after["node_modules_removed"] == [f"{app}/node_modules"] and "npm_absent" not in after
    assert not (app / "node_modules").exists() and keep.is_dir()
    assert after["npm"][f"{app}/.npmrc"] != "-"


def test_the_node_packages_npm_starts_are_listed_and_their_changed_files_are_the_test_runners(tmp_path):
    from tbscale.runner.guard_shell import CHANGES
    from tbscale.runner.npm_project import node_library_changed

    lib, bin_ = tmp_path / "lib" / "node_modules", tmp_path / "bin"
    for package, script in (("npm", "bin/npm-cli.js"), ("@scope/runner", "bin/run.js"), ("other", "bin/o.js")):
        (lib / package / script).parent.mkdir(parents=True)
        (lib / package / script).write_text("#!/usr/bin/env node\n")
        (lib / package / script).chmod(0o755)
        (lib / package / "lib").mkdir()
        (lib / package / "lib" / "cli.js").write_text("module.exports = 1;\n")
    bin_.mkdir()
    (bin_ / "npm").symlink_to(lib / "npm" / "bin" / "npm-cli.js")
    (bin_ / "run").symlink_to(lib / "@scope" / "runner" / "bin" / "run.js")
    since = subprocess.run(["date", "+%s.%N"], capture_output=True, text=True, check=True).stdout.strip()
    subprocess.run(["sleep", "0.05"], check=True)
    for package in ("npm", "@scope/runner", "other"):
        with open(lib / package / "lib" / "cli.js", "a") as f:
            f.write("process.on('exit', () => { process.exitCode = 0 });\n")
    env = {"PATH": f"{bin_}:/usr/bin:/bin", "HOME": str(tmp_path), "TBSCALE_NPM": "+", "TBSCALE_SINCE": since,
           "TBSCALE_NODE_PROGRAMS": "bash run npm", "TBSCALE_TESTS": str(tmp_path / "tests")}
    out = parse_snapshot(subprocess.run(["sh", "-c", CHANGES], capture_output=True, text=True, check=True, env=env).stdout)
    assert out["node_roots"] == [str(lib / "@scope" / "runner"), str(lib / "npm")]
    (found,) = node_library_changed(out["changes"], out["node_roots"], [(1, "echo x >> cli.js")])
    assert found["kind"] == "test_library_changed"
    assert found["paths"] == [str(lib / "@scope" / "runner" / "lib" / "cli.js"), str(lib / "npm" / "lib" / "cli.js")]
    assert node_library_changed(out["changes"], [], []) == []  # a package npm does not start: not listed


def test_the_folders_go_builds_in_and_what_go_mod_takes_from_elsewhere():
    from tbscale.runner.go_project import go_folders, go_settings

    # SWE-bench Pro's Harbor adapters, and terminal-bench's Aider Polyglot Go tasks
    assert go_folders(["cd /app || cd /testbed || cd /workspace\ngo test -v ./... 2>&1 | tee log"], "/tests") == [
        "/app", "/testbed", "/workspace"]
    assert go_folders(["cd /app\nif [ -f go.mod ]; then go mod tidy; fi\ngo test -v ./..."], "/tests") == ["/app"]
    assert go_folders(["go version && go env GOPATH", "cd /tests && go test ./..."], "/tests") == []
    mod = b"""module example.com/app // the app

go 1.19

require github.com/stretchr/testify v1.8.4

replace example.com/checker => ./checker // local
replace (
\tgithub.com/stretchr/testify  =>   /tmp/evil
\tgolang.org/x/net v0.1.0 => golang.org/x/net v0.2.0
)
"""
    assert go_settings("/app/go.mod", mod) == {"replaces": [
        "replace example.com/checker => ./checker", "replace github.com/stretchr/testify => /tmp/evil",
        "replace golang.org/x/net v0.1.0 => golang.org/x/net v0.2.0"]}
    # go 1.21 and later switch to the toolchain go.mod names
    assert go_settings("/app/go.mod", b"module m\n\ngo 1.22\n\ntoolchain go1.99.1\n") == {"replaces": ["toolchain go1.99.1"]}


def test_what_go_reads_changed_is_told_by_kind():
    from tbscale.runner.go_project import go_changed

    before = {"/root/.config/go/env": "-", "/usr/lib/go/go.env": "a", "/app/go.mod": "b", "/app/go.work": "-",
              "/go.work": "-", "/app/vendor/modules.txt": "-"}
    base = {"/app/go.mod": {"replaces": ["replace example.com/checker => ./checker"]}}

    def kinds(after: dict, read_after: dict | None = None, mains: list[str] | None = None) -> list[str]:
        return [e["kind"] for e in go_changed(before, {**before, **after}, base, read_after or {}, mains or [],
                                              [(1, "cmd")])]

    assert kinds({}) == []
    # go mod tidy rewrote the requirements: no replace added
    assert kinds({"/app/go.mod": "c"}, {"/app/go.mod": {"replaces": ["replace example.com/checker => ./checker"]}}) == []
    assert kinds({"/app/go.mod": "c"}, {"/app/go.mod": {"replaces": ["replace example.com/checker => /tmp/evil"]}}) == [
        "project_source_added"]
    assert kinds({"/app/go.mod": "c"}, {"/app/go.mod": {"replaces": ["replace example.com/checker => ./checker",
                                                                     "toolchain go1.99.1"]}}) == ["project_source_added"]
    assert kinds({"/root/.config/go/env": "d"}) == ["installer_config_changed"]
    assert kinds({"/usr/lib/go/go.env": "e"}) == ["installer_config_changed"]
    assert kinds({"/go.work": "f"}) == ["project_source_added"]
    assert kinds({"/app/vendor/modules.txt": "g"}) == ["project_source_added"]
    assert kinds({}, mains=["/app/zz_test.go"]) == ["test_config_planted"]


def test_the_guard_shell_lists_gos_files_up_to_the_top(tmp_path):
    from tbscale.runner.go_project import GO

    app, home = tmp_path / "app", tmp_path / "home"
    (home / ".config" / "go").mkdir(parents=True)
    app.mkdir()
    (app / "go.mod").write_text("module example.com/app\n")
    (home / ".config" / "go" / "env").write_text("GOFLAGS=-run=^$\n")
    env = {"PATH": "/usr/bin:/bin", "HOME": str(home), "TBSCALE_GO": "\n/tests", "TBSCALE_WORKDIR": str(app)}
    out = subprocess.run(["sh", "-c", PROJECT + NPM + GO], capture_output=True, text=True, check=True, env=env, timeout=60)
    found = parse_snapshot(out.stdout)["go"]
    assert len(found[f"{app}/go.mod"]) == 64 and len(found[f"{home}/.config/go/env"]) == 64
    assert found[f"{app}/vendor/modules.txt"] == "-"
    # every go.work from the folder up to /, once for each folder
    works = [p for p in found if p.endswith("/go.work")]
    assert "/go.work" in works and f"{app}/go.work" in works and "/tests/go.work" in works
    assert len(out.stdout.splitlines()) < 40
