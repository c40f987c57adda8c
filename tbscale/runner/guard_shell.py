"""The shell the verifier guard runs in an environment (runner/guard.py), and the readers of what it
prints. Each script prints tab-separated lines whose first field says what they carry:

* `P`, `R`, `H`, `O`, `T`: a tool resolved on PATH, its real path, digest and status (`SNAPSHOT`);
* `N`: the container's clock, `D` the folder an exec starts in, `V` root's home (`CLOCK`), and
  `U` when the environment has no `find`;
* `M`: a mount point of the verifier's (`MOUNTS`); `F`: a script it sources (`SOURCED`); `J`: a file of
  the workdir's Python project, which its uv commands read (`PROJECT`);
* `C`: a path whose status changed since the reference clock, `W` a place with more of them than
  the listing keeps, `I` a `.pth` file with a line site.py executes, `E` an entry_points.txt that
  declares a pytest plugin, `K` a `_virtualenv.py` that is uv's own, `X` a module the `.pth` files
  import at every start, `Y` a `.venv` the verifier's
  uv commands use, whose Python folders are listed (`CHANGES`); `Q`: the digest of a start-up file
  of setuptools' (`STARTUP_COPIES`);
* `B`: how many compiled modules the agent phase wrote were removed (`BYTECODE`);
* `S`: what a failed setup command printed (`SETUP`), `A` the artifacts folder's state
  (`ARTIFACTS_PROBE`); and one line per process, from /proc (`PROCESSES`).

Scripts that run while the agent's processes may be alive print each value once, so a value line
given twice with different values was written by something else (`parse_snapshot`'s `conflicts`).
"""

from __future__ import annotations

from tbscale.environments.base import first_lines
from tbscale.runner.build_tools import TAGS as BUILD_TAGS
from tbscale.runner.findings import HOME_INSTALLER_SETTINGS, INSTALLER_SETTINGS, UV_VIRTUALENV_MODULES, VERIFIER_LOGS
from tbscale.types.guard import GuardSnapshot, MountState, ProcessInfo, ToolState
from tbscale.verifiers.script import OWN_PROCESSES

CLEAR_VERIFIER_LOGS = (f"[ -d {VERIFIER_LOGS} ] && [ ! -L {VERIFIER_LOGS} ] && "
                        f"find {VERIFIER_LOGS} -mindepth 1 -delete 2>/dev/null\n")

# The working folder an exec starts in (`D`: the task's workdir, or the image's WORKDIR when the task
# names none), where the verifier's command runs unless told otherwise: `CHANGES` lists it as the
# workdir. Root's home (`V`), as an exec gets it from /etc/passwd: where pip, uv and Python's user
# site read from; an agent that moves it moves them where nothing is listed. The container's clock,
# the reference of the changes `CHANGES` lists later: to the nanosecond where date and find have it
# (GNU). Busybox's date has no %N (it prints it as it is) and its find
# no -newerct; the clock is then the next whole second, waited for, so that nothing changed before
# it shares its second, and a clock without a fraction tells `CHANGES` (which runs it in a later
# exec, the agent's phase between) to read each path's status change second from stat: the choice
# is probed once, here, before the agent could touch `find`.
CLOCK = r'''
command -v find >/dev/null 2>&1 || printf 'U\tfind\n'
_now=$(date +%s.%N 2>/dev/null)
case "$_now" in *[!0-9.]*|''|.*|*.) _now= ;; esac
if [ -z "$_now" ] || ! find / -maxdepth 0 -newerct @0 >/dev/null 2>&1; then
  _s=$(date +%s); _now=$_s
  while [ "$_now" = "$_s" ]; do sleep 0.05 2>/dev/null || sleep 1; _now=$(date +%s); done
fi
printf 'N\t%s\n' "$_now"
printf 'D\t%s\n' "$PWD"
printf 'V\t%s\n' "${HOME:-}"
'''
# The Python folders the verifier's Python runs from (`_py`), and the pyvenv.cfg of each virtualenv
# among them (`_cfg`): the interpreter's own, and the `lib/python3*` of each virtualenv the verifier
# activates or its uv commands use.
PYTHON_FOLDERS = r'''
_py=; _cfg=
for d in /usr/lib/python3* /usr/local/lib/python3* /root/.local/lib/python3*; do [ -d "$d" ] && _py="$_py $d"; done
# and those of each virtualenv the verifier activates (a `bin/activate` it sources: its Python
# runs what they hold); the paths have no blanks or glob characters (verifier_reads.sourced_scripts)
for _s in ${TBSCALE_SOURCED:-}; do
  case "$_s" in */bin/activate) _v=${_s%/bin/activate}
    case "$_v" in '~/'*) _v="$HOME/${_v#??}" ;; /*) ;; *) _v="${TBSCALE_WORKDIR:-$PWD}/$_v" ;; esac
    _cfg="$_cfg $_v/pyvenv.cfg"
    for d in "$_v"/lib/python3*; do [ -d "$d" ] && _py="$_py $d"; done ;;
  esac
done
# and those of each `.venv` the verifier's uv commands use (verifier_reads.project_envs), a `Y`
# line each: one with `?` in front only beside a pyproject.toml (uv takes it for a project's)
for _s in ${TBSCALE_PROJECT_ENVS:-}; do
  _v=${_s#\?}
  case "$_v" in /*) _e=$_v ;; *) _e="${TBSCALE_WORKDIR:-$PWD}/$_v" ;; esac
  [ "$_s" = "$_v" ] || [ -f "${_e%/.venv}/pyproject.toml" ] || continue
  [ -d "$_e" ] || continue
  printf 'Y\t%s\n' "$_v"
  _cfg="$_cfg $_e/pyvenv.cfg"
  for d in "$_e"/lib/python3*; do [ -d "$d" ] && _py="$_py $d"; done
done
'''
# `_newer PATH... [find's tests]`: the paths whose status changed after $TBSCALE_SINCE (defined only
# when it is set: after the sweep). Here for CHANGES, and in PROJECT for the blocks after it.
_NEWER = r'''
case "${TBSCALE_SINCE:-}" in
  '') ;;
  *.*) _newer() { find "$@" -newerct "@$TBSCALE_SINCE" 2>/dev/null; } ;;
  # A whole second: CLOCK found no -newerct or no %N (busybox); each candidate's status
  # change second, from stat.
  *) _newer() { find "$@" -exec stat -c '%Z %n' {} + 2>/dev/null |
                awk -v s="$TBSCALE_SINCE" '$1 >= s { sub(/^[0-9]+ /, ""); print }'; } ;;
esac
'''

