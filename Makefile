# ssdtwin developer commands. `make help` lists them; `make test` is what CI runs.
.DEFAULT_GOAL := help
SHELL := bash
PYTHON ?= python3
PIP ?= $(PYTHON) -m pip
# Always build the extension with the release profile ([profile.release] in Cargo.toml):
# a debug build of the core is ~20x slower and would make the physics tests crawl.
export MATURIN_PEP517_ARGS ?= --profile release

.PHONY: help install lint test test-build test-rust test-python test-bytecode typecheck demo validate bench sim physics-scale calibrate-roundtrip ab-run ab-diff fio-conformance doublewrite mariadb shaping shaping-full stack-serve

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk 'BEGIN {FS = ":.*## "} {printf "  make %-12s %s\n", $$1, $$2}'

# install ends by printing the fast-forward speed of what it built (measured with the
# release profile on this machine class, 2 cores: 10-18 M random 4 KiB writes/s).
install: ## pip install -e '.[test]': the package, its test tools, the extension built in release mode (~2 min)
	$(PIP) install -e '.[test]'
	@if command -v pyenv >/dev/null; then pyenv rehash; fi  # put the new `ssdtwin` script on PATH
	@$(PYTHON) -c "import ssdtwin, ssdtwin._core as c; print('ssdtwin', c.__version__, 'from', c.__file__)"
	@$(PYTHON) -c "import time; from ssdtwin import Drive; d = Drive.in_memory('kioxia-cm6-r-3.84t', scale=454); \
	t = time.perf_counter(); r = d.precondition(1, 'rand', 4096, loops=1.0, seed=1); \
	print(f'fast-forward check: {r.ios / (time.perf_counter() - t) / 1e6:.1f} M random 4 KiB writes/s')"

lint: ## rustfmt, clippy (-D warnings, [workspace.lints]) and ruff: the style CI enforces
	env -u MAKEFLAGS -u MFLAGS cargo fmt --all --check
	env -u MAKEFLAGS -u MFLAGS cargo clippy --workspace --all-targets --release -- -D warnings
	$(PYTHON) -m ruff check python tests
	$(PYTHON) -m ruff format --check python tests

# Every test. The Rust tests' run leaves a core idle for much of its ~25 s (one test binary
# after another, many tests waiting on sockets and timers), and stubtest and mypy need one
# core for ~12 s: they run beside it, after the test build (`--output-sync` prints each
# target's output whole when it ends). Lint beside the test build was slower (130 s against
# 26 + 97 one after the other): docs/performance.md, "CI time". The bytecode pytest's workers
# would each compile (test-bytecode) is written there too.
test: lint test-build ## every test: lint, the Rust test build, cargo test beside stubtest and mypy, then pytest
	$(MAKE) --no-print-directory -j2 --output-sync=target test-rust typecheck test-bytecode
	$(MAKE) --no-print-directory test-python

test-build: ## build the Rust tests of the workspace's default members (the test profile) without running them
	env -u MAKEFLAGS -u MFLAGS cargo test --tests --no-run

# `--tests` builds and runs the unit and integration tests but not the examples (`cargo test`
# alone also links every example, ~1 min of CI's 2 cores; clippy --all-targets in `make lint`
# already compiles them), then `--doc` runs the doc tests.
# Every cargo here runs without make's MAKEFLAGS and MFLAGS: run by `make -j2` (`make test`),
# cargo and rustdoc would find a jobserver there whose descriptors make does not pass them, and
# warn (on every doc test); each cargo keeps its own jobserver, one job per core.
test-rust: ## cargo test of the workspace's default members (core, nbd, serve, sim: its CI seed set) with the workspace's test profile
	env -u MAKEFLAGS -u MFLAGS cargo test --tests
	env -u MAKEFLAGS -u MFLAGS cargo test --doc

SEEDS ?= 1000
CASES ?= 8
STEPS ?= 64
sim: ## the deterministic simulation over seeds 1..SEEDS (default 1000; CASES, STEPS), docs/simulation.md
	SSDTWIN_SIM_SEEDS=$(SEEDS) SSDTWIN_SIM_CASES=$(CASES) SSDTWIN_SIM_STEPS=$(STEPS) cargo test -p ssdtwin-sim --release --test sim -- --nocapture

