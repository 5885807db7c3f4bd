# skv.mk -- SKV's additions to upstream's src/Makefile.
#
# Upstream's src/Makefile includes this file (patch 0001) right after it
# defines its object lists, with SKV_SRC set to this directory. Everything SKV
# compiles into the upstream binaries is listed here, so the patch series only
# carries the one include line.

# Our sources are found through vpath; objects land next to upstream's.
vpath %.c $(SKV_SRC)
# Upstream headers first (-I.), then ours. Our objects put -I. before
# upstream's -I../deps/hiredis, so that "sds.h" is the server's sds.
FINAL_CFLAGS += -I. -I$(SKV_SRC)
# The daemon's own sources (../nic-kv), named once: nic-kv and nic-kv-debug
# below are built from this list.
NICKV_OWN = nickv nickv_log nickv_config nickv_cmd nickv_probe nickv_failover nickv_state nickv_repoint nickv_coord nickv_etcd nickv_sentinel nickv_replica nickv_upstream nickv_fullsync nickv_resp nickv_fanout nickv_backlog nickv_conn nickv_resolve nickv_info nickv_cluster nickv_busy nickv_member nickv_tls nickv_status
# REPLCONF nickv messages (src/nickv_msg.c): built by the daemon, read by the master.
NICKV_OWN += nickv_msg
SKV_OWN_OBJ = rdma_chan.o rdma_none.o rdma_ae.o rdma.o nickv_server.o nickv_lease.o nickv_watch.o hiredis_rdma.o rdma_tool.o $(addsuffix .o,$(NICKV_OWN))
# SKV_DEBUG=yes: our sources check their invariants (rdmaInvariant in
# rdma_chan.h). Objects do not notice the switch: make clean first.
ifeq ($(SKV_DEBUG),yes)
SKV_DEBUG_CFLAGS = -DSKV_DEBUG
endif
# Our own files: a call to an undeclared function is an error, not a
# warning (its int result silently truncated a pointer once: a header left
# out after nickv.h was split per part).
SKV_OWN_CFLAGS = -Werror=implicit-function-declaration -Werror=int-conversion
$(SKV_OWN_OBJ): FINAL_CFLAGS := -I. $(FINAL_CFLAGS) $(SKV_DEBUG_CFLAGS) $(SKV_OWN_CFLAGS)

# The RDMA channel library (rdma_chan.c, over rdma-core) and the event-loop
# adapter that drives its channels (rdma_ae.c). BUILD_RDMA=no builds without
# rdma-core, as BUILD_TLS=no builds without OpenSSL: rdma_none.c stands in
# for the library, every RDMA entry point fails with "RDMA support was not
# built", and nothing includes <infiniband/*> or links libibverbs/librdmacm.
# The setting is remembered in .skv-build-rdma; when it changes, the library
# object is rebuilt, so that every binary is linked again.
ifeq ($(BUILD_RDMA),no)
SKV_RDMA_LIB_OBJ = rdma_none.o
else
SKV_RDMA_LIB_OBJ = rdma_chan.o
FINAL_LIBS += -libverbs -lrdmacm
endif
SKV_RDMA_OBJ = $(SKV_RDMA_LIB_OBJ) rdma_ae.o
SKV_RDMA_SETTING := $(shell s='$(BUILD_RDMA)'; [ "$$(cat .skv-build-rdma 2>/dev/null)" = "$$s" ] || echo "$$s" > .skv-build-rdma)
$(SKV_RDMA_LIB_OBJ): .skv-build-rdma


# Objects linked into redis-server (and redis-sentinel, the same binary):
# the RDMA transport (the channel library and the connection type) and the
# master's side of Nic-KV.
SKV_SERVER_OBJ = $(SKV_RDMA_OBJ) rdma.o nickv_server.o nickv_lease.o nickv_watch.o nickv_msg.o
REDIS_SERVER_OBJ += $(SKV_SERVER_OBJ)

# redis-cli and redis-benchmark: --rdma, through hiredis contexts over RDMA.
REDIS_CLI_OBJ += hiredis_rdma.o $(SKV_RDMA_OBJ)
REDIS_BENCHMARK_OBJ += hiredis_rdma.o $(SKV_RDMA_OBJ)

