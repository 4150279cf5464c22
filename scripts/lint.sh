#!/usr/bin/env bash
# `make lint` (run by .ci/run before `make test`): the checks a reviewer
# should not have to make by hand.
#
# 1. clang-format: every tracked C/C++ file against the repo's .clang-format
#    (`clang-format --dry-run --Werror`): a file that is not clean fails the
#    lint (`make format` fixes it). LINT_FORMAT=report only lists them.
#
# 2. clang-tidy (the repo's .clang-tidy, with $BUILD/compile_commands.json) on
#    the C++ sources under src/ that changed since LINT_BASE, committed or not.
#    A changed header is checked through the .cc of the same name beside it.
#    LINT_BASE defaults to where the branch left main, so on a branch it
#    means "everything this branch changes"; on main itself (a CI clone of
#    main) that is HEAD, and the default becomes HEAD~1: the files of the
#    last commit. (A clone without that parent, e.g. `git clone --depth 1`,
#    checks every file under src/: slower, never wrong.) LINT_BASE=<rev>
#    chooses; `make tidy` checks every file regardless.
#
# Exit status: 0 when clean, 1 when a check failed. Configures $BUILD
# (default build/) when it has no compile_commands.json yet; the Makefile's
# lint target generates the headers clang-tidy needs first.
set -euo pipefail
cd "$(dirname "$0")/.."

BUILD=${BUILD:-build}
LINT_FORMAT=${LINT_FORMAT:-enforce}
JOBS=${JOBS:-$(nproc)}
CLANG_FORMAT=${CLANG_FORMAT:-clang-format}
CLANG_TIDY=${CLANG_TIDY:-clang-tidy}
failed=0

# --- 1. clang-format ---------------------------------------------------------
mapfile -t sources < <(git ls-files '*.h' '*.cc' '*.cpp' '*.hpp' '*.c')
unformatted=()
for f in "${sources[@]}"; do
  if ! "$CLANG_FORMAT" --dry-run --Werror "$f" >/dev/null 2>&1; then unformatted+=("$f"); fi
done
if [ ${#unformatted[@]} -eq 0 ]; then
  echo "lint: clang-format: all ${#sources[@]} files clean"
else
  echo "lint: clang-format: ${#unformatted[@]} of ${#sources[@]} files not clean (make format fixes them):"
  printf '  %s\n' "${unformatted[@]}"
  if [ "$LINT_FORMAT" = enforce ]; then
    failed=1
  else
    echo "lint: clang-format: reported only (LINT_FORMAT=enforce makes this fail)"
  fi
fi

# --- 2. clang-tidy on changed files ------------------------------------------
if [ -z "${LINT_BASE:-}" ]; then
  for main in origin/main main; do
    if git rev-parse -q --verify "$main^{commit}" >/dev/null; then
      LINT_BASE=$(git merge-base HEAD "$main" || true)
      break
    fi
  done
  if [ -z "${LINT_BASE:-}" ] || [ "$LINT_BASE" = "$(git rev-parse HEAD)" ]; then
    LINT_BASE=$(git rev-parse -q --verify 'HEAD~1^{commit}' || true)
  fi
fi
if [ -n "${LINT_BASE:-}" ]; then
  mapfile -t changed < <(git diff --name-only --diff-filter=d "$LINT_BASE" -- 'src/*.cc' 'src/*.h')
  what="changed since $(git rev-parse --short "$LINT_BASE")"
else
  mapfile -t changed < <(git ls-files 'src/*.cc' 'src/*.h')
  what="every file under src/ (no base commit to compare with)"
fi

if [ ! -f "$BUILD/compile_commands.json" ]; then
  generator=()  # a new build directory gets Ninja, as the Makefile makes them
  [ -f "$BUILD/CMakeCache.txt" ] || generator=(-G Ninja)
  cmake -S . -B "$BUILD" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release >/dev/null
fi
units=()
for f in "${changed[@]}"; do
  unit=$f
  [[ $f == *.h ]] && unit=${f%.h}.cc
  [ -f "$unit" ] || continue
  grep -qF "\"file\": \"$PWD/$unit\"" "$BUILD/compile_commands.json" || continue
  [[ " ${units[*]} " == *" $unit "* ]] || units+=("$unit")
done
if [ ${#units[@]} -eq 0 ]; then
  echo "lint: clang-tidy: nothing to check (${what}: no sources under src/)"
else
  echo "lint: clang-tidy: ${#units[@]} files, ${what}: ${units[*]}"
  # One process per file, JOBS at a time; only the findings are shown (not
  # clang's count of what it suppressed in system headers).
  if ! printf '%s\n' "${units[@]}" |
      xargs -P "$JOBS" -n 1 "$CLANG_TIDY" -p "$BUILD" --quiet --warnings-as-errors='*' \
        2> >(grep -Ev '^[0-9]+ warnings? (and [0-9]+ errors? )?generated\.$' >&2); then
    echo "lint: clang-tidy: findings above"
    failed=1
  fi
fi

if [ $failed -ne 0 ]; then
  echo "lint: FAILED"
  exit 1
fi
echo "lint: ok"
