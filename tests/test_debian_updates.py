"""Files an apt install wrote over what the verifier runs are settled only when they are, path for
path, what the archive's signed package installs (runner/debian_updates.py, runner/debian_archive.py).

The archive here is a loopback one built with Debian's own tools: `dpkg-deb` makes the package,
`gpg` signs the release with a key made for the test, and `gpgv` checks it, as apt does."""

from __future__ import annotations

import functools
import hashlib
import http.server
import lzma
import os
import shutil
import subprocess
import tempfile
import threading
from pathlib import Path
from types import SimpleNamespace

import pytest

from tbscale.errors import SandboxError
from tbscale.runner import debian_archive
from tbscale.runner.debian_archive import ArchiveUnavailable, published_deb
from tbscale.runner.apt_settings import PACKAGE_KIND
from tbscale.runner.dpkg_programs import KIND as PROGRAM_KIND
from tbscale.runner.apt_settings import source_suites
from tbscale.runner.debian_updates import READ_ONE_BY_ONE, _read, settle_debian
from tbscale_testing.folder_box import FolderBox

pytestmark = pytest.mark.skipif(not all(shutil.which(t) for t in ("dpkg-deb", "gpg", "gpgv")),
                                reason="needs dpkg-deb, gpg and gpgv (Debian's dpkg and gnupg)")

STDLIB = "/usr/lib/python3.99"
MODULES = {f"{STDLIB}/json/__init__.py": b"from .decoder import loads\n", f"{STDLIB}/json/decoder.py": b"def loads(s):\n    return s\n",
           f"{STDLIB}/os.py": b"sep = '/'\n", "/etc/python3.99/sitecustomize.py": b"# Debian's empty hook\n",
           "/usr/bin/python3.99": b"\x7fELF interpreter\n"}
for i in range(12):  # a folder with more paths than are read one by one
    MODULES[f"{STDLIB}/mod{i}.py"] = f"X = {i}\n".encode()
LINKS = {f"{STDLIB}/sitecustomize.py": "/etc/python3.99/sitecustomize.py", "/usr/bin/python3": "python3.99"}
PACKAGE, VERSION = "libpython3.99-stdlib", "3.99.1-1+deb99u1"
# its maintainer scripts, as dpkg copies them to /var/lib/dpkg/info
SCRIPTS = {"postinst": b"#!/bin/sh\n[ \"$1\" = triggered ] && /usr/bin/python3.99 -c pass\nexit 0\n",
           "triggers": b"interest-noawait /usr/lib/python3.99\n"}


def _run(*args: str, env: dict | None = None, cwd: Path | None = None) -> None:
    subprocess.run(args, check=True, capture_output=True, env=env, cwd=cwd)


class Archive:
    """`/debian` (suite `zed`) and `/debian-security` (`zed-security`) on a loopback server; the
    package is in the security suite only, as a point update is."""

    def __init__(self, root: Path, key: tuple[dict, bytes]) -> None:
        self.root = root
        root.mkdir(parents=True)
        self.env, exported = key  # the gpg home that signs, and its key exported
        self.keyring = root / "archive.gpg"
        self.keyring.write_bytes(exported)
        stage = root / "stage"
        for path, data in MODULES.items():
            (stage / path.lstrip("/")).parent.mkdir(parents=True, exist_ok=True)
            (stage / path.lstrip("/")).write_bytes(data)
        for path, target in LINKS.items():
            (stage / path.lstrip("/")).parent.mkdir(parents=True, exist_ok=True)
            (stage / path.lstrip("/")).symlink_to(target)
        (stage / "DEBIAN").mkdir()
        for name, data in SCRIPTS.items():
            (stage / "DEBIAN" / name).write_bytes(data)
            (stage / "DEBIAN" / name).chmod(0o755 if name != "triggers" else 0o644)
        (stage / "DEBIAN" / "control").write_text(f"Package: {PACKAGE}\nVersion: {VERSION}\nArchitecture: amd64\n"
                                                  "Maintainer: t <t@example.invalid>\nDescription: test\n")
        self.pool = f"pool/updates/main/p/python3.99/{PACKAGE}_{VERSION}_amd64.deb"
        deb = root / "debian-security" / self.pool
        deb.parent.mkdir(parents=True)
        _run("dpkg-deb", "--root-owner-group", "-Zxz", "--build", str(stage), str(deb))
        self.publish("debian", "zed", "")
        self.publish("debian-security", "zed-security", self._stanza(deb))
        self.requests: list[str] = []
        archive = self

        class Handler(http.server.SimpleHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def do_GET(self):
                archive.requests.append(self.path)
                super().do_GET()

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Handler, directory=str(root)))
        self.url = f"http://127.0.0.1:{self.server.server_port}"
        threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()

    def _stanza(self, deb: Path) -> str:
        data = deb.read_bytes()
        return (f"Package: {PACKAGE}\nVersion: {VERSION}\nArchitecture: amd64\nFilename: {self.pool}\n"
                f"Size: {len(data)}\nSHA256: {hashlib.sha256(data).hexdigest()}\n\n")

    def publish(self, base: str, suite: str, packages: str, env: dict | None = None) -> None:
        """The suite's Packages.xz and its InRelease, signed with the archive's key (or the key of
        the gpg home `env` names)."""
        dists = self.root / base / "dists" / suite
        index = dists / "main" / "binary-amd64" / "Packages.xz"
        index.parent.mkdir(parents=True, exist_ok=True)
        index.write_bytes(lzma.compress(packages.encode()))
        body = index.read_bytes()
        (dists / "Release").write_text(f"Suite: {suite}\nComponents: main\nArchitectures: amd64\nSHA256:\n"
                                       f" {hashlib.sha256(body).hexdigest()} {len(body)} main/binary-amd64/Packages.xz\n")
        _run("gpg", "--batch", "--yes", "--clearsign", "-o", str(dists / "InRelease"), str(dists / "Release"),
             env=env or self.env)


@pytest.fixture(scope="module")
def archive_key():
    """The archives' signing key, made once for the module: a key and its gpg-agent cost a tenth
    of a second or more each."""
    env, exported = _key("archive")
    yield env, exported
    subprocess.run(["gpgconf", "--kill", "gpg-agent"], env=env, capture_output=True)
    shutil.rmtree(env["GNUPGHOME"], ignore_errors=True)


