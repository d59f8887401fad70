# lamina - the two commands: `make run` and `make test`. Both install missing
# build tools first (scripts/deps.sh). BUILD and SAN_BUILD name the build dirs.
BUILD ?= build
SAN_BUILD ?= build-san
JOBS ?= $(shell nproc 2>/dev/null || echo 2)
MODEL ?=
PROMPT ?= Once upon a time
N ?= 128

.PHONY: all deps build build-san test test-fast run clean

all: build

deps:
	@bash scripts/deps.sh

build: deps
	@cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release >/dev/null
	@cmake --build $(BUILD) -j $(JOBS)

build-san: deps
	@cmake -S . -B $(SAN_BUILD) -DCMAKE_BUILD_TYPE=Debug -DLM_SANITIZE=ON >/dev/null
	@cmake --build $(SAN_BUILD) -j $(JOBS)

# The whole suite: the release build, then the same tests under ASan+UBSan.
test: build build-san
	@cd $(BUILD) && ctest --output-on-failure -j $(JOBS)
	@cd $(SAN_BUILD) && ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
		ctest --output-on-failure -j $(JOBS) -LE nosan

test-fast: build
	@cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

run: build
	@bash scripts/run.sh "$(BUILD)" "$(MODEL)" "$(PROMPT)" "$(N)"

clean:
	rm -rf $(BUILD) $(SAN_BUILD)