# skv-rdma-tool: a TCP-to-RDMA proxy and RDMA test clients (tests/rdma).
# Not built with BUILD_RDMA=no: it has nothing to do without RDMA.
SKV_RDMA_TOOL_NAME = skv-rdma-tool
SKV_RDMA_TOOL_OBJ = rdma_tool.o hiredis_rdma.o $(SKV_RDMA_OBJ) ae.o anet.o zmalloc.o monotonic.o redisassert.o
-include rdma_tool.d

# Our targets are defined before upstream's "all": keep "all" the default.
.DEFAULT_GOAL := all
ifneq ($(BUILD_RDMA),no)
all: $(SKV_RDMA_TOOL_NAME)
endif

$(SKV_RDMA_TOOL_NAME): $(SKV_RDMA_TOOL_OBJ)
	$(REDIS_LD) -o $@ $^ ../deps/hiredis/libhiredis.a $(FINAL_LIBS)

# nic-kv: the Nic-KV daemon (../nic-kv) with the RDMA channel library, and upstream's event loop, sds,
# lists, allocator and number parsers (util.c: string2ll, memtoull) compiled from this tree.
SKV_NICKV_SRC = $(SKV_SRC)/../nic-kv
vpath %.c $(SKV_NICKV_SRC)
NICKV_NAME = nic-kv
NICKV_OBJ = $(addsuffix .o,$(NICKV_OWN)) $(SKV_RDMA_OBJ) ae.o anet.o sds.o zmalloc.o adlist.o monotonic.o redisassert.o util.o sha256.o
-include $(addsuffix .d,$(NICKV_OWN))
all: $(NICKV_NAME)

$(NICKV_NAME): $(NICKV_OBJ)
	$(REDIS_LD) -o $@ $^ $(FINAL_LIBS)

# nickv-etcd-check: one call of Nic-KV's etcd client (nickv_etcd.c) from the
# shell, for tests/unit/etcd-client.tcl and for operators.
NICKV_ETCD_CHECK_NAME = nickv-etcd-check
NICKV_ETCD_CHECK_OBJ = nickv_etcd_check.o nickv_etcd.o sds.o zmalloc.o util.o sha256.o
-include nickv_etcd_check.d
nickv_etcd_check.o: FINAL_CFLAGS := -I. $(FINAL_CFLAGS) $(SKV_DEBUG_CFLAGS) $(SKV_OWN_CFLAGS)
all: $(NICKV_ETCD_CHECK_NAME)

$(NICKV_ETCD_CHECK_NAME): $(NICKV_ETCD_CHECK_OBJ)
	$(REDIS_LD) -o $@ $^ $(FINAL_LIBS)

# nic-kv-debug: the same daemon with its invariants checked, nkBug() aborting
# (-DNK_DEBUG; see nic-kv/nickv.h) and the channel's own checks (-DSKV_DEBUG),
# from objects of its own: the normal build is untouched. Not part of "all":
# "make nic-kv-debug" at the top. The Tcl tests run it with SKV_NICKV=src/nic-kv-debug.
NICKV_DEBUG_NAME = nic-kv-debug
NICKV_DEBUG_OWN = $(NICKV_OWN) $(basename $(SKV_RDMA_OBJ))
NICKV_DEBUG_OWN_OBJ = $(addsuffix -nkdebug.o,$(NICKV_DEBUG_OWN))
NICKV_DEBUG_OBJ = $(NICKV_DEBUG_OWN_OBJ) ae.o anet.o sds.o zmalloc.o adlist.o monotonic.o redisassert.o util.o sha256.o
-include $(addsuffix -nkdebug.d,$(NICKV_DEBUG_OWN))
$(NICKV_DEBUG_OWN_OBJ): FINAL_CFLAGS := -I. $(FINAL_CFLAGS) -DNK_DEBUG -DSKV_DEBUG $(SKV_OWN_CFLAGS)

%-nkdebug.o: %.c .make-prerequisites
	$(REDIS_CC) -MMD -o $@ -c $<

$(NICKV_DEBUG_NAME): $(NICKV_DEBUG_OBJ)
	$(REDIS_LD) -o $@ $^ $(FINAL_LIBS)