@pytest.fixture
def archive(tmp_path, monkeypatch, archive_key):
    a = Archive(tmp_path / "archive", archive_key)
    monkeypatch.setenv("TBSCALE_DEBIAN_MIRROR", a.url + "/debian")
    monkeypatch.setenv("TBSCALE_DEBIAN_SECURITY_MIRROR", a.url + "/debian-security")
    monkeypatch.setenv("TBSCALE_APT_KEYRINGS", str(a.keyring))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    # what this process remembers of an archive (its signed releases, Ubuntu's keyring, its indexes)
    for memo in ("_releases", "_ubuntu_rings", "_in_memory"):
        monkeypatch.setattr(debian_archive, memo, {})
    yield a
    a.server.shutdown()


def _key(name: str) -> tuple[dict, bytes]:
    """A gpg home with a signing key of its own, and the key exported (a keyring gpgv reads).
    gpg-agent's socket is made in the home: a short path (a socket's path is at most 107 bytes)."""
    env = {**os.environ, "GNUPGHOME": tempfile.mkdtemp(prefix="tbscale-gpg-")}
    _run("gpg", "--batch", "--passphrase", "", "--quick-gen-key", f"{name} <{name}@example.invalid>", "ed25519", "sign",
         "never", env=env)
    return env, subprocess.run(["gpg", "--export"], check=True, capture_output=True, env=env).stdout


def _deb(stage: Path, control: str, out: Path, compression: str) -> str:
    """`dpkg-deb --build` of `stage` into `out`; its stanza for a Packages index (Filename relative
    to the archive's base, which is out's parent's `pool` folder's parent)."""
    (stage / "DEBIAN").mkdir(parents=True, exist_ok=True)
    (stage / "DEBIAN" / "control").write_text(control + "Maintainer: t <t@example.invalid>\nDescription: test\n")
    out.parent.mkdir(parents=True, exist_ok=True)
    _run("dpkg-deb", "--root-owner-group", f"-Z{compression}", "--build", str(stage), str(out))
    data = out.read_bytes()
    pool = str(out)[str(out).index("/pool/") + 1:]
    return control + f"Filename: {pool}\nSize: {len(data)}\nSHA256: {hashlib.sha256(data).hexdigest()}\n\n"


class UbuntuArchive:
    """Beside the Debian archive: `/ubuntu` (suites `yak`, `yak-updates`, `yak-security`,
    `yak-backports`) signed with a key of its own, the package in `yak-updates` with its data.tar
    in zstd (as Ubuntu builds them); and Debian's `stable` suite, listing the `ubuntu-keyring`
    package that holds that key."""

    def __init__(self, debian: Archive, tmp: Path) -> None:
        self.debian = debian
        self.env, self.key = _key("ubuntu")
        stage = tmp / "ubuntu-stage"
        for path, data in MODULES.items():
            (stage / path.lstrip("/")).parent.mkdir(parents=True, exist_ok=True)
            (stage / path.lstrip("/")).write_bytes(data)
        for path, target in LINKS.items():
            (stage / path.lstrip("/")).symlink_to(target)
        self.version = "3.99.1-1ubuntu0.1"
        self.pool = f"pool/main/p/python3.99/{PACKAGE}_{self.version}_amd64.deb"
        self.stanza = _deb(stage, f"Package: {PACKAGE}\nVersion: {self.version}\nArchitecture: amd64\n",
                           debian.root / "ubuntu" / self.pool, "zstd")
        for suite in ("yak", "yak-security", "yak-backports"):
            debian.publish("ubuntu", suite, "", env=self.env)
        debian.publish("ubuntu", "yak-updates", self.stanza, env=self.env)
        self.keyring_stage = tmp / "keyring-stage"
        (self.keyring_stage / "usr/share/keyrings").mkdir(parents=True)
        (self.keyring_stage / "usr/share/keyrings/ubuntu-archive-keyring.gpg").write_bytes(self.key)
        self.publish_keyring()

    def publish_keyring(self, tamper: bool = False) -> None:
        deb = self.debian.root / "debian/pool/main/u/ubuntu-keyring/ubuntu-keyring_2099.1_all.deb"
        stanza = _deb(self.keyring_stage, "Package: ubuntu-keyring\nVersion: 2099.1\nArchitecture: all\n", deb, "xz")
        self.debian.publish("debian", "stable", stanza)
        if tamper:  # the package file changed after the signed index named it
            deb.write_bytes(deb.read_bytes() + b"x")


@pytest.fixture
def ubuntu(archive, tmp_path, monkeypatch):
    u = UbuntuArchive(archive, tmp_path)
    monkeypatch.setenv("TBSCALE_UBUNTU_MIRROR", archive.url + "/ubuntu")
    monkeypatch.setenv("TBSCALE_UBUNTU_SECURITY_MIRROR", archive.url + "/ubuntu")
    monkeypatch.delenv("TBSCALE_UBUNTU_KEYRINGS", raising=False)
    monkeypatch.setattr(debian_archive, "UBUNTU_KEYRINGS", (str(tmp_path / "no-ubuntu-keyring-on-this-machine.gpg"),))
    yield u
    subprocess.run(["gpgconf", "--kill", "gpg-agent"], env=u.env, capture_output=True)
    shutil.rmtree(u.env["GNUPGHOME"], ignore_errors=True)


def test_a_package_is_read_from_the_signed_archive_once(archive):
    deb = published_deb(PACKAGE, VERSION, "amd64", "zed", native="amd64")
    assert (deb.suite, deb.filename) == ("zed-security", archive.pool)
    assert deb.files[f"{STDLIB}/os.py"] == "file:" + hashlib.sha256(MODULES[f"{STDLIB}/os.py"]).hexdigest()
    assert deb.files[f"{STDLIB}/sitecustomize.py"] == "link:/etc/python3.99/sitecustomize.py"
    assert deb.sizes[f"{STDLIB}/json/decoder.py"] == len(MODULES[f"{STDLIB}/json/decoder.py"])
    fetched = [r for r in archive.requests if r.endswith(".deb")]
    published_deb(PACKAGE, VERSION, "amd64", "zed", native="amd64")
    assert [r for r in archive.requests if r.endswith(".deb")] == fetched == ["/debian-security/" + archive.pool]
    with pytest.raises(ArchiveUnavailable, match="in no index of zed"):
        published_deb(PACKAGE, "3.99.0-1", "amd64", "zed", native="amd64")


