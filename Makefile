# The README's promises: `make run` and `make test` work on a fresh Debian 12
# machine. Every target first installs what is missing (scripts/bootstrap.sh:
# `make run` and `make install` the packages they build with, the others all).
BUILD ?= build
JOBS ?= $(shell nproc)
BUILD_TYPE ?= Release
# `make install` puts bin/delayq, the systemd unit and libdelayq (headers,
# libdelayq.a, CMake package, pkg-config file) under PREFIX.
PREFIX ?= /usr/local
# CMake's progress lines, not make's: no "Entering/Leaving directory" from
# the makes that `cmake --build` runs (they inherit MAKEFLAGS).
MAKEFLAGS += --no-print-directory
# A new build directory gets Ninja (quicker to start, one line when there is
# nothing to do); one that exists keeps the generator it was made with.
GENERATOR = $(if $(wildcard $(1)/CMakeCache.txt),,-G Ninja)

.PHONY: all bootstrap configure build test lint run bench format tidy install clean \
        bootstrap-run configure-run

all: build

bootstrap:
	@bash scripts/bootstrap.sh test

bootstrap-run:
	@bash scripts/bootstrap.sh run

# Everything on: the tests, the fuzz targets and the benchmarks. One
# translation unit per source (no unity build): quick to rebuild after an
# edit, and what clang-tidy's compile_commands.json must list.
configure: bootstrap
	@cmake -S . -B $(BUILD) $(call GENERATOR,$(BUILD)) -DCMAKE_BUILD_TYPE=$(BUILD_TYPE) \
	    -DDELAYQ_TESTS=ON -DDELAYQ_BENCH=ON -DDELAYQ_FUZZ=ON -DCMAKE_UNITY_BUILD=OFF >/dev/null

# Configures a new build directory (tests and benchmarks off, so only
# `bootstrap.sh run`'s packages are needed), one whose configure did not
# finish, or one of another BUILD_TYPE; an existing one keeps its options.
# Otherwise no configure: `cmake --build` re-runs CMake if a CMakeLists.txt changed.
# A new one is a unity build (CMake joins each library's sources into a few
# translation units, so shared headers are compiled once per group, not once
# per file): the first `make run` takes ~2.5 min instead of ~3.3 (docs/benchmarks.md,
# "The first hour"). `make test` compiles the sources that way too, in its
# second pass (build-asan), so a name two files of one library both define
# breaks the tests, not a newcomer's first `make run`.
configure-run: bootstrap-run
	@if [ ! -f $(BUILD)/CMakeCache.txt ]; then \
	  cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=$(BUILD_TYPE) \
	      -DDELAYQ_TESTS=OFF -DDELAYQ_BENCH=OFF -DCMAKE_UNITY_BUILD=ON >/dev/null; \
	elif [ ! -f $(BUILD)/build.ninja ] && [ ! -f $(BUILD)/Makefile ] || \
	    ! grep -qx 'CMAKE_BUILD_TYPE:STRING=$(BUILD_TYPE)' $(BUILD)/CMakeCache.txt; then \
	  cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=$(BUILD_TYPE) >/dev/null; \
	fi

build: configure
	@cmake --build $(BUILD) -j$(JOBS)

# Every test twice: on the release build, and on an ASan+UBSan build
# (build-asan/: everything but the benchmarks and the fuzz targets, so a new
# test binary is built there with no list to keep; the libraries and the
# server as a unity build, as `make run` builds them). The fuzz targets (clang,
# libFuzzer, their own ASan) run in the first pass only, for
# DELAYQ_FUZZ_SECONDS each; so do the clients' suites (clients/: Python, Node
# and Go against the release binary, black-box and the slowest to repeat) and
# the Redis failover test (a minute of Redis processes killed under load; the
# client code it runs is covered in both passes by redis_test's failover tests).
test: build
	ctest --test-dir $(BUILD) --output-on-failure -j$(JOBS)
	@cmake -S . -B $(BUILD)-asan $(call GENERATOR,$(BUILD)-asan) -DCMAKE_BUILD_TYPE=RelWithDebInfo \
	    -DDELAYQ_SANITIZE=ON -DDELAYQ_TESTS=ON -DDELAYQ_BENCH=OFF -DDELAYQ_FUZZ=OFF \
	    -DCMAKE_UNITY_BUILD=ON >/dev/null
	@cmake --build $(BUILD)-asan -j$(JOBS)
	ctest --test-dir $(BUILD)-asan --output-on-failure -j$(JOBS) -E '^(fuzz|clients)[.]|^integration[.]redis_failover$$'

# Starts the server in the foreground: HTTP/JSON on 127.0.0.1:7700, the Redis
# protocol on 127.0.0.1:7701, jobs kept in the embedded store in ./data
# (DELAYQ_STORE, DELAYQ_FSYNC, ... choose otherwise; see delayq serve --help).
# Builds only the `delayq` target and the libraries it links.
run: configure-run
	@[ -x $(BUILD)/bin/delayq ] || echo "make run: building the server: a few minutes the first time, seconds after that"
	@cmake --build $(BUILD) -j$(JOBS) --target delayq
	$(BUILD)/bin/delayq serve

# bin/delayq, deploy/delayq.service (as lib/systemd/system/delayq.service,
# ExecStart pointed at PREFIX/bin/delayq) and the library: include/delayq/,
# lib/libdelayq.a, lib/cmake/delayq/, lib/pkgconfig/delayq.pc (see
# cmake/library.cmake). Builds only what it installs. See README.md,
# "Operations".
install: configure-run
	@cmake --build $(BUILD) -j$(JOBS) --target delayq libdelayq
	cmake --install $(BUILD) --prefix $(PREFIX)

bench: build
	bash bench/engine.sh

# clang-format over every tracked C/C++ file (`make format` fixes what it
# finds) and clang-tidy on the files changed since LINT_BASE
# (default: since the branch left main; on main, the last commit). See
# scripts/lint.sh. Configures and generates the headers clang-tidy reads
# (version.h, the Redis store's script table), and builds nothing else.
lint: configure
	@cmake --build $(BUILD) --target delayq_generated >/dev/null
	@BUILD=$(BUILD) JOBS=$(JOBS) bash scripts/lint.sh

format:
	clang-format -i $$(git ls-files '*.h' '*.cc' '*.c')

tidy: configure
	clang-tidy -p $(BUILD) $$(git ls-files 'src/*.cc')

clean:
	rm -rf $(BUILD)
