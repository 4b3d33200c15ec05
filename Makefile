# tracepack: every task is a target; `make help` lists them.
# Each target sets up what it needs (a virtual environment in .venv) on a fresh machine.

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
RUN_STAMP := $(VENV)/.installed-run
TORCH_STAMP := $(VENV)/.installed-torch
# torch is pinned exactly: a looser pin pulls the newest build with gigabytes of CUDA packages.
TORCH_PIN := torch==2.13.0

.DEFAULT_GOAL := help
.PHONY: help venv venv-torch venv-ray test-torch test-torch-all torch-suite real-programs demo smoke wheels wheels-config test test-fast conformance conformance-vectors generate check fix bench cpp cpp-asan cpp-deps conformance-cpp ci-cpp samples executorch-samples real-models release-samples dictionary dictionary-check dictionary-corpus-check executorch-dictionary executorch-dictionary-check fuzz fuzz-big fuzz-cov fuzz-smoke fuzz-corpus campaign release-schema schema-fuzz clean

help: ## List the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-12s %s\n", $$1, $$2}'

# The columnar codec's C loops are built by the editable install: a changed C file reinstalls.
CSOURCES := src/tracepack/codecs/_cforms.c

$(STAMP): pyproject.toml setup.py $(CSOURCES)
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -e '.[dev]'
	@touch $@

venv: $(STAMP) ## Create .venv and install tracepack with its test and dev tools

# `make demo` needs tracepack and its runtime dependencies only, not the test and dev tools.
$(RUN_STAMP): pyproject.toml setup.py $(CSOURCES)
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -e .
	@touch $@

$(TORCH_STAMP): $(STAMP)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check '$(TORCH_PIN)'
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -e '.[dev,torch]'
	@touch $@

venv-torch: $(TORCH_STAMP) ## Also install torch 2.13.0 (CPU) for the torch bridge and its tests

# Ray (the `ray` extra) for the zoo job's Ray engine and its tests in Ray's local mode.
RAY_STAMP := $(VENV)/.installed-ray
$(RAY_STAMP): $(STAMP)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -e '.[dev,ray]'
	@touch $@

venv-ray: $(RAY_STAMP) ## Also install Ray (the ray extra) for `export --engine ray` and its tests

# Not part of test/CI (CI runs torch 2.13 only): another torch release is a large (CUDA) download, in its
# own environment. The torch tests (marked `torch`) run on the corpus that release exports itself, with
# what it lacks skipped by name and release range (docs/torch-releases.md).
TORCH ?= 2.15.0
TORCH_VENV := .venv-torch-$(TORCH)
TORCH_TESTS ?= -m torch tests
test-torch: ## Run the torch tests against another torch release: make test-torch TORCH=2.6.0 (own venv; not CI)
	@test -x $(TORCH_VENV)/bin/python || $(PYTHON) -m venv $(TORCH_VENV)
	$(TORCH_VENV)/bin/python -m pip install --quiet --disable-pip-version-check 'torch==$(TORCH)'
	$(TORCH_VENV)/bin/python -m pip install --quiet --disable-pip-version-check -e '.[test,torch]'
	HYPOTHESIS_PROFILE=fast $(TORCH_VENV)/bin/python -m pytest -q -p no:cacheprovider -rs $(TORCH_TESTS)

# The releases docs/torch-releases.md records; each venv is deleted after its run passes (several GB
# each) unless KEEP_TORCH_VENVS=1.
TORCH_RELEASES ?= 2.6.0 2.8.0 2.10.0 2.12.0 2.13.0 2.15.0
test-torch-all: ## make test-torch for every release of TORCH_RELEASES in turn (GBs of downloads; not CI)
	@for v in $(TORCH_RELEASES); do \
	  $(MAKE) --no-print-directory test-torch TORCH=$$v || exit 1; \
	  test "$(KEEP_TORCH_VENVS)" = 1 || rm -rf .venv-torch-$$v; \
	done

# PyTorch's own export tests (never copied here) with tracepack in the loop, against the same tests
# without it (scripts/torch/dropin_suite.py; docs/torch-load.md has the figures).
#   make torch-suite TORCH_EXPORT_TESTS=/path/to/pytorch/test/export   (a source tree of torch 2.13.0)
# TORCH_EXPORT_FILES picks the files (default: test_serialize.py test_serdes.py test_export.py, the last sampled).
TORCH_EXPORT_TESTS ?=
TORCH_EXPORT_FILES ?=
torch-suite: $(TORCH_STAMP) ## PyTorch's export tests with tracepack pack+load in the loop: TORCH_EXPORT_TESTS=.../test/export
	@test -n "$(TORCH_EXPORT_TESTS)" || { echo "make torch-suite: set TORCH_EXPORT_TESTS to test/export of a PyTorch $(TORCH_PIN) source tree" >&2; exit 2; }
	$(BIN)/python -m pip install --quiet --disable-pip-version-check expecttest   # torch.testing._internal imports it
	$(BIN)/python scripts/torch/dropin_suite.py "$(TORCH_EXPORT_TESTS)" $(TORCH_EXPORT_FILES)