def test_what_the_signature_does_not_cover_is_refused(archive, tmp_path, monkeypatch):
    other = tmp_path / "other.gpg"  # a keyring without the archive's key
    env = {**archive.env, "GNUPGHOME": tempfile.mkdtemp(prefix="tbscale-gpg-")}
    _run("gpg", "--batch", "--passphrase", "", "--quick-gen-key", "other <o@example.invalid>", "ed25519", "sign", "never", env=env)
    other.write_bytes(subprocess.run(["gpg", "--export"], check=True, capture_output=True, env=env).stdout)
    monkeypatch.setenv("TBSCALE_APT_KEYRINGS", str(other))
    with pytest.raises(ArchiveUnavailable, match="is not signed by a key of"):
        published_deb(PACKAGE, VERSION, "amd64", "zed", native="amd64")
    subprocess.run(["gpgconf", "--kill", "gpg-agent"], env=env, capture_output=True)
    shutil.rmtree(env["GNUPGHOME"], ignore_errors=True)
    monkeypatch.setenv("TBSCALE_APT_KEYRINGS", str(archive.keyring))
    # the index changed after the release was signed
    index = archive.root / "debian-security/dists/zed-security/main/binary-amd64/Packages.xz"
    signed = index.read_bytes()
    index.write_bytes(lzma.compress(b"Package: other\n"))
    with pytest.raises(ArchiveUnavailable, match="not the index its signed release names"):
        published_deb(PACKAGE, VERSION, "amd64", "zed", native="amd64")
    # the package file changed after the index was signed
    index.write_bytes(signed)
    deb = archive.root / "debian-security" / archive.pool
    deb.write_bytes(deb.read_bytes() + b"x")
    with pytest.raises(ArchiveUnavailable, match="sha256 is not the one the signed index gives"):
        published_deb(PACKAGE, VERSION, "amd64", "zed", native="amd64")


class DebianBox(FolderBox):
    """A Debian image's files, in a local folder."""

    def __init__(self, root: Path) -> None:
        super().__init__(root)
        self.write("/usr/lib/os-release", "PRETTY_NAME=\"Debian\"\nID=debian\nVERSION_CODENAME=zed\n")
        self._p("/etc").mkdir(parents=True, exist_ok=True)
        self._p("/etc/os-release").symlink_to("../usr/lib/os-release")  # as Debian's images have it
        self.write("/var/lib/dpkg/status", "Package: dpkg\nStatus: install ok installed\nArchitecture: amd64\n"
                   "Version: 1.22\n\n" f"Package: {PACKAGE}\nStatus: install ok installed\nArchitecture: amd64\n"
                   f"Version: {VERSION}\n")

    def install(self) -> None:
        for path, data in MODULES.items():
            self.write(path, data)
        for path, target in LINKS.items():
            self._p(path).symlink_to(target)
        self.write(f"/var/lib/dpkg/info/{PACKAGE}:amd64.list", "\n".join([*MODULES, *LINKS]) + "\n")
        for name, data in SCRIPTS.items():
            self.write(f"/var/lib/dpkg/info/{PACKAGE}:amd64.{name}", data)


BY = {"turn": 2, "command": "apt-get install -y python3.99", "package_install": True}


def _entries() -> tuple[list[dict], dict[str, list[str]]]:
    library = sorted(p for p in MODULES if p.startswith(STDLIB))
    hooks = [f"{STDLIB}/sitecustomize.py", "/etc/python3.99/sitecustomize.py"]
    entries = [
        {"kind": "toolchain_added", "source": "environment", "detail": "`python3` now resolves to /usr/bin/python3",
         "tool": "python3", "after": {"path": "/usr/bin/python3", "real": "/usr/bin/python3.99", "sha256": "ab"},
         "by_command": BY},
        {"kind": "python_library_changed", "source": "environment", "detail": "the interpreter's standard library "
         "changed", "paths": library[:20], "by_command": BY},
        {"kind": "startup_hook_planted", "source": "environment", "detail": "a file every interpreter start loads",
         "paths": hooks, "by_command": BY},
        {"kind": "tests_written", "source": "environment", "detail": "the agent phase wrote under /tests"}]
    return entries, {"python_library_changed": library, "startup_hook_planted": hooks}


def test_an_apt_install_is_settled_as_the_archives_package(archive, tmp_path):
    box = DebianBox(tmp_path / "box")
    box.install()
    entries, groups = _entries()
    kept, debs = settle_debian(entries, box, lambda: groups, {})
    assert [e["kind"] for e in kept] == ["tests_written"], kept
    [row] = debs
    assert (row["package"], row["version"], row["suite"], row["deb"]) == (PACKAGE, VERSION, "zed-security", archive.pool)
    assert row["deb_sha256"] == hashlib.sha256((archive.root / "debian-security" / archive.pool).read_bytes()).hexdigest()
    assert len(row["settles"]) == 3 and row["by_command"] == BY


@pytest.mark.parametrize("change, kind, why", [
    (lambda b: b.write(f"{STDLIB}/json/decoder.py", "def loads(s):\n    return {}\n"), "python_library_changed",
     f"{STDLIB}/json/decoder.py differs from pool/updates/main/p/python3.99/{PACKAGE}_"),
    (lambda b: b.write("/etc/python3.99/sitecustomize.py", "import os; os._exit(0)\n"), "startup_hook_planted",
     "/etc/python3.99/sitecustomize.py differs from"),
    (lambda b: (b._p(f"{STDLIB}/sitecustomize.py").unlink(), b._p(f"{STDLIB}/sitecustomize.py").symlink_to("/tmp/x.py")),
     "startup_hook_planted", "is a link to /tmp/x.py"),
    (lambda b: b.write("/usr/bin/python3.99", "#!/bin/sh\nexit 0\n"), "toolchain_added", "/usr/bin/python3.99 differs"),
])
def test_a_file_the_agent_changed_after_the_install_keeps_its_entry(archive, tmp_path, change, kind, why):
    box = DebianBox(tmp_path / "box")
    box.install()
    change(box)
    entries, groups = _entries()
    kept, debs = settle_debian(entries, box, lambda: groups, {})
    found = [e for e in kept if e["kind"] == kind]
    assert found and why in found[0]["published_check"], kept
    assert found[0]["published_check"].startswith("Debian: ")


def _scripts_run(*packages: str) -> dict:
    """apt_settings' entry for packages whose scripts the verifier's apt runs."""
    return {"kind": PACKAGE_KIND, "source": "environment", "detail": "packages whose maintainer scripts dpkg runs",
            "paths": [f"/var/lib/dpkg/info/{p}.list" for p in packages], "by_command": BY}


