"""The modification times the verifier's cargo and make decide by, as the agent phase left them
(docs/tasks.md, "Verification integrity", *cargo, cmake and make*).

cargo and make rebuild what is older than its sources, by modification time, and a modification
time can be set to anything (`touch -d`). An agent that built a solution that passes, then wrote
one that fails and set its time back to before the build, passed the Aider Polyglot-shaped Rust
and C++ tasks with the failing source in place: the verifier's `cargo test`, and `cmake .. &&
make`, took the library and the object file built from the first as up to date. Setting a build
output's time forward (a fingerprint, an object file) does the same. A file's status change time
cannot be set from inside the container, so what the agent phase changed is known whatever its
modification time says. So, after the sweep, in the folders where the verifier's cargo runs and
the source folders its cmake configures (and their build folders: cargo's `target` there and
above, `$CARGO_TARGET_DIR`, cmake's build folders):
* a file the agent phase changed whose modification time is in the future is set to the baseline's
  time and is `build_time_set_forward` (no build tool writes one);
* every file the agent phase changed outside the build folders is touched, so the verifier's
  build compiles each again from what is there now (`build_sources_touched`, in the sweep
  record). An honest agent's build is redone for the files it changed, and nothing is recorded
  against it.
Beside a makefile for tests the verifier's make is given (`m:` lines of runner/verifier_tests.py,
DevEval's `makefile_test`), only the first: a test program the agent dated 2099 was taken as built.
Its sources and outputs lie together, and verifier_tests touches the tests themselves.
An output the agent phase wrote over with other content and left with an ordinary time is not
covered (docs/tasks.md)."""

from __future__ import annotations

from tbscale.runner.findings import grouped_entries
from tbscale.types.guard import GuardSnapshot, Tampering


def set_forward(snap: GuardSnapshot, actions: list[tuple[int, str]]) -> list[Tampering]:
    """The files `BUILD_TIMES` found dated in the future (`TF` lines), as tampering."""
    found = [f"{path} (set to the baseline's time)" for path in snap.get("build_times_forward", [])]
    return grouped_entries([("build_time_set_forward", found, "a file the agent phase changed where the verifier's "
                             "cargo or make builds was dated in the future, which makes them take what was built "
                             "from it as up to date")], actions)


