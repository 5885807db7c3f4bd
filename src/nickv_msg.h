/* nickv_msg.h -- REPLCONF nickv messages: built and read by one module, on both sides.
 *
 * Copyright (c) 2026, the SKV authors. BSD 3-Clause licence (see LICENSE).
 *
 * The words of each message are defined in nickv_proto.h. The daemon
 * (nic-kv/) builds its messages with the nickvMsg*() builders below; the
 * master (src/nickv_server.c) reads them with nickvMsgParse(), which checks
 * the count of words and reads every number strictly (the whole word, in
 * range: string2ll, never atoi or sscanf). Built by both binaries from this
 * one file (src/skv.mk).
 */
#ifndef SKV_NICKV_MSG_H
#define SKV_NICKV_MSG_H

#include <stddef.h>
#include "sds.h"

typedef enum {
    NICKV_M_UNKNOWN = 0,               /* a verb we do not know */
    NICKV_M_HELLO,
    NICKV_M_LEASE,
    NICKV_M_HEALTH,
    NICKV_M_ADD,
    NICKV_M_DEL,
    NICKV_M_ACK,
    NICKV_M_BACKLOG,
} nickvMsgType;

/* A message read. Its words stay in argv (argv[0] the verb) for what the
 * reader checks itself: hello's and lease's identity, lease's times
 * (src/nickv_lease.c), health's list (nickvHealth). */
typedef struct nickvMsg {
    nickvMsgType type;
    int ok;                            /* the count of words and the numbers are right */
    const char *why;                   /* when !ok: what is wrong (static text) */
    int argc;
    sds *argv;
    long long id;                      /* add, del, ack: Nic-KV's id of the replica */
    long long offset;                  /* ack */
    long long first, last;             /* backlog */
    long long slots;                   /* backlog: free client slots (-1: not said) */
    int port, rdma_port, tls_port;     /* hello (all three); add (port) */
} nickvMsg;

/* Reads message into m. Returns -1 when it does not split into words (or
 * has none): m holds nothing to free. Otherwise 0, with m->type the verb
 * (NICKV_M_UNKNOWN for another) and m->ok whether its words are well
 * formed (else m->why says what is wrong); nickvMsgFree() releases it. */
int nickvMsgParse(const char *message, size_t len, nickvMsg *m);
void nickvMsgFree(nickvMsg *m);

/* A port as a message gives it: 0-65535, the whole word. */
int nickvMsgPort(const char *s, size_t len, int *port);

/* The builders, one per message, each a new sds (nickv_proto.h has what
 * each word means). */
sds nickvMsgHello(const char *host, int port, int rdma_port, const char *instance, const char *key,
                  int tls_port);
sds nickvMsgLease(long long t, long long ms, const char *instance, const char *key);
sds nickvMsgLeaseAt(long long t, long long ms, const char *instance, const char *key, long long offset);
sds nickvMsgAdd(long long id, const char *ip, int port);
sds nickvMsgDel(long long id);
sds nickvMsgAck(long long id, long long offset);
sds nickvMsgBacklog(long long first, long long last, int slots);
/* health: valid and joining are lists of " <addr> <port>" pairs, nvalid and
 * njoining pairs long (njoining 0: no joining part). */
sds nickvMsgHealth(int min_slaves, int nvalid, const char *valid, int njoining, const char *joining);

#endif
