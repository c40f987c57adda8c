#!/bin/bash
# Builds /app/project whose third commit mixes two unrelated changes and a stray log file.
set -euo pipefail
n=0
commit() {  # commit "<author name>" <email> <message>, with deterministic dates
  n=$((n + 1))
  GIT_AUTHOR_NAME="$1" GIT_AUTHOR_EMAIL="$2" GIT_COMMITTER_NAME="$1" GIT_COMMITTER_EMAIL="$2" \
  GIT_AUTHOR_DATE="2024-02-1${n}T09:30:00Z" GIT_COMMITTER_DATE="2024-02-1${n}T09:30:00Z" \
    git commit -q -m "$3"
}
mkdir -p /app/project && cd /app/project
git init -q -b main .
mkdir -p calc tests
cat > README.md <<'MD'
# calc

A small arithmetic expression evaluator.

Functions recieve a string and return a number.
MD
printf '"""calc: a tiny expression evaluator."""\n' > calc/__init__.py
git add -A && commit "Dana Kurz" dana@example.com "Initial layout"
cat > calc/tokenizer.py <<'PY'
import re

TOKEN = re.compile(r"\s*(?:(\d+\.?\d*)|(.))")


def tokenize(text):
    tokens = []
    for number, op in TOKEN.findall(text):
        if number:
            tokens.append(float(number))
        elif op.strip():
            tokens.append(op)
    return tokens
PY
git add -A && commit "Dana Kurz" dana@example.com "Add tokenizer"
sed -i 's/recieve/receive/' README.md
cat > calc/parser.py <<'PY'
from .tokenizer import tokenize


def evaluate(text):
    """Evaluate + - * / expressions with the usual precedence (no parentheses)."""
    tokens = tokenize(text)
    pos = 0

    def term():
        nonlocal pos
        value = tokens[pos]
        pos += 1
        while pos < len(tokens) and tokens[pos] in ("*", "/"):
            op, rhs = tokens[pos], tokens[pos + 1]
            pos += 2
            value = value * rhs if op == "*" else value / rhs
        return value

    value = term()
    while pos < len(tokens):
        op = tokens[pos]
        pos += 1
        rhs = term()
        value = value + rhs if op == "+" else value - rhs
    return value
PY
cat > tests/test_parser.py <<'PY'
from calc.parser import evaluate


def test_precedence():
    assert evaluate("2 + 3 * 4") == 14


def test_left_to_right():
    assert evaluate("10 - 4 - 3") == 3
PY
for i in $(seq 1 200); do echo "DEBUG $i tokenize('$i + $i') -> [$i.0, '+', $i.0]"; done > debug.log
git add -A && commit "Sam Lee" sam@example.com "Add parser and fix typo in README"
cat > calc/cli.py <<'PY'
import sys

from .parser import evaluate


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    print(evaluate(" ".join(argv)))


if __name__ == "__main__":
    main()
PY
git add -A && commit "Ali Khan" ali@example.com "Add CLI entry point"
