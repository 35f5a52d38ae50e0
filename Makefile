# Thin wrapper over CMake: `make`, `make run`, `make test`, `make test-asan`, `make parity`.
BUILD      ?= build
ASAN_BUILD ?= build-asan
FUZZ_BUILD ?= build-fuzz
CLANG_BUILD ?= build-clang
FUZZ_SECONDS ?= 60
JOBS       ?= $(shell nproc 2>/dev/null || echo 2)
VENV       ?= tools/.venv

.PHONY: all deps build run test test-portable test-asan test-clang fuzz install parity bench clean

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

# The suite again as other CPUs run it (results must not depend on the kernels chosen): capped
# to AVX2 (what AMD Zen 2/3 and Intel client CPUs get), capped to no SIMD (OpenBLAS products,
# scalar loops), and with the scalar loops and the reference GEMM forced (slow: minutes).
test-portable: build
	@cd $(BUILD) && for env in BRIGADE_ISA=avx2 BRIGADE_ISA=scalar "BRIGADE_SIMD=scalar BRIGADE_GEMM=ref"; do \
		echo "== ctest with $$env"; env $$env ctest --output-on-failure -j $(JOBS) || exit 1; done

test-asan: deps
	@cmake -S . -B $(ASAN_BUILD) -DCMAKE_BUILD_TYPE=Debug -DBRIGADE_SANITIZE=ON >/dev/null
	@cmake --build $(ASAN_BUILD) -j $(JOBS)
	@cd $(ASAN_BUILD) && ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
		ctest --output-on-failure -j $(JOBS)

# The suite built with clang instead of gcc (Release): the fuzz harnesses need clang, so every
# file must build with it, and the results must not depend on the compiler.
test-clang:
	@bash scripts/deps.sh fuzz
	@CC=clang cmake -S . -B $(CLANG_BUILD) -DCMAKE_BUILD_TYPE=Release >/dev/null
	@cmake --build $(CLANG_BUILD) -j $(JOBS)
	@cd $(CLANG_BUILD) && ctest --output-on-failure -j $(JOBS)

# libFuzzer harnesses (fuzz/) with ASan/UBSan, FUZZ_SECONDS each, new coverage merged into
# fuzz/corpus/ (which make test replays). Needs clang: scripts/deps.sh fuzz installs it.
fuzz:
	@bash scripts/deps.sh fuzz
	@CC=clang cmake -S . -B $(FUZZ_BUILD) -DCMAKE_BUILD_TYPE=Debug -DBRIGADE_SANITIZE=ON -DBRIGADE_FUZZ=ON >/dev/null
	@cmake --build $(FUZZ_BUILD) -j $(JOBS) --target fuzzers
	@bash fuzz/run.sh $(FUZZ_BUILD) $(FUZZ_SECONDS)

# Headers, libbrigade.{so,a}, the brigade command, brigade.pc and brigadeConfig.cmake under PREFIX.
PREFIX ?= /usr/local
install: build
	@cmake --install $(BUILD) --prefix $(PREFIX)

# Live comparison against transformers (creates the Python venv on first use).
parity: build
	@bash tools/parity.sh $(BUILD) $(VENV)

# brigade against PyTorch on this machine, in one run (creates the Python venv on first use).
bench: build
	@bash bench/run.sh $(BUILD)

clean:
	rm -rf $(BUILD) $(ASAN_BUILD) $(CLANG_BUILD) $(FUZZ_BUILD)