def test_a_package_whose_scripts_apt_runs_is_settled_only_as_its_archives(archive, tmp_path):
    """Its scripts, its triggers file and every file of the `.deb` that is there, read from
    outside, are the archive's at the version dpkg has; apt's log and dpkg's file list are not asked."""
    box = DebianBox(tmp_path / "box")
    box.install()
    listed = f"{PACKAGE}:amd64"
    kept, [row] = settle_debian([_scripts_run(listed)], box, lambda: {}, {})
    assert kept == [] and (row["package"], row["deb"]) == (PACKAGE, archive.pool) and row["by_command"] == BY
    # a file the `.deb` installs that is not there settles (dpkg's path-exclude leaves documentation out)
    box._p(f"{STDLIB}/mod3.py").unlink()
    kept, _ = settle_debian([_scripts_run(listed)], box, lambda: {}, {})
    assert kept == []
    info = f"/var/lib/dpkg/info/{listed}"
    for i, (change, why) in enumerate([
            (lambda: box.write(f"{info}.postinst", "#!/bin/sh\nsh /opt/f.sh\n"), f"{info}.postinst is not {archive.pool}'s"),
            (lambda: box.write(f"{info}.prerm", "#!/bin/sh\nsh /opt/f.sh\n"), f"{info}.prerm is not {archive.pool}'s (it has none)"),
            (lambda: (box._p(f"{info}.postinst").unlink(), box._p(f"{info}.postinst").symlink_to("/opt/f.sh")),
             f"{info}.postinst is not {archive.pool}'s"),
            # the program its script runs, written over, and taken out of dpkg's file list
            (lambda: (box.write("/usr/bin/python3.99", "#!/bin/sh\nsh /opt/f.sh\n"), box.write(f"{info}.list", f"{STDLIB}/os.py\n")),
             f"/usr/bin/python3.99 differs from {archive.pool}'s")]):
        box = DebianBox(tmp_path / f"box{i}")
        box.install()
        change()
        kept, debs = settle_debian([_scripts_run(listed)], box, lambda: {}, {})
        assert [e["kind"] for e in kept] == [PACKAGE_KIND] and debs == [], why
        assert kept[0]["published_check"].startswith("Debian: " + why), kept
    # a package at a version the archive does not have, or one dpkg has no record of
    box = DebianBox(tmp_path / "box-version")
    box.install()
    box.write("/var/lib/dpkg/status", box._p("/var/lib/dpkg/status").read_text().replace(VERSION, "3.99.1-1"))
    kept, _ = settle_debian([_scripts_run(listed, "zz")], box, lambda: {}, {})
    assert f"{PACKAGE} 3.99.1-1 was not checked against the archive: {PACKAGE} 3.99.1-1 (amd64) is in no index" \
        in kept[0]["published_check"], kept
    assert "(and 1 more)" in kept[0]["published_check"]


def test_a_package_an_install_cut_short_left_unpacked_is_settled_at_the_version_dpkgs_journal_has(archive, tmp_path):
    """An `apt-get install` the agent's command timeout stopped leaves packages unpacked, one
    half-installed, recorded in dpkg's journal (/var/lib/dpkg/updates) and not yet in its status
    file: they are read at the version that journal has, as dpkg reads its database."""
    box = DebianBox(tmp_path / "box")
    box.install()
    listed = f"{PACKAGE}:amd64"
    status = box._p("/var/lib/dpkg/status")
    status.write_text(status.read_text().replace(f"Package: {PACKAGE}\nStatus: install ok installed\nArchitecture: amd64\n"
                                                 f"Version: {VERSION}", f"Package: {PACKAGE}\nStatus: install ok "
                                                 "installed\nArchitecture: amd64\nVersion: 3.99.0-1"))
    record = f"Package: {PACKAGE}\nStatus: {{}}\nArchitecture: amd64\nVersion: {{}}\n"
    box.write("/var/lib/dpkg/updates/0001", record.format("install ok unpacked", "3.99.0-1"))
    box.write("/var/lib/dpkg/updates/0002", record.format("install reinstreq half-installed", VERSION))
    box.write("/var/lib/dpkg/updates/tmp.i", record.format("purge ok not-installed", "3.99.0-1"))  # dpkg's scratch file
    kept, [row] = settle_debian([_scripts_run(listed)], box, lambda: {}, {})
    assert kept == [] and (row["package"], row["version"]) == (PACKAGE, VERSION), kept
    # its scripts are still the archive's question
    box.write(f"/var/lib/dpkg/info/{listed}.postinst", "#!/bin/sh\nsh /opt/f.sh\n")
    kept, debs = settle_debian([_scripts_run(listed)], box, lambda: {}, {})
    assert debs == [] and f"{listed}.postinst is not {archive.pool}'s" in kept[0]["published_check"], kept
    # the journal's last record is what dpkg has: a package removed is no package
    box.write("/var/lib/dpkg/updates/0003", f"Package: {PACKAGE}\nStatus: purge ok not-installed\nArchitecture: amd64\n")
    kept, _ = settle_debian([_scripts_run(listed)], box, lambda: {}, {})
    assert f"dpkg lists files of {listed} but has no such package installed or unpacked" in kept[0]["published_check"]


