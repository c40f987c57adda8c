#!/bin/bash
set -e
cd /app/shop && git status && git log --oneline --graph --all

cd /app/shop && git fsck --lost-found

cd /app/shop && for c in $(git fsck 2>/dev/null | awk '/dangling commit/{print $3}'); do git log -3 --format='%h %s' "$c"; echo; done

cd /app/shop && if ! git rev-parse -q --verify refs/heads/feature/payments >/dev/null; then sha=$(for c in $(git fsck 2>/dev/null | awk '/dangling commit/{print $3}'); do [ "$(git log -1 --format=%s "$c")" = "Add refund support" ] && echo "$c"; done); git branch feature/payments "$sha"; fi; git log --oneline -3 feature/payments

cd /app/shop && git diff --stat main...feature/payments

cd /app/shop && git checkout -q main && (git merge-base --is-ancestor feature/payments main || git merge --no-ff -m "Merge branch 'feature/payments'" feature/payments)

cd /app/shop && git tag -f v1.1 main

cd /app/shop && git log --oneline --graph -6 && git status --short
