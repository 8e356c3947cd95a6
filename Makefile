# Every target creates .venv and installs what it needs on first use.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
PIP_QUIET := --quiet --disable-pip-version-check

.PHONY: run test bench docs fuzz loadtest browser clean

$(STAMP): pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install $(PIP_QUIET) torch==2.13.0 2>&1 | grep -v "is ignored" || true
	$(PY) -m pip install $(PIP_QUIET) -e '.[test]' 2>&1 | grep -v "is ignored" || true
	$(PY) -c "import stacklab, torch, streamlit, pytest, hypothesis"
	@touch $(STAMP)

# The app listens on this machine only; for a classroom: make run HOST=0.0.0.0
HOST ?= 127.0.0.1
PORT ?= 8501
run: $(STAMP)
	$(VENV)/bin/streamlit run app.py --server.address $(HOST) --server.port $(PORT)

# Debian's Chromium for the browser tests (Playwright drives it; nothing is downloaded).
browser:
	@command -v chromium >/dev/null 2>&1 || { \
	  echo "installing Debian's chromium for the browser tests"; \
	  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null) \
	  || echo "could not install chromium: the browser tests will be skipped"; }

test: $(STAMP) browser
	$(PY) -m pytest

bench: $(STAMP)
	$(PY) bench/run.py

docs: $(STAMP)
	$(VENV)/bin/stacklab docs --out docs

# Long property runs: thousands of generated, mutated and hostile stacks, each within 200 ms.
fuzz: $(STAMP)
	$(PY) -m pytest tests/test_fuzz.py --hypothesis-profile=fuzz --hypothesis-show-statistics -q

# Thirty browser sessions training at once against the real server (see bench/loadtest.py).
loadtest: $(STAMP) browser
	$(PY) bench/loadtest.py

clean:
	rm -rf $(VENV) .pytest_cache
