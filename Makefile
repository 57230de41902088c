# attngraph: set-up, tests, demo. `make demo` and `make test` are all a new user needs.

VENV := .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip
# Installed before the project so that pip finds torch already satisfied: on these
# machines this pin takes a local CPU wheel, while an unpinned torch would pull the
# CUDA build (gigabytes). Override with e.g. `make venv TORCH=torch`.
TORCH ?= torch==2.13.0
# Source packages; renderers/ may not exist yet in a fresh clone.
SRC := $(wildcard attngraph renderers)
DOT_MISSING := attngraph: the Graphviz 'dot' program is missing; install it (Debian/Ubuntu: sudo apt-get install graphviz; macOS: brew install graphviz) for svg/png/pdf diagrams
CHROMIUM_MISSING := attngraph: Chromium is missing; install it (Debian/Ubuntu: sudo apt-get install chromium) for the playground's browser tests, which are skipped without it

.PHONY: help venv dot chromium test test-slow demo docs experiments bench fuzz lint clean

help:
	@echo "make demo   set up, then check, draw and list the catalog, train one model, draw its attention, train on a data file and predict"
	@echo "make test   set up, then run the doctests and the tests (slow ones aside)"
	@echo "make test-slow  the slow tests: trainings to target, every ONNX export"
	@echo "make venv   create $(VENV) ($(TORCH) first, then the project with [dev])"
	@echo "make dot    install Graphviz 'dot' when root with apt-get, else say how"
	@echo "make chromium  the same for Chromium (the playground's browser tests)"
	@echo "make docs | experiments | bench | fuzz | lint | clean"

venv: $(VENV)/.stamp

# Re-runs only when pyproject.toml changes; works on top of an existing $(VENV).
$(VENV)/.stamp: pyproject.toml
	test -x $(PY) || python3 -m venv $(VENV)
	$(PIP) install $(TORCH)
	$(PIP) install -e '.[dev]'
	touch $@

# $(call system_program,COMMANDS,PACKAGE,MESSAGE): nothing when one of COMMANDS is on
# the PATH; else, when root with apt-get, install the Debian PACKAGE; else (or when that
# fails) print MESSAGE. The tests that need the program skip, saying so, without it.
define system_program
	@if $(foreach c,$(1),command -v $(c) >/dev/null 2>&1 ||) false; then \
	  :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	  DEBIAN_FRONTEND=noninteractive apt-get update \
	  && DEBIAN_FRONTEND=noninteractive apt-get install -y $(2) \
	  || echo "$(3)"; \
	else \
	  echo "$(3)"; \
	fi
endef

dot:
	$(call system_program,dot,graphviz,$(DOT_MISSING))

# The system's Chromium, which the playground's browser tests drive through playwright
# (tests/test_playground_browser.py; playwright's own browser download is never used).
chromium:
	$(call system_program,chromium chromium-browser,chromium,$(CHROMIUM_MISSING))

# The doctests of the source packages, then the test suite without its `slow` tests
# (the catalog's trainings to target, the export of every mechanism to ONNX...: about
# 6 CPU minutes more), which `make test-slow` runs; CI runs both (.ci/run). Exit code
# 5 ("no tests collected") of the doctest pass is not a failure; it runs first so that
# the last summary line printed is the test suite's. The suite runs in one worker per
# core (pytest-xdist; each worker runs torch on one thread, see tests/conftest.py; the
# workers share trained models and exported files through the session's temporary
# folder). `make test WORKERS=0` runs it in this process instead.
WORKERS ?= auto
test: venv dot chromium
	$(PY) -m pytest --doctest-modules $(SRC); rc=$$?; [ $$rc -eq 0 ] || [ $$rc -eq 5 ]
	$(PY) -m pytest -n $(WORKERS) -m "not slow" tests

test-slow: venv dot chromium
	$(PY) -m pytest -n $(WORKERS) -m slow tests

# One step per line; later steps (render the catalog, train a model) go below.
# The main job end to end (about half a minute): check and list the catalog, draw
# every spec in both views, train one model with a progress bar, and draw what it
# attended to; then train on a small data file (examples/data/), predict the topics
# of new sentences and draw the attention on one of your own. Output goes to runs/demo/ (not tracked; an earlier demo's run is moved
# aside to runs/demo/global_attention.old-<time>); `make docs` rewrites docs/.
demo: venv dot
	$(VENV)/bin/attngraph validate -q specs/*.yaml
	$(VENV)/bin/attngraph catalog
	$(VENV)/bin/attngraph docs --out runs/demo/docs
	$(VENV)/bin/attngraph train specs/global_attention.yaml --out runs/demo/global_attention --overwrite
	$(VENV)/bin/attngraph attend runs/demo/global_attention --example 3 -o runs/demo/attention.png
	$(VENV)/bin/attngraph train specs/global_attention.yaml --data examples/data/topics.jsonl --valid examples/data/topics-valid.jsonl --epochs 6 --out runs/demo/topics --overwrite --quiet
	$(VENV)/bin/attngraph predict runs/demo/topics --data examples/data/topics-new.jsonl
	$(VENV)/bin/attngraph attend runs/demo/topics --input "The coach was late after the match." -o runs/demo/topics-attention.png
	@echo "demo: diagrams in runs/demo/docs/catalog.md, attention pictures runs/demo/attention.png and runs/demo/topics-attention.png"
	@echo "demo: now write a spec and watch it become a model (then open the address it prints; Ctrl-C stops it):"
	@echo "  $(VENV)/bin/attngraph playground ."

docs: venv dot
	$(VENV)/bin/attngraph docs

# docs/experiments.md from real runs of `attngraph compare` over 3 seeds (a few minutes
# on 2 cores; finished runs in runs/experiments/ are reused). Not part of `make test`.
experiments: venv
	$(PY) -m attngraph.train.report.experiments

bench: venv
	$(PY) benchmarks/run.py

# The long fuzz run (the test suite runs 2,000 mutants and 200 cases per surface):
# 100,000 mutants of the catalog and the docs' specs, then 100,000 cases of the surfaces
# around the spec (data files, run directories, exports, plugins, the Python API's
# arguments; docs/fuzzing.md),
# counts per outcome and surface; each defect's case is kept in runs/fuzz/ (about half
# an hour on 2 cores). Both runs go ahead; the target fails if either found a defect.
FUZZ_COUNT ?= 100000
FUZZ_SURFACE_COUNT ?= $(FUZZ_COUNT)
fuzz: venv
	$(PY) -m fuzz.run --count $(FUZZ_COUNT) --keep runs/fuzz --json runs/fuzz/report.json; \
	spec=$$?; \
	$(PY) -m fuzz.run --surface around --count $(FUZZ_SURFACE_COUNT) --keep runs/fuzz \
	  --json runs/fuzz/report-surfaces.json; \
	around=$$?; [ $$spec -eq 0 ] && [ $$around -eq 0 ]

lint: venv
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy $(SRC)

# Leaves $(VENV) and runs/ (training output) alone; `rm -rf .venv` for a full reset.
clean:
	rm -rf build dist .pytest_cache .mypy_cache .ruff_cache .hypothesis *.egg-info
	find . -path ./$(VENV) -prune -o -name __pycache__ -type d -prune -exec rm -rf {} +
