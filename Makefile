# Thin wrapper over CMake: `make`, `make run`, `make test`, `make test-asan`, `make parity`.
BUILD      ?= build
ASAN_BUILD ?= build-asan
JOBS       ?= $(shell nproc 2>/dev/null || echo 2)
VENV       ?= tools/.venv

.PHONY: all deps build run test test-asan parity bench clean

all: build

deps:
	@bash scripts/deps.sh

$(BUILD)/CMakeCache.txt: | deps
	@cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release >/dev/null

build: deps $(BUILD)/CMakeCache.txt
	@cmake --build $(BUILD) -j $(JOBS)

# The main job: a fresh tiny GPT-2, one forward pass with labels, logits shape and loss printed.
run: build
	@bash scripts/run-demo.sh $(BUILD)/brigade

test: build
	@cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

test-asan: deps
	@cmake -S . -B $(ASAN_BUILD) -DCMAKE_BUILD_TYPE=Debug -DBRIGADE_SANITIZE=ON >/dev/null
	@cmake --build $(ASAN_BUILD) -j $(JOBS)
	@cd $(ASAN_BUILD) && ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
		ctest --output-on-failure -j $(JOBS)

# Live comparison against transformers (creates the Python venv on first use).
parity: build
	@bash tools/parity.sh $(BUILD) $(VENV)

# brigade against PyTorch on this machine, in one run (creates the Python venv on first use).
bench: build
	@bash bench/run.sh $(BUILD)

clean:
	rm -rf $(BUILD) $(ASAN_BUILD)