# The paths whose status changed after $TBSCALE_SINCE, where they matter to the verifier (`C`
# lines), in three places listed apart: the verifier's own paths, the workdir's pytest files and
# the Python folders. At most 500 paths a place, and a `W` line naming a place that had more (an
# output cut for its size counts the same): runner/findings.py reports either as
# `listing_flooded`, so files written in bulk cannot push a planted one out of the listing unseen.
# The Python folders: what the interpreter runs at start-up (sitecustomize, usercustomize, `.pth`
# files, with an `I` line for a `.pth` with an import line, which site.py executes, and the modules
# those lines import), the packages
# pytest runs from, the standard library (and a zip of it, which sys.path puts before it), and
# the packages' entry points (an `E` line for one that declares a pytest plugin, which pytest
# loads unasked). Compiled modules are left out: the seal removes those the agent phase wrote
# (`BYTECODE`).
CHANGES = PYTHON_FOLDERS + _NEWER + r'''
if [ -n "${TBSCALE_SINCE:-}" ]; then
  # `_list PLACE COMMAND...`: the paths COMMAND prints, at most 500 (`C` lines; TBSCALE_LIST_MAX
  # when the guard lists a flooded place again), and a `W` line when it printed more.
  _max=${TBSCALE_LIST_MAX:-500}
  _list() {
    _g=$1; shift; _found=$("$@" | head -n $((_max + 1)))
    [ -n "$_found" ] || return 0
    printf '%s\n' "$_found" | head -n "$_max" | sed 's/^/C\t/'
    case "$_found" in *'
'*) [ "$(printf '%s\n' "$_found" | wc -l)" -le "$_max" ] || printf 'W\t%s\n' "$_g" ;; esac
  }
  # `_each PATTERN REGEX MARK`: a MARK line for each path of the last listing that matches the
  # shell PATTERN and holds a line matching REGEX. A carriage return ends a line too: Python reads
  # a .pth file with universal newlines, so `/tmp<CR>import ...` runs its second line.
  _each() { printf '%s\n' "$_found" | while IFS= read -r _f; do case "$_f" in $1) _uvs_own "$_f" || { tr '\r' '\n' < "$_f" \
            2>/dev/null | grep -qs -E "$2" && printf '%s\t%s\n' "$3" "$_f"; } ;; esac; done; }
  # uv's own `_virtualenv.pth` (uv 0.3 to 0.10 write one into every virtualenv they make): its one
  # line imports the `_virtualenv.py` beside it, which is uv's (findings.UV_VIRTUALENV_MODULES)
  _uvs_own() { case "$1" in */_virtualenv.pth) [ "$(cat -- "$1" 2>/dev/null)" = "import _virtualenv" ] &&
               sha256sum < "${1%.pth}.py" 2>/dev/null | grep -qs -E '^(@UV_VIRTUALENV@) ' ;; *) return 1 ;; esac; }
  # Every path listed here counts (the top of / only by the names that do): a flood of them
  # cannot hide one.
  _core() {
    _newer / -xdev -maxdepth 1 \( -name conftest.py -o -name pytest.ini -o -name .pytest.ini -o -name tox.ini \
      -o -name setup.cfg -o -name pyproject.toml -o -name sitecustomize.py -o -name usercustomize.py -o -name pytest.py \
      -o -name uv.toml \)
    _newer /logs/verifier "$TBSCALE_TESTS" /solution /etc/ld.so.preload -xdev
    # Where pip and uv read their settings (findings.INSTALLER_SETTINGS), and uv.toml in the workdir,
    # where the script runs (uv reads it from the working folder up).
    _newer @INSTALLER_SETTINGS@ ${TBSCALE_WORKDIR:+"${TBSCALE_WORKDIR%/}/uv.toml"} -xdev
  }
  _list core _core
  # With a slash after it, find walks the workdir where a link in its place points (the workdir made
  # a link to a folder with a pytest.py in it), and prints the paths under the workdir's name. A
  # pip.conf there is a virtualenv's (pip reads one in sys.prefix): a test script may install into it.
  [ -n "${TBSCALE_WORKDIR:-}" ] && [ "$TBSCALE_WORKDIR" != / ] && _list workdir _newer "${TBSCALE_WORKDIR%/}/" -xdev -maxdepth 4 \
    \( -name pytest.py -o -path '*/pytest/__init__.py' -o -path '*/_pytest/__init__.py' -o -name conftest.py \
    -o -name sitecustomize.py -o -name usercustomize.py -o -name pip.conf \)
  # their pyvenv.cfg: its `home` says where their Python takes its standard library from
  # (guard.py `_venv_homes` reads a changed one from outside)
  [ -n "$_cfg" ] && _list venvs _newer $_cfg -maxdepth 0
  if [ -n "$_py" ]; then
    # The modules the `.pth` files in the packages' folders import at every start (`import M`, `from M`
    # and `__import__('M')` in a line that starts with `import`: setuptools' `_distutils_hack`, uv's
    # `_virtualenv`, an editable install's finder), an `X` line each: their files are listed wherever
    # they are in these folders, as one earlier on sys.path is the one imported.
    _mods=$(for d in $_py; do for f in "$d"/*-packages/*.pth; do [ -f "$f" ] && { tr '\r' '\n' < "$f"; echo; }; done; done 2>/dev/null |
      grep -E '^import[ 	]' | grep -oE "(import|from)[ 	]+[A-Za-z_][A-Za-z0-9_., 	]*|__import__\\([\"'][A-Za-z_][A-Za-z0-9_]*" |
      sed -E "s/^(import|from)[ 	]+//; s/^__import__.//; s/^[\"']//" | tr ',' '\n' |
      sed -E 's/^[ 	]+//; s/[. 	].*$//' | grep -E '^[A-Za-z_][A-Za-z0-9_]*$' | sort -u | head -n 32)
    for m in $_mods; do printf 'X\t%s\n' "$m"; done
    _python() {
      # the modules' files, in the same walk
      set --
      for m in $_mods; do set -- "$@" -o -path "*-packages/$m.py" -o -path "*-packages/$m.*.so" \
        -o \( -path "*-packages/$m/*" ! -type d \); done
      _newer $_py /etc/python3* /usr/lib/python3*.zip /usr/local/lib/python3*.zip -xdev \( \( \
        -name sitecustomize.py -o -name usercustomize.py -o -name '*.pth' -o -name entry_points.txt \
        -o -path '*-packages/_pytest/*' -o -path '*-packages/pytest/*' -o -path '*-packages/pluggy/*' \
        -o -path '*-packages/iniconfig/*' -o -path '*-packages/packaging/*' -o -path '*-packages/exceptiongroup/*' \
        -o -path '*-packages/tomli/*' -o -name pytest.py -o -name py.py "$@" \
        -o \( ! -path '*-packages/*' \( -name '*.py' -o -name '*.so' -o -name '*.zip' -o -type l \) \) \) \
        ! -path '*/__pycache__/*' \)
      # A link outside the packages' folders (one of these folders, one right under it such as
      # dist-packages, anything in the standard library) is listed itself: find does not walk where
      # it points (`importlib/metadata` made a link to a copy with a hook in it passed unseen before
      # 2026-12-06, when only the first two were listed).
    }
    _list python _python
    case "$_found" in *.pth*) _each '*.pth' '^import[ 	]' I ;; esac
    # Anywhere in the file: importlib.metadata splits lines at \v, \f and more, and strips the brackets
    # of `[[pytest11]]`; every header it reads as pytest11 holds `[pytest11]`.
    case "$_found" in *entry_points.txt*) _each '*/entry_points.txt' '\[pytest11\]' E ;; esac
    # a `K` line for a `_virtualenv.py` that is uv's own (findings.UV_VIRTUALENV_MODULES)
    case "$_found" in *_virtualenv.py*) printf '%s\n' "$_found" | while IFS= read -r _f; do case "$_f" in
      */_virtualenv.py) sha256sum < "$_f" 2>/dev/null | grep -qs -E '^(@UV_VIRTUALENV@) ' && printf 'K\t%s\n' "$_f" ;;
    esac; done ;; esac
  fi
  # The Node packages the verifier's npm commands start (`TBSCALE_NPM`): npm's own (on Debian, the
  # system's modules npm takes its dependencies from: /usr/share/nodejs) and the package of each
  # program the scripts run (`TBSCALE_NODE_PROGRAMS`) that resolves into a node_modules folder (a
  # global jest, with the dependencies nested in it). A `GL` line names each; their files changed
  # since the baseline are listed (npm_project.npm_changed: `test_library_changed`).
  if [ -n "${TBSCALE_NPM+set}" ]; then
    _roots=
    _r=$(command -v npm 2>/dev/null) && _r=$(readlink -f -- "$_r" 2>/dev/null) && _roots=${_r%/bin/*}
    case "$_roots" in /usr/share/nodejs/*) _roots=/usr/share/nodejs ;; esac
    for _t in ${TBSCALE_NODE_PROGRAMS:-}; do
      _r=$(command -v "$_t" 2>/dev/null) && _r=$(readlink -f -- "$_r" 2>/dev/null) || continue
      case "$_r" in */node_modules/*) ;; *) continue ;; esac
      _rest=${_r##*/node_modules/}
      case "$_rest" in @*/*/*) _p=${_rest#*/}; _p=${_rest%%/*}/${_p%%/*} ;; */*) _p=${_rest%%/*} ;; *) continue ;; esac
      _roots="$_roots ${_r%/node_modules/*}/node_modules/$_p"
    done
    for _x in $_roots; do printf 'GL\t%s\n' "$_x"; done
    [ -z "$_roots" ] || _list node _newer $_roots -xdev ! -type d
  fi
  # The `_test.go` files under the folders the verifier's go commands run in that the agent phase
  # wrote and that declare `TestMain` or an `init` function (go_project.go_changed): a `GT` line each.
  if [ -n "${TBSCALE_GO+set}" ]; then
    printf '%s\n' "$TBSCALE_GO" | while IFS= read -r _p; do
      _at "$_p"
      _newer "${_p%/}/" -xdev -name '*_test.go' -type f | head -n 2000
    done | while IFS= read -r _f; do
      grep -qs -E '^func[[:space:]]+(TestMain|init)[[:space:]]*\(' "$_f" && printf 'GT\t%s\n' "$_f"
    done
  fi
fi
'''.replace("@UV_VIRTUALENV@", "|".join(UV_VIRTUALENV_MODULES)).replace("@INSTALLER_SETTINGS@", " ".join(
    [*INSTALLER_SETTINGS, *(f"{home}/{name}" for home in ("/root", "/home/*") for name in HOME_INSTALLER_SETTINGS)]))