def test_the_archive_says_which_packages_an_upgrade_would_run_the_scripts_of(archive, tmp_path):
    """A package with a prerm or postrm that apt's lists give no newer version of (`if_replaced`):
    the archive's signed indexes are asked (apt's lists may be gone, or the agent's); one it has no
    newer version of leaves the entry, one it has is settled as its archive's package."""
    assert debian_archive.newer_published(PACKAGE, "3.99.0-1", "amd64", "zed", native="amd64") == VERSION
    assert debian_archive.newer_published(PACKAGE, VERSION, "amd64", "zed", native="amd64") is None
    assert debian_archive.newer_published(PACKAGE, "1:0.1", "amd64", "zed", native="amd64") is None  # an epoch is newer
    # an `all` package of the agent's under the name of the native architecture's (apt upgrades either)
    assert debian_archive.newer_published(PACKAGE, "0.1", "all", "zed", native="amd64") == VERSION
    # only the suites the environment's apt sources name: its `apt-get update` fetches no other
    assert debian_archive.newer_published(PACKAGE, "0.1", "amd64", "zed", native="amd64", named=frozenset({"zed"})) is None
    assert debian_archive.newer_published(PACKAGE, "0.1", "amd64", "zed", native="amd64",
                                          named=frozenset({"zed", "zed-security"})) == VERSION
    # a suite these do not tell (an alias, another release, another archive's): all are asked
    assert debian_archive.newer_published(PACKAGE, "0.1", "amd64", "zed", native="amd64",
                                          named=frozenset({"zed", "stable"})) == VERSION
    assert source_suites("sources.list", "deb [arch=amd64] http://m/debian zed main\n# deb http://m zed-updates main\n"
                         "deb-src http://m zed-src main\n") == {"zed"}
    assert source_suites("debian.sources", "Types: deb\nURIs: http://m/debian\nSuites: zed zed-updates\n"
                         "Components: main\n\nTypes: deb\nURIs: http://s\nSuites: zed-security\nEnabled: no\n") \
        == {"zed", "zed-updates"}
    listed = f"{PACKAGE}:amd64"
    upgradable = {**_scripts_run(listed), "if_replaced": True}
    box = DebianBox(tmp_path / "box")
    box.install()
    # the archive's own package at its newest version: nothing to run, nothing settled
    box.write("/etc/apt/sources.list.d/debian.sources", "Types: deb\nURIs: http://m\nSuites: zed zed-security\n")
    box.write("/etc/apt/sources.list", "deb http://m zed-updates main\n")
    kept, debs = settle_debian([dict(upgradable)], box, lambda: {}, {})
    assert kept == [] and debs == []
    # one at an older version: apt's sources name the suite that has the newer one, or not
    status = box._p("/var/lib/dpkg/status")
    status.write_text(status.read_text().replace(f"Version: {VERSION}", "Version: 3.99.0-1"))
    kept, _ = settle_debian([dict(upgradable)], box, lambda: {}, {})
    assert f"{listed} (the archive has {VERSION})" in kept[0]["detail"], kept
    box.write("/etc/apt/sources.list.d/debian.sources", "Types: deb\nURIs: http://m\nSuites: zed\n")
    assert settle_debian([dict(upgradable)], box, lambda: {}, {}) == ([], [])
    # a source that is a link, which apt follows and a copy out does not: every suite is asked
    box._p("/etc/apt/sources.list.d/more.list").symlink_to("/opt/elsewhere.list")
    assert f"{listed} (the archive has {VERSION})" in settle_debian([dict(upgradable)], box, lambda: {}, {})[0][0]["detail"]
    box._p("/etc/apt/sources.list.d/more.list").unlink()
    status.write_text(status.read_text().replace("Version: 3.99.0-1", f"Version: {VERSION}"))
    # the archive has a newer version than dpkg's: the package is read against the archive at dpkg's
    asked = []
    kept, [row] = settle_debian([dict(upgradable)], box, lambda: {}, {},
                                newer=lambda *a, **k: asked.append(a[:3]) or "3.99.2-1")
    assert kept == [] and row["version"] == VERSION and asked == [(PACKAGE, VERSION, "amd64")]
    box.write(f"/var/lib/dpkg/info/{listed}.prerm", "#!/bin/sh\nsh /opt/f.sh\n")
    kept, debs = settle_debian([dict(upgradable)], box, lambda: {}, {}, newer=lambda *a, **k: "3.99.2-1")
    assert debs == [] and "(the archive has 3.99.2-1)" in kept[0]["detail"], kept
    assert f"{listed}.prerm is not {archive.pool}'s (it has none)" in kept[0]["published_check"]
    # a version the archive could not have, written into dpkg's status (apt compares it all the same)
    status = box._p("/var/lib/dpkg/status")
    status.write_text(status.read_text().replace(f"Version: {VERSION}", "Version: 0.1_x"))
    kept, _ = settle_debian([dict(upgradable)], box, lambda: {}, {})
    assert "whether the archive has a newer version could not be told" in kept[0]["detail"], kept
    status.write_text(status.read_text().replace("Version: 0.1_x", f"Version: {VERSION}"))
    # more packages with newer versions than are checked (each may cost a download): not settled
    many = {**upgradable, "paths": [f"/var/lib/dpkg/info/{listed}.list"] * 101}
    kept, _ = settle_debian([many], box, lambda: {}, {}, newer=lambda *a, **k: "3.99.2-1")
    assert "101 packages, more than the 100 checked" in kept[0]["published_check"], kept
    # where the archive is not asked (an image that is not Debian's), apt's lists decided: no upgrade
    box._p("/usr/lib/os-release").write_text("ID=mint\nVERSION_CODENAME=zed\n")
    kept, _ = settle_debian([dict(upgradable), _scripts_run(listed)], box, lambda: {}, {},
                            newer=lambda *a, **k: "3.99.2-1")
    assert [e.get("if_replaced") for e in kept] == [None], kept