# ---- the guard shell's part, run by the seal after the sweep with BYTECODE -------------------------
# `TBSCALE_CARGO`, `TBSCALE_CMAKE` and `TBSCALE_TESTS_HERE` as runner/cargo_project.py's,
# runner/cmake_project.py's and runner/verifier_tests.py's blocks read them; `TBSCALE_SINCE`, the baseline's clock. A `TF` line for each file dated in the
# future (set to the baseline's time; the first 200 named), and a `TT` line with how many files
# were touched.
BUILD_TIMES = r'''
if [ -n "${TBSCALE_SINCE:-}" ] && { [ -n "${TBSCALE_CARGO+set}" ] || [ -n "${TBSCALE_CMAKE+set}" ] ||
                                     [ -n "${TBSCALE_TESTS_HERE+set}" ]; }; then
  _now=$(date +%s)
  # the folders: `s PATH` a source folder, `o PATH` a build folder, `f PATH` one where only a time set
  # forward is set back (`_at` is guard_shell.PROJECT's)
  _bt=$( {
    [ -n "${TBSCALE_CARGO+set}" ] && printf '%s\n' "$TBSCALE_CARGO" | while IFS= read -r _p; do
      _at "$_p"; _p=${_p%/}
      printf 's %s\n' "$_p"
      _up=$_p
      while [ -n "$_up" ]; do [ -d "$_up/target" ] && printf 'o %s\n' "$_up/target"; _up=${_up%/*}; done
    done
    case "${CARGO_TARGET_DIR:-}" in /*) printf 'o %s\n' "${CARGO_TARGET_DIR%/}" ;; esac
    [ -n "${TBSCALE_CMAKE+set}" ] && printf '%s\n' "$TBSCALE_CMAKE" | while IFS= read -r _p; do
      _k=${_p%%:*}; _at "${_p#*:}"
      if [ "$_k" = b ]; then printf 'o %s\n' "${_p%/}"; else printf 's %s\n' "${_p%/}"; fi
    done
    [ -n "${TBSCALE_TESTS_HERE+set}" ] && printf '%s\n' "$TBSCALE_TESTS_HERE" | while IFS= read -r _p; do
      case "$_p" in m:*) _at "${_p#m:}"; _p=${_p%/*}; [ -z "$_p" ] || printf 'f %s\n' "$_p" ;; esac
    done; } | sort -u)
  # "MTIME CTIME PATH" for each file or link under those folders (not in .git or node_modules)
  # whose status changed since the baseline: one walk for both uses below. A link too: touching
  # one touches what it points to, which the build reads through it.
  case "$TBSCALE_SINCE" in *.*) _bt_nc="-newerct @$TBSCALE_SINCE" ;; *) _bt_nc= ;; esac
  _bt_all=$(printf '%s\n' "$_bt" | while IFS= read -r _l; do
    [ -d "${_l#? }" ] && find "${_l#? }/" -xdev \( -name .git -o -name node_modules \) -prune -o \
      \( -type f -o -type l \) $_bt_nc -exec stat -c '%Y %Z %n' {} + 2>/dev/null
  done | awk -v s="${TBSCALE_SINCE%.*}" '$2 >= s' | sort -u)
  # `_bt_touch [TOUCH-OPTIONS] -- TAG`: touch each path read, 200 at a time, however many (a
  # cut-off would let files written in bulk push one out); the first 200 as `TF PATH` lines, or
  # a `TT COUNT` line
  _bt_touch() {
    _o=
    while [ "$1" != -- ]; do _o="$_o $1"; shift; done
    _tag=$2; _t=0; set --
    while IFS= read -r _f; do
      set -- "$@" "$_f"; _t=$((_t + 1))
      [ "$_tag" != TF ] || [ "$_t" -gt 200 ] || printf 'TF\t%s\n' "$_f"
      [ $# -lt 200 ] || { touch -c $_o -- "$@" 2>/dev/null; set --; }
    done
    [ $# -eq 0 ] || touch -c $_o -- "$@" 2>/dev/null
    [ "$_tag" != TT ] || [ "$_t" -eq 0 ] || printf 'TT\t%s\n' "$_t"
  }
  [ -n "$_bt_all" ] && printf '%s\n' "$_bt_all" | awk -v n="$_now" '$1 > n + 1 { sub(/^[0-9]+ [0-9]+ /, ""); print }' |
    _bt_touch -d "@${TBSCALE_SINCE%.*}" -- TF
  # then what changed outside the build folders (a build folder that is also a source, as with
  # `cmake . && make`, but for its CMakeFiles), and outside cargo's `target` in a source
  _outs=$(printf '%s\n' "$_bt" | while IFS= read -r _l; do case "$_l" in "o "*) printf '%s\n' "${_l#o }" ;; esac; done)
  _srcs=$(printf '%s\n' "$_bt" | while IFS= read -r _l; do case "$_l" in "s "*) printf '%s\n' "${_l#s }" ;; esac; done)
  [ -n "$_bt_all" ] && printf '%s\n' "$_bt_all" | sed 's/^[0-9]* [0-9]* //' | _O=$_outs _S=$_srcs awk '
    BEGIN { n = split(ENVIRON["_O"], O, "\n"); m = split(ENVIRON["_S"], S, "\n"); for (j = 1; j <= m; j++) src[S[j]] = 1 }
    { for (j = 1; j <= m; j++) if (S[j] != "" && index($0, S[j] "/") == 1) break
      if (j > m || index($0, S[j] "/target/") == 1 || index($0, "/CMakeFiles/") > 0) next
      for (i = 1; i <= n; i++) if (O[i] != "" && !(O[i] in src) && index($0, O[i] "/") == 1) next
      print }' | _bt_touch -- TT
fi
'''
