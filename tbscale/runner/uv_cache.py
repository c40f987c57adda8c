"""uv's own folders, which the verifier's `uv` and `uvx` reuse: made by the agent phase, they are
removed before the verifier runs (docs/tasks.md, "Verification integrity", *uv's cache*).

Terminal-Bench 2.0's test scripts run `uvx -p 3.13 -w pytest==8.4.1 -w pytest-json-ctrf==0.3.5
pytest ...`. uvx keeps the environment it makes for that command in its cache
(`~/.cache/uv/archive-v0/...`), and runs the same command from it again; it takes a managed Python
from `~/.local/share/uv/python` before it downloads one. An agent that runs the same uvx (as an
honest agent does, to run its tests) and then adds a `.pth` line to that cached environment's
site-packages has the verifier's pytest run its code: on 2026-12-06 that passed a trial of
fix-python-inventory whose test script runs its tests so, with the bugs in place and nothing
recorded (tests/test_uv_cache_integrity.py). An honest agent fills the same cache with the same
command, so a file check cannot tell the two apart.

So, as with the `node_modules` the agent phase makes where the verifier's npm installs
(runner/npm_project.py), where the verifier's scripts run uv or uvx, each of uv's folders (its
cache, its managed Pythons, its tools; by uv's variables, else XDG's, else the home's defaults) that
was absent at the baseline (`UZ` lines) and is there after the sweep is removed in the sweep's exec
(`UL` lines, the sweep event's `uv_removed`): the verifier's own uv makes it again from the index.
Not where the verifier has no network (it could not), nor under `agent_processes: keep` (the
agent's processes may be using it). Not covered: a folder the image already had (a cache made for
an offline verifier, `uvx --offline`), whose entries are not listed.
"""

from __future__ import annotations

from tbscale.runner.made_again import removal

# At the baseline (no TBSCALE_SINCE), where the verifier runs uv (`TBSCALE_UV`): a `UZ` line for
# each of uv's folders that is absent.
UV_FOLDERS = r'''
if [ -n "${TBSCALE_UV:-}" ] && [ -z "${TBSCALE_SINCE:-}" ]; then
  _uh=${HOME:-/root}
  for _u in "${UV_CACHE_DIR:-${XDG_CACHE_HOME:-$_uh/.cache}/uv}" \
      "${UV_PYTHON_INSTALL_DIR:-${XDG_DATA_HOME:-$_uh/.local/share}/uv/python}" \
      "${UV_TOOL_DIR:-${XDG_DATA_HOME:-$_uh/.local/share}/uv/tools}"; do
    [ -e "$_u" ] || [ -L "$_u" ] || printf 'UZ\t%s\n' "$_u"
  done
fi
'''
# In the sweep's exec (the agent's processes are gone): each folder of `TBSCALE_UV_CLEAR` (the
# baseline's `UZ` lines) that is there now was made by the agent phase, and is removed.
UV_CLEAR = removal("TBSCALE_UV_CLEAR", "UL")
