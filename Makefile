# kvserve: the two entry points of the README (`make run`, `make test`) and their parts.
# Every target installs missing Debian packages first (scripts/install-deps.sh).
BUILD      ?= build
ASAN_BUILD ?= build-asan
JOBS       ?= $(shell nproc)
PROMPT     ?= Once upon a time
CMAKE_FLAGS ?=

.PHONY: deps js-deps configure build run test test-release test-isa test-sanitize format-check bench format clean

deps:
	@scripts/install-deps.sh

# The OpenAI npm client for the server tests (tests/js, ctest kvserve_server_js), at the versions
# of package-lock.json; nothing to do when node_modules is newer than the lock file.
js-deps:
	@if [ tests/js/node_modules/.package-lock.json -nt tests/js/package-lock.json ]; then :; \
	elif command -v npm >/dev/null 2>&1; then \
	  cd tests/js && npm ci --prefer-offline --no-audit --no-fund --loglevel=error; \
	else echo "js-deps: npm not found; the kvserve_server_js test will fail until tests/js has node_modules"; fi

configure: deps
	cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Release -DKVS_WERROR=ON $(CMAKE_FLAGS)

build: configure
	@echo "make build: started $$(date +%T)"
	cmake --build $(BUILD) -j $(JOBS)

# The main job: generate a story with the default model (stories260K, converted at build time). Builds only the
# kvserve binary and the default model, not the test binaries.
run: configure
	cmake --build $(BUILD) -j $(JOBS) --target kvserve default_model
	$(BUILD)/kvserve run -p "$(PROMPT)" -n 256

# The whole test suite: formatting, the release build (warnings are errors) on the CPU's best kernels,
# again with the kernels limited to AVX2 and to scalar code, then again under AddressSanitizer + UBSan.
test: format-check test-release test-isa test-sanitize

test-release: build js-deps
	@echo "make test-release: started $$(date +%T)"
	ctest --test-dir $(BUILD) --output-on-failure -j $(JOBS)

# KVS_ISA limits the kernels of the test binaries and of the kvserve processes they start (tensor/isa.h);
# every level below the CPU's best runs again (a level above what the CPU has changes nothing, and the best
# one is test-release): avxvnni where the CPU has AVX-512 and AVX-VNNI, avx2 where it has either, and
# scalar. Only the modules whose tests check arithmetic run again (the kernels, attention, the models and
# the engine: ctest labels); the KV accounting, tokenizer, GGUF, CLI, server and bench tests do not depend
# on the kernels' ISA. AVX-VNNI changes only the packed int8 matmul kernels, so its run skips attention.
ISA_LABELS = ^(tensor|attention|model|engine)$$
VNNI_LABELS = ^(tensor|model|engine)$$
HAS_AVX512 := $(shell grep -qw avx512f /proc/cpuinfo && echo 1)
HAS_AVX_VNNI := $(shell grep -qw avx_vnni /proc/cpuinfo && echo 1)
test-isa: build js-deps
	@echo "make test-isa: started $$(date +%T)"
	if [ "$(HAS_AVX512)$(HAS_AVX_VNNI)" = 11 ]; then \
	  KVS_ISA=avxvnni ctest --test-dir $(BUILD) --output-on-failure -j $(JOBS) -L '$(VNNI_LABELS)' || exit 1; \
	fi
	for isa in $$([ -n "$(HAS_AVX512)$(HAS_AVX_VNNI)" ] && echo avx2) scalar; do \
	  KVS_ISA=$$isa ctest --test-dir $(BUILD) --output-on-failure -j $(JOBS) -L '$(ISA_LABELS)' || exit 1; \
	done

format-check: deps
	find src tests bench -name '*.cpp' -o -name '*.h' | xargs clang-format --dry-run --Werror

# Warnings are not errors here: GCC 12's instrumentation makes libstdc++ (std::regex, std::function) raise
# maybe-uninitialized false positives that the release build, which does use -Werror, does not.
# The sanitizers skip the few tests that only evaluate long perplexities against numeric bounds, DeepSeek-V2's
# every-form-and-layout sweep (27 s under ASan), and the GPU's sweeps over weight types and models and its CLI runs
# (30-75 s each under ASan: the shaders are not instrumented, and the host code they run is run under the
# sanitizers by GpuForward's engine tests) (the release pass runs them all; shorter tests run the same code under
# the sanitizers: Deepseek2.AbsorbedEqualsExpanded..., WeightTypes..., BatchedEqualsAlone): CI must stay under 35
# minutes on 2 cores.
SANITIZE_SKIP = ^(QuantizedKvQuality\.PerplexityStaysWithinTheBoundsOfTheF32Cache|Perplexity\.HalfPrecisionKvCostsLittle|Perplexity\.ReproducesReferenceForBothChunkLengths|BenchCli\.NoRepackKeepsTheFileLayout|KvEviction\.SinksKeepTheStreamsPerplexityWithinFivePercentOfTheFullCache|Deepseek2\.EveryFormAndLayoutEqualsTheNaiveReference|GpuWeightTypes\.EveryTypeGivesTheCpusScalarLogits|GpuWeightTypes\.QuantizedStories260KAgreesWithTheCpuTeacherForced|GpuForward\.Stories4MGivesTheReferenceGreedyIdsAndLogitsOnBothDevices|DevicesCli\.RunAndPerplexityOnTheGpuAreTheCpus|CliTensorParallel\.OnTheGpuRanksPrintWhatTheCpuPrints)$$
test-sanitize: deps js-deps
	@echo "make test-sanitize: started $$(date +%T)"
	cmake -S . -B $(ASAN_BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_FLAGS_RELEASE=-O1 -DKVS_SANITIZE=ON -DKVS_BUILD_BENCH=OFF -DKVS_WERROR=OFF
	cmake --build $(ASAN_BUILD) -j $(JOBS)
	ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
	  ctest --test-dir $(ASAN_BUILD) --output-on-failure -j $(JOBS) -E '$(SANITIZE_SKIP)'
	@echo "make test-sanitize: done $$(date +%T)"

bench: build
	$(BUILD)/kvserve bench

format:
	find src tests bench -name '*.cpp' -o -name '*.h' | xargs clang-format -i

clean:
	rm -rf $(BUILD) $(ASAN_BUILD)