def test_a_package_the_verifiers_install_removes_is_settled_only_as_its_archives(archive, tmp_path):
    """One with no newer version that conflicts with or breaks a package the verifier's install
    brings (by the archive's relations: install_closure), or that such a package conflicts with or
    breaks, at the versions in play: apt removes it and dpkg runs its prerm (a package of the
    agent's with `Conflicts: curl` passed unseen). The others leave the entry."""
    listed = f"{PACKAGE}:amd64"
    replaced = {**_scripts_run(listed), "if_replaced": True, "verifier_installs": ["curl"]}
    box = DebianBox(tmp_path / "box")
    box.install()
    box.write("/etc/apt/sources.list", "deb http://m zed main\n")
    box.write(f"/var/lib/dpkg/info/{listed}.prerm", "#!/bin/sh\nsh /opt/f.sh\n")
    status = box._p("/var/lib/dpkg/status")
    plain = status.read_text()

    def settle(fields: str = "", brought=({"curl": "7.88.1-10", "libcurl4": "7.88.1-10"}, {"www-browser": {"curl"}}, {})):
        status.write_text(plain.replace(f"Version: {VERSION}\n", f"Version: {VERSION}\n{fields}"))
        return settle_debian([dict(replaced)], box, lambda: {}, {}, newer=lambda *a, **k: None,
                             closure=lambda *a, **k: brought)[0]

    brought_nothing = ({"curl": "7.88.1-10"}, {}, {})
    assert settle() == []  # no relation to what the install brings
    kept = settle("Conflicts: curl\n")
    assert "it conflicts with or breaks curl, which the verifier's install of curl brings" in kept[0]["detail"], kept
    assert f"{listed}.prerm is not {archive.pool}'s" in kept[0]["published_check"]
    assert "libcurl4" in settle("Breaks: libcurl4 (<< 7.99)\n")[0]["detail"]
    assert settle("Breaks: libcurl4 (<< 7.0)\n") == []  # the version the install brings is not broken
    assert "which curl provides" in settle("Conflicts: www-browser\n")[0]["detail"]
    # it depends on a version of one that the install upgrades past (a libcurl4 0.1 of the agent's)
    assert "it depends on libcurl4 (= 0.1)" in settle("Depends: libc6, libcurl4 (= 0.1)\n")[0]["detail"]
    assert settle("Depends: libcurl4 (= 0.1) | libcurl3-gnutls\n") == []  # an alternative the install leaves
    assert settle("Pre-Depends: libcurl4 (>= 7.0)\n") == []
    # a package the install brings breaks it, at the version dpkg has
    theirs = ({"curl": "7.88.1-10"}, {}, {"curl": [(PACKAGE, "<<", "9")]})
    assert "curl, which the verifier's install of curl brings, conflicts with or breaks it" in \
        settle(brought=theirs)[0]["detail"]
    assert settle(brought=({"curl": "7.88.1-10"}, {}, {"curl": [(PACKAGE, "<<", "1")]})) == []
    # what the install brings could not be told: it stays
    assert "could not be told" in settle_debian([dict(replaced)], box, lambda: {}, {}, newer=lambda *a, **k: None,
                                                closure=_unavailable)[0][0]["detail"]
    # the verifier's install names a package with a variable, a pattern or a file (apt_settings.UNTOLD_INSTALL): it stays
    untold = settle_debian([{**replaced, "verifier_installs": ["?", "curl"]}], box, lambda: {}, {},
                           newer=lambda *a, **k: None, closure=lambda *a, **k: brought_nothing)[0]
    assert "with a variable, a pattern or a file" in untold[0]["detail"], untold
    # the verifier installs nothing with apt: nothing is removed
    status.write_text(plain.replace(f"Version: {VERSION}\n", f"Version: {VERSION}\nConflicts: curl\n"))
    assert settle_debian([{**replaced, "verifier_installs": None}], box, lambda: {}, {},
                         newer=lambda *a, **k: None) == ([], [])


def _unavailable(*args, **kwargs):
    raise debian_archive.ArchiveUnavailable("not reached")


def test_a_program_dpkg_runs_is_settled_as_its_packages_or_kept_when_no_package_owns_it(archive, tmp_path):
    """`dpkg_program_changed` (runner/dpkg_programs.py): a program an install wrote is settled; one
    of no package (an `rm` of the agent's in /usr/sbin) keeps its entry, saying why, rather than
    being passed over as an entry Debian does not explain (an alternative's link is of no package too)."""
    box = DebianBox(tmp_path / "box")
    box.install()
    box.write("/usr/sbin/rm", "#!/bin/sh\nsh /opt/f.sh\n")

    def program(*paths: str) -> tuple[list[dict], dict[str, list[str]]]:
        return ([{"kind": PROGRAM_KIND, "source": "environment", "detail": "a program dpkg runs", "paths": list(paths)}],
                {PROGRAM_KIND: list(paths)})

    entries, groups = program("/usr/bin/python3.99")
    kept, [row] = settle_debian(entries, box, lambda: groups, {})
    assert kept == [] and row["package"] == PACKAGE
    entries, groups = program("/usr/bin/python3.99", "/usr/sbin/rm")
    kept, debs = settle_debian(entries, box, lambda: groups, {})
    assert debs == [] and kept[0]["published_check"] == "Debian: /usr/sbin/rm belongs to no installed package", kept


def test_a_path_no_package_owns_or_removed_settles_nothing(archive, tmp_path):
    box = DebianBox(tmp_path / "box")
    box.install()
    box.write(f"{STDLIB}/zz_planted.py", "import os\n")
    entries, groups = _entries()
    groups["python_library_changed"] = sorted([*groups["python_library_changed"], f"{STDLIB}/zz_planted.py"])
    entries[1]["paths"] = groups["python_library_changed"][:20]
    kept, _ = settle_debian(entries, box, lambda: groups, {})
    [library] = [e for e in kept if e["kind"] == "python_library_changed"]
    assert library["published_check"] == f"Debian: {STDLIB}/zz_planted.py belongs to no installed package", library
    # removed, as the listing from outside tells it
    entries, groups = _entries()
    kept, _ = settle_debian(entries, box, lambda: groups, {f"{STDLIB}/os.py": 2})
    [library] = [e for e in kept if e["kind"] == "python_library_changed"]
    assert library["published_check"].startswith(f"Debian: {STDLIB}/os.py was removed"), library
    # removed, which the listing inside does not tell: the package's files in the folder read are all there
    box._p(f"{STDLIB}/mod3.py").unlink()
    entries, groups = _entries()
    groups["python_library_changed"].remove(f"{STDLIB}/mod3.py")
    entries[1]["paths"] = groups["python_library_changed"][:20]
    kept, _ = settle_debian(entries, box, lambda: groups, {})
    [library] = [e for e in kept if e["kind"] == "python_library_changed"]
    assert library["published_check"] == f"Debian: {STDLIB}/mod3.py of {archive.pool} is missing", library
    # an entry whose paths no package owns (a pip install) is not Debian's to explain: left as it was
    pip = {"kind": "toolchain_added", "source": "environment", "detail": "`pip`", "tool": "pip",
           "after": {"path": "/usr/local/bin/pip", "real": "/usr/local/bin/pip"}}
    kept, debs = settle_debian([pip], box, lambda: {}, {})
    assert kept == [pip] and "published_check" not in pip and debs == []


def test_an_image_that_is_not_debian_keeps_its_entries(archive, tmp_path):
    box = DebianBox(tmp_path / "box")
    box.install()
    box.write("/usr/lib/os-release", "ID=alpine\n")
    entries, groups = _entries()
    kept, debs = settle_debian(entries, box, lambda: groups, {})
    assert len(kept) == 4 and debs == []
    assert all("the environment is alpine, not a Debian or Ubuntu release" in e["published_check"] for e in kept[:3]), kept
    # without dpkg, nothing is a package's: the entries are left as they were
    box._p("/var/lib/dpkg/status").unlink()
    entries, groups = _entries()
    kept, debs = settle_debian(entries, box, lambda: groups, {})
    assert kept == entries and not any("published_check" in e for e in kept) and debs == []


