import os
import random
import subprocess

import pytest

DIR = "/app/textstat"
BIN = os.path.join(DIR, "textstat")
WS = b" \t\n\r\v\f"


@pytest.fixture(scope="module", autouse=True)
def build():
    subprocess.run(["make", "clean"], cwd=DIR, capture_output=True)
    r = subprocess.run(["make"], cwd=DIR, capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "warning" not in (r.stdout + r.stderr).lower(), r.stderr
    assert os.access(BIN, os.X_OK)


def expected(data: bytes):
    lines = data.count(b"\n")
    words = 0
    in_word = False
    for b in data:
        if b in WS:
            in_word = False
        elif not in_word:
            in_word = True
            words += 1
    parts = data.split(b"\n")
    longest = max(len(p) for p in parts) if data else 0
    return f"{lines} {words} {len(data)} {longest}"


def run(data: bytes):
    r = subprocess.run([BIN], input=data, capture_output=True, timeout=10)
    assert r.returncode == 0
    return r.stdout.decode().strip()


@pytest.mark.parametrize("data", [
    b"",
    b"a\tb  c",
    b"hello world\n",
    b"hello world",
    b"one\ntwo three\n\nfour",
    b"\t\t  \n\r\n",
    b"x",
    b"trailing spaces   \n   leading\n",
    b"crlf\r\nline\r\n",
    b"vt\vff\fend",
])
def test_examples(data):
    assert run(data) == expected(data)


def test_spec_example():
    assert run(b"a\tb  c") == "0 3 6 6"
    assert run(b"") == "0 0 0 0"


def test_large_and_random():
    rnd = random.Random(1234)
    alphabet = b"abc xyz\t\n\r\v\f0123456789\x00\xff"
    for size in (63, 64, 65, 127, 1000, 100000):
        data = bytes(rnd.choice(alphabet) for _ in range(size))
        assert run(data) == expected(data), size


def test_long_line_across_buffers():
    data = b"w" * 5000 + b"\n" + b"z" * 7000
    assert run(data) == expected(data) == "1 2 12001 7000"
