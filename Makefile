# Two commands on a fresh machine: `make demo` and `make test`. Each creates .venv if missing.
VENV   ?= .venv
PY     := $(VENV)/bin/python
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: demo test test-fast lint docs docs-site docs-serve bench clean

$(STAMP): pyproject.toml
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	# The distribution was named `newsletter` before (another project's name on the index): a
	# venv made then still lists it, and two distributions would claim one package.
	$(PY) -m pip uninstall --quiet --yes newsletter 2>/dev/null || true
	$(PY) -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

# The demo's capture server port (0 picks a free one). tools/demo.py keeps the demo's outbox,
# Maildir and build in out/demo/, emptied at every run; .newsletter/ is not touched.
DEMO_PORT ?= 1025

demo: $(STAMP)
	@$(PY) tools/demo.py --port $(DEMO_PORT)

lint: $(STAMP)
	$(BIN)/ruff check src tests benchmarks docs tools
	$(BIN)/ruff format --check src tests benchmarks docs tools
	$(BIN)/mypy src tools benchmarks
	$(BIN)/lint-imports

# The documentation site, strictly: a broken link or anchor, a page missing from the nav, or a
# reference page older than the code (tools/docsref.py --check) fails. Built into a temporary
# folder, offline (no plugin fetches anything).
docs: $(STAMP)
	$(PY) tools/docsref.py --check
	@out="$$(mktemp -d)"; NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --quiet \
		--site-dir "$$out"; status=$$?; rm -rf "$$out"; exit $$status

# The site to read: `make docs-site` builds it (strictly) into $(SITE) and keeps it there (open
# $(SITE)/index.html); `make docs-serve` serves it at http://127.0.0.1:$(DOCS_PORT)/, rebuilt as
# the pages change.
SITE      ?= site
DOCS_PORT ?= 8000

docs-site: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --quiet --site-dir "$(SITE)"
	@echo "The manual is in $(SITE)/: open $(SITE)/index.html"

docs-serve: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs serve --dev-addr 127.0.0.1:$(DOCS_PORT)

# The suite on every core (pytest-xdist): each worker starts its own PostgreSQL, Dovecot and
# browser once; --dist loadfile keeps a module's tests on one worker, so a module's server or
# browser starts once. `make test` is the full run, lint and all, nothing skipped;
# `make test-fast` is the edit loop: no lint, no `slow` or `browser` tests. The full run ends
# with its 25 slowest tests, so a log (CI's too) says where the suite's time goes.
WORKERS ?= auto
# The suite starts hundreds of interpreters (`newsletter` commands, servers, its own workers):
# with PYTHONDONTWRITEBYTECODE set (some shells and CI images set it) none of them keeps its
# compiled modules, so each compiles the package from source again (about 1 s), and pytest
# rewrites every test module's asserts in each worker. The caches go to __pycache__/ (ignored).
PYTEST := env -u PYTHONDONTWRITEBYTECODE $(BIN)/pytest

test: lint docs
	$(PYTEST) -n $(WORKERS) --dist loadfile --durations=25

test-fast: $(STAMP)
	$(PYTEST) -n $(WORKERS) --dist loadfile -q -m "not slow and not browser"

bench: $(STAMP)
	$(PY) benchmarks/render.py
	$(PY) benchmarks/messages.py
	$(PY) benchmarks/preview.py
	$(PY) benchmarks/send.py
	$(PY) benchmarks/serve.py
	$(PY) benchmarks/bounces.py
	$(PY) benchmarks/preflight.py
	$(PY) benchmarks/clicks.py
	$(PY) benchmarks/signup.py
	$(PY) benchmarks/diff.py
	$(PY) benchmarks/archive.py
	$(PY) benchmarks/sequences.py
	$(PY) benchmarks/startup.py

clean:
	rm -rf $(VENV) out site .newsletter .pytest_cache .mypy_cache .ruff_cache
