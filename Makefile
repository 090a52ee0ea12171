# Entry points: `make demo` and `make test` install what is missing, build, and run.
BUILD ?= build
ASAN_BUILD ?= build-asan
JOBS ?= $(shell nproc)
CMAKE_FLAGS ?= -G Ninja -DCMAKE_BUILD_TYPE=Release

.PHONY: all deps configure build test test-asan demo bench bench-fft bench-peers bench-lm bench-busy clean

all: build

deps:
	@bash scripts/install-deps.sh

configure: deps
	@cmake -S . -B $(BUILD) $(CMAKE_FLAGS) > /dev/null

build: configure
	@cmake --build $(BUILD) -j $(JOBS)

test: build
	ctest --test-dir $(BUILD) --output-on-failure -j $(JOBS)
	@$(MAKE) --no-print-directory test-asan

# The core tests again under AddressSanitizer + UndefinedBehaviorSanitizer.
test-asan: deps
	@cmake -S . -B $(ASAN_BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Debug -DEDDY_SANITIZE=ON \
	  -DEDDY_BUILD_BENCH=OFF -DEDDY_BUILD_EXAMPLES=OFF > /dev/null
	@cmake --build $(ASAN_BUILD) -j $(JOBS)
	ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
	  ctest --test-dir $(ASAN_BUILD) -L core --output-on-failure -j $(JOBS)

# Burgers' equation from examples/pinn/burgers.yaml, on a budget of a few minutes.
demo: build
	./$(BUILD)/bin/eddy solve examples/pinn/burgers.yaml training.adam.steps=1000 \
	  training.lbfgs.iterations=500 output.dir=runs/burgers-demo

bench: build
	./$(BUILD)/bench/eddy_bench

# The FFT table over three eddy_bench processes, each planning anew (bench/fft_table.py).
bench-fft: build
	python3 bench/fft_table.py --build $(BUILD)

# eddy against PyTorch and JAX (bench/peers/run.py), in .venv-bench from
# scripts/install-bench-deps.sh; writes the table into docs/benchmarks.md. Not part of `make test`.
BENCH_PYTHON ?= .venv-bench/bin/python
bench-peers: configure
	@test -x $(BENCH_PYTHON) || { echo "bench-peers: $(BENCH_PYTHON) not found; run scripts/install-bench-deps.sh"; exit 1; }
	@cmake --build $(BUILD) -j $(JOBS) --target eddy_peers _eddy
	$(BENCH_PYTHON) bench/peers/run.py --build $(BUILD) --update-docs docs/benchmarks.md $(BENCH_PEERS_ARGS)

# Language models against PyTorch (bench/lm/speed.py): training and decode tokens/s at 1 and 2
# threads, and int8/int4 decode; trains the example into runs/fortunes_gpt first if it is not there.
bench-lm: configure
	@test -x $(BENCH_PYTHON) || { echo "bench-lm: $(BENCH_PYTHON) not found; run scripts/install-bench-deps.sh"; exit 1; }
	@cmake --build $(BUILD) -j $(JOBS) --target eddy _eddy
	$(BENCH_PYTHON) bench/lm/speed.py --build $(BUILD) $(BENCH_LM_ARGS)

# The Burgers solve at 1 and 2 threads on a quiet machine and with a busy loop on one core, with
# PyTorch eager beside it when .venv-bench has it (bench/busy_machine.py). Not part of `make test`.
bench-busy: build
	python3 bench/busy_machine.py --build $(BUILD) $(BENCH_BUSY_ARGS)

clean:
	rm -rf $(BUILD) $(ASAN_BUILD)
