# Entry points: `make demo` and `make test` install what is missing, build, and run.
BUILD ?= build
ASAN_BUILD ?= build-asan
JOBS ?= $(shell nproc)
CMAKE_FLAGS ?= -G Ninja -DCMAKE_BUILD_TYPE=Release

.PHONY: all help deps configure build link-venv test test-asan demo bench bench-fft bench-peers bench-lm bench-busy bench-accuracy fuzz clean

all: build

deps:
	@bash scripts/install-deps.sh

configure: deps
	@cmake -S . -B $(BUILD) $(CMAKE_FLAGS) > /dev/null

build: configure
	@cmake --build $(BUILD) -j $(JOBS)
	@$(MAKE) --no-print-directory link-venv

# `import eddy` in the project's .venv (from deps) finds the package of the build tree,
# $(BUILD)/python, without PYTHONPATH: a .pth file in the venv's site-packages names that folder.
# An editable install (pip install -e .) would build the extension again in scikit-build-core's own
# build folder, minutes per change; the .pth serves the build that `make build` just made, and the
# next `make build` points it at another BUILD. Only `build` writes it: the sanitizer build's
# module would not load in a plain interpreter.
VENV_PYTHON ?= .venv/bin/python
link-venv:
	@$(VENV_PYTHON) -c 'import pathlib, site, sys; pathlib.Path(site.getsitepackages()[0], "eddy-build.pth").write_text(sys.argv[1] + "\n")' \
	  "$(abspath $(BUILD))/python"

test: build
	ctest --test-dir $(BUILD) --output-on-failure -j $(JOBS)
	@$(MAKE) --no-print-directory test-asan

# The core tests again under AddressSanitizer + UndefinedBehaviorSanitizer.
test-asan: deps
	@cmake -S . -B $(ASAN_BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Debug -DEDDY_SANITIZE=ON \
	  -DEDDY_BUILD_BENCH=OFF -DEDDY_BUILD_EXAMPLES=OFF > /dev/null
	@cmake --build $(ASAN_BUILD) -j $(JOBS)
	ASAN_OPTIONS=detect_leaks=1 LSAN_OPTIONS=suppressions=$(CURDIR)/tests/lsan.supp UBSAN_OPTIONS=print_stacktrace=1 \
	  ctest --test-dir $(ASAN_BUILD) -L core --output-on-failure -j $(JOBS)

# The PINN accuracy suite (bench/accuracy/README.md): each problem solved with `eddy solve`, its
# error against an independent reference written into docs/benchmarks.md. About 25 minutes with
# two solves side by side. Not part of `make test`.
BENCH_ACCURACY_ARGS ?= --jobs 2
bench-accuracy: build
	$(VENV_PYTHON) bench/accuracy/run.py --build $(BUILD) --update-docs docs/benchmarks.md $(BENCH_ACCURACY_ARGS)

# The libFuzzer harnesses of tests/fuzz/ (docs/fuzzing.md), in a clang build of their own: each
# runs FUZZ_SECONDS on a copy of its seeds; findings go to build-fuzz/findings/. Not part of `make
# test`, which replays the seeds through the same harnesses (ctest tests fuzz_*).
FUZZ_BUILD ?= build-fuzz
FUZZ_SECONDS ?= 600
FUZZ_TARGETS ?= npy safetensors export pinn_config expression csv hdf5 operator_dataset operator_config lm_config tokenizer checkpoint
fuzz: deps
	@cmake -S . -B $(FUZZ_BUILD) -G Ninja -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ -DEDDY_FUZZ=ON \
	  -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -gline-tables-only" \
	  -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O1 -gline-tables-only" -DEDDY_CHECK_LAYERS=OFF -DEDDY_WITH_MPI=OFF -DEDDY_WITH_CUDA=OFF \
	  -DEDDY_BUILD_BENCH=OFF -DEDDY_BUILD_EXAMPLES=OFF -DEDDY_BUILD_PYTHON=OFF > /dev/null
	@cmake --build $(FUZZ_BUILD) -j $(JOBS) --target fuzz_targets
	@bash scripts/fuzz.sh $(FUZZ_BUILD) $(FUZZ_SECONDS) $(FUZZ_TARGETS)

# Burgers' equation from examples/pinn/burgers.yaml, on a budget of a few minutes.
# The command and the Python module only: the tests, benchmarks and examples wait for `make test`.
demo: configure
	@cmake --build $(BUILD) -j $(JOBS) --target eddy_cli _eddy eddy_python_sources
	@$(MAKE) --no-print-directory link-venv
	./$(BUILD)/bin/eddy solve examples/pinn/burgers.yaml training.adam.steps=1000 \
	  training.lbfgs.iterations=500 output.dir=runs/burgers-demo
	@echo "demo: a short budget (1,000 Adam steps, 500 L-BFGS); the example's own budget reaches a relative"
	@echo "  L2 error near 1e-3 (examples/pinn/README.md): ./$(BUILD)/bin/eddy solve examples/pinn/burgers.yaml"
	@echo "  Next: README.md (What works today), docs/config.md, examples/notebooks; make help lists targets."

help:
	@echo "make demo            install what is missing, build the eddy command and Python module, solve Burgers"
	@echo "make test            build everything and run every test (then the core tests under ASan/UBSan)"
	@echo "make build           build everything into $(BUILD) and point .venv's eddy at it"
	@echo "make bench           C++ microbenchmarks against OpenBLAS, Eigen and FFTW (docs/benchmarks.md)"
	@echo "make bench-peers     the PINN step against PyTorch and JAX (needs scripts/install-bench-deps.sh)"
	@echo "make bench-lm        language-model training and decoding against PyTorch (same)"
	@echo "make bench-accuracy  the PINN accuracy suite (about 25 minutes)"
	@echo "make bench-busy      the Burgers solve with another program holding a core"
	@echo "make fuzz            the libFuzzer harnesses (docs/fuzzing.md)"
	@echo "make clean           remove the build folders"

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
	rm -rf $(BUILD) $(ASAN_BUILD) $(FUZZ_BUILD)
