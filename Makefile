# tracekit: see README.md. `make help` lists the targets.
PYTHON   ?= python3
VENV     ?= .venv
VENV_HTA ?= .venv-hta
# On a machine where everything is already installed (the lent GPU machine),
# run with SETUP= TRACEKIT="python3 -m tracekit" to skip the virtual environment.
SETUP    ?= $(VENV)/.setup-done
TRACEKIT ?= $(VENV)/bin/tracekit
PYTEST   ?= $(VENV)/bin/python -m pytest
TORCH_CPU ?= torch==2.13.0

MODEL  ?= vit16x6x384
MODE   ?= eager
TRACES ?= traces
REPORTS ?= reports
SUITE  ?= vit-study
# The H100 variants of the five study suites (issue 6), their time limit in minutes, and the
# folder their reports and traces go to (H100/<suite>/); ARCHIVE=DIR also packs each as DIR/<suite>.tgz.
H100_SUITES ?= surgical-h100 backends-study-h100 ops-h100 lm-h100 compile-modes-h100
# The five studies' full grids (issue 21): make bench-h100-full, MINUTES of cells a call, each call going
# on where the last stopped; a cell past TIMEOUT seconds is a timeout row.
FULL_SUITES ?= surgical compile-modes backends ops lm
TIMEOUT ?= 300
MINUTES ?= 9
H100    ?= reports/h100
KERNELS ?= 100
OUT     ?= $(H100)/diff
COUNTERS_OUT ?= $(REPORTS)/counters
TRACE_OPTS = $(if $(BATCH),--batch $(BATCH)) $(if $(SEQ),--seq $(SEQ)) $(if $(DTYPE),--dtype $(DTYPE)) $(if $(DEVICE),--device $(DEVICE)) \
             $(if $(ITERS),--iters $(ITERS)) $(if $(PHASE),--phase $(PHASE)) $(if $(THREADS),--threads $(THREADS)) \
             $(if $(REPEATS),--repeats $(REPEATS)) $(if $(NPROC),--nproc $(NPROC)) $(if $(PARALLEL),--parallel $(PARALLEL))

# Headless Chromium checks index.html in a real browser (tests/report/test_browser.py); without it
# the test skips, saying so. Only `make setup-browser` installs it (system-wide: asked for, never implied).
BROWSER := $(firstword $(shell command -v chromium chromium-browser google-chrome 2>/dev/null))

.PHONY: help setup setup-browser demo trace analyze counters bench bench-h100 bench-h100-full attribution-h100 bench-analyze bench-analyze-10g bench-job-critical-path bench-decode test test-all fuzz clean

help:  ## list targets
	@grep -E '^[a-z-]+:.*##' $(MAKEFILE_LIST) | sed 's/:.*##/\t/'

setup: $(SETUP)  ## create .venv with tracekit, its dependencies and torch

# With a CUDA build of torch already importable, the venv sees it (system site
# packages) and keeps it; otherwise it gets the CPU build of torch.
$(VENV)/.setup-done: pyproject.toml
	@if $(PYTHON) -c "import torch, sys; sys.exit(not torch.cuda.is_available())" 2>/dev/null; then \
	  echo "keeping the installed CUDA torch"; $(PYTHON) -m venv --system-site-packages $(VENV); \
	else \
	  $(PYTHON) -m venv $(VENV) && $(VENV)/bin/pip install -q $(TORCH_CPU); \
	fi
	$(VENV)/bin/pip install -q -e ".[dev,backends,models,dist]"
	$(VENV)/bin/pip install -q --no-deps holistictraceanalysis==0.5.0
	@# HTA's critical path (the cross-check of tests/crosscheck/test_hta_critical_path.py) needs pandas < 3
	$(PYTHON) -m venv $(VENV_HTA) && $(VENV_HTA)/bin/pip install -q "pandas<3" numpy networkx pyyaml psutil pydot plotly \
	  && $(VENV_HTA)/bin/pip install -q --no-deps holistictraceanalysis==0.5.0
	@touch $@