def test_paths_no_package_puts_files_in_do_not_read_dpkgs_files(tmp_path):
    box = DebianBox(tmp_path / "box")
    reads = []
    box.read_file = lambda path, limit=None: reads.append(path)  # type: ignore[method-assign]
    pytest_entry = {"kind": "test_library_changed", "source": "environment", "detail": "the test runner's",
                    "paths": ["/usr/local/lib/python3.11/dist-packages/_pytest/main.py"]}
    kept, debs = settle_debian([pytest_entry], box, lambda: {"test_library_changed": pytest_entry["paths"]}, {})
    assert kept == [pytest_entry] and debs == [] and reads == [] and "published_check" not in pytest_entry


def test_a_folder_too_large_to_read_whole_settles_nothing_in_it(archive, tmp_path):
    box = DebianBox(tmp_path / "box")
    box.install()
    box._p(f"{STDLIB}/mod3.py").unlink()  # a removal the listing inside does not tell
    box.write(f"{STDLIB}/padding.bin", b"\0" * (65 * 2**20))  # past what the packages put there, and the slack
    entries, groups = _entries()
    groups["python_library_changed"].remove(f"{STDLIB}/mod3.py")
    entries[1]["paths"] = groups["python_library_changed"][:20]
    kept, _ = settle_debian(entries, box, lambda: groups, {})
    [library] = [e for e in kept if e["kind"] == "python_library_changed"]
    assert library["published_check"].startswith(f"Debian: {STDLIB} could not be read whole"), library


class UbuntuBox(DebianBox):
    """An Ubuntu image's files: Ubuntu's os-release and the package at Ubuntu's version."""

    def __init__(self, root: Path, version: str) -> None:
        super().__init__(root)
        self.write("/usr/lib/os-release", "PRETTY_NAME=\"Ubuntu\"\nID=ubuntu\nID_LIKE=debian\nVERSION_CODENAME=yak\n")
        self.write("/var/lib/dpkg/status", self._p("/var/lib/dpkg/status").read_text().replace(VERSION, version))


def test_an_ubuntu_install_is_settled_with_the_keys_debian_publishes_for_ubuntu(ubuntu, tmp_path):
    box = UbuntuBox(tmp_path / "box", ubuntu.version)
    box.install()
    entries, groups = _entries()
    kept, debs = settle_debian(entries, box, lambda: groups, {})
    assert [e["kind"] for e in kept] == ["tests_written"], kept
    [row] = debs
    assert (row["package"], row["version"], row["suite"], row["deb"]) == (PACKAGE, ubuntu.version, "yak-updates",
                                                                          ubuntu.pool)
    # Ubuntu's key came from Debian's signed archive: its stable suite, then the keyring's package
    asked = ubuntu.debian.requests
    assert "/debian/dists/stable/InRelease" in asked and any(r.endswith("ubuntu-keyring_2099.1_all.deb") for r in asked)
    # a file the agent changed is told as Ubuntu's
    box.write(f"{STDLIB}/json/decoder.py", "def loads(s):\n    return {}\n")
    entries, groups = _entries()
    kept, _ = settle_debian(entries, box, lambda: groups, {})
    [library] = [e for e in kept if e["kind"] == "python_library_changed"]
    assert library["published_check"].startswith(f"Ubuntu: {STDLIB}/json/decoder.py differs from {ubuntu.pool}")


def test_ubuntus_releases_are_checked_only_against_the_key_debian_vouches_for(ubuntu, tmp_path, monkeypatch):
    box = UbuntuBox(tmp_path / "box", ubuntu.version)
    box.install()
    # signed by Debian's key, which is not Ubuntu's
    ubuntu.debian.publish("ubuntu", "yak-updates", ubuntu.stanza)
    entries, groups = _entries()
    kept, debs = settle_debian(entries, box, lambda: groups, {})
    assert debs == [] and len(kept) == 4
    assert "yak-updates/InRelease is not signed by a key of" in kept[0]["published_check"], kept[0]
    # the keyring's package is not the one Debian's signed index names: no Ubuntu key at all
    for memo in ("_releases", "_ubuntu_rings", "_in_memory"):
        monkeypatch.setattr(debian_archive, memo, {})
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache2"))
    ubuntu.publish_keyring(tamper=True)
    entries, groups = _entries()
    kept, debs = settle_debian(entries, box, lambda: groups, {})
    assert debs == [] and "sha256 is not the one the signed index gives" in kept[0]["published_check"], kept[0]



def test_an_alternative_settles_only_as_its_package_registers_it(archive, tmp_path):
    """`apt-get install gawk` makes `/usr/bin/awk` a link to `/etc/alternatives/awk`, a link to
    gawk's program: no package owns those links; the one the archive's package registers in its own
    postinst settles, a choice it does not register stays."""
    stage = tmp_path / "gzawk-stage"
    (stage / "usr/bin").mkdir(parents=True)
    (stage / "usr/bin/gzawk").write_bytes(b"\x7fELF gzawk\n")
    (stage / "DEBIAN").mkdir()
    (stage / "DEBIAN/postinst").write_text("#!/bin/sh\nset -e\nupdate-alternatives --quiet --install /usr/bin/zawk "
                                           "zawk /usr/bin/gzawk 10 \\\n  --slave /usr/bin/nzawk nzawk /usr/bin/gzawk\n")
    (stage / "DEBIAN/postinst").chmod(0o755)
    pool = archive.root / "debian/pool/main/g/gzawk/gzawk_1.0-1_amd64.deb"
    archive.publish("debian", "zed-updates", _deb(stage, "Package: gzawk\nVersion: 1.0-1\nArchitecture: amd64\n", pool,
                                                   "xz"))
    box = DebianBox(tmp_path / "box")
    box.install()
    status = box._p("/var/lib/dpkg/status")
    status.write_text(status.read_text() + "\nPackage: gzawk\nStatus: install ok installed\nArchitecture: amd64\n"
                      "Version: 1.0-1\n")
    box.write("/var/lib/dpkg/info/gzawk:amd64.list", "/usr/bin/gzawk\n")
    box.write("/usr/bin/gzawk", b"\x7fELF gzawk\n")
    box._p("/etc/alternatives").mkdir(parents=True)
    box._p("/etc/alternatives/zawk").symlink_to("/usr/bin/gzawk")
    box._p("/usr/bin/zawk").symlink_to("/etc/alternatives/zawk")

    def entry(real: str) -> dict:
        return {"kind": "toolchain_replaced", "source": "environment", "detail": "`zawk` now resolves elsewhere",
                "tool": "zawk", "after": {"path": "/usr/bin/zawk", "real": real}, "by_command": BY}

    kept, debs = settle_debian([entry("/usr/bin/gzawk")], box, lambda: {}, {})
    assert kept == [] and [d["package"] for d in debs] == ["gzawk"], kept
    # the same name set to a file of a package that registers no such alternative (a genuine file)
    box._p("/etc/alternatives/zawk").unlink()
    box._p("/etc/alternatives/zawk").symlink_to("/usr/bin/python3.99")
    [stays], debs = settle_debian([entry("/usr/bin/python3.99")], box, lambda: {}, {})
    assert debs == [] and stays["published_check"] == (
        f"Debian: /usr/bin/zawk is the alternative zawk, set to /usr/bin/python3.99, which {archive.pool} does not "
        "register"), stays
    # the registered path made a link to another package's genuine file: the program run is not
    # gzawk's, though every path the entry names is some package's
    box._p("/etc/alternatives/zawk").unlink()
    box._p("/etc/alternatives/zawk").symlink_to("/usr/bin/gzawk")
    box._p("/usr/bin/gzawk").unlink()
    box._p("/usr/bin/gzawk").symlink_to("/usr/bin/python3.99")
    [stays], debs = settle_debian([entry("/usr/bin/python3.99")], box, lambda: {}, {})
    assert debs == [] and "/usr/bin/gzawk" in stays["published_check"], stays