# The load benchmark's real third-party programs (.bench/real-pt2, outside git), exported with a Python
# that has torch, torchvision, timm and transformers: make real-programs REAL_PYTHON=/path/to/python
REAL_PYTHON ?=
real-programs: ## Export the load benchmark's real programs into .bench/real-pt2: REAL_PYTHON=python-with-transformers
	@test -n "$(REAL_PYTHON)" || { echo "make real-programs: set REAL_PYTHON to a python with torch 2.12-2.15, torchvision, timm and transformers" >&2; exit 2; }
	"$(REAL_PYTHON)" -W ignore scripts/torch/real_programs.py .bench/real-pt2

demo: $(RUN_STAMP) ## Run the main job on the bundled sample: size and speed against the legacy form
	$(BIN)/tracepack demo

smoke: $(STAMP) ## Build sdist + wheel, install the wheel into a clean venv, smoke-test CLI, API, mypy --strict
	$(BIN)/python scripts/smoke_wheel.py

WHEELS_STAMP := $(VENV)/.installed-wheels
$(WHEELS_STAMP): $(STAMP)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -e '.[dev,wheels]'
	@touch $@

# The other platforms' wheels: cibuildwheel on each OS's CI runner ([tool.cibuildwheel] in pyproject.toml).
wheels: $(WHEELS_STAMP) ## Build this machine's platform wheel (manylinux) and the pure-Python wheel into dist/wheels, install and smoke-test each, compare their bytes
	$(BIN)/python scripts/smoke_wheel.py --wheels

wheels-config: $(WHEELS_STAMP) ## Check that [tool.cibuildwheel] builds the release set (cibuildwheel lists it; no build; CI)
	$(BIN)/python scripts/smoke_wheel.py --cibuildwheel-config

test: $(STAMP) venv-torch venv-ray cpp cpp-asan ## Run the whole test suite (thorough hypothesis profile on CI), the C++ reader's included
	$(BIN)/python -m pytest

test-fast: $(STAMP) ## Run the tests with the fast hypothesis profile
	HYPOTHESIS_PROFILE=fast $(BIN)/python -m pytest -q

conformance: $(STAMP) ## Run the conformance suite (conformance/, spec/12-conformance.md) against the Python CLI
	$(BIN)/python -m conformance.run --impl "$(BIN)/tracepack" -j 2 -q

conformance-vectors: $(STAMP) ## Write conformance/ again (vectors, expected outputs, manifest) after a format change
	$(BIN)/python -m conformance.generate

generate: $(STAMP) ## Regenerate generated/ from schema/
	$(BIN)/python -m tracepack.codegen generate

check: $(STAMP) ## Fail if generated/ is stale, code is not ruff-clean or not mypy-clean
	$(BIN)/python -m tracepack.codegen check
	$(BIN)/python -m tracepack.schema_check --all schema
	$(BIN)/python -m conformance.generate --check
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

fix: $(STAMP) ## Regenerate, then let ruff fix and format what it can
	$(BIN)/python -m tracepack.codegen generate
	$(BIN)/ruff check --fix .
	$(BIN)/ruff format .

# The C++ reader (cpp/ on generated/cpp/): g++, libzstd and zlib, installed with apt-get when missing (as root);
# and flatc with the FlatBuffers headers, which tests/cpp/test_verifier.py runs FlatBuffers' own Verifier with.
cpp-deps:
	@if ! command -v $(CXX) >/dev/null 2>&1 || ! command -v flatc >/dev/null 2>&1 || \
		! printf '#include <zstd.h>\n#include <zlib.h>\n#include <flatbuffers/flatbuffers.h>\n' | $(CXX) -E -x c++ - >/dev/null 2>&1; then \
		if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
			apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq g++ libzstd-dev zlib1g-dev \
				flatbuffers-compiler libflatbuffers-dev; \
		else \
			echo "make cpp needs g++, libzstd-dev, zlib1g-dev, flatbuffers-compiler and libflatbuffers-dev (run as root, it installs them with apt-get)" >&2; exit 1; \
		fi; \
	fi

