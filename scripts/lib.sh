# Shared by scripts/run, scripts/test and scripts/bench: install what is missing, build.
# Sourced, not run.

# Debian packages the build needs, then those the tests and tools add.
ENTITYD_BUILD_PKGS="build-essential meson ninja-build pkg-config python3 libuv1-dev node-llhttp
  libhiredis-dev libsecp256k1-dev nettle-dev libjansson-dev"
ENTITYD_RUN_PKGS="redis-server"
ENTITYD_TEST_PKGS="redis-server redis-tools libcmocka-dev clang-format prometheus"

# ensure_packages PKG...: apt-get only when something is missing.
ensure_packages() {
  local missing=()
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  echo "installing: ${missing[*]}" >&2
  local sudo=""
  [ "$(id -u)" -ne 0 ] && sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
}

# build_dir DIR [meson setup options...]: configure once, then build.
build_dir() {
  local dir=$1; shift
  if [ ! -f "$dir/build.ninja" ]; then
    meson setup "$dir" "$@" >/dev/null
  fi
  ninja -C "$dir" >&2
}

# free_port: a TCP port nothing listens on now (loopback).
free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'
}