def test_libraries_are_read_one_by_one_where_their_folder_is_too_large_to_read_whole(archive, tmp_path):
    """A library folder holds far more than the packages an entry names (runner/debian_updates.py
    ALONE_KINDS): its files are read one by one, so a reinstall that rewrote more than
    READ_ONE_BY_ONE of them is settled where a folder of the standard library would not be."""
    box = DebianBox(tmp_path / "box")
    box.install()
    box.write(f"{STDLIB}/padding.bin", b"\0" * (65 * 2**20))
    library = sorted(p for p in MODULES if p.startswith(STDLIB))
    assert len(library) > READ_ONE_BY_ONE
    written = {"kind": "shared_library_changed", "source": "environment", "detail": "libraries written",
               "paths": library[:20], "by_command": BY}
    kept, debs = settle_debian([written], box, lambda: {"shared_library_changed": library}, {})
    assert kept == [] and [row["package"] for row in debs] == [PACKAGE]
    # one of them not the package's: the entry stays, saying which
    box.write(f"{STDLIB}/mod4.py", "X = 'forged'\n")
    written = {**written}
    kept, _ = settle_debian([written], box, lambda: {"shared_library_changed": library}, {})
    assert [e["kind"] for e in kept] == ["shared_library_changed"]
    assert kept[0]["published_check"].startswith(f"Debian: {STDLIB}/mod4.py differs from"), kept


def test_a_packages_libraries_are_read_one_by_one_and_its_own_folders_whole(monkeypatch):
    """A package whose scripts apt runs is read file by file where every package puts files
    (/usr/lib/x86_64-linux-gnu: hundreds of MB in a large image, more than a read of the folder
    whole may take), and by folder elsewhere; a folder too large to read whole, file by file."""
    from tbscale.runner import debian_updates
    libs = [f"/usr/lib/x86_64-linux-gnu/libglib-2.{i}.so.0" for i in range(READ_ONE_BY_ONE + 2)]
    docs = [f"/usr/share/doc/libglib2.0-0/f{i}" for i in range(READ_ONE_BY_ONE + 2)]
    deb = SimpleNamespace(filename="pool/libglib.deb", sha256="0" * 64, scripts={}, sizes={p: 10 for p in libs + docs},
                          files={p: "file:x" for p in libs + docs})
    asked: list[str] = []

    too_large: set[str] = set()

    def read_tree(path: str, limit: int | None = None) -> dict[str, str]:
        asked.append(path)
        if path in too_large:
            raise SandboxError(f"{path} is over the limit")
        return {p: "file:x" for p in libs + docs if p == path or p.startswith(path + "/")}

    packages = SimpleNamespace(deb=lambda owner, fetch: deb, scripts={})
    box = SimpleNamespace(read_tree=read_tree)
    problems, debs = debian_updates._package_problems({"paths": ["/var/lib/dpkg/info/libglib2.0-0:amd64.list"]},
                                                      packages, None, box)  # type: ignore[arg-type]
    assert problems == [] and debs == [deb]
    assert sorted(asked) == sorted([*libs, "/usr/share/doc"])
    asked.clear()
    too_large.add("/usr/share/doc")
    problems, _ = debian_updates._package_problems({"paths": ["/var/lib/dpkg/info/libglib2.0-0:amd64.list"]},
                                                   packages, None, box)  # type: ignore[arg-type]
    assert problems == [] and sorted(asked) == sorted([*libs, "/usr/share/doc", *docs])


def test_perl_modules_are_read_by_their_own_folder():
    """Perl's module folders sit in folders that hold tens of MB besides them
    (/usr/lib/x86_64-linux-gnu/perl-base): a `perl_module_changed` entry's paths are read by the
    folder one level deeper (runner/debian_updates.py DEEPER_KINDS), so that a reinstall of perl-base
    is settled where the library folder around it is too large to read whole."""
    paths = [f"/usr/lib/x86_64-linux-gnu/perl-base/Mod{i}.pm" for i in range(READ_ONE_BY_ONE + 2)]

    class Box:
        def __init__(self) -> None:
            self.asked: list[str] = []

        def read_tree(self, path: str, limit: int | None = None) -> dict[str, str]:
            self.asked.append(path)
            return {p: "digest" for p in paths if p.startswith(path + "/")}

    deb = SimpleNamespace(sha256="0" * 64, sizes={p: 100 for p in paths})
    expected = {p: (deb, "digest") for p in paths}
    box = Box()
    found, trees = _read(box, expected, {}, deeper=set(paths))  # type: ignore[arg-type]
    assert box.asked == ["/usr/lib/x86_64-linux-gnu/perl-base"] and found == dict.fromkeys(paths, "digest")
    box = Box()
    _read(box, expected, {})  # type: ignore[arg-type]
    assert box.asked == ["/usr/lib/x86_64-linux-gnu"]
