# Every target creates .venv and installs what it needs on first use.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
PIP_QUIET := --quiet --disable-pip-version-check

.PHONY: run test bench docs fuzz clean

$(STAMP): pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install $(PIP_QUIET) torch==2.13.0 2>&1 | grep -v "is ignored" || true
	$(PY) -m pip install $(PIP_QUIET) -e '.[test]' 2>&1 | grep -v "is ignored" || true
	$(PY) -c "import stacklab, torch, streamlit, pytest, hypothesis"
	@touch $(STAMP)

run: $(STAMP)
	$(VENV)/bin/streamlit run app.py

test: $(STAMP)
	$(PY) -m pytest

bench: $(STAMP)
	$(PY) bench/run.py

docs: $(STAMP)
	$(VENV)/bin/stacklab docs --out docs

clean:
	rm -rf $(VENV) .pytest_cache
