# Every target creates .venv and installs what it needs on first use: `make run` only what
# the app needs (about 1.5 GB, a minute), `make test` the test tools on top (Ray, Playwright,
# transformers, MkDocs, Jupyter's kernel: about 2.3 GB in all). pip prints each package as it goes.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
APP_STAMP := $(VENV)/.app-installed
STAMP := $(VENV)/.installed
PIP := $(PY) -m pip install --disable-pip-version-check --progress-bar off
PIP_QUIET := --quiet --disable-pip-version-check

.PHONY: run test test-public bench docs fuzz loadtest browser axe nginx wheel screenshots clean lessons

$(APP_STAMP): pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	@echo "stacklab: installing torch 2.13.0 (CPU) and the app's packages into $(VENV) ..."
	$(PIP) torch==2.13.0 2>&1 | grep --line-buffered -v "is ignored" || true
	$(PIP) -e . 2>&1 | grep --line-buffered -v "is ignored" | grep --line-buffered -v "^Requirement already satisfied" || true
	$(PY) -c "import stacklab, torch, streamlit"
	@touch $(APP_STAMP)

$(STAMP): $(APP_STAMP) pyproject.toml
	@echo "stacklab: installing the test tools (pytest, hypothesis, Playwright, Ray, Jupyter's kernel) ..."
	$(PIP) -e '.[test]' 2>&1 | grep --line-buffered -v "is ignored" | grep --line-buffered -v "^Requirement already satisfied" || true
	$(PY) -c "import stacklab, torch, streamlit, pytest, hypothesis"
	@touch $(STAMP)

# The app listens on this machine only; for a classroom: make run HOST=0.0.0.0 (PORT stays yours)
HOST ?= 127.0.0.1
PORT ?= 8501
run: $(APP_STAMP)
	@$(PY) -c "from stacklab.serve.links.addresses import lan_address, serving_note; print(serving_note('$(HOST)', $(PORT), lan_address()))"
	$(VENV)/bin/streamlit run server.py --server.address $(HOST) --server.port $(PORT)

# Debian's Chromium for the browser tests (Playwright drives it; nothing is downloaded).
browser:
	@command -v chromium >/dev/null 2>&1 || { \
	  echo "installing Debian's chromium for the browser tests"; \
	  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null) \
	  || echo "could not install chromium: the browser tests will be skipped"; }

# Debian's nginx for the deploy guide's load balancer test (tests/test_nginx.py starts it
# with the guide's configuration; nothing is downloaded by the test).
nginx:
	@command -v nginx >/dev/null 2>&1 || test -x /usr/sbin/nginx || { \
	  echo "installing Debian's nginx for the load balancer test"; \
	  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nginx >/dev/null) \
	  || echo "could not install nginx: the load balancer test will be skipped"; }

# axe-core, the accessibility checker the browser tests inject into each page: pinned in
# tests/js/package-lock.json, installed once from the npm registry (Debian's npm if missing);
# the tests themselves fetch nothing.
AXE := tests/js/node_modules/axe-core/axe.min.js
axe: $(AXE)
$(AXE): tests/js/package.json tests/js/package-lock.json
	@command -v npm >/dev/null 2>&1 || { \
	  echo "installing Debian's npm for the accessibility checker"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq npm >/dev/null; }
	cd tests/js && npm ci --no-audit --no-fund --loglevel=error
	@touch $(AXE)

test: $(STAMP) browser axe nginx
	$(PY) -m pytest

# The whole suite on servers and kernels that use none of Streamlit's or plotly's private
# names (every public fallback of ui/private_api.py and lab/figures/plotly_private.py): what
# a Streamlit or plotly release without them would run. The tests of the fast paths
# themselves are skipped, each saying so.
test-public: $(STAMP) browser axe nginx
	STACKLAB_PUBLIC_API_ONLY=1 $(PY) -m pytest

bench: $(STAMP)
	$(PY) bench/run.py

