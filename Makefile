# The README's two commands. Both create .venv if missing and install the project (pinned in pyproject.toml).
VENV  := .venv
PY    := $(VENV)/bin/python
STAMP := $(VENV)/.mkb-installed

.PHONY: run test test-fast install validate lint

$(STAMP): pyproject.toml scripts/install-serving.sh scripts/install-system.sh
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[test]'
	bash scripts/install-system.sh
	bash scripts/install-serving.sh $(VENV)
	touch $(STAMP)

install: $(STAMP)

# The main job on the embedded default: the quickstart campaign (SmolLM2 on vLLM CPU, 2 problems, the four
# benchmark arms and one 3-hop chain) on a local Ray, then its claims and lineage and its report, which ends on a
# five-line summary and the report's path; rerunning resumes it (lineage and report redo only what is new).
run: install
	$(VENV)/bin/mkb run experiments/quickstart.yaml
	$(VENV)/bin/mkb lineage runs/quickstart
	$(VENV)/bin/mkb report runs/quickstart

# Judge every shipped solution on this machine's CPU (the judge's own self-check).
validate: install
	$(VENV)/bin/mkb problems validate --device cpu

test: install
	$(PY) -m pytest

# The inner loop: every test that judges no kernel, starts no Ray and serves no model (markers: pyproject.toml;
# tests/conftest.py fails a test that starts a checker or Ray without saying so).
test-fast: install
	$(PY) -m pytest -m "not judge and not ray and not model"

# ruff, pinned in the test extra and configured in pyproject.toml ([tool.ruff]); CI runs it before the tests.
lint: install
	$(VENV)/bin/ruff check .
