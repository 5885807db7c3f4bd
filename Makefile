# Makefile -- build, run, test and install SKV.
#
# SKV is upstream Redis (fetched from Debian's source package, see deps/redis)
# patched by deps/redis/patches and extended by the sources in src/. Every
# target installs the packages it needs first (utils/setup-deps.sh).
#
#   make                 fetch + patch upstream into build/redis, build it
#   make run             build, then start SKV's main job (utils/run-skv.sh)
#   make test            build, then run every test suite (utils/run-tests.sh)
#   make test-skv        only SKV's own tests (fast loop while developing)
#   make nic-kv-debug    nic-kv with its invariants checked (nkBug aborts),
#                        as build/bin/nic-kv-debug
#   make nic-kv-arm64    nic-kv cross-built for aarch64 (the DPU's Arm cores),
#                        as build/bin/nic-kv-arm64 (run it here with
#                        utils/nic-kv-arm64-qemu)
#   make deb             Debian packages into build/deb/: skv-server (amd64),
#                        skv-nic-kv (amd64, arm64); utils/make-deb.sh
#   make install PREFIX=/usr/local
#   make check-patches   the exported patch series matches a fresh export
#   make check-layers    nic-kv/LAYERS holds for the objects built, and no
#                        function of SKV's own is over 100 lines
#                        (utils/check-layers.sh)
#   make check-model     spin checks the fencing protocol's model
#                        (model/fencing.pml, utils/check-model.sh)
#   make clean           remove build outputs, keep the patched tree
#   make distclean       remove build/ entirely (downloads included)

TOP    := $(CURDIR)
BUILD  := $(TOP)/build
REDIS  := $(BUILD)/redis
PREFIX ?= /usr/local
JOBS   ?= $(shell nproc 2>/dev/null || echo 2)

# BUILD_TLS: SKV serves TLS like Debian's redis-server does.
# BUILD_RDMA=no: build without rdma-core, as upstream builds without TLS
# (src/skv.mk, RDMA.md "Building without RDMA").
# SKV_DEBUG=yes: SKV's own code checks its invariants (src/rdma_chan.h).
BUILD_RDMA ?= yes
export BUILD_RDMA
# Debian's hardening flags, as a package built by dpkg-buildpackage gets them
# (DEB_BUILD_MAINT_OPTIONS=hardening=+all: stack protector, _FORTIFY_SOURCE,
# relro and bind-now), in the environment of upstream's Makefile, which
# passes CFLAGS and LDFLAGS on to its deps/ and uses CPPFLAGS when compiling
# (nic-kv too: it is built there). Empty where dpkg-buildflags is missing.
buildflags = $(shell DEB_BUILD_MAINT_OPTIONS=hardening=+all $(1) dpkg-buildflags --get $(2) 2>/dev/null)
HARDENING = CFLAGS='$(call buildflags,,CFLAGS)' CPPFLAGS='$(call buildflags,,CPPFLAGS)' \
            LDFLAGS='$(call buildflags,,LDFLAGS)'
HARDENING_ARM64 = CFLAGS='$(call buildflags,DEB_HOST_ARCH=arm64,CFLAGS)' \
            CPPFLAGS='$(call buildflags,DEB_HOST_ARCH=arm64,CPPFLAGS)' \
            LDFLAGS='$(call buildflags,DEB_HOST_ARCH=arm64,LDFLAGS)'
REDIS_MAKE = $(HARDENING) $(MAKE) -C $(REDIS) SKV_SRC=$(TOP)/src BUILD_TLS=yes BUILD_RDMA=$(BUILD_RDMA) SKV_DEBUG=$(SKV_DEBUG)

