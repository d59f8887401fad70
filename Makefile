# lamina - the two commands: `make run` and `make test`. Both install missing
# build tools first (scripts/deps.sh). BUILD, SAN_BUILD and CLANG_SAN_BUILD
# name the build dirs; FUZZ_SECONDS is the time each libFuzzer target runs in
# `make test` (0 skips the bounded fuzzing). `make install PREFIX=P` installs
# the release build as a C library (lib/, include/, pkg-config, bin/lamina);
# DESTDIR stages it.
BUILD ?= build
SAN_BUILD ?= build-san
CLANG_SAN_BUILD ?= build-san-clang
FUZZ_SECONDS ?= 15
JOBS ?= $(shell nproc 2>/dev/null || echo 2)
MODEL ?=
PROMPT ?= Once upon a time
N ?= 128
PREFIX ?= /usr/local
DESTDIR ?=

SAN_ENV = ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
HAVE_CLANG = command -v clang >/dev/null 2>&1 && command -v clang++ >/dev/null 2>&1

.PHONY: all deps build build-san build-san-clang test test-fast fuzz run install clean

all: build

deps:
	@bash scripts/deps.sh

build: deps
	@cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release >/dev/null
	@cmake --build $(BUILD) -j $(JOBS)

build-san: deps
	@cmake -S . -B $(SAN_BUILD) -DCMAKE_BUILD_TYPE=Debug -DLM_SANITIZE=ON >/dev/null
	@cmake --build $(SAN_BUILD) -j $(JOBS)

# clang's ASan/UBSan (it checks what gcc's misses, e.g. arithmetic on NULL),
# with the library instrumented for libFuzzer and the fuzz_<name> binaries.
build-san-clang: deps
	@if $(HAVE_CLANG); then \
	  CC=clang CXX=clang++ cmake -S . -B $(CLANG_SAN_BUILD) -DCMAKE_BUILD_TYPE=Debug -DLM_SANITIZE=ON >/dev/null && \
	  cmake --build $(CLANG_SAN_BUILD) -j $(JOBS) --target all fuzzers; \
	else echo "make: clang not found: no clang sanitizer build (scripts/deps.sh installs it on Debian)"; fi

# The whole suite: the release build; the same tests under gcc's ASan+UBSan,
# then under clang's; then each libFuzzer target for FUZZ_SECONDS from its seeds.
test: build build-san build-san-clang
	@cd $(BUILD) && ctest --output-on-failure -j $(JOBS)
	@sed 's/^/make: /' $(BUILD)/cuda-status.txt
	@cd $(SAN_BUILD) && $(SAN_ENV) ctest --output-on-failure -j $(JOBS) -LE nosan
	@if $(HAVE_CLANG) && [ -f $(CLANG_SAN_BUILD)/CTestTestfile.cmake ]; then \
	  cd $(CLANG_SAN_BUILD) && $(SAN_ENV) ctest --output-on-failure -j $(JOBS) -LE nosan; \
	else echo "make: clang not found: skipping the clang sanitizer tests"; fi
	@if [ "$(FUZZ_SECONDS)" = 0 ]; then echo "make: FUZZ_SECONDS=0: skipping bounded fuzzing"; \
	elif $(HAVE_CLANG) && [ -d $(CLANG_SAN_BUILD)/fuzz ]; then bash scripts/fuzz.sh $(CLANG_SAN_BUILD) $(FUZZ_SECONDS); \
	else echo "make: clang not found: skipping bounded fuzzing"; fi

test-fast: build
	@cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

# Only the bounded fuzzing (FUZZ_SECONDS per target; FUZZ_TARGETS to choose).
fuzz: build-san-clang
	@bash scripts/fuzz.sh $(CLANG_SAN_BUILD) $(FUZZ_SECONDS) $(FUZZ_TARGETS)

run: build
	@bash scripts/run.sh "$(BUILD)" "$(MODEL)" "$(PROMPT)" "$(N)"

install: build
	@DESTDIR="$(DESTDIR)" cmake --install $(BUILD) --prefix "$(PREFIX)"

clean:
	rm -rf $(BUILD) $(SAN_BUILD) $(CLANG_SAN_BUILD)
