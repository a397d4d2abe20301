# SPDX-License-Identifier: MIT
# ibverbs-cpp developer commands (`make help`). CMake does the real work; see CMakePresets.json.
#
#   make demo      install deps, build (ci preset), run the examples (here or in the testbed)
#   make test      install deps, build (ci preset, -Werror), run every test suite (SUITES=unit,device: some)
#   make build     install deps, configure and build (PRESET=ci by default: dev, ci, release)
#   make test-long the long suites: fuzzing (10 min) and the 4-host soak (10 min), see scripts/run-tests
#   make fuzz      build the libFuzzer targets (clang-14) and fuzz each for FUZZ_SECONDS (default 300)
#   make lint      clang-format --dry-run -Werror and clang-tidy over include/ src/ tests/ examples/
#   make format    apply clang-format in place
#   make docs      the API reference (Doxygen, warnings fail) into build/docs/html
#   make install   build and install to PREFIX (default /usr/local)
#   make package   Debian packages in build/debs/ (apt-get install ./build/debs/*.deb; see README)
#   make clean     remove build/

SHELL := /bin/bash
.DEFAULT_GOAL := build

PRESET ?= ci
# make test SUITES=unit,device runs those suites only (scripts/run-tests --help lists them).
SUITES ?=
BUILD_DIR = build/$(PRESET)
PREFIX ?= /usr/local
JOBS ?= $(shell nproc 2>/dev/null || echo 2)
# cmake runs its own make: keep ours (flags, jobserver, "Entering directory") out of it.
CMAKE := env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL cmake

.PHONY: help deps configure build test test-long demo fuzz lint format docs install package clean

help:
	@sed -n '4,15p' Makefile | sed 's/^# \{0,1\}//'

deps:
	@scripts/install-deps

configure: deps
	$(CMAKE) --preset $(PRESET)

build: configure
	$(CMAKE) --build --preset $(PRESET) --parallel $(JOBS)

# Timed from its start, the build included: scripts/run-tests prints each suite's time and the
# whole, and warns when the whole is over the budget (tests/suites.json) for its kind of run:
# "fresh" when this preset's tree was not configured before, "rebuilt" otherwise.
test:
	@kind=$$([[ -f $(BUILD_DIR)/CMakeCache.txt ]] && echo rebuilt || echo fresh); \
	  start=$$(date +%s); \
	  $(MAKE) --no-print-directory build && \
	  IBV_MAKE_TEST_START=$$start IBV_MAKE_TEST_KIND=$$kind \
	    scripts/run-tests --suites "$(SUITES)" $(BUILD_DIR)

test-long: build
	scripts/run-tests --long $(BUILD_DIR)

demo: build
	scripts/demo $(BUILD_DIR)

fuzz: deps
	scripts/fuzz $(FUZZ_SECONDS)

# clang-tidy reads build/ci/compile_commands.json, whatever PRESET is.
lint: deps
	$(CMAKE) --preset ci >/dev/null
	scripts/lint build/ci

format: deps
	scripts/lint --fix

# No build needed: doxygen reads the headers and pages (docs/Doxyfile).
docs: deps
	scripts/docs

install: build
	$(CMAKE) --install $(BUILD_DIR) --prefix $(PREFIX)

# Its own tree, build/package (the package preset: Release, /usr, library and ibvcpp only).
package: deps
	scripts/package build/debs

clean:
	rm -rf build