cpp: cpp-deps ## Build the C++ reader build/tracepack-cpp (`cat FILE` as `tracepack cat`); installs g++/libzstd if missing
	$(MAKE) --no-print-directory -f cpp/Makefile BUILD=build

cpp-asan: cpp-deps ## Build the C++ reader with ASan and UBSan: build/asan/tracepack-cpp
	$(MAKE) --no-print-directory -f cpp/Makefile BUILD=build/asan SANITIZE=1

# The conformance suite through the C++ reader: every vector (cat and trace), exact places; the damaged ones
# again under ASan/UBSan (a sanitizer report exits 86).
SANITIZERS := ASAN_OPTIONS=abort_on_error=0:exitcode=86:detect_leaks=1 UBSAN_OPTIONS=halt_on_error=1:exitcode=86:print_stacktrace=1

conformance-cpp: $(STAMP) cpp cpp-asan ## The conformance suite against build/tracepack-cpp (exact places), its damaged vectors under ASan/UBSan
	$(BIN)/python -m conformance.run --impl build/tracepack-cpp -j 2 -q --strict-places
	$(SANITIZERS) $(BIN)/python -m conformance.run --impl build/asan/tracepack-cpp -j 2 -q --strict-places --only '^invalid/'

ci-cpp: $(STAMP) conformance-cpp ## All of the C++ reader's checks alone (apt deps, builds, conformance, tests/cpp: differential, ASan/UBSan)
	$(BIN)/python -m pytest -q -p no:cacheprovider tests/cpp

bench: $(STAMP) venv-ray cpp ## Run the benchmarks; figures are ratios against a baseline in the same run (the C++ reader built first)
	$(BIN)/python -m benchmarks.run

FUZZ_CASES ?= 2000
FUZZ_SEED ?= 1
fuzz: $(STAMP) ## Long hostile-input run: FUZZ_CASES mutants per surface (bad inputs saved to $$TMPDIR)
	$(BIN)/python -m tests.hostile.fuzz --cases $(FUZZ_CASES) --seed $(FUZZ_SEED) --save "$${TMPDIR:-/tmp}/tracepack-fuzz-findings"

CAMPAIGN_JOBS ?= 1
campaign: venv-torch ## The crafted campaign: every hostile class at every place, every command, 2 GiB cap (bad inputs saved)
	$(BIN)/python -m tests.hostile.campaign --scope full --jobs $(CAMPAIGN_JOBS) --save "$${TMPDIR:-/tmp}/tracepack-campaign-findings"

# Coverage-guided fuzzing (fuzz/, atheris + libFuzzer): the C loops are instrumented with clang, which the
# stamp installs where it is missing (Debian: clang and libclang-rt-dev, as root; docs/hostile-input.md);
# the C++ reader's harness (cpp_reader) is built by clang++ against cpp-deps' libraries.
FUZZ_STAMP := $(VENV)/.installed-fuzz
FUZZ_SECONDS ?= 60
FUZZ_SMOKE_SECONDS ?= 20
# Harnesses whose open findings wait for a fix (tests/fuzz_regressions: OPEN, strict xfail), left out of
# fuzz-smoke until it lands: none.
FUZZ_SMOKE_SKIP ?=
FUZZ_HARNESS_FLAG = $(if $(HARNESS),--harness $(HARNESS))
$(FUZZ_STAMP): $(TORCH_STAMP)
	@command -v clang >/dev/null || { test "$$(id -u)" = 0 && apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq clang libclang-rt-dev >/dev/null; } || \
		{ echo "make: fuzzing needs clang and its runtimes (apt-get install clang libclang-rt-dev)"; exit 1; }
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -e '.[dev,torch,fuzz]'
	@touch $@

fuzz-cov: $(FUZZ_STAMP) cpp-deps ## Coverage-guided fuzzing: each harness (or HARNESS=name) FUZZ_SECONDS; executions, coverage, findings
	$(BIN)/python -m fuzz.run cov --seconds $(FUZZ_SECONDS) $(FUZZ_HARNESS_FLAG)

fuzz-smoke: $(FUZZ_STAMP) cpp-deps ## A short coverage-guided run of every harness (FUZZ_SMOKE_SECONDS each); fails on any finding
	$(BIN)/python -m fuzz.run cov --smoke --seed 1 --no-coverage --nice 0 --seconds $(FUZZ_SMOKE_SECONDS) --skip '$(FUZZ_SMOKE_SKIP)' $(FUZZ_HARNESS_FLAG)