PATCHES := deps/redis/pin deps/redis/fetch.sh deps/redis/patches/series \
           $(wildcard deps/redis/patches/*.patch)

.PHONY: all deps run test test-skv install clean distclean check-patches check-layers check-model nic-kv-debug nic-kv-arm64 deb

all: deps $(REDIS)/.skv-patched
	+$(REDIS_MAKE) -j$(JOBS) all
	@mkdir -p $(BUILD)/bin
	@for b in redis-server redis-sentinel redis-cli redis-benchmark redis-check-rdb redis-check-aof nic-kv skv-rdma-tool; do \
	    if [ $$b = skv-rdma-tool ] && [ "$(BUILD_RDMA)" = no ]; then rm -f $(BUILD)/bin/$$b; continue; fi; \
	    ln -sfn ../redis/src/$$b $(BUILD)/bin/$$b; done
	@echo "SKV built: $(BUILD)/bin/ ($$($(BUILD)/bin/redis-server --version))"

deps:
	@utils/setup-deps.sh build

# Run the Nic-KV Tcl tests against it with SKV_NICKV=src/nic-kv-debug.
nic-kv-debug: all
	+$(REDIS_MAKE) -j$(JOBS) nic-kv-debug
	@ln -sfn ../redis/src/nic-kv-debug $(BUILD)/bin/nic-kv-debug

# nic-kv for aarch64, from a patched tree of its own (build/redis-arm64: the
# x86 objects stay), with Debian's cross compiler and the arm64 rdma-core
# packages (utils/setup-deps.sh arm64). libc's malloc (jemalloc is not
# cross-built; nic-kv allocates little), no libsystemd (nic-kv uses
# neither); TLS with the arm64 libssl (NIC-KV.md, "TLS": the DPU's links,
# and etcd's). uname_M tells upstream's Makefile the target's machine.
ARM64_TREE := $(BUILD)/redis-arm64
nic-kv-arm64: deps $(ARM64_TREE)/.skv-patched
	@utils/setup-deps.sh arm64
	+$(HARDENING_ARM64) $(MAKE) -C $(ARM64_TREE)/src -j$(JOBS) CC=aarch64-linux-gnu-gcc LD=aarch64-linux-gnu-gcc \
	    uname_M=aarch64 MALLOC=libc USE_SYSTEMD=no BUILD_TLS=yes BUILD_RDMA=$(BUILD_RDMA) \
	    SKV_SRC=$(TOP)/src nic-kv
	@mkdir -p $(BUILD)/bin
	@ln -sfn ../redis-arm64/src/nic-kv $(BUILD)/bin/nic-kv-arm64
	@echo "nic-kv for aarch64: $(BUILD)/bin/nic-kv-arm64 (run it here with utils/nic-kv-arm64-qemu)"

deb: all nic-kv-arm64
	@utils/setup-deps.sh deb
	utils/make-deb.sh

$(ARM64_TREE)/.skv-patched: $(PATCHES) | deps
	deps/redis/fetch.sh $(ARM64_TREE)
	@touch $@

# The patched tree is rebuilt from scratch whenever the pin or the series
# changes; fetch.sh replaces it atomically. After deps (order only): with
# make -j the fetch and setup-deps's apt-get update raced on a fresh
# machine ("You must put some 'deb-src' URIs in your sources.list").
$(REDIS)/.skv-patched: $(PATCHES) | deps
	deps/redis/fetch.sh $(REDIS)
	@touch $@

run: all
	utils/run-skv.sh

test: all
	@utils/setup-deps.sh test
	utils/run-tests.sh

test-skv: all
	@utils/setup-deps.sh test
	SKV_TEST_SUITES="layers skv" utils/run-tests.sh

check-patches: deps
	utils/patch-queue.sh check

check-layers: all
	utils/check-layers.sh

check-model:
	@utils/setup-deps.sh test
	utils/check-model.sh

install: all
	+$(REDIS_MAKE) install PREFIX=$(PREFIX)
	install -d $(PREFIX)/etc/skv $(PREFIX)/share/skv
	install -m 0755 $(REDIS)/src/nic-kv $(PREFIX)/bin/nic-kv
	install -m 0644 redis.conf $(PREFIX)/etc/skv/redis.conf
	install -m 0644 nic-kv/nic-kv.conf $(PREFIX)/etc/skv/nic-kv.conf
	install -m 0644 $(REDIS)/redis.conf $(PREFIX)/share/skv/redis.conf.reference
	install -m 0644 $(REDIS)/sentinel.conf $(PREFIX)/share/skv/sentinel.conf.reference
	install -m 0755 utils/fence-ovs.sh $(PREFIX)/share/skv/fence-ovs.sh
	@echo "installed into $(PREFIX): bin/redis-*, bin/nic-kv, etc/skv/{redis,nic-kv}.conf, share/skv/*.reference, share/skv/fence-ovs.sh"

clean:
	-[ -d $(REDIS) ] && $(REDIS_MAKE) clean
	rm -f $(REDIS)/src/skv-rdma-tool $(REDIS)/src/nic-kv $(REDIS)/src/nic-kv-debug $(REDIS)/src/*-nkdebug.[od]
	rm -rf $(BUILD)/bin $(BUILD)/test-logs $(BUILD)/run $(BUILD)/vm

distclean:
	rm -rf $(BUILD)
