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

demo: $(STAMP)
	$(BIN)/newsletter check --issue 14
	$(BIN)/newsletter build --issue 14 --out out/14

lint: $(STAMP)
	$(BIN)/ruff check src tests benchmarks
	$(BIN)/ruff format --check src tests benchmarks
	$(BIN)/mypy src

test: lint
	$(BIN)/pytest

bench: $(STAMP)
	$(PY) benchmarks/render.py

clean:
	rm -rf $(VENV) out .newsletter .pytest_cache .mypy_cache .ruff_cache