# pytest-xdist spreads the tests over the cores (CI has 2): the suite is CPU-bound (each test
# drives the Rust core), and every test keeps its own tmp_path and free ports, so they run apart.
# `--dist loadfile`: a file's tests on one worker, so a module- or session-scoped fixture of a
# test file (`validate --quick`, the reproduce tables, MariaDB's server) is computed once, not
# once per worker. (`--dist loadgroup` with xdist_group marks does nothing under pytest 9 with
# xdist 3.8: xdist renames `item._nodeid`, which pytest 9 no longer reads.)
# One worker more than the cores: the suite also waits (real-time NBD serving, real fio,
# MariaDB and chromium in their own processes), and a third worker on 2 cores fills those
# waits: a quiet 2-core machine ran the suite in 287.6 s with 2 workers, 265.7 s with 3 and
# 264.9 s with 4 (docs/performance.md, "CI time").
PYTEST_WORKERS ?= $(shell echo $$(( $$(nproc) + 1 )))
# compileall first: 563 of the tests start the `ssdtwin` CLI, many of them several times, and where
# PYTHONDONTWRITEBYTECODE is set (this machine's environment sets it) no start writes the
# package's bytecode, so each one compiled every module again (`ssdtwin --version`: 0.47 s
# of CPU instead of 0.28 s; a pytest run of tests/fio/test_fio_bad_input.py, 148 s -> 75 s).
# Each pytest worker collects the whole suite, and collecting is mostly pytest rewriting the test
# modules' asserts (~4 of a collection's ~6.7 s of CPU); where PYTHONDONTWRITEBYTECODE is set,
# or when three workers start at once on a clean clone, none reuses another's rewrite. One
# collection with bytecode allowed writes the rewritten modules (tests/__pycache__/*-pytest-*.pyc)
# and the package's bytecode, which every later collection reads (~2.6 s of CPU each).
test-bytecode: ## bytecode of the package and of pytest's rewritten test modules, for pytest's workers to read
	$(PYTHON) -m compileall -q python/ssdtwin
	@echo '$(PYTHON) -m pytest --collect-only -q -p no:cacheprovider (bytecode allowed)'
	@out=$$(env -u PYTHONDONTWRITEBYTECODE $(PYTHON) -m pytest --collect-only -q -p no:cacheprovider 2>&1) || { echo "$$out" | tail -n 40; exit 1; }

test-python: ## pytest on PYTEST_WORKERS processes (default: one more than the cores): CLI, bad input, crash safety, physics, API, fio (needs `make install`)
	$(PYTHON) -m compileall -q python/ssdtwin
	$(PYTHON) -m pytest -ra -n $(PYTEST_WORKERS) --dist loadfile --no-loadscope-reorder --durations=25

typecheck: ## mypy.stubtest of ssdtwin._core against the build, and mypy of the package
	$(PYTHON) -m mypy.stubtest ssdtwin._core
	$(PYTHON) -m mypy --strict python/ssdtwin --ignore-missing-imports

physics-scale: ## the scale-agreement physics test at the issue's own pair, 1/64 against 1/16 (CI runs 1/128 against 1/32; ~3 min)
	SSDTWIN_SCALE_PAIR=issue $(PYTHON) -m pytest -q -s tests/test_physics.py -k scale_agreement

calibrate-roundtrip: ## the calibration round trip on the CM6-R at 1/64 (hidden parameters fitted back from its preset; CI runs a small fixture drive; ~3 min)
	SSDTWIN_CALIBRATE_ROUNDTRIP=cm6 $(PYTHON) -m pytest -q -s tests/test_calibrate.py -k round_trip

AB_OUT ?= ab-out
ab-run: ## the bit-identity suite (benchmarks/ab: fio jobs, tenants, reproduce pblaze5) with this build into AB_OUT (~3 min); SSDTWIN=path picks another build
	benchmarks/ab/run_suite.sh $(AB_OUT)

ab-diff: ## compare two ab-run folders, wall-clock fields removed: make ab-diff A=old B=new (exit 1 if any differs)
	benchmarks/ab/jdiff.sh $(A) $(B)

fio-conformance: ## the tests/fio/conformance jobs through real fio (null engine) and ssdtwin: totals and iologs side by side
	$(PYTHON) tests/fio/fio_conformance.py tests/fio/conformance

demo: ## the KIOXIA CM6 namespace-size experiment at 1/64 scale (~1 min)
	ssdtwin demo

validate: ## every published figure against the twin at 1/64, written to docs/validation.md (~4 min of CPU)
	ssdtwin validate --write-doc docs/validation.md

shaping: ## the write-shaping study (docs/host.md): a PMem tier in front of a 1/256 P5316, figures 1-3 and the sizing plot (~7 min)
	ssdtwin reproduce shaping --plot shaping-sizing.png

shaping-full: ## the same at 1/64 with 32 GiB per point (hours)
	ssdtwin reproduce shaping --full --plot shaping-sizing-full.png

STACK_SERVE_IO ?= 256m
stack-serve: ## real fio over NBD against a served stack vs ssdtwin fio (docs/host.md "Serving a stack"), STACK_SERVE_IO per job of 4 (default 256m: 1 GiB, ~2 min; CI runs 16m)
	SSDTWIN_STACK_SERVE_IO=$(STACK_SERVE_IO) $(PYTHON) -m pytest tests/test_stack_serve.py -k agrees -s -q -p no:cacheprovider

bench: ## FTL fast-forward speed at 1/16 scale (docs/performance.md has full-scale figures)
	ssdtwin bench ftl --scale 1/16

doublewrite: ## the PBlaze5 talk's doublewrite study, modelled: InnoDB jobs on a 1/64 PBlaze5, data+doublewrite on one namespace vs doublewrite on DRAM, 64 and 4 threads, a NAND control, over a trimmed and a written namespace (~8-12 min)
	ssdtwin reproduce pblaze5 --part doublewrite --placements shared,dram,nand --threads 4,64 --drive-state trimmed,written

MARIADB_DIR ?= mariadb-study
MARIADB_RUN_S ?= 600
mariadb: ## the same study with a real MariaDB + sysbench on served namespaces (needs mariadb-server sysbench nbdkit libnbd-bin fuse2fs; ~35 min); images left in MARIADB_DIR, each checked
	ssdtwin reproduce pblaze5 --part mariadb --placements shared,nand,dram --run-s $(MARIADB_RUN_S) --dir $(MARIADB_DIR)
	for d in $(MARIADB_DIR)/*/img; do ssdtwin check $$d || exit 1; done