# setuptools' files that every start of a Python runs where they are (`distutils-precedence.pth` and
# the `_distutils_hack` it imports), a `Q` line each (digest, path), at the baseline and after the
# agent phase: `python3 -m venv` on Python 3.11 and earlier copies setuptools into every virtualenv
# it makes, so such a file written byte for byte as the image had one at the baseline is the image's
# own code (findings.tampering_entries). Run after `CHANGES`, whose `PYTHON_FOLDERS` sets `_py`.
STARTUP_COPIES = r'''
_q=
for d in $_py; do
  for f in "$d"/*-packages/_distutils_hack/*.py "$d"/*-packages/distutils-precedence.pth; do [ -f "$f" ] && _q="$_q $f"; done
done
[ -z "$_q" ] || sha256sum -- $_q 2>/dev/null | while IFS= read -r _h; do printf 'Q\t%s\t%s\n' "${_h%% *}" "${_h#*  }"; done
'''
# Run by the seal after the sweep: every compiled module the agent phase wrote or changed in the
# Python folders is removed (a `B` line counts them), so the verifier's Python compiles each module
# from its source again. A `.pyc` whose header gives its source's time and size is loaded in place
# of the source, and a planted one cannot be told from one Python wrote itself when the agent ran
# it; the sources themselves are listed by `CHANGES`.
BYTECODE = r'''
if [ -n "${TBSCALE_SINCE:-}" ] && [ -n "${_py:-}" ]; then
  _pyc=$(_newer $_py -xdev -name '*.pyc')
  if [ -n "$_pyc" ]; then
    # in batches, by the shell (xargs would stop at a name with a quote in it, before the rest)
    printf '%s\n' "$_pyc" | { set --; while IFS= read -r _f; do set -- "$@" "$_f"
      [ $# -lt 200 ] || { rm -f -- "$@" 2>/dev/null; set --; }; done; [ $# -eq 0 ] || rm -f -- "$@" 2>/dev/null; }
    printf 'B\t%s\n' "$(printf '%s\n' "$_pyc" | wc -l)"
  fi
fi
'''
# Few programs per line: a program run costs far more in a busy container than a builtin. Each
# name is resolved by a builtin; the paths found are then resolved by one readlink (one a path
# where readlink takes a single operand, as busybox's does), hashed by one sha256sum and described
# by one stat (`R`, `H` and `O` lines, joined to the name's `P` line by path in parse_snapshot):
# with three programs a tool, this part of the exec cost about twice a bare exec. The names after a
# `--` are programs in the folders the verifier's scripts put first on PATH (verifier_reads
# `in_folders`): one starting `~/` is under the home, and a relative one under the workdir, where the
# verifier's script runs. A relative name before it (`./build.sh`) is the task's own, as it was.
SNAPSHOT = r'''
_paths=; _t=$(printf '\t'); _n=0; _in=
for name in "$@"; do
  case "$name" in
    --) _in=1; continue ;;
    '~/'*) name="$HOME/${name#??}" ;;
    /*) ;;
    */*) [ -z "$_in" ] || name="${TBSCALE_WORKDIR:-$PWD}/$name" ;;
  esac
  p=$(command -v -- "$name" 2>/dev/null) || { printf 'T\t%s\t-\n' "$name"; continue; }
  case "$p" in
    /*) printf 'P\t%s\t%s\n' "$name" "$p"; _paths="$_paths$p
"; _n=$((_n + 1)) ;;
    *) printf 'T\t%s\tbuiltin\n' "$name" ;;
  esac
done
if [ "$_n" -gt 0 ]; then
  _ifs=$IFS; IFS='
'; set -f
  _reals=$(readlink -f -- $_paths 2>/dev/null)
  if [ -z "$_reals" ] || [ "$(printf '%s\n' "$_reals" | wc -l)" != "$_n" ]; then
    _reals=$(for p in $_paths; do readlink -f -- "$p" 2>/dev/null || printf '%s\n' "$p"; done)
  fi
  set -- $_reals; _files=
  for p in $_paths; do
    # each file hashed once: python3, python and a virtualenv's python are often one interpreter
    printf 'R\t%s\t%s\n' "$p" "$1"
    case "
$_files" in *"
$1
"*) ;; *) [ -f "$1" ] && _files="$_files$1
" ;; esac; shift
  done
  if [ -n "$_files" ]; then
    sha256sum -- $_files 2>/dev/null | while IFS= read -r _h; do printf 'H\t%s\t%s\n' "${_h%% *}" "${_h#*  }"; done
    stat -c "O$_t%u:%g:%a:%s$_t%n" -- $_files 2>/dev/null
  fi
  set +f; IFS=$_ifs
fi
'''
# The scripts the verifier's shell sources (verifier_reads.sourced_scripts; `~/` is the home, a
# relative path is in the workdir) and the pyvenv.cfg of each virtualenv it makes
# (verifier_reads.verifier_venvs), one `F` line each: `-` absent, `other` not a plain file or over
# 64 kB, else the digest of its lines that run: its NUL bytes dropped (as bash drops them reading a
# script), each line's leading and trailing blanks dropped, and the blank lines and the lines that
# start with `#` left out. A line that starts with `#` is a comment in the shell wherever a script
# whose quotes close on each line has it, so the digest changes with anything the shell would run
# (findings.sourced_changed compares it with the baseline's and with the installers' own env script).
SOURCED = r'''
[ -n "${TBSCALE_SOURCED:-}" ] && printf '%s\n' "$TBSCALE_SOURCED" | while IFS= read -r _s; do
  [ -n "$_s" ] || continue
  case "$_s" in '~/'*) _f="$HOME/${_s#??}" ;; /*) _f=$_s ;; *) _f="${TBSCALE_WORKDIR:-$PWD}/$_s" ;; esac
  if [ ! -e "$_f" ] && [ ! -L "$_f" ]; then _d=-
  elif [ ! -f "$_f" ] || [ "$(($(wc -c < "$_f")))" -gt 65536 ]; then _d=other
  else _d=$(tr -d '\000' < "$_f" | awk '{ sub(/^[ \t]+/, ""); sub(/[ \t]+$/, "") } /^#/ || $0 == "" { next } { print }' | sha256sum)
    _d=${_d%% *}; fi
  printf 'F\t%s\t%s\n' "$_s" "$_d"
done
'''
# The workdir's Python project, where the verifier runs uv commands that read it (`uv run`, `uv
# sync`, `uv pip`: verifier_reads.reads_project): one `J` line for each of its pyproject.toml,
# uv.lock and the `.python-version(s)` that pins the Python of its `.venv`, with the file's digest, `-` absent, or `other` (a link, not a plain file, or over
# 4 MB). The workdir is the one `CHANGES` lists, else the folder the exec starts in (at the
# baseline, the image's WORKDIR).
# A changed one is read from outside and compared with the baseline's (findings.project_changed).
# `_fd KIND FILE` prints a KIND line with FILE's digest, `-` absent, or `other`, and `_at FOLDER`
# sets `_p` to a folder as the verifier's scripts name it (absolute, "" the workdir, or relative
# under it); both are defined here for this block and for npm's and the build tools' after it
# (runner/npm_project.NPM, runner/build_tools.py, runner/build_times.py).
PROJECT = _NEWER + r'''
_at() { case "$1" in /*) _p=$1 ;; '') _p=${TBSCALE_WORKDIR:-$PWD} ;; *) _p=${TBSCALE_WORKDIR:-$PWD}; _p=${_p%/}/$1 ;; esac; }
_fd() { if [ ! -e "$2" ] && [ ! -L "$2" ]; then _fdd=-
  elif [ -L "$2" ] || [ ! -f "$2" ] || [ "$(($(wc -c < "$2")))" -gt 4194304 ]; then _fdd=other
  else _fdd=$(sha256sum < "$2"); _fdd=${_fdd%% *}; fi
  printf '%s\t%s\t%s\n' "$1" "$2" "$_fdd"; }
# `_ft KIND FILE`: `_fd`'s line, and at the baseline (no process of the agent's has run yet) a
# `KIND FILE?text HEX` line with its bytes, up to 64 KiB, for a tool that reads them then from
# these lines rather than from outside (build_tools.BuildTool.read_at_baseline False: git's, apt's)
_ft() {
  _fd "$1" "$2"
  [ -z "${TBSCALE_SINCE:-}" ] && [ "$_fdd" != - ] && [ "$_fdd" != other ] && [ "$(($(wc -c < "$2")))" -le 65536 ] \
    && printf '%s\t%s?text\t%s\n' "$1" "$2" "$(od -An -v -tx1 < "$2" | tr -d ' \n')"
  return 0
}
if [ -n "${TBSCALE_PROJECT:-}" ]; then
  _w=${TBSCALE_WORKDIR:-$PWD}
  for _f in "${_w%/}/pyproject.toml" "${_w%/}/uv.lock" "${_w%/}/.python-version" "${_w%/}/.python-versions"; do
    _fd J "$_f"
  done
fi
'''
# The verifier's mount points: type, owner and mode, and a digest of the files under a folder.
MOUNTS = r'''
for m in /logs /logs/verifier "$TBSCALE_TESTS"; do
  if [ -L "$m" ]; then printf 'M\t%s\tlink\t%s\n' "$m" "$(readlink -- "$m")"
  elif [ -d "$m" ]; then
    d=$(cd "$m" && find . -xdev -type f ! -path '*/__pycache__/*' ! -path '*/.pytest_cache/*' -exec sha256sum {} + \
        2>/dev/null | LC_ALL=C sort | sha256sum)
    printf 'M\t%s\tdir\t%s\t%.16s\n' "$m" "$(stat -c '%u:%g:%a' -- "$m")" "$d"
  elif [ -e "$m" ]; then printf 'M\t%s\tfile\t%s\n' "$m" "$(stat -c '%u:%g:%a' -- "$m")"
  else printf 'M\t%s\tabsent\n' "$m"; fi
done
'''
# One line per process: pid, start time (clock ticks after boot), uid, parent pid, command line
# (its newlines and tabs made spaces: a command line cannot forge a line of this output, which
# may share an exec with the snapshot's).
# Shell builtins read /proc, so that a process costs one program run (tr), not four. The exec's
# own processes (this shell and its ancestors up to the engine's: `timeout` and the exec's
# wrapper) are left out.
PROCESSES = OWN_PROCESSES + r'''
for d in /proc/[0-9]*; do
  p=${d#/proc/}; case "$_own" in *" $p "*) continue;; esac
  read -r s 2>/dev/null < "$d/stat" || continue
  rest=${s##*) }; set -- $rest
  u=; while read -r k v _; do [ "$k" = Uid: ] && { u=$v; break; }; done 2>/dev/null < "$d/status"
  c=$(tr '\0\n\t\r' '    ' 2>/dev/null < "$d/cmdline")
  printf '%s\t%s\t%s\t%s\t%.200s\n' "$p" "${20}" "$u" "$2" "$c"
done
'''
# After the sweep: is the artifacts convention folder a plain folder with nothing in it (`empty`),
# absent (`absent`), or anything else (`other`)? With the process list of the same exec, it tells
# whether copying it out can be left out (runner/artifacts.py).
ARTIFACTS_PROBE = r'''
a=other; f=/logs/artifacts
if [ ! -e "$f" ] && [ ! -L "$f" ]; then a=absent
elif [ -d "$f" ] && [ ! -L "$f" ] && [ -z "$(find "$f" -mindepth 1 -maxdepth 1 2>&1 | head -n 1)" ]; then a=empty; fi
printf 'A\t%s\n' "$a"
'''
# A root command run first in the baseline's exec (`VerifierGuard.baseline`'s `setup`); when it
# fails, one `S` line with what it printed, its lines joined (the caller keeps the end). The
# standard folders follow the PATH it is given: the exec carries the verifier's env, whose PATH
# may leave them out.
SETUP = r'''_setup=$(PATH="${PATH:+$PATH:}/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"; { %s
} 2>&1) || printf 'S\t%%s\n' "$(printf %%s "$_setup" | tr '\n\t' '  ')"
'''
# The last line of each check (guard.VerifierGuard._exec's `to_the_end`): a check whose output lacks
# it was ended from inside before it finished, and what it did not print is no finding of nothing.
CHECK_END = "\nprintf 'END\\n'\n"