setup-browser:  ## install Chromium system-wide from Debian's packages (apt-get; root or passwordless sudo) for the browser check of index.html
	@if [ -n "$(BROWSER)" ]; then echo "found $(BROWSER): nothing to install"; exit 0; fi; \
	if [ "$$(id -u)" = 0 ]; then SUDO=; else SUDO="sudo -n"; fi; \
	( $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq chromium >/dev/null ) \
	  && echo "installed $$(chromium --version 2>/dev/null)" \
	  || echo "could not install chromium (apt-get failed): the browser check of index.html will be skipped"

demo: $(SETUP)  ## set up, trace the small default workload eagerly and compiled, analyze
	$(TRACEKIT) bench workloads/demo.toml --traces $(TRACES) --reports $(REPORTS)

trace: $(SETUP)  ## run MODEL in MODE under the profiler: make trace MODEL=vit16x6x384 MODE=reduce-overhead (MODEL=resnet50, hf:gpt2, path/to/file.py:fn...; REPEATS=3 THREADS=1; NPROC=2 PARALLEL=ddp|fsdp)
	$(TRACEKIT) trace --model '$(MODEL)' --mode $(MODE) --out $(TRACES) $(TRACE_OPTS)

counters: $(SETUP)  ## trace MODEL, then its hardware counters under Nsight Compute (needs ncu): make counters MODEL=mul1024 KERNELS=2
	$(TRACEKIT) trace --model '$(MODEL)' --mode $(MODE) --out $(TRACES) $(TRACE_OPTS)
	$(TRACEKIT) counters --model '$(MODEL)' --mode $(MODE) --traces $(TRACES) --out $(COUNTERS_OUT) --kernels $(KERNELS) \
	  $(if $(BATCH),--batch $(BATCH)) $(if $(SEQ),--seq $(SEQ)) $(if $(DTYPE),--dtype $(DTYPE)) $(if $(DEVICE),--device $(DEVICE))

analyze: $(SETUP)  ## analyze and compare everything under traces/: reports/summary.md, index.html, plots/
	$(TRACEKIT) analyze $(TRACES) --out $(REPORTS)

bench: $(SETUP)  ## run a suite of workloads/ (resumable): make bench SUITE=vit-study [BENCH_OPTS="--only 'vit16*/*'"]
	$(TRACEKIT) bench workloads/$(SUITE).toml --traces $(TRACES) --reports $(REPORTS) $(BENCH_OPTS)

bench-h100: $(SETUP)  ## the five study suites trimmed for the H100, MINUTES (9) of runs a call (resumable: call again to go on): H100/<suite>/ (index.html links its plots)
	$(TRACEKIT) bench $(H100_SUITES:%=workloads/%.toml) --traces $(H100) --reports $(H100) --max-minutes $(MINUTES) --html-plots link $(BENCH_OPTS)
	$(if $(ARCHIVE),for s in $(H100_SUITES); do tar czf $(ARCHIVE)/$$s.tgz -C $(H100) $$s; done)

bench-h100-full: $(SETUP)  ## the five studies' full grids on a GPU, MINUTES (9) of cells a call (resumable: call again until all are done): H100/<suite>/
	$(TRACEKIT) bench $(FULL_SUITES:%=workloads/%.toml) --traces $(H100) --reports $(H100) --max-minutes $(MINUTES) --timeout $(TIMEOUT) --html-plots link $(BENCH_OPTS)

attribution-h100: $(SETUP)  ## issue 20 on a GPU: ViT and GPT-2 eager/default/reduce-overhead, GPU time by module, every pair diffed: OUT (reports/h100/diff)/
	$(TRACEKIT) bench workloads/attribution-h100.toml --traces $(OUT)/traces --reports $(OUT) --max-minutes $(MINUTES)
	$(TRACEKIT) diff $(OUT)/traces/attribution-h100 --out $(OUT)/diffs --min-coverage 0.95