fuzz-corpus: $(FUZZ_STAMP) cpp-deps ## Rebuild the committed seed corpus (fuzz/corpus), minimised with libFuzzer's -merge=1
	$(BIN)/python -m fuzz.run corpus $(FUZZ_HARNESS_FLAG)

FUZZ_BIG_GIB ?= 4.5
fuzz-big: $(STAMP) ## Members over 4 GiB (zip64, sparse: no disk to make): convert/pack/unpack/expand stream them byte for byte
	$(BIN)/python -m tests.hostile.big --gib $(FUZZ_BIG_GIB)

release-schema: $(STAMP) ## Release the schema draft: check, lock, generate, migration, golden files
	$(BIN)/python -m tracepack.schema_check release

schema-fuzz: $(STAMP) ## Long differential run: DIFFERENTIAL_EXAMPLES cases per schema rule, every codec
	DIFFERENTIAL_EXAMPLES=$${DIFFERENTIAL_EXAMPLES:-30} $(BIN)/python -m pytest -q tests/schema_check/test_differential.py

samples: $(TORCH_STAMP) ## Re-export the bundled torch samples with torch 2.13 (paths neutralised)
	$(BIN)/python scripts/torch/export_sample.py
	$(BIN)/python scripts/torch/export_torchscript_sample.py

# Not part of test/CI: needs executorch, installed in its own environment (ET_VENV), beside torch 2.13.
ET_VENV ?= ../et-venv
executorch-samples: ## Remake tests/data/executorch/ (ETRecord, .pte, ETDump, logs, Inspector's answers) in $(ET_VENV)
	@test -x $(ET_VENV)/bin/python || { python3 -m venv $(ET_VENV) && $(ET_VENV)/bin/pip install --quiet 'torch==2.13.0' 'executorch==1.5.1'; }
	$(ET_VENV)/bin/python scripts/executorch/make_samples.py
	$(ET_VENV)/bin/python scripts/executorch/make_samples.py --delegate
	$(BIN)/python scripts/executorch/make_samples.py --profiler

# Not part of test/CI: torch, torchvision, timm and transformers (GBs), in their own environment; REAL_VENV
# names an existing one instead (then nothing is installed into it).
REAL_VENV ?= .venv-real
REAL_PINS := torch==2.14.1 torchvision==0.29.1 timm==1.0.31 transformers==5.24.0
real-models: ## Export the 18 real third-party models of the size benchmark into .bench/real (own venv; not CI)
	@test -x $(REAL_VENV)/bin/python || { $(PYTHON) -m venv $(REAL_VENV) && $(REAL_VENV)/bin/python -m pip install --quiet --disable-pip-version-check $(REAL_PINS); }
	$(REAL_VENV)/bin/python -W ignore scripts/torch/real_models.py

RELEASE_PYTHON ?= python3.11
release-samples: ## Re-create tests/data/torch/releases/ in one venv per torch release (GBs of downloads; not in test/CI)
	$(RELEASE_PYTHON) scripts/torch/releases/build_all.py $(RELEASES)

dictionary: $(TORCH_STAMP) ## Retrain the built-in zstd dictionary and record its inputs (torch 2.13; docs/dictionaries.md)
	$(BIN)/python -W ignore scripts/torch/train_dictionary.py

dictionary-check: $(STAMP) ## Fail unless every recorded dictionary retrains byte for byte from its commit (no torch; CI)
	$(BIN)/python -W ignore scripts/torch/train_dictionary.py --check

dictionary-corpus-check: $(TORCH_STAMP) ## Fail unless torch 2.13 exports the recorded training inputs (minutes; not CI)
	$(BIN)/python -W ignore scripts/torch/train_dictionary.py --check-corpus

# Not part of test/CI: the corpus needs executorch ($(ET_VENV)); training runs in the project's environment.
# The corpus is made afresh (a folder left by another version of the script could hold other models).
executorch-dictionary: ## Retrain the built-in ExecuTorch zstd dictionary (corpus made in $(ET_VENV); docs/dictionaries.md)
	rm -rf .bench/executorch-dictionary-corpus
	$(ET_VENV)/bin/python scripts/executorch/dictionary_corpus.py
	$(BIN)/python scripts/executorch/train_dictionary.py

executorch-dictionary-check: ## Fail unless the ExecuTorch corpus retrains into the shipped dictionary byte for byte
	rm -rf .bench/executorch-dictionary-corpus
	$(ET_VENV)/bin/python scripts/executorch/dictionary_corpus.py
	$(BIN)/python scripts/executorch/train_dictionary.py --check

clean: ## Remove the virtual environment, caches and build/
	rm -rf $(VENV) .pytest_cache .ruff_cache .mypy_cache .hypothesis build
