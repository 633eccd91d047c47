# Two commands on a fresh machine: `make demo` and `make test`.
# Both build .venv first (Python 3.11, both engines, the dev tools).
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: demo test lint bench proto java clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e ".[dev]"
	touch $(STAMP)

java:
	@java -version >/dev/null 2>&1 || { \
	  echo "Java 17 is needed by Flink and Spark and was not found."; \
	  echo "Install it with: apt-get install -y openjdk-17-jre-headless"; exit 1; }

demo: $(STAMP) java
	$(PY) -m examples.spark_event_time

test: $(STAMP) java
	$(PY) -m pytest

lint: $(STAMP)
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .

bench: $(STAMP)
	$(PY) bench/run.py

proto: $(STAMP)
	$(PY) proto/generate.py

clean:
	rm -rf $(VENV) .pytest_cache