# Every built-in lesson's claims trained on seeds 0-2 (the suite trains each step once, on
# its own seed, and checks the docs' example on seeds 0-2), then the docs' example.
lessons: $(STAMP)
	$(VENV)/bin/stacklab lessons check lib/stacklab/lab/lessons/builtin/*.md assets/lessons/*.md

# The documentation site (MkDocs, material theme; the API reference from the docstrings):
# the op reference regenerated from the catalog, the README's screenshots copied in, built
# with --strict into site/ (a broken link or a docstring griffe cannot read fails it). It
# installs only the app and the `docs` extra; site/ works served and opened from disk.
DOCS_STAMP := $(VENV)/.docs-installed
$(DOCS_STAMP): $(APP_STAMP) pyproject.toml
	@echo "stacklab: installing the docs tools (MkDocs, its theme, mkdocstrings) ..."
	$(PIP) -e '.[docs]' 2>&1 | grep --line-buffered -v "is ignored" | grep --line-buffered -v "^Requirement already satisfied" || true
	@touch $(DOCS_STAMP)

docs: $(DOCS_STAMP)
	$(VENV)/bin/stacklab docs --out docs/ops
	mkdir -p docs/images && cp assets/screenshots/*.png docs/images/
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict --site-dir site

# Long property runs: thousands of generated, mutated and hostile stacks, each within 200 ms.
fuzz: $(STAMP)
	$(PY) -m pytest tests/test_fuzz.py --hypothesis-profile=fuzz --hypothesis-show-statistics -q

# A lecture hall on one link: 30 and 100 agent-API students, 30 seeds, a run= link, a hostile
# student and one real Chromium, each on its own server with the agent API on (bench/loadtest.py);
# first, what one request of each kind costs the server (bench/request_costs.py); then a class
# of 100 voting on a presented lesson, and a hostile student's 1,000 votes (bench/loadtest_votes.py).
loadtest: $(STAMP) browser
	$(PY) bench/request_costs.py
	$(PY) bench/loadtest.py
	$(PY) bench/loadtest_votes.py
	$(PY) bench/bytes.py

# Build the wheel and install it in a fresh venv outside the checkout: the CLI, the
# library and the notebook Lab must work from the installed package alone.
WHEEL_CHECK := /tmp/stacklab-wheel-check
wheel: $(STAMP)
	rm -rf $(WHEEL_CHECK) && mkdir -p $(WHEEL_CHECK)
	$(PY) -m pip wheel $(PIP_QUIET) --no-deps -w $(WHEEL_CHECK)/dist . 2>&1 | grep -v "is ignored" || true
	$(PYTHON) -m venv $(WHEEL_CHECK)/venv
	$(WHEEL_CHECK)/venv/bin/pip install $(PIP_QUIET) torch==2.13.0 2>&1 | grep -v "is ignored" || true
	$(WHEEL_CHECK)/venv/bin/pip install $(PIP_QUIET) "$$(ls $(WHEEL_CHECK)/dist/stacklab-*.whl)[notebook]" 2>&1 | grep -v "is ignored" || true
	cd $(WHEEL_CHECK) && ./venv/bin/stacklab tasks >/dev/null && ./venv/bin/stacklab train --task position --steps 20 --out run >/dev/null 2>&1 \
	  && ./venv/bin/python -c "import stacklab, stacklab.notebook; lab = stacklab.notebook.Lab(task='position', steps=20); lab.train(); run = lab.wait(120); assert run.status == 'finished', run.status; print('wheel ok:', stacklab.__file__, run.status)"

# The README's screenshots, refreshed on purpose: the browser tests write them into
# assets/screenshots instead of the ignored screenshots/ folder of every `make test`.
screenshots: $(STAMP) browser axe
	STACKLAB_SCREENSHOTS=assets/screenshots $(PY) -m pytest tests/test_browser.py tests/test_phone.py tests/test_rehearsal.py -q

clean:
	rm -rf $(VENV) .pytest_cache tests/js/node_modules