def ended(output: str) -> bool:
    """Whether a check's output has its last line (CHECK_END's)."""
    return "\nEND\n" in "\n" + output


KILL = r'''
for pair in "$@"; do
  p=${pair%:*}; want=${pair#*:}
  s=$(cat "/proc/$p/stat" 2>/dev/null) || continue
  rest=${s##*) }; set -- $rest
  [ "${20}" = "$want" ] && kill -9 "$p" 2>/dev/null && echo "$p"
done
'''




def _value_line(line: str) -> str | None:
    """The key of a snapshot line that carries a value the check reads: "N" (the clock), "D" (the
    folder an exec starts in), "V" (root's home), "B" (compiled modules removed), "T tool", "M mount",
    "F script", "J file", "G file", "GO file" (and each build tool's), "R path", "H file" and "O file" (a tool's real path, digest and status)."""
    parts = line.split("\t", 2)
    if parts[0] in ("N", "B", "D", "V") and len(parts) >= 2:
        return parts[0]
    if parts[0] in ("T", "M", "P", "F", "J", "G", *BUILD_TAGS) and len(parts) >= 2:
        return f"T {parts[1]}" if parts[0] == "P" else f"{parts[0]} {parts[1]}"
    if parts[0] in ("H", "O") and len(parts) == 3:
        return f"{parts[0]} {parts[2]}"
    if parts[0] == "R" and len(parts) == 3:
        return f"R {parts[1]}"
    return None


