# Two commands on a fresh machine: `make demo` and `make test`. Each creates .venv if missing.
VENV   ?= .venv
PY     := $(VENV)/bin/python
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: demo test lint bench clean

$(STAMP): pyproject.toml
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

# DEMO ONLY: a publicly known key, so a fresh clone can sign unsubscribe links. A real send
# must use your own NEWSLETTER_SECRET (an already exported one wins here too).
DEMO_SECRET := demo-only-publicly-known-never-use-for-real-sends
# The loop after the handoff: VERP return path, and one staging address that bounces.
DEMO_RETURN := bounces@news.example.org
DEMO_BOUNCE := proofreader@news.example.org

demo: $(STAMP)
	$(BIN)/newsletter check --issue 14
	$(BIN)/newsletter build --issue 14 --out out/14
	@# The capture server runs for the length of the send; the trap stops it on every exit. It
	@# answers one staging address the way a server answers a dead mailbox: with a bounce.
	@$(BIN)/newsletter mailbox --port 1025 --bounce $(DEMO_BOUNCE) & mailbox=$$!; \
	trap 'kill -TERM $$mailbox 2>/dev/null; wait $$mailbox' EXIT; \
	for i in $$(seq 50); do \
	  $(PY) -c 'import socket; socket.create_connection(("127.0.0.1", 1025), 0.2).close()' \
	    2>/dev/null && break; sleep 0.1; \
	done; \
	export NEWSLETTER_SECRET="$${NEWSLETTER_SECRET:-$(DEMO_SECRET)}"; \
	export NEWSLETTER_BOUNCES__RETURN_PATH="$${NEWSLETTER_BOUNCES__RETURN_PATH:-$(DEMO_RETURN)}"; \
	$(BIN)/newsletter send --issue 14 --list staging --yes && \
	echo "--- the bounce mailbox (here the capture server's Maildir):" && \
	$(BIN)/newsletter bounces --maildir .newsletter/mailbox && \
	$(BIN)/newsletter suppressions --list staging && \
	$(BIN)/newsletter status --issue 14 --list staging && \
	echo "--- lifted again, so the demo can be run again:" && \
	$(BIN)/newsletter unsubscribe $(DEMO_BOUNCE) --list staging --undo

lint: $(STAMP)
	$(BIN)/ruff check src tests benchmarks docs
	$(BIN)/ruff format --check src tests benchmarks docs
	$(BIN)/mypy src

test: lint
	$(BIN)/pytest

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

clean:
	rm -rf $(VENV) out .newsletter .pytest_cache .mypy_cache .ruff_cache
