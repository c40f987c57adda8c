"""Checks for the mathx Makefile. Tests run in file order and share the build directory."""
import math
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

D = Path("/app/mathx")
B = D / "build"
EXPECTED = "count 5\nsum 8.000 15.000 9.000\nmean_norm 5.2000\nstddev_norm 2.8636\n"


def make(*args, check=True):
    r = subprocess.run(["make", *args], cwd=D, capture_output=True, text=True, timeout=60)
    if check:
        assert r.returncode == 0, f"make {' '.join(args)} failed:\n{r.stdout}\n{r.stderr}"
    return r


def backdate():
    """Move inputs 20 s and build outputs 10 s into the past, keeping the tree up to date, so that
    a following change is newer than every output without sleeping."""
    now = time.time()
    for p in list(D.glob("src/*")) + list(D.glob("[Mm]akefile")) + list(D.glob("GNUmakefile")):
        os.utime(p, (now - 20, now - 20))
    for p in B.rglob("*"):
        os.utime(p, (now - 10, now - 10))


def mtimes():
    return {p.name: p.stat().st_mtime_ns for p in B.iterdir() if p.suffix in (".o", ".a") or p.name == "mathx"}


def test_sources_unchanged():
    assert (D / "src" / "main.c").read_text().count("#include") == 3
    assert "vec_add" in (D / "src" / "vec.c").read_text()


def test_clean_build():
    assert (D / "Makefile").exists() or (D / "makefile").exists() or (D / "GNUmakefile").exists()
    if B.exists():
        shutil.rmtree(B)
    make()
    for f in ("vec.o", "stats.o", "main.o", "libmathx.a", "mathx"):
        assert (B / f).is_file(), f"build/{f} missing"
    members = subprocess.run(["ar", "t", str(B / "libmathx.a")], capture_output=True, text=True, check=True).stdout.split()
    assert sorted(members) == ["stats.o", "vec.o"]
    syms = subprocess.run(["nm", "-g", str(B / "mathx")], capture_output=True, text=True).stdout
    assert "vec_add" in syms and "stats_stddev" in syms


def test_flags():
    out = make("-n", "-B").stdout
    compiles = [l for l in out.splitlines() if " -c " in l]
    assert len(compiles) == 3, out
    for l in compiles:
        assert "-Wall" in l and "-O2" in l, l


def test_program_output():
    inp = (D / "data" / "input.txt").read_text()
    r = subprocess.run([str(B / "mathx")], input=inp, capture_output=True, text=True, check=True)
    assert r.stdout == EXPECTED
    vecs = [(1, 1, 1), (2, -3, 6), (0.5, 0, 0)]
    r = subprocess.run([str(B / "mathx")], input="\n".join(" ".join(map(str, v)) for v in vecs), capture_output=True, text=True, check=True)
    norms = [math.sqrt(sum(c * c for c in v)) for v in vecs]
    mean = sum(norms) / 3
    sd = math.sqrt(sum((n - mean) ** 2 for n in norms) / 2)
    assert f"mean_norm {mean:.4f}" in r.stdout and f"stddev_norm {sd:.4f}" in r.stdout


def test_noop_rebuild():
    backdate()
    before = mtimes()
    make()
    assert mtimes() == before, "a second make rebuilt something"


def test_header_change_rebuilds_dependents_only():
    backdate()
    before = mtimes()
    (D / "src" / "stats.h").touch()
    make()
    after = mtimes()
    assert after["stats.o"] != before["stats.o"], "stats.o not rebuilt after stats.h changed"
    assert after["main.o"] != before["main.o"], "main.o not rebuilt after stats.h changed"
    assert after["vec.o"] == before["vec.o"], "vec.o rebuilt although it does not include stats.h"
    assert after["mathx"] != before["mathx"]
    backdate()
    before = mtimes()
    (D / "src" / "vec.h").touch()
    make()
    after = mtimes()
    assert after["vec.o"] != before["vec.o"] and after["main.o"] != before["main.o"]
    assert after["stats.o"] == before["stats.o"]


def test_source_change_rebuilds_one_object():
    backdate()
    before = mtimes()
    (D / "src" / "vec.c").touch()
    make()
    after = mtimes()
    assert after["vec.o"] != before["vec.o"]
    assert after["stats.o"] == before["stats.o"] and after["main.o"] == before["main.o"]
    assert after["libmathx.a"] != before["libmathx.a"] and after["mathx"] != before["mathx"]


def test_check_target():
    exp = D / "data" / "expected.txt"
    assert exp.read_text() == EXPECTED
    make("check")
    saved = exp.read_text()
    try:
        exp.write_text(saved.replace("count 5", "count 6"))
        assert make("check", check=False).returncode != 0, "make check passed with a wrong expected.txt"
    finally:
        exp.write_text(saved)
    make("check")


def test_install():
    with tempfile.TemporaryDirectory() as tmp:
        prefix = os.path.join(tmp, "inst")
        make("install", f"PREFIX={prefix}")
        p = Path(prefix)
        assert os.access(p / "bin" / "mathx", os.X_OK)
        assert (p / "lib" / "libmathx.a").is_file()
        assert (p / "include" / "vec.h").is_file() and (p / "include" / "stats.h").is_file()
        r = subprocess.run([str(p / "bin" / "mathx")], input="3 4 0\n", capture_output=True, text=True, check=True)
        assert "mean_norm 5.0000" in r.stdout


def test_clean():
    make("clean")
    assert not B.exists()
    make()
    assert (B / "mathx").exists()
