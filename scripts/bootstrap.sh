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
#         unit in deploy/, beanstalkd and wrk for the comparisons, strace).
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

if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi

echo "bootstrap: installing ${missing[*]}"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
