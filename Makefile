# streamsmith: everything a fresh machine needs is installed by `make setup`,
# which `make demo` runs first; `make test` runs its steps too (the JVM archive's beside
# the static checks).
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: setup packages test-packages java maven jars lock jvm-archive db-start db-stop demo demo-cloudtrail demo-nest demo-signals test test-static test-suite test-fast test-deep test-cluster test-chaos lint docs docs-serve format bench peers peers-flink peers-sdp clean

setup:
	@$(MAKE) --no-print-directory -j2 packages $(VENV)/.installed
	@$(MAKE) --no-print-directory jvm-archive

# The Debian packages streamsmith needs, each as NAME:package with HAS_NAME, the check that
# tells a machine has it. Whatever a machine lacks is installed by one apt-get, beside the
# virtualenv's install (make setup, make test), not one package after the other.
# Java 17 runs Spark's JVM, and its compiler builds streamsmith's one Java class (the JDBC
# server's password check); Maven resolves the pinned jars once (make jars), no run needs
# it afterwards; PostgreSQL serves results (postgres sinks, tests); a native BLAS for
# MLlib (the secops anomaly model: without it the JVM prints "netlib-blas: JNI_OnLoad:
# dlopen(libblas.so.3) failed" at the first model call); headless Chromium loads the
# dashboard in the tests.
HAS_JDK = command -v java && command -v javac
HAS_MAVEN = command -v mvn
HAS_POSTGRES = ls /usr/lib/postgresql/*/bin/initdb || command -v initdb
HAS_BLAS = ls /usr/lib/*/libblas.so.3 || ls /lib/*/libblas.so.3
HAS_CHROMIUM = command -v chromium || command -v chromium-browser
PACKAGES := JDK:openjdk-17-jdk-headless MAVEN:maven POSTGRES:postgresql BLAS:libblas3
TEST_PACKAGES := $(PACKAGES) CHROMIUM:chromium
apt_install = missing=""; \
	$(foreach pair,$(1),{ $(HAS_$(firstword $(subst :, ,$(pair)))); } >/dev/null 2>&1 || \
	  missing="$$missing $(lastword $(subst :, ,$(pair)))";) \
	[ -z "$$missing" ] || { echo "installing$$missing"; $(SUDO) apt-get update -q && \
	  DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -q $$missing; }

packages:
	@$(call apt_install,$(PACKAGES))
test-packages:
	@$(call apt_install,$(TEST_PACKAGES))
java:
	@$(call apt_install,JDK:openjdk-17-jdk-headless)
maven:
	@$(call apt_install,MAVEN:maven)

# The jars of src/streamsmith/spark/stack.py (Spark's Kafka and Avro connectors, Delta Lake,
# the Kafka broker), resolved into streamsmith's own folder; every run reads only that.
jars: java maven $(VENV)/.installed
	$(VENV)/bin/streamsmith jvm fetch

# Spark's classes recorded once into a class-data-sharing archive: every later Spark start
# (run, backfill, query, the tests' subprocesses) maps it instead of loading jar by jar.
jvm-archive: java jars
	$(VENV)/bin/streamsmith jvm build

db-start: setup
	$(VENV)/bin/streamsmith db start

db-stop: setup
	$(VENV)/bin/streamsmith db stop

# Exactly the locked, hashed versions (requirements.lock, from `make lock`), then
# streamsmith itself without resolving anything again. pip installs the lock's uv alone
# (its hashes checked); uv installs the rest in half pip's time, compiled to bytecode as
# pip does (with PYTHONDONTWRITEBYTECODE set, as on CI machines, every Python process
# would otherwise compile pyspark's and pandas' modules anew: 2 s more per process).
UV_PIN = awk '/^uv==/ {on = 1} on {print} on && !/\\$$/ {exit}' requirements.lock
$(VENV)/.installed: pyproject.toml requirements.lock
	@[ -x $(PY) ] || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --require-hashes --no-deps -r <($(UV_PIN))
	$(VENV)/bin/uv pip install -q --python $(PY) --compile-bytecode --require-hashes -r requirements.lock
	$(VENV)/bin/uv pip install -q --python $(PY) --no-deps --no-build-isolation -e .
	@touch $@

# Resolve pyproject.toml's dependencies (with the dev extra) again into requirements.lock.
lock:
	@[ -x .venv-lock/bin/pip-compile ] || { $(PYTHON) -m venv .venv-lock && \
	  .venv-lock/bin/pip install -q pip-tools==7.6.2; }
	.venv-lock/bin/pip-compile -q --generate-hashes --allow-unsafe --strip-extras --no-emit-find-links \
	  --extra dev -o requirements.lock pyproject.toml


demo: setup
	$(VENV)/bin/streamsmith demo

# Two pytest workers (pytest-xdist): most of a test's time is a JVM starting or a query's
# driver planning, one core's work, so two workers keep both cores busy. Each worker has
# its own Spark session, broker and PostgreSQL; `worksteal` evens out the long tests.
TEST_WORKERS ?= 2
PYTEST := $(PY) -m pytest -n $(TEST_WORKERS) --dist worksteal

# The static checks (ruff, mypy, the strict docs build) need only the virtualenv: they run
# beside the JVM archive's recording (one core's work) and the tests, not before them; the
# import contracts are a unit test (tests/unit/test_layers.py). test-suite needs the rest
# of setup (jvm-archive).
test:
	@$(MAKE) --no-print-directory -j2 test-packages $(VENV)/.installed
	@$(MAKE) --no-print-directory jars
	@$(MAKE) --no-print-directory -j2 test-static test-suite

test-static:
	$(VENV)/bin/ruff check src tests benchmarks
	$(VENV)/bin/mypy
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict --quiet -d "$$(mktemp -d)"

test-suite: jvm-archive
	$(PYTEST)

# The deeper variants make test leaves out for its time budget: prefix integrity with 50
# random splits per reference app (make test runs 1), and the tests marked deep.
test-deep: setup
	STREAMSMITH_SPLITS=50 $(PYTEST) tests/streaming/test_prefix_integrity.py
	$(PYTEST) -m deep

test-fast: setup
	$(PYTEST) tests/unit

# Three always-on flows under a seeded schedule of kills, outages and malformed records,
# judged against the feeder's ground truth (benchmarks/chaos.py; --seed replays a run).
test-chaos: setup
	$(PY) benchmarks/chaos.py --profile full --json chaos-verdict.json

# The ysb app on a standalone master and two workers on loopback (streamsmith cluster).
test-cluster: setup
	$(PY) -m pytest -m cluster

# lint-imports checks the layer contracts of pyproject.toml's [tool.importlinter].
lint: setup
	$(VENV)/bin/ruff check src tests benchmarks
	$(VENV)/bin/ruff format --check src tests benchmarks
	$(VENV)/bin/mypy
	$(VENV)/bin/lint-imports --no-cache

# The documentation site: the generated references rewritten, then a strict build (a
# broken link or a missing page fails); docs-serve serves it on 127.0.0.1:8000.
docs: setup
	$(PY) docs/gen_reference.py
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict

docs-serve: docs
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs serve --dev-addr 127.0.0.1:8000

format: setup
	$(VENV)/bin/ruff format src tests benchmarks
	$(VENV)/bin/ruff check --fix src tests benchmarks

bench: setup
	$(PY) benchmarks/cloudtrail_etl.py

# The peer frameworks of benchmarks/ysb.py --peers, in their own virtualenv (their pins
# clash with PySpark's).
PEERS_VENV := .venv-peers
peers: $(PEERS_VENV)/.installed

$(PEERS_VENV)/.installed:
	@[ -x $(PEERS_VENV)/bin/python ] || $(PYTHON) -m venv $(PEERS_VENV)
	$(PEERS_VENV)/bin/python -m pip install -q quixstreams==3.28.1 bytewax==0.21.1 pathway==0.33.0
	@touch $@

# PyFlink (benchmarks/peers/pyflink_*.py) in a virtualenv of its own: its pins (pyarrow 16,
# protobuf 5, py4j 0.10.9.7, apache-beam) clash with PySpark's and with the other peers'.
# Flink's SQL Kafka connector is not in the wheel: Maven resolves it once from Maven Central
# into the virtualenv's jars/ folder, built for the wheel's Flink minor (5.0.0-2.2 for 2.2;
# Maven Central has none for 2.3 yet, hence Flink 2.2). No run downloads anything.
FLINK_VENV := .venv-flink
FLINK_VERSION := 2.2.1
FLINK_KAFKA := org.apache.flink:flink-sql-connector-kafka:5.0.0-2.2
FLINK_STAMP := $(FLINK_VENV)/.installed-$(FLINK_VERSION)-$(lastword $(subst :, ,$(FLINK_KAFKA)))
peers-flink: $(FLINK_STAMP)

$(FLINK_STAMP): | java maven
	@[ -x $(FLINK_VENV)/bin/python ] || $(PYTHON) -m venv $(FLINK_VENV)
	$(FLINK_VENV)/bin/python -m pip install -q apache-flink==$(FLINK_VERSION)
	rm -rf $(FLINK_VENV)/jars
	mvn -B -q dependency:copy -Dartifact=$(FLINK_KAFKA) -DoutputDirectory=$(FLINK_VENV)/jars
	@touch $@

# Spark Declarative Pipelines' own runner (`spark-pipelines`), the reference the SDP tests
# marked deep and benchmarks compare streamsmith's tables with: pyspark with its pipelines
# extra in a virtualenv of its own, with Delta's jars (resolved by `streamsmith jvm fetch`)
# copied into that pyspark's jars/ folder. No run downloads anything.
SDP_VENV := .venv-sdp
peers-sdp: $(SDP_VENV)/.installed

$(SDP_VENV)/.installed: | jars
	@[ -x $(SDP_VENV)/bin/python ] || $(PYTHON) -m venv $(SDP_VENV)
	$(SDP_VENV)/bin/python -m pip install -q "pyspark[pipelines]==4.2.0"
	cp $$($(VENV)/bin/streamsmith jvm jars | awk '$$1 == "spark" && $$2 ~ /\/delta-[^\/]*\.jar$$/ {print $$2}') \
	  "$$($(SDP_VENV)/bin/python -c 'import os, pyspark; print(os.path.join(os.path.dirname(pyspark.__file__), "jars"))')"
	@touch $@

demo-cloudtrail: setup
	$(VENV)/bin/streamsmith demo cloudtrail

demo-nest: setup
	$(VENV)/bin/streamsmith demo nest

demo-signals: setup
	$(VENV)/bin/streamsmith demo signals

clean:
	-$(VENV)/bin/streamsmith db stop --root streamsmith-demo-signals 2>/dev/null
	rm -rf streamsmith-demo streamsmith-demo-cloudtrail streamsmith-demo-nest streamsmith-demo-signals streamsmith-data .pytest_cache
