# squall - the two set-up commands are `make demo` and `make test` (see README.md).
BUILD       ?= build
BUILD_ASAN  ?= build-asan
BUILD_FUZZ  ?= build-fuzz
BUILD_TSAN  ?= build-tsan
BUILD_RELEASE ?= build-release
JOBS        ?= $(shell nproc)
FUZZ_SECONDS ?= 60
SQUALL      := $(BUILD)/squall
# Warnings are errors in every build made here and in CI; a plain `cmake` configure (a
# packager's) leaves them warnings (README.md, "Building").
WERROR      := -DSQ_WERROR=ON

.PHONY: all deps deps-test build test test-asan test-tsan release-check fuzz demo bench \
	bench-micro bench-scaling format format-check ci clean

all: build

# deps: what the build (and so `make demo`) needs; deps-test: that and what every test needs
# (Chromium for the browser tests, strace, iproute2 and util-linux for the security suite).
deps:
	@scripts/deps.sh

deps-test:
	@scripts/deps.sh test

build: deps
	@cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo $(WERROR) >/dev/null
	@cmake --build $(BUILD) -j$(JOBS)

test: deps-test
	@$(MAKE) --no-print-directory build
	@cd $(BUILD) && ctest --output-on-failure -j1

test-asan: deps-test
	@cmake -S . -B $(BUILD_ASAN) -DCMAKE_BUILD_TYPE=Debug -DSQ_SANITIZE=ON $(WERROR) >/dev/null
	@cmake --build $(BUILD_ASAN) -j$(JOBS)
	@cd $(BUILD_ASAN) && ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
		ctest --output-on-failure -j1

# The threaded parts (engine and server workers, the run store, the daemon's API, runner and ops
# threads, the bus drivers and the sink's HTTP workers and thread) again under ThreadSanitizer.
test-tsan: deps-test
	@cmake -S . -B $(BUILD_TSAN) -DCMAKE_BUILD_TYPE=Debug -DSQ_TSAN=ON $(WERROR) >/dev/null
	@cmake --build $(BUILD_TSAN) -j$(JOBS)
	@cd $(BUILD_TSAN) && TSAN_OPTIONS=halt_on_error=1 \
		ctest --output-on-failure -j1 -R 'test_engine|test_wsdrv|test_server|test_store|test_daemon|test_cluster|e2e.test_quick|e2e.test_executors|e2e.test_plans|e2e.test_protocols|e2e.test_wrk|e2e.test_plan_scripts|e2e.test_ws$$|e2e.test_cluster|e2e.test_daemon|test_busdrv|test_nats|test_mqtt|test_stamp|e2e.test_pipeline|e2e.test_proto_live|e2e.test_sink|e2e.test_push'

# A packager's optimised build (-O3: gcc warns about more there), with warnings as errors so a
# new one is fixed before it reaches a packager, then a smoke run of the binary it built.
release-check: deps
	@cmake -S . -B $(BUILD_RELEASE) -DCMAKE_BUILD_TYPE=Release $(WERROR) >/dev/null
	@cmake --build $(BUILD_RELEASE) -j$(JOBS)
	@$(BUILD_RELEASE)/squall --version
	@scripts/demo.sh $(BUILD_RELEASE)/squall 2s

fuzz:
	@scripts/deps.sh fuzz
	@CC=clang cmake -S . -B $(BUILD_FUZZ) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSQ_FUZZ=ON -DSQ_SANITIZE=ON $(WERROR) >/dev/null
	@cmake --build $(BUILD_FUZZ) -j$(JOBS)
	@scripts/fuzz.sh $(BUILD_FUZZ)/fuzz $(FUZZ_SECONDS)

demo: build
	@scripts/demo.sh $(SQUALL)

bench: build
	@scripts/deps.sh bench
	@bench/compare.sh --squall $(SQUALL) --probe $(BUILD)/bench/probe

bench-micro: build
	@bench/micro.sh $(BUILD)

bench-scaling: build
	@scripts/deps.sh bench
	@bench/scaling.sh --squall $(SQUALL)

format:
	@clang-format -i $$(git ls-files '*.c' '*.h')

format-check:
	@clang-format --dry-run --Werror $$(git ls-files '*.c' '*.h')

# What CI runs: the tests, the tests again under ASan+UBSan and TSan, the Release build, and
# every fuzzer.
ci: test test-asan test-tsan release-check fuzz

clean:
	rm -rf $(BUILD) $(BUILD_ASAN) $(BUILD_FUZZ) $(BUILD_TSAN) $(BUILD_RELEASE)
