#!/usr/bin/env bash
# The engine figures of docs/benchmarks.md (SPEC §12: engine alone, memory per
# pending job, add rate with N pending). Usage: bench/engine.sh [JOBS]
# Default JOBS = 10000000 (needs ~2 GB of memory and ~30 s).
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=${1:-10000000}
bin=build/bin/delayq-bench
[ -x "$bin" ] || { echo "build first: make build" >&2; exit 1; }
echo "# $(date -u +%FT%TZ) $(nproc) cpu, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(free -g | awk '/Mem:/{print $2}') GiB" >&2
"$bin" engine --jobs "$jobs" --body 100
"$bin" engine --jobs "$jobs" --body 100 --id-bytes 24