# The commit before the last round of issue 18's work (the fast reader was 70e69e4 -> fcb9ec4; the
# shared CPU-op nest and leaner analyses came after 42d40e5, the reused nest order, narrower
# temporaries and the heap trimmed after reading after e218d2d, attribution on categorical codes and
# the analyses' scratch memory cut after 90ecc19, the Queue-fed workers, 4 MiB chunks and copy-free
# summaries after ada46c7): its phases are timed beside today's (its
# tracekit/ unpacked by git archive into BENCH_DIR/before-<commit>, so the report names it; skipped
# outside a git checkout). Synthetic traces go to BENCH_DIR, never into the repository.
BENCH_BEFORE ?= ada46c7
BENCH_DIR    ?= /tmp/tracekit-bench
bench-analyze: $(SETUP)  ## speed/memory of tracekit analyze on 10 MB-1 GB traces vs HTA, before/after: reports/bench-analyze.md
	@if git rev-parse -q --verify $(BENCH_BEFORE)^{commit} >/dev/null 2>&1; then \
	  rm -rf $(BENCH_DIR)/before-$(BENCH_BEFORE) && mkdir -p $(BENCH_DIR)/before-$(BENCH_BEFORE) && \
	  git archive $(BENCH_BEFORE) tracekit | tar -x -C $(BENCH_DIR)/before-$(BENCH_BEFORE); \
	  BEFORE="--before $(BENCH_DIR)/before-$(BENCH_BEFORE)"; fi; \
	$(VENV)/bin/python -m compileall -q tracekit $(BENCH_DIR)/before-$(BENCH_BEFORE)/tracekit >/dev/null 2>&1; \
	$(VENV)/bin/python benchmarks/loadbench.py --workdir $(BENCH_DIR) --report $(REPORTS)/bench-analyze.md $$BEFORE

bench-analyze-10g: $(SETUP)  ## tracekit analyze of a 10 GB trace (about 10 GB in BENCH_DIR), into reports/bench-analyze.md
	$(VENV)/bin/python benchmarks/loadbench.py --workdir $(BENCH_DIR) --report $(REPORTS)/bench-analyze.md --big 10000

bench-job-critical-path: $(SETUP)  ## cost of an 8-rank job's critical path (analyze with/without --critical-path, whatif): reports/bench-job-critical-path.json
	$(VENV)/bin/python benchmarks/jobbench.py --out $(REPORTS)/bench-job-critical-path.json

bench-decode: $(SETUP)  ## tracekit's own cost per decode step (issue 41) vs a bare eager decode loop, on the GPU (target < 2%): reports/bench-decode.json
	$(VENV)/bin/python benchmarks/decode_overhead.py --out $(REPORTS)/bench-decode.json $(BENCH_OPTS)

# Tests marked slow (cold compiles, end-to-end runs, several processes: pyproject.toml's markers) run
# in test-all, which CI runs (.ci/run); test leaves them out.
test: $(SETUP)  ## run the test suite but its slow tests (GPU tests skip without CUDA)
	$(PYTEST) -q -m "not slow" --durations=15

test-all: $(SETUP)  ## run every test, the slow ones too (what CI runs)
	$(PYTEST) -q --durations=15

FUZZ_EXAMPLES ?= 3000
# make fuzz: FUZZ_EXAMPLES cases of analyze, half as many of every verb, 0.4 of them of damaged
# folders through every verb (and the fast suite's shares): 6000 cases for 3000, about an hour on 2 cores.
fuzz: $(SETUP)  ## every verb on thousands of damaged copies of every real trace and damaged folders (tests/test_fuzz*.py; ~1 h)
	TRACEKIT_FUZZ_EXAMPLES=$(FUZZ_EXAMPLES) TRACEKIT_FUZZ_MAX_KB=100000 $(PYTEST) -q -x --durations=0 \
	  tests/test_fuzz.py tests/test_fuzz_folders.py

clean:  ## remove the virtual environment and local traces
	rm -rf $(VENV) $(TRACES)/*/
