/* rdma_proto.h -- the RDMA transport's control messages, as structs.
 *
 * Copyright (c) 2026, the SKV authors. BSD 3-Clause licence (see LICENSE).
 *
 * The wire format is "Valkey over RDMA", version 1 (see RDMA.md and the
 * protocol comment at the top of rdma_chan.c): every control message is 32
 * bytes, sent with IBV_WR_SEND, all fields big-endian, starting with a
 * 16-bit opcode:
 *
 *   offset  0      2      4             16     24       28      32
 *   Feature op     select reserved(20)         features(u64)
 *   Keepalive op   reserved(30) ..........................................
 *   Xfer    op     reserved(14) ........ addr(u64) length(u32) rkey(u32)
 *
 * The structs below lay the fields out at exactly those offsets with their
 * natural alignment (no packing needed); the _Static_asserts make the
 * compiler refuse any change that would move a byte. Fields hold wire
 * (big-endian) values: read and write them through rdmaBe16/32/64, which
 * convert both ways. A received message is copied into an rdmaCtrlMsg
 * before it is looked at; nothing in it is trusted (rdma_chan.c checks).
 *
 * Shared by the library (rdma_chan.c) and the bad-peer clients of
 * skv-rdma-tool, which build wrong messages on purpose from the same
 * structs. No <endian.h>: some users include Redis's fmacros.h, which
 * hides it.
 */

#ifndef SKV_RDMA_PROTO_H
#define SKV_RDMA_PROTO_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define RDMA_CTRL_MSG_SIZE           32

#define RDMA_OP_GET_SERVER_FEATURE   0
#define RDMA_OP_SET_CLIENT_FEATURE   1
#define RDMA_OP_KEEPALIVE            2
#define RDMA_OP_REGISTER_XFER_MEMORY 3

/* GetServerFeature and SetClientFeature. */
typedef struct rdmaFeatureMsg {
    uint16_t opcode;
    uint16_t select;
    uint8_t reserved[20];
    uint64_t features;
} rdmaFeatureMsg;

typedef struct rdmaKeepaliveMsg {
    uint16_t opcode;
    uint8_t reserved[30];
} rdmaKeepaliveMsg;

/* RegisterXferMemory: where the sender wants to be written to. */
typedef struct rdmaXferMsg {
    uint16_t opcode;
    uint8_t reserved[14];
    uint64_t addr;
    uint32_t length;
    uint32_t rkey;
} rdmaXferMsg;

typedef union rdmaCtrlMsg {
    uint16_t opcode;                 /* every message starts with it */
    rdmaFeatureMsg feature;
    rdmaKeepaliveMsg keepalive;
    rdmaXferMsg xfer;
    uint8_t raw[RDMA_CTRL_MSG_SIZE];
} rdmaCtrlMsg;

_Static_assert(sizeof(rdmaFeatureMsg) == RDMA_CTRL_MSG_SIZE, "Feature message is 32 bytes");
_Static_assert(offsetof(rdmaFeatureMsg, select) == 2, "Feature select at 2");
_Static_assert(offsetof(rdmaFeatureMsg, features) == 24, "Feature features at 24");
_Static_assert(sizeof(rdmaKeepaliveMsg) == RDMA_CTRL_MSG_SIZE, "Keepalive is 32 bytes");
_Static_assert(sizeof(rdmaXferMsg) == RDMA_CTRL_MSG_SIZE, "RegisterXferMemory is 32 bytes");
_Static_assert(offsetof(rdmaXferMsg, addr) == 16, "Xfer addr at 16");
_Static_assert(offsetof(rdmaXferMsg, length) == 24, "Xfer length at 24");
_Static_assert(offsetof(rdmaXferMsg, rkey) == 28, "Xfer rkey at 28");
_Static_assert(sizeof(rdmaCtrlMsg) == RDMA_CTRL_MSG_SIZE, "a control message is 32 bytes");

/* Host <-> big-endian; the same function goes both ways. */
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
static inline uint16_t rdmaBe16(uint16_t v) { return v; }
static inline uint32_t rdmaBe32(uint32_t v) { return v; }
static inline uint64_t rdmaBe64(uint64_t v) { return v; }
#else
static inline uint16_t rdmaBe16(uint16_t v) { return __builtin_bswap16(v); }
static inline uint32_t rdmaBe32(uint32_t v) { return __builtin_bswap32(v); }
static inline uint64_t rdmaBe64(uint64_t v) { return __builtin_bswap64(v); }
#endif

/* A zeroed message with this opcode (reserved bytes are zero on the wire). */
static inline void rdmaCtrlInit(rdmaCtrlMsg *m, uint16_t opcode) {
    memset(m, 0, sizeof(*m));
    m->opcode = rdmaBe16(opcode);
}

static inline uint16_t rdmaCtrlOpcode(const rdmaCtrlMsg *m) { return rdmaBe16(m->opcode); }

static inline void rdmaCtrlFeature(rdmaCtrlMsg *m, uint16_t opcode, uint16_t select, uint64_t features) {
    rdmaCtrlInit(m, opcode);
    m->feature.select = rdmaBe16(select);
    m->feature.features = rdmaBe64(features);
}

static inline void rdmaCtrlXfer(rdmaCtrlMsg *m, uint64_t addr, uint32_t length, uint32_t rkey) {
    rdmaCtrlInit(m, RDMA_OP_REGISTER_XFER_MEMORY);
    m->xfer.addr = rdmaBe64(addr);
    m->xfer.length = rdmaBe32(length);
    m->xfer.rkey = rdmaBe32(rkey);
}

#endif
