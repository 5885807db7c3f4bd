/* nickv_resp.h -- RESP: argv commands, requests, replies, the replica
 * handshake, the RDB reader.
 *
 * Copyright (c) 2026, the SKV authors. BSD 3-Clause licence (see LICENSE).
 */
#ifndef NICKV_RESP_H
#define NICKV_RESP_H

#include "nickv.h"

/* nickv_resp.c: commands as argument vectors, a master's full sync reply. */
/* Append a command (first, then the arguments in ap up to a NULL) to out
 * as RESP: every argument a bulk string of exactly its bytes. */
sds nkCatCommandV(sds out, const char *first, va_list ap);
sds nkCatCommand(sds out, const char *first, ...) __attribute__((sentinel));
/* Replies to a client in the protocol it speaks (resp: 2 or 3), as
 * upstream's addReply*: RESP3's map, null, push and verbatim string, or
 * what stands for each in RESP2. */
sds nkCatBulk(sds s, const char *p, size_t len);
sds nkCatBulkLL(sds s, long long v);
sds nkCatMapLen(sds s, int resp, long n);
sds nkCatPushLen(sds s, int resp, long n);
sds nkCatNull(sds s, int resp);
sds nkCatNullArray(sds s, int resp);
sds nkCatVerbatim(sds s, int resp, const char *p, size_t len);

/* A replica's handshake with the master, for the link and for proxied full
 * syncs alike (see nickv_resp.c). */
typedef enum {
    NK_HS_AUTH, NK_HS_PORT, NK_HS_CAPA, NK_HS_HELLO, NK_HS_PSYNC, NK_HS_DONE, NK_HS_STEPS
} nkHandshakeStep;
typedef enum {
    NK_HS_SENT,                 /* the next command is queued in out */
    NK_HS_PSYNC_NEXT,           /* the caller sends its PSYNC (nkHandshakePsync);
                                 * the line is the hello's answer, with hello */
    NK_HS_PSYNC_REPLY,          /* the line answers the PSYNC: over to the caller */
    NK_HS_FAILED                /* err says why */
} nkHandshakeResult;
typedef struct nkHandshake {
    nkHandshakeStep step;
    int port;                   /* REPLCONF listening-port */
    int capa_eof;               /* REPLCONF capa eof */
    const char *hello;          /* REPLCONF nickv <hello> (the link); NULL: none */
    sds out;                    /* commands to send */
    char err[256];
} nkHandshake;
void nkHandshakeStart(nkHandshake *hs, const char *user, const char *pass);
nkHandshakeResult nkHandshakeReply(nkHandshake *hs, const char *line);
/* PSYNC replid offset, or PSYNC ? -1 with no replid. */
void nkHandshakePsync(nkHandshake *hs, const char *replid, long long offset);
const char *nkHandshakeStepName(const nkHandshake *hs);
#define NK_REPLY_LINE_MAX (64*1024)
sds nkNextLine(sds *in, const char **err);
#define NK_RDB_PREAMBLE (-2)        /* left: before the $ line */
#define NK_RDB_EOFMARK (-1)         /* left: until the mark */
#define NK_RDB_PREAMBLE_MAX 128     /* a $ line longer than this is garbage */
typedef struct nkRdbReader {
    long long left;                 /* NK_RDB_PREAMBLE, NK_RDB_EOFMARK, or bytes left */
    char mark[NK_RUNID_SIZE];
    char tail[NK_RUNID_SIZE];       /* the last bytes read: a mark may straddle reads */
    size_t taillen;                 /* < NK_RUNID_SIZE */
} nkRdbReader;
void nkRdbReaderInit(nkRdbReader *r);
ssize_t nkRdbReaderFeed(nkRdbReader *r, const char *p, size_t len, int *done, const char **err);

/* nickv_resp.c: RESP requests (multibulk or inline), for clients and replicas.
 * 1 = a command in argc/argv (free with nkFreeArgv), 0 = need more input,
 * -1 = protocol error (*err says which). */
int nkParseCommand(sds *buf, int *argc, sds **argv, const char **err);
void nkFreeArgv(int argc, sds *argv);

#endif