def parse_snapshot(output: str) -> GuardSnapshot:
    """A snapshot from the guard's exec output. A clock, tool or mount line given twice with
    different values is listed in `conflicts`: the exec printed each once, so something beside
    it wrote into its output (a kept agent process can; Container.exec's `hostile_peers`)."""
    tools: dict[str, ToolState | None] = {}
    mounts: dict[str, MountState] = {}
    changes: dict[str, int] = {}
    marked: dict[str, list[str]] = {"W": [], "I": [], "E": [], "K": [], "X": []}
    sourced: dict[str, str] = {}
    project: dict[str, str] = {}
    npm: dict[str, str] = {}
    npm_absent: list[str] = []
    npm_removed: list[str] = []
    uv_absent: list[str] = []
    uv_removed: list[str] = []
    node_roots: list[str] = []
    built: dict[str, dict[str, str]] = {}  # the build tools' files (runner/build_tools.py)
    test_mains: list[str] = []
    set_forward: list[str] = []
    touched = None
    envs: list[str] = []
    copies: dict[str, str] = {}
    now = removed = workdir = home = None
    _, conflicts = first_lines(output, _value_line)
    lines = [line.split("\t") for line in output.splitlines()]
    digests = {parts[2]: parts[1] for parts in lines if parts[0] == "H" and len(parts) == 3}
    statuses = {parts[2]: parts[1] for parts in lines if parts[0] == "O" and len(parts) == 3}
    reals = {parts[1]: parts[2] for parts in lines if parts[0] == "R" and len(parts) == 3}
    for parts in lines:
        if parts[0] == "P" and len(parts) == 3:  # a tool found on the PATH: the T line it stands for
            path, real = parts[2], reals.get(parts[2], parts[2])
            parts = ["T", parts[1], path, real, *([digests.get(real, ""), statuses.get(real, "")] if real in statuses
                                                  else ["not-a-file", "-"])]
        if parts[0] == "N" and len(parts) == 2:
            now = parts[1]
        elif parts[0] == "D" and len(parts) == 2 and workdir is None:
            workdir = parts[1]
        elif parts[0] == "V" and len(parts) == 2 and home is None:
            home = parts[1]
        elif parts[0] == "C" and len(parts) == 2:
            changes[parts[1]] = 0
        elif parts[0] == "F" and len(parts) == 3:
            sourced.setdefault(parts[1], parts[2])
        elif parts[0] == "J" and len(parts) == 3:
            project.setdefault(parts[1], parts[2])
        elif parts[0] == "G" and len(parts) == 3:
            npm.setdefault(parts[1], parts[2])
        elif parts[0] in BUILD_TAGS and len(parts) == 3:
            built.setdefault(BUILD_TAGS[parts[0]], {}).setdefault(parts[1], parts[2])
        elif parts[0] in ("Z", "L", "UZ", "UL", "GL", "GT", "TF") and len(parts) == 2:
            {"Z": npm_absent, "L": npm_removed, "UZ": uv_absent, "UL": uv_removed, "GL": node_roots, "GT": test_mains,
             "TF": set_forward}[parts[0]].append(parts[1])
        elif parts[0] == "TT" and len(parts) == 2 and parts[1].strip().isdigit():
            touched = int(parts[1])
        elif parts[0] == "Y" and len(parts) == 2:
            envs.append(parts[1])
        elif parts[0] == "Q" and len(parts) == 3:
            copies.setdefault(parts[2], parts[1])
        elif parts[0] in marked and len(parts) == 2:
            marked[parts[0]].append(parts[1])
        elif parts[0] == "B" and len(parts) == 2 and parts[1].strip().isdigit():
            removed = int(parts[1])
        elif parts[0] == "T" and len(parts) >= 3:
            if parts[2] in ("-", "builtin"):
                tools[parts[1]] = None if parts[2] == "-" else {"builtin": True}
            elif len(parts) >= 6:
                owner = parts[5].split(":")
                tools[parts[1]] = {"path": parts[2], "real": parts[3], "sha256": parts[4],
                                   "owner": ":".join(owner[:2]) if len(owner) >= 2 else None,
                                   "mode": owner[2] if len(owner) >= 3 else None,
                                   "size": int(owner[3]) if len(owner) >= 4 and owner[3].isdigit() else None}
        elif parts[0] == "M" and len(parts) >= 3:
            mount: MountState = {"type": parts[2]}
            if len(parts) >= 4:
                mount["stat" if parts[2] != "link" else "target"] = parts[3]  # type: ignore[literal-required]
            if len(parts) >= 5:
                mount["digest"] = parts[4]
            mounts[parts[1]] = mount
    snap: GuardSnapshot = {"tools": tools, "mounts": mounts, "now": now, "changes": changes,
                           "flooded": marked["W"], "executes": marked["I"], "plugins": marked["E"]}
    if marked["K"]:
        snap["uv_own"] = marked["K"]
    if marked["X"]:
        snap["pth_modules"] = sorted(set(marked["X"]))
    if removed is not None:
        snap["bytecode_removed"] = removed
    if sourced:
        snap["sourced"] = sourced
    if project:
        snap["project"] = project
    if envs:
        snap["project_envs"] = envs
    if npm:
        snap["npm"] = npm
    if npm_absent:
        snap["npm_absent"] = sorted(set(npm_absent))
    if npm_removed:
        snap["node_modules_removed"] = sorted(set(npm_removed))
    if uv_absent:
        snap["uv_absent"] = sorted(set(uv_absent))
    if uv_removed:
        snap["uv_removed"] = sorted(set(uv_removed))
    if node_roots:
        snap["node_roots"] = sorted(set(node_roots))
    for key, files in built.items():
        snap[key] = files  # type: ignore[literal-required]
    if test_mains:
        snap["go_test_mains"] = sorted(set(test_mains))
    if set_forward:
        snap["build_times_forward"] = sorted(set(set_forward))
    if touched is not None:
        snap["build_sources_touched"] = touched
    if copies:
        snap["startup_copies"] = copies
    if workdir:
        snap["workdir"] = workdir
    if home:
        snap["home"] = home
    if any(parts[0] == "U" for parts in lines):
        snap["no_find"] = True
    if conflicts:
        snap["conflicts"] = conflicts
    return snap


def parse_processes(output: str) -> list[ProcessInfo]:
    out: list[ProcessInfo] = []
    for line in output.splitlines():
        parts = line.split("\t")
        if len(parts) >= 5 and parts[0].isdigit():
            out.append({"pid": int(parts[0]), "start": parts[1], "uid": parts[2], "ppid": int(parts[3] or 0),
                        "cmd": parts[4].strip()})
    return out
