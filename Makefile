# xccl: build libxccl.so (Go, -buildmode=c-shared), the launcher, the C
# examples; run the quick-start job; run every test.
GO       ?= go
CC       ?= cc
BUILD    ?= build
PREFIX   ?= /usr/local
SOVER    := 1
LIB      := $(BUILD)/libxccl.so.$(SOVER).0.0
CFLAGS   ?= -O2 -Wall -Wextra -Werror -std=c99 -D_POSIX_C_SOURCE=200809L
NP       ?= 4
GOSRC    := $(shell find . -name '*.go' -not -path './$(BUILD)/*') $(wildcard abi/*.[ch] abi/*.map include/*.h devices/host/*.[ch]) go.mod go.sum
EXAMPLES := $(BUILD)/allreduce $(BUILD)/collectives $(BUILD)/paddle_loader

# Whether the C compiler finds UCX's headers: devices/host/ucx_shim.c builds
# its UCX links only then (__has_include). Go's build cache does not notice
# headers installed after a build, so the answer goes into CGO_CFLAGS (part
# of every cgo package's cache key) and into a stamp $(LIB) depends on:
# installing or removing libucx-dev rebuilds what needs it.
# (A CGO_CFLAGS given on the command line or inherited from a parent make
# keeps its flags, less an earlier answer.)
CGO_BASE  := $(filter-out -DXCCL_UCX_HEADERS=%,$(or $(CGO_CFLAGS),-O2 -g))
HAVE_UCX  := $(shell printf '\043include <ucp/api/ucp.h>\n' | $(CC) $(CGO_CPPFLAGS) $(CGO_BASE) -E -x c - >/dev/null 2>&1 && echo 1 || echo 0)
UCX_STAMP := $(BUILD)/.ucx-headers-$(HAVE_UCX)
override CGO_CFLAGS := $(CGO_BASE) -DXCCL_UCX_HEADERS=$(HAVE_UCX)
export CGO_CFLAGS

.PHONY: all build run test test-python test-arm64 test-go test-race vet fmt clean install bench bench-forward bench-mixed bench-python soak gpu-kit

all: build

build: $(LIB) $(BUILD)/xcclrun $(BUILD)/xccl-perf $(EXAMPLES)

$(UCX_STAMP):
	@mkdir -p $(BUILD)
	@rm -f $(BUILD)/.ucx-headers-*
	@touch $@

$(LIB): $(GOSRC) $(UCX_STAMP)
	@mkdir -p $(BUILD)
	$(GO) build -buildmode=c-shared -trimpath \
	  -ldflags="-s -w -extldflags '-Wl,--version-script=$(CURDIR)/abi/xccl.map -Wl,-soname,libxccl.so.$(SOVER) -Wl,-z,now'" \
	  -o $@ ./abi
	@rm -f $(basename $@).h
	ln -sf libxccl.so.$(SOVER).0.0 $(BUILD)/libxccl.so.$(SOVER)
	ln -sf libxccl.so.$(SOVER) $(BUILD)/libxccl.so

$(BUILD)/xcclrun: $(GOSRC) $(UCX_STAMP)
	$(GO) build -trimpath -o $@ ./cmd/xcclrun

$(BUILD)/xccl-perf: $(GOSRC) $(UCX_STAMP)
	$(GO) build -trimpath -o $@ ./cmd/xccl-perf

$(BUILD)/%: examples/c/%.c examples/c/common.h include/xccl.h $(LIB)
	$(CC) $(CFLAGS) -Iinclude $< -o $@ -L$(BUILD) -lxccl -Wl,-rpath,'$$ORIGIN'

# Loads the plugin with dlopen, as Paddle does: not linked against it.
$(BUILD)/paddle_loader: examples/c/paddle_loader.c include/xccl_paddle.h include/xccl.h
	$(CC) $(CFLAGS) -Iinclude $< -o $@ -ldl

# The quick start: a 4-rank all-reduce on the host device, results and bandwidth.
run: build
	$(BUILD)/xcclrun -n $(NP) $(BUILD)/allreduce

# Every test: vet, the Go suites (conformance, C ABI, C examples under
# xcclrun), then the race detector over the short suites.
test: build vet
	XCCL_BUILD_DIR=$(CURDIR)/$(BUILD) $(GO) test -count=1 -timeout 30m ./...
	XCCL_BUILD_DIR=$(CURDIR)/$(BUILD) $(GO) test -count=1 -race -short -timeout 30m ./...
	$(MAKE) test-python
	$(MAKE) test-arm64

# The Python package and torch backend (python/tests, pytest): Debian's
# python3 carries python3-torch, python3-numpy and python3-pytest.
PYTHON ?= $(shell [ -x /usr/bin/python3 ] && echo /usr/bin/python3 || echo python3)
test-python: build
	@if ! $(PYTHON) -c "import pytest, numpy" 2>/dev/null; then \
	  echo "test-python: SKIPPED: $(PYTHON) lacks pytest or numpy (apt install python3-pytest python3-numpy python3-torch)"; \
	else \
	  XCCL_LIBRARY=$(CURDIR)/$(BUILD)/libxccl.so $(PYTHON) -m pytest -q -p no:cacheprovider python/tests; \
	fi

# arm64 (cross-built, run under qemu-user): vet, the c-shared library, and
# the host engine's short suite (its release stores and prefetches are
# per-architecture assembly): apt install gcc-aarch64-linux-gnu qemu-user.
ARM64ENV := GOARCH=arm64 CGO_ENABLED=1 CC=aarch64-linux-gnu-gcc
ARM64RUN := qemu-aarch64 -L /usr/aarch64-linux-gnu
test-arm64:
	@if ! command -v aarch64-linux-gnu-gcc >/dev/null || ! command -v qemu-aarch64 >/dev/null; then \
	  echo "test-arm64: SKIPPED: no aarch64-linux-gnu-gcc or qemu-aarch64 (apt install gcc-aarch64-linux-gnu qemu-user)"; \
	else \
	  set -e; mkdir -p $(BUILD)/arm64; \
	  $(ARM64ENV) $(GO) vet ./...; \
	  $(ARM64ENV) $(GO) build -buildmode=c-shared -o $(BUILD)/arm64/libxccl.so ./abi; \
	  for p in internal/relstore internal/half devices/host; do \
	    $(ARM64ENV) $(GO) test -c -o $(BUILD)/arm64/$$(basename $$p).test ./$$p; \
	    (cd $$p && $(ARM64RUN) $(CURDIR)/$(BUILD)/arm64/$$(basename $$p).test -test.short -test.timeout 10m >$(CURDIR)/$(BUILD)/arm64/$$(basename $$p).log 2>&1) \
	      || { tail -50 $(BUILD)/arm64/$$(basename $$p).log; exit 1; }; \
	    echo "ok  	$$p (arm64, qemu-user)"; \
	  done; \
	fi

# The long soak: 10 000 mixed collectives × 4 ranks under the race detector;
# goroutines and open files must come back to where they started.
soak:
	XCCL_SOAK_OPS=10000 $(GO) test -race -count=1 -run TestSoak -v ./devices/host

vet:
	@test -z "$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))" || { gofmt -l .; echo "gofmt needed"; exit 1; }
	$(GO) vet ./...

# xccl-perf and the peers (OpenMPI, Gloo, memcpy) back to back, medians of
# REPS runs, ratio tables and plots in $(BUILD)/bench (see bench/run.sh).
bench: build
	BUILD=$(CURDIR)/$(BUILD) bench/run.sh

# The cost xccl adds over calling a vendor library directly (fake NCCL).
FAKESRC := internal/fakevendor/csrc
# dist.all_reduce through the torch backend beside gloo, 2 and 4 processes.
bench-python: build
	for n in 2 4; do BUILD=$(CURDIR)/$(BUILD) XCCL_LIBRARY=$(CURDIR)/$(BUILD)/libxccl.so $(PYTHON) bench/python_allreduce.py $$n; done

# Mixed communicator (host clusters 2+2) beside the same ranks flat.
bench-mixed: build
	BUILD=$(CURDIR)/$(BUILD) bench/mixed.sh

bench-forward: build
	$(CC) -O2 -shared -fPIC -pthread -Wno-unused-function -o $(BUILD)/libfakenccl.so $(FAKESRC)/fake_nccl.c
	$(CC) -O2 -shared -fPIC -pthread -Wno-unused-function -DRT=cuda -o $(BUILD)/libfakecudart.so $(FAKESRC)/fake_rt.c
	$(CC) $(CFLAGS) -Iinclude bench/forward_overhead.c -o $(BUILD)/forward_overhead -L$(BUILD) -lxccl -ldl -Wl,-rpath,'$$ORIGIN'
	XCCL_DEVICE=nvidia XCCL_NCCL_LIBRARY=$(CURDIR)/$(BUILD)/libfakenccl.so XCCL_CUDART_LIBRARY=$(CURDIR)/$(BUILD)/libfakecudart.so \
	  $(BUILD)/forward_overhead

# What bench/gpu/run.sh needs on a machine with an NVIDIA GPU and no Go:
# copy $(BUILD) and bench/ (or the repository) there, then
# bench/gpu/run.sh $(BUILD) OUTDIR.
gpu-kit: build
	$(CC) -O2 -Wall -Wextra -Werror -std=c11 -D_DEFAULT_SOURCE -Iinclude tests/c/paddle_replay.c -o $(BUILD)/paddle_replay -ldl -lpthread
	$(CC) -O2 -Wall -Wextra -Werror -std=c11 -D_DEFAULT_SOURCE -Iinclude tests/c/split.c -o $(BUILD)/split -L$(BUILD) -lxccl -Wl,-rpath,'$$ORIGIN'
	$(CC) $(CFLAGS) -Iinclude bench/forward_overhead.c -o $(BUILD)/forward_overhead -L$(BUILD) -lxccl -ldl -Wl,-rpath,'$$ORIGIN'

# Installs libxccl.so.1 (and its links), the headers, xcclrun and a
# pkg-config file: c++ app.cc $(pkg-config --cflags --libs xccl).
install: build
	install -d $(DESTDIR)$(PREFIX)/lib/pkgconfig $(DESTDIR)$(PREFIX)/include $(DESTDIR)$(PREFIX)/bin
	install -m 0755 $(LIB) $(DESTDIR)$(PREFIX)/lib/
	ln -sf libxccl.so.$(SOVER).0.0 $(DESTDIR)$(PREFIX)/lib/libxccl.so.$(SOVER)
	ln -sf libxccl.so.$(SOVER) $(DESTDIR)$(PREFIX)/lib/libxccl.so
	install -m 0644 include/xccl.h include/xccl_paddle.h $(DESTDIR)$(PREFIX)/include/
	install -m 0755 $(BUILD)/xcclrun $(BUILD)/xccl-perf $(DESTDIR)$(PREFIX)/bin/
	printf 'prefix=%s\nlibdir=$${prefix}/lib\nincludedir=$${prefix}/include\n\nName: xccl\nDescription: one collective-communication ABI over every accelerator vendor\nVersion: 0.1.0\nLibs: -L$${libdir} -Wl,-rpath,$${libdir} -lxccl\nCflags: -I$${includedir}\n' \
	  '$(PREFIX)' > $(DESTDIR)$(PREFIX)/lib/pkgconfig/xccl.pc

clean:
	rm -rf $(BUILD)
