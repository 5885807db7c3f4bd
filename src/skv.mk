# skv.mk -- SKV's additions to upstream's src/Makefile.
#
# Upstream's src/Makefile includes this file (patch 0001) right after it
# defines its object lists, with SKV_SRC set to this directory. Everything SKV
# compiles into the upstream binaries is listed here, so the patch series only
# carries the one include line.

# Our sources are found through vpath; objects land next to upstream's.
vpath %.c $(SKV_SRC)
# Upstream headers first (-I.), then ours.
FINAL_CFLAGS += -I. -I$(SKV_SRC)

# Objects linked into redis-server (and redis-sentinel, the same binary).
SKV_SERVER_OBJ =
REDIS_SERVER_OBJ += $(SKV_SERVER_OBJ)
