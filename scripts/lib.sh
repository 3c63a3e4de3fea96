# Shared by scripts/run, scripts/test and scripts/bench: install what is missing, build.
# Sourced, not run.

# Debian packages the build needs, then those the tests and tools add.
ENTITYD_BUILD_PKGS="build-essential meson ninja-build pkg-config python3 libuv1-dev node-llhttp
  libhiredis-dev libsecp256k1-dev nettle-dev libjansson-dev libcurl4-openssl-dev"
ENTITYD_RUN_PKGS="redis-server"
ENTITYD_TEST_PKGS="redis-server redis-tools libcmocka-dev clang-format prometheus chromium"

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

# ensure_node_tools: the Node packages the integration tests run (tests/node: the EAS SDK,
# siwe, ganache, Safe's contract artifacts, ethers), installed with npm ci only when
# tests/node/node_modules is missing or the lock file changed. Node.js itself comes from
# Debian's packages when missing.
ensure_node_tools() {
  local dir=tests/node
  if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
    ensure_packages nodejs npm || return 1
  fi
  local stamp=$dir/node_modules/.entityd-lock.sha256
  local sum
  sum=$(sha256sum "$dir/package-lock.json" "$dir/package.json" | sha256sum | cut -d' ' -f1)
  if [ ! -d "$dir/node_modules" ] || [ "$(cat "$stamp" 2>/dev/null || true)" != "$sum" ]; then
    echo "installing the tests' Node packages (npm ci in $dir)" >&2
    npm ci --prefix "$dir" --legacy-peer-deps --no-audit --no-fund --ignore-scripts \
      --loglevel=error >&2 || return 1
    echo "$sum" >"$stamp"
  fi
}
