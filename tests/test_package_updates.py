"""A program or test library the agent phase replaced with a published release is settled against
the release's wheel (runner/package_updates.py, runner/pypi_releases.py), and nothing else is.

No engine: the index is a loopback server with PEP 691 pages and wheels made here, and the
environment a folder read as the container's filesystem."""

from __future__ import annotations

import hashlib
import http.server
import io
import json
import threading
import zipfile

import pytest

from tbscale.environments.base import ExecResult
from tbscale.runner.package_updates import launcher, settle
from tbscale_testing.folder_box import FolderBox
from tbscale.runner.pypi_releases import ReleaseUnavailable, published_wheel, wheel_tags

PIP_LAUNCHER = """#!/usr/bin/python3
# -*- coding: utf-8 -*-
import re
import sys
from pip._internal.cli.main import main
if __name__ == "__main__":
    sys.argv[0] = re.sub(r"(-script\\.pyw|\\.exe)?$", "", sys.argv[0])
    sys.exit(main())
"""
UV_LAUNCHER = """#!/opt/venv/bin/python
# -*- coding: utf-8 -*-
import sys
from pytest import console_main
if __name__ == "__main__":
    if sys.argv[0].endswith("-script.pyw"):
        sys.argv[0] = sys.argv[0][:-11]
    elif sys.argv[0].endswith(".exe"):
        sys.argv[0] = sys.argv[0][:-4]
    sys.exit(console_main())
"""
PIP26_LAUNCHER = """#!/usr/bin/python3
import sys
from _pytest.config import _console_main
if __name__ == '__main__':
    sys.argv[0] = sys.argv[0].removesuffix('.exe')
    sys.exit(_console_main())
"""
SITE = "/usr/local/lib/python3.11/dist-packages"
PIP_FILES = {"pip/__init__.py": b"__version__ = '99.1'\n", "pip/_internal/cli/main.py": b"def main():\n    return 0\n"}
PYTEST_FILES = {"_pytest/__init__.py": b"", "_pytest/main.py": b"def run():\n    pass\n",
                "pytest/__init__.py": b"from _pytest.main import run\n", "py.py": b"# shim\n"}


def _wheel(name: str, version: str, files: dict[str, bytes], entry_points: str) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        for path, data in files.items():
            z.writestr(path, data)
        info = f"{name}-{version}.dist-info"
        z.writestr(f"{info}/METADATA", f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
        z.writestr(f"{info}/WHEEL", "Wheel-Version: 1.0\nTag: py3-none-any\n")
        z.writestr(f"{info}/entry_points.txt", entry_points)
        z.writestr(f"{info}/RECORD", "")
    return buf.getvalue()


class Index:
    """A loopback index: `/simple/NAME/` in PEP 691 JSON, and the wheels it lists; counts requests."""

    def __init__(self) -> None:
        self.wheels: dict[str, bytes] = {}
        self.requests: list[str] = []
        self.bad_digest: set[str] = set()
        index = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *a):  # quiet
                pass

            def do_GET(self):
                index.requests.append(self.path)
                if self.path.startswith("/simple/"):
                    name = self.path.split("/")[2]
                    files = [{"filename": f, "url": f"/files/{f}", "size": len(b),
                              "hashes": {"sha256": "0" * 64 if f in index.bad_digest else hashlib.sha256(b).hexdigest()}}
                             for f, b in index.wheels.items() if f.split("-")[0].replace("_", "-").lower() == name]
                    body = json.dumps({"meta": {"api-version": "1.1"}, "name": name, "files": files}).encode()
                    if not files:
                        self.send_response(404)
                        self.end_headers()
                        return
                elif self.path.startswith("/files/") and self.path[7:] in index.wheels:
                    body = index.wheels[self.path[7:]]
                else:
                    self.send_response(404)
                    self.end_headers()
                    return
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}/simple"
        threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()

    def add(self, name: str, version: str, files: dict[str, bytes], entry_points: str) -> None:
        self.wheels[f"{name.replace('-', '_')}-{version}-py3-none-any.whl"] = _wheel(name, version, files, entry_points)


