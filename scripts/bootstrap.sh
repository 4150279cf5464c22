#!/usr/bin/env bash
# Installs the Debian 12 packages delayq needs. Usage: bootstrap.sh [run|test]
#
#   run   what `make run` and `make install` build with, and the README's tour
#         uses: the compiler, CMake and Ninja, the libraries the `delayq`
#         binary links (Abseil, xxHash, CLI11, Boost.Beast, simdjson, hiredis,
#         jemalloc), and curl, redis-cli and jq.
#   test  (the default) all of `run`, plus what the tests, the benchmarks and
#         `make lint` need: GoogleTest, Google Benchmark, clang for the fuzz
#         targets, clang-format and clang-tidy, and the programs the tests run
#         against the binary (redis-server, redis-py, systemd-analyze for the
#         unit in deploy/, beanstalkd and wrk for the comparisons, strace),
#         and the clients' toolchains (clients/): Go, pytest, venv and pip
#         for the Python client's install test, node and npm (Debian's, only
#         when no node is installed), then `npm ci` in clients/node when
#         its node_modules does not match its package-lock.json.
#
# Skips apt entirely when every package is already installed (one dpkg-query
# call), so it is cheap to call from every `make` target. Safe to re-run.
set -euo pipefail

RUN_PACKAGES=(
  build-essential cmake pkg-config ninja-build
  libabsl-dev libxxhash-dev libcli11-dev
  libboost-dev libsimdjson-dev libhiredis-dev libjemalloc-dev
  libcurl4-openssl-dev libssl-dev
  curl redis-tools jq tzdata
)
TEST_PACKAGES=(
  libgtest-dev libbenchmark-dev
  clang libclang-rt-14-dev clang-format clang-tidy
  python3-redis redis-server systemd openssl
  beanstalkd wrk strace
  golang-go python3-pytest python3-venv python3-pip python3-setuptools
)

case "${1:-test}" in
  run) packages=("${RUN_PACKAGES[@]}") ;;
  test) packages=("${RUN_PACKAGES[@]}" "${TEST_PACKAGES[@]}") ;;
  *)
    echo "bootstrap.sh: unknown set '$1' (type 'bootstrap.sh run' or 'bootstrap.sh test')" >&2
    exit 2
    ;;
esac

# One dpkg-query for the whole list: it prints a line for each package it
# knows (and complains on stderr about the others); "ii" is installed.
declare -A installed=()
while read -r status name; do
  [ "$status" = ii ] && installed[$name]=1
done < <(dpkg-query -W -f='${db:Status-Abbrev} ${Package}\n' "${packages[@]}" 2>/dev/null || true)
missing=()
for p in "${packages[@]}"; do
  [ -n "${installed[$p]:-}" ] || missing+=("$p")
done

# Node for the Node client's tests: any node 18+ on PATH will do (this machine
# may have one from elsewhere, with its own npm); Debian's otherwise.
if [ "${1:-test}" = test ]; then
  command -v node >/dev/null || missing+=(nodejs)
  command -v npm >/dev/null || missing+=(npm)
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
if [ ${#missing[@]} -gt 0 ]; then
  echo "bootstrap: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# The Node client's packages, exactly as its lock file pins them (npm's
# registry): once, and again whenever package-lock.json changes (npm ci
# leaves a copy of the lock in node_modules/.package-lock.json).
if [ "${1:-test}" = test ]; then
  node_dir="$(dirname "$0")/../clients/node"
  if [ -f "$node_dir/package-lock.json" ] &&
    [ ! "$node_dir/node_modules/.package-lock.json" -nt "$node_dir/package-lock.json" ]; then
    echo "bootstrap: npm ci in clients/node"
    (cd "$node_dir" && npm ci --no-audit --no-fund --loglevel=error)
  fi
fi
