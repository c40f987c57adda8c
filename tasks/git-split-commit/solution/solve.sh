#!/bin/bash
set -e
cd /app/project && git status && git log --format='%h %an <%ae> %s' --stat

cd /app/project && git show --stat HEAD~1 && git show HEAD~1 -- README.md

cd /app/project && (git rev-parse -q --verify refs/heads/backup >/dev/null || git branch backup main)

cd /app/project && git checkout -q -B split backup~2 && git log --oneline

cd /app/project && if [ "$(git log -1 --format=%s)" = "Add tokenizer" ]; then git checkout backup~1 -- README.md && git commit -q --author="Sam Lee <sam@example.com>" -m "Fix typo in README"; fi; git log --oneline -1 --stat

cd /app/project && if [ "$(git log -1 --format=%s)" = "Fix typo in README" ]; then git checkout backup~1 -- calc/parser.py tests/test_parser.py && git commit -q --author="Sam Lee <sam@example.com>" -m "Add parser"; fi; git log --oneline -1 --stat

cd /app/project && if [ "$(git log -1 --format=%s)" = "Add parser" ]; then git cherry-pick backup; fi; git log --format='%h %an %s' --stat -1

cd /app/project && git diff --stat backup split

cd /app/project && git checkout -q -B main split && git log --format='%h %an <%ae> %s'

cd /app/project && git branch -D split backup 2>/dev/null || true; git branch

cd /app/project && python3 -m pytest -q -p no:cacheprovider tests && git status --short