@pytest.fixture
def index(tmp_path, monkeypatch):
    idx = Index()
    monkeypatch.setenv("TBSCALE_PYPI_SIMPLE", idx.url)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    idx.add("pip", "99.1", PIP_FILES, "[console_scripts]\npip = pip._internal.cli.main:main\n"
                                      "pip3 = pip._internal.cli.main:main\n")
    idx.add("pytest", "9.9", PYTEST_FILES, "[console_scripts]\npytest = pytest:console_main\n")
    yield idx
    idx.server.shutdown()


class SiteBox(FolderBox):
    """Its one exec (where the packages are) answers from the folder as the container's `find`
    and `grep` would."""

    def install(self, name: str, version: str, files: dict[str, bytes], site: str = SITE) -> None:
        for path, data in files.items():
            self.write(f"{site}/{path}", data)
        info = f"{site}/{name}-{version}.dist-info"
        self.write(f"{info}/METADATA", f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
        self.write(f"{info}/WHEEL", "Wheel-Version: 1.0\nTag: py3-none-any\n")
        self.write(f"{info}/RECORD", "".join(f"{p},sha256=x,1\n" for p in files))

    def exec(self, command: str, timeout_sec: float, **kw) -> ExecResult:
        import subprocess
        # the command's absolute paths, under the folder
        script = command.replace(" /", f" {self.root}/").replace("'/", f"'{self.root}/")
        out = subprocess.run(["bash", "-c", script], capture_output=True, text=True).stdout
        return ExecResult(0, out.replace(str(self.root), ""), False, 0.0)


def _tool(path: str, data: bytes) -> dict:
    return {"path": path, "real": path, "sha256": hashlib.sha256(data).hexdigest()}


PY = {"path": "/usr/bin/python3", "real": "/usr/bin/python3.11", "sha256": "ab"}


def _pip_entry(box: FolderBox, text: str = PIP_LAUNCHER, path: str = "/usr/local/bin/pip") -> dict:
    box.write(path, text)
    return {"kind": "toolchain_replaced", "source": "environment", "detail": "`pip` changed", "tool": "pip",
            "after": _tool(path, text.encode()),
            "by_command": {"turn": 1, "command": "pip install -U pip", "package_install": True}}


def _settle(box, entries, tools_before=None, tools_after=None, changes=None):
    tools = {"python3": PY}
    return settle(entries, box, tools_before or tools, tools_after or tools, changes or {})


def test_a_launcher_is_known_by_its_syntax_whatever_installer_wrote_it():
    assert launcher(PIP_LAUNCHER).module == "pip._internal.cli.main" and launcher(PIP_LAUNCHER).target == "main"
    assert launcher(UV_LAUNCHER).interpreter == "/opt/venv/bin/python"
    assert launcher(PIP_LAUNCHER.replace("'", '"')) is not None
    found = launcher(PIP26_LAUNCHER)
    assert (found.interpreter, found.module, found.target) == ("/usr/bin/python3", "_pytest.config", "_console_main")
    assert launcher(PIP26_LAUNCHER.replace("removesuffix('.exe')", "removesuffix(open('/x').read())")) is None
    for bad in (PIP_LAUNCHER.replace("sys.exit(main())", "open('/logs/verifier/reward.txt', 'w'); sys.exit(main())"),
                PIP_LAUNCHER.replace('re.sub(r"(-script\\.pyw|\\.exe)?$", "", sys.argv[0])', "__import__('os').getcwd()"),
                PIP_LAUNCHER.replace("import re\n", "import re\nimport os\n"),
                PIP_LAUNCHER.replace("sys.exit(main())", "sys.exit(0)"),
                PIP_LAUNCHER.replace("from pip._internal.cli.main import main", "from pip._internal.cli.main import main as m"),
                PIP_LAUNCHER.replace("#!/usr/bin/python3", "#!/usr/bin/env python3"),
                PIP_LAUNCHER + "print(1)\n", PIP_LAUNCHER.replace("#!", "")):
        assert launcher(bad) is None, bad


def test_wheel_tags_expand_compressed_sets():
    assert wheel_tags("pip-9.0.1-py2.py3-none-any.whl") == {"py2-none-any", "py3-none-any"}
    assert wheel_tags("x-1-1-cp311-cp311-manylinux_2_17_x86_64.manylinux2014_x86_64.whl") == {
        "cp311-cp311-manylinux_2_17_x86_64", "cp311-cp311-manylinux2014_x86_64"}
    assert wheel_tags("x-1.tar.gz") == set()


def test_a_published_wheel_is_read_once_and_its_digest_checked(index, tmp_path):
    wheel = published_wheel("pip", "99.1", ["py3-none-any"])
    assert wheel.filename == "pip-99.1-py3-none-any.whl"
    assert wheel.files["pip/__init__.py"] == hashlib.sha256(PIP_FILES["pip/__init__.py"]).hexdigest()
    assert "pip3 = pip._internal.cli.main:main" in wheel.entry_points
    asked = len(index.requests)
    assert published_wheel("pip", "99.1", ["py3-none-any"]) == wheel
    assert len(index.requests) == asked  # the cache answered
    index.add("pytest", "9.8", PYTEST_FILES, "")
    index.bad_digest.add("pytest-9.8-py3-none-any.whl")
    with pytest.raises(ReleaseUnavailable, match="not the one the index gives"):
        published_wheel("pytest", "9.8", ["py3-none-any"])
    with pytest.raises(ReleaseUnavailable, match="not a version an index serves"):
        published_wheel("pytest", "nine", ["py3-none-any"])
    with pytest.raises(ReleaseUnavailable, match="local version label"):
        published_wheel("pytest", "9.9+mine", ["py3-none-any"])
    with pytest.raises(ReleaseUnavailable, match="no wheel"):
        published_wheel("pytest", "9.9", ["cp311-cp311-linux_x86_64"])
    with pytest.raises(ReleaseUnavailable, match="answered 404"):
        published_wheel("no-such-thing", "1", ["py3-none-any"])


def test_an_upgraded_pip_is_settled_as_its_release(index, tmp_path):
    box = SiteBox(tmp_path / "fs")
    box.install("pip", "99.1", PIP_FILES)
    kept, updates = _settle(box, [_pip_entry(box)])
    assert kept == []
    [u] = updates
    assert (u["package"], u["version"], u["wheel"], u["site"]) == ("pip", "99.1", "pip-99.1-py3-none-any.whl", SITE)
    assert u["settles"] == ["`pip` changed"] and u["by_command"]["command"] == "pip install -U pip"


def test_compiled_modules_do_not_count_but_any_other_file_does(index, tmp_path):
    box = SiteBox(tmp_path / "fs")
    box.install("pip", "99.1", PIP_FILES)
    box.write(f"{SITE}/pip/__pycache__/__init__.cpython-311.pyc", b"\0")
    assert _settle(box, [_pip_entry(box)])[1] != []
    box.write(f"{SITE}/pip/_internal/cli/main.py", b"def main():\n    return 0  # mine\n")
    kept, updates = _settle(box, [_pip_entry(box)])
    assert updates == [] and "pip/_internal/cli/main.py differs from pip-99.1-py3-none-any.whl" in kept[0]["published_check"]
    box.install("pip", "99.1", PIP_FILES)
    box.write(f"{SITE}/pip/extra.py", b"")
    [e] = _settle(box, [_pip_entry(box)])[0]
    assert "pip/extra.py is not in pip-99.1" in e["published_check"]
    (box.root / SITE.lstrip("/") / "pip/extra.py").unlink()
    (box.root / SITE.lstrip("/") / "pip/__init__.py").unlink()
    [e] = _settle(box, [_pip_entry(box)])[0]
    assert "pip/__init__.py is missing" in e["published_check"]


def test_a_launcher_of_another_entry_point_or_interpreter_settles_nothing(index, tmp_path):
    box = SiteBox(tmp_path / "fs")
    box.install("pip", "99.1", PIP_FILES)
    [e] = _settle(box, [_pip_entry(box, PIP_LAUNCHER.replace("import main", "import run").replace("(main())", "(run())"))])[0]
    assert "does not declare as pip" in e["published_check"]
    [e] = _settle(box, [_pip_entry(box, PIP_LAUNCHER.replace("/usr/bin/python3", "/tmp/python3"))])[0]
    assert "runs /tmp/python3, not a Python" in e["published_check"]
    changed = dict(PY, sha256="cd")
    [e] = _settle(box, [_pip_entry(box)], tools_after={"python3": changed})[0]
    assert "not a Python" in e["published_check"]
    [e] = _settle(box, [_pip_entry(box, PIP_LAUNCHER.replace("sys.exit(main())", "sys.exit(0)"))])[0]
    assert "does more than start an entry point" in e["published_check"]


def test_a_program_of_another_distribution_settles_nothing(index, tmp_path):
    """A release that is published, whole and unchanged, but is not the one the program's name
    belongs to: a `pytest` launcher into a package of its own."""
    index.add("pytest-lookalike", "1.0", {"lookalike/__init__.py": b"def main():\n    return 0\n"},
              "[console_scripts]\npytest = lookalike:main\n")
    box = SiteBox(tmp_path / "fs")
    box.install("pytest-lookalike", "1.0", {"lookalike/__init__.py": b"def main():\n    return 0\n"})
    text = PIP_LAUNCHER.replace("pip._internal.cli.main", "lookalike")
    box.write("/usr/local/bin/pytest", text)
    e = {"kind": "toolchain_replaced", "source": "environment", "detail": "`pytest` changed", "tool": "pytest",
         "after": _tool("/usr/local/bin/pytest", text.encode())}
    [e] = _settle(box, [e])[0]
    assert "belongs to pytest-lookalike, not pytest" in e["published_check"]


def test_the_test_runners_library_is_settled_folder_by_folder(index, tmp_path):
    box = SiteBox(tmp_path / "fs")
    box.install("pytest", "9.9", PYTEST_FILES)
    changes = {f"{SITE}/_pytest/main.py": 0, f"{SITE}/pytest/__init__.py": 0, f"{SITE}/py.py": 0}
    e = {"kind": "test_library_changed", "source": "environment", "detail": "the test runner's own library changed",
         "paths": [f"{SITE}/_pytest/main.py"]}
    kept, [u] = _settle(box, [e], changes=changes)
    assert kept == [] and u["package"] == "pytest"
    # a change past the entry's first paths is checked too
    box.write(f"{SITE}/py.py", b"import os; os._exit(0)\n")
    [e] = _settle(box, [dict(e)], changes=changes)[0]
    assert "py.py differs from pytest-9.9" in e["published_check"]
    # a folder that is no test runner distribution's
    e2 = {"kind": "test_library_changed", "source": "environment", "detail": "x", "paths": [f"{SITE}/pluggyx/a.py"]}
    assert _settle(box, [e2], changes={f"{SITE}/pluggyx/a.py": 0})[1] == []


def test_an_unreachable_index_leaves_the_entry_with_the_reason(tmp_path, monkeypatch):
    monkeypatch.setenv("TBSCALE_PYPI_SIMPLE", "http://127.0.0.1:9/simple")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    box = SiteBox(tmp_path / "fs")
    box.install("pip", "99.1", PIP_FILES)
    [e] = _settle(box, [_pip_entry(box)])[0]
    assert "pip 99.1 was not checked against its release: pip: the index could not be reached" in e["published_check"]


def test_entries_of_other_kinds_cost_nothing(tmp_path):
    class NoBox:
        def __getattr__(self, name):
            raise AssertionError(f"the environment was used: {name}")
    entries = [{"kind": "startup_hook_planted", "source": "environment", "detail": "x"},
               {"kind": "toolchain_replaced", "source": "environment", "detail": "`bash`", "tool": "bash",
                "after": {"path": "/bin/bash", "real": "/bin/bash"}}]
    assert settle(entries, NoBox(), {}, {}, {}) == (entries, [])


def test_the_copy_the_launcher_imports_is_the_one_checked(index, tmp_path):
    """A module beside the launcher or in the user's site comes first on sys.path: that one is
    checked, and the published copy further on settles nothing."""
    box = SiteBox(tmp_path / "fs")
    box.install("pip", "99.1", PIP_FILES)
    box.write("/usr/local/bin/pip.py", b"import sys; sys.exit(0)\n")
    [e] = _settle(box, [_pip_entry(box)])[0]
    assert "no installed distribution lists pip where pip takes it from" in e["published_check"]
    (box.root / "usr/local/bin/pip.py").unlink()
    box.install("pip", "99.1", {**PIP_FILES, "pip/__init__.py": b"raise SystemExit(0)\n"},
                site="/root/.local/lib/python3.11/site-packages")
    [e] = _settle(box, [_pip_entry(box)])[0]
    assert "/root/.local/lib/python3.11/site-packages/pip/__init__.py differs" in e["published_check"]


def test_an_entry_from_the_listing_outside_names_the_program_by_its_path(index, tmp_path):
    """`file_checks: outside` reports a written program with its path only (findings.programs_changed)."""
    box = SiteBox(tmp_path / "fs")
    box.install("pytest", "9.9", PYTEST_FILES)
    text = PIP_LAUNCHER.replace("pip._internal.cli.main import main", "pytest import console_main").replace(
        "(main())", "(console_main())")
    box.write("/usr/local/bin/py.test", text)
    e = {"kind": "toolchain_replaced", "source": "environment", "tool": "py.test", "paths": ["/usr/local/bin/py.test"],
         "detail": "`py.test` (/usr/local/bin/py.test) was written, as seen from outside the environment"}
    index.add("pytest", "9.9", PYTEST_FILES, "[console_scripts]\npy.test = pytest:console_main\n"
                                            "pytest = pytest:console_main\n")
    kept, [u] = _settle(box, [e])
    assert kept == [] and u["settles"] == [e["detail"]]


SETUPTOOLS_FILES = {"distutils-precedence.pth": b"import os; var = 'SETUPTOOLS_USE_DISTUTILS'; "
                                                b"enabled = os.environ.get(var, 'local') == 'local'; "
                                                b"enabled and __import__('_distutils_hack').add_shim(); \n",
                    "_distutils_hack/__init__.py": b"def add_shim():\n    pass\n", "setuptools/__init__.py": b""}


def test_setuptools_start_up_hook_is_settled_and_no_other(index, tmp_path):
    """`pip install -U pip setuptools wheel` writes setuptools' `.pth`, which imports
    `_distutils_hack` at every start; a hook of anyone else's in the same entry keeps it."""
    index.add("setuptools", "99.0", SETUPTOOLS_FILES, "")
    box = SiteBox(tmp_path / "fs")
    box.install("setuptools", "99.0", SETUPTOOLS_FILES)
    hook = {"kind": "startup_hook_planted", "source": "environment", "detail": "a file every interpreter start loads",
            "paths": [f"{SITE}/distutils-precedence.pth", f"{SITE}/_distutils_hack/__init__.py"]}
    kept, [u] = _settle(box, [dict(hook)])
    assert kept == [] and u["package"] == "setuptools"
    box.write(f"{SITE}/zz.pth", b"import os; os._exit(0)\n")
    [e] = _settle(box, [dict(hook, paths=hook["paths"] + [f"{SITE}/zz.pth"])])[0]
    assert f"{SITE}/zz.pth is no file of setuptools" in e["published_check"]
    alone = {"kind": "startup_hook_planted", "source": "environment", "detail": "x", "paths": [f"{SITE}/zz.pth"]}
    assert _settle(box, [alone]) == ([alone], []) and "published_check" not in alone
    box.write(f"{SITE}/_distutils_hack/__init__.py", b"import os; os._exit(0)\n")
    [e] = _settle(box, [dict(hook)])[0]
    assert "_distutils_hack/__init__.py differs from setuptools-99.0" in e["published_check"]


def test_npms_test_library_entries_are_left_alone(tmp_path):
    e = {"kind": "test_library_changed", "source": "environment", "detail": "jest",
         "paths": ["/usr/lib/node_modules/jest/bin/jest.js"]}
    assert _settle(SiteBox(tmp_path), [e], changes={"/usr/lib/python3/dist-packages/_pytest/x.py": 0}) == ([e], [])


def test_a_folder_filled_past_its_release_is_not_copied_out(index, tmp_path):
    """The copy of the package's folder stops past the wheel's size (and room for compiled
    modules): an agent cannot make the check fill the host."""
    box = SiteBox(tmp_path / "fs")
    box.install("pip", "99.1", PIP_FILES)
    box.write(f"{SITE}/pip/__pycache__/big.cpython-311.pyc", b"\0" * (40 * 2**20))
    [e] = _settle(box, [_pip_entry(box)])[0]
    assert f"{SITE}/pip is over" in e["published_check"]
