# Two commands on a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: demo test lint bench clean docs docs-tables

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade "pip>=25.1"
	$(BIN)/python -m pip install --quiet -e ".[postgres,redis,langgraph,encryption,zstd,parquet,otel,prometheus,s3,ui]" --group dev
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/resumable demo

test: $(STAMP)
	$(BIN)/coverage erase
	$(BIN)/coverage run -m pytest $(PYTEST_ARGS)
	$(BIN)/coverage combine --quiet
	$(BIN)/coverage report --skip-covered --skip-empty --sort=cover | tail -n 25

lint: $(STAMP)
	$(BIN)/ruff format --check src tests benchmarks
	$(BIN)/ruff check src tests benchmarks
	$(BIN)/mypy src tests
	$(BIN)/mypy benchmarks
	$(BIN)/pyright src tests/typing

# step_overhead, pg_ and redis_step_overhead refresh src/resumable/data/overhead.json
# (read by `resumable cost-model`); without the services, their entries keep their old date
bench: $(STAMP)
	$(BIN)/python benchmarks/step_overhead.py
	$(BIN)/python benchmarks/step_work.py
	$(BIN)/python benchmarks/resume_latency.py
	$(BIN)/python benchmarks/snapshot_storage.py
	$(BIN)/python benchmarks/compression.py
	$(BIN)/python benchmarks/recovery_latency.py
	$(BIN)/python benchmarks/check_speed.py
	-$(BIN)/python benchmarks/pg_step_overhead.py
	-$(BIN)/python benchmarks/redis_step_overhead.py

# the site under site/, from docs/ and the docstrings; --strict fails on any warning
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --quiet

# rewrite the guide's cost tables from `resumable cost-model` (after `make bench`)
docs-tables: $(STAMP)
	$(BIN)/python tests/docs/test_cost_tables.py

clean:
	rm -rf $(VENV) site .resumable .pytest_cache .mypy_cache .ruff_cache .coverage*
