# Two commands on a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
# two installs: the demo's (the package and the openai SDK, a few MB) and the
# developer's (every extra and the dev group: test, lint, docs, benchmarks).
# The full install also satisfies the demo, so it stamps both.
DEMO_STAMP := $(VENV)/.installed-demo
STAMP      := $(VENV)/.installed
EXTRAS     := openai,postgres,redis,langgraph,openai-agents,pydantic-ai,encryption,zstd,parquet,otel,prometheus,s3,ui,schedule

.PHONY: demo test coverage lint bench clean docs docs-tables

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade "pip>=25.1"

$(DEMO_STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e ".[openai]"
	touch $(DEMO_STAMP)

$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e ".[$(EXTRAS)]" --group dev
	touch $(STAMP) $(DEMO_STAMP)

demo: $(DEMO_STAMP)
	$(BIN)/resumable demo

# The tests run in parallel (pytest-xdist, one worker per CPU), except the few that
# stop or restart the shared PostgreSQL/Redis: those run alone afterwards, so no other
# test sees its server go away. Exit status 5 is "no test selected" (a PYTEST_ARGS
# that picks none of them), which is not a failure.
PYTEST_WORKERS ?= auto
define run_tests
	$(1) -n $(PYTEST_WORKERS) -m "not restarts_server" $(PYTEST_ARGS)
	$(1) -m restarts_server $(PYTEST_ARGS) || [ $$? -eq 5 ]
endef

test: $(STAMP)
	$(call run_tests,$(BIN)/python -m pytest)

# the same tests under coverage (workers and the CLI subprocesses included), then a report
coverage: $(STAMP)
	$(BIN)/coverage erase
	$(call run_tests,$(BIN)/coverage run -m pytest)
	$(BIN)/coverage combine --quiet
	$(BIN)/coverage report --skip-covered --skip-empty --sort=cover | tail -n 25

lint: $(STAMP)
	$(BIN)/ruff format --check src tests benchmarks examples
	$(BIN)/ruff check src tests benchmarks examples
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
