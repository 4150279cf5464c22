#!/usr/bin/env bash
# Installs the Debian 12 packages delayq needs to build and test: the compiler
# and CMake, the libraries it links (Abseil, xxHash, CLI11, Boost.Beast,
# simdjson, hiredis, jemalloc), the test and benchmark frameworks (GoogleTest,
# Google Benchmark), clang for the fuzz targets and `make lint`, and the
# programs the tests and benchmarks run against the binary (redis-server and
# redis-cli, redis-py, curl, systemd-analyze for the unit in deploy/, beanstalkd
# and wrk for the comparisons, strace).
# Skips apt entirely when every package is already installed, so it is cheap to
# call from every `make` target. Safe to re-run.
set -euo pipefail

PACKAGES=(
  build-essential cmake pkg-config
  libabsl-dev libxxhash-dev
  libcli11-dev
  libboost-dev libsimdjson-dev libhiredis-dev
  libgtest-dev libbenchmark-dev
  clang libclang-rt-14-dev clang-format clang-tidy
  python3-redis redis-tools redis-server curl systemd
  beanstalkd wrk strace
  libjemalloc-dev
)

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
    missing+=("$p")
  fi
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
