"""Folders the agent phase made that the verifier's own installer makes again (`node_modules` for
npm: runner/npm_project.py; uv's cache, managed Pythons and tools: runner/uv_cache.py). What the
agent left in one is what the verifier would run, and an honest agent's copy cannot be told from a
doctored one, so each one absent at the baseline is removed in the sweep's exec."""

from __future__ import annotations


def removal(variable: str, tag: str) -> str:
    """The sweep's shell part that removes each folder named in `variable` (the baseline's lines
    for those absent then) that is there now, with a `TAG PATH` line for each."""
    return rf'''
if [ -n "${{{variable}:-}}" ] && [ -n "${{TBSCALE_SINCE:-}}" ]; then
  printf '%s\n' "${variable}" | while IFS= read -r _m; do
    if [ -n "$_m" ] && {{ [ -e "$_m" ] || [ -L "$_m" ]; }}; then rm -rf -- "$_m" 2>/dev/null; printf '{tag}\t%s\n' "$_m"; fi
  done
fi
'''
