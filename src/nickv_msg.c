/* nickv_msg.c -- REPLCONF nickv messages: built and read by one module, on both sides.
 *
 * Copyright (c) 2026, the SKV authors. BSD 3-Clause licence (see LICENSE).
 *
 * What each message says is in nickv_proto.h. The daemon sends them on its
 * replication link (and lease and health on its probe connection) as the
 * one argument after REPLCONF nickv; the master reads them here, word by
 * word, before it acts on any. A message whose count of words or numbers
 * is wrong is read as such (ok 0, why) and never acted on: the master
 * answers an error to a client, and logs one from its daemon (a reply on a
 * replica's link would end it).
 */

#include "nickv_msg.h"
#include "nickv_proto.h"

#include <string.h>
#include <strings.h>

#include "util.h"

/* ------------------------------------------------------------ Reading --- */

int nickvMsgPort(const char *s, size_t len, int *port) {
    long long v;
    if (!string2ll(s, len, &v) || v < 0 || v > 65535) return 0;
    *port = (int)v;
    return 1;
}

/* A replica's id: the whole word, 1 or more (the daemon counts from 1). */
static int msgId(sds s, long long *v) {
    return string2ll(s, sdslen(s), v) && *v >= 1;
}

/* A replication offset: the whole word, any long long (-1 is "nothing yet";
 * the master takes no ACK past what it wrote). */
static int msgOffset(sds s, long long *v) {
    return string2ll(s, sdslen(s), v);
}

static int msgPortWord(sds s, int *port) {
    return nickvMsgPort(s, sdslen(s), port);
}

static const struct {
    const char *verb;
    nickvMsgType type;
} msgVerbs[] = {
    {NICKV_MSG_HELLO, NICKV_M_HELLO}, {NICKV_MSG_LEASE, NICKV_M_LEASE}, {NICKV_MSG_HEALTH, NICKV_M_HEALTH},
    {NICKV_MSG_ADD, NICKV_M_ADD},     {NICKV_MSG_DEL, NICKV_M_DEL},     {NICKV_MSG_ACK, NICKV_M_ACK},
    {NICKV_MSG_BACKLOG, NICKV_M_BACKLOG},
};

/* The words after the verb, as m->type wants them: 1 well formed, else 0
 * with m->why set. */
static int msgWords(nickvMsg *m) {
    int argc = m->argc;
    sds *argv = m->argv;
    switch (m->type) {
    case NICKV_M_HELLO:
        m->why = "expected hello <host> <port> <rdma-port> <instance> <key> <tls-port>";
        return argc == NICKV_MSG_HELLO_ARGC && msgPortWord(argv[2], &m->port) &&
               msgPortWord(argv[3], &m->rdma_port) && msgPortWord(argv[6], &m->tls_port);
    case NICKV_M_LEASE:
        /* <t> <ms> are read by nickvLeaseGrant (src/nickv_lease.c). */
        m->why = "expected lease <t> <ms> <instance> <key>";
        return argc == NICKV_MSG_LEASE_ARGC || argc == NICKV_MSG_LEASE_AT_ARGC;
    case NICKV_M_HEALTH:
        /* The list is read by nickvHealth. */
        m->why = "expected health <min-slaves> <n> [<addr> <port>]...";
        return argc >= NICKV_MSG_HEALTH_ARGC;
    case NICKV_M_ADD:
        m->why = "expected add <id> <ip> <listening-port>";
        return argc == NICKV_MSG_ADD_ARGC && msgId(argv[1], &m->id) && msgPortWord(argv[3], &m->port);
    case NICKV_M_DEL:
        m->why = "expected del <id>";
        return argc == NICKV_MSG_DEL_ARGC && msgId(argv[1], &m->id);
    case NICKV_M_ACK:
        m->why = "expected ack <id> <offset>";
        return argc == NICKV_MSG_ACK_ARGC && msgId(argv[1], &m->id) && msgOffset(argv[2], &m->offset);
    case NICKV_M_BACKLOG:
        /* The free slots came later: without them, or not a count, -1. */
        m->why = "expected backlog <first> <last> [<free-slots>]";
        m->slots = -1;
        if ((argc != NICKV_MSG_BACKLOG_ARGC - 1 && argc != NICKV_MSG_BACKLOG_ARGC) ||
            !msgOffset(argv[1], &m->first) || !msgOffset(argv[2], &m->last))
            return 0;
        if (argc == NICKV_MSG_BACKLOG_ARGC && (!string2ll(argv[3], sdslen(argv[3]), &m->slots) || m->slots < 0))
            m->slots = -1;
        return 1;
    default:
        m->why = "unknown message";
        return 0;
    }
}

int nickvMsgParse(const char *message, size_t len, nickvMsg *m) {
    sds s = sdsnewlen(message, len);
    memset(m, 0, sizeof(*m));
    m->argv = sdssplitargs(s, &m->argc);
    sdsfree(s);
    if (!m->argv || m->argc == 0) {
        if (m->argv) sdsfreesplitres(m->argv, m->argc);
        m->argv = NULL;
        m->argc = 0;
        return -1;
    }
    m->type = NICKV_M_UNKNOWN;
    for (size_t i = 0; i < sizeof(msgVerbs) / sizeof(msgVerbs[0]); i++)
        if (!strcasecmp(m->argv[0], msgVerbs[i].verb)) m->type = msgVerbs[i].type;
    m->ok = msgWords(m);
    if (m->ok) m->why = NULL;
    return 0;
}

void nickvMsgFree(nickvMsg *m) {
    if (m->argv) sdsfreesplitres(m->argv, m->argc);
    m->argv = NULL;
    m->argc = 0;
}

/* ----------------------------------------------------------- Building --- */

sds nickvMsgHello(const char *host, int port, int rdma_port, const char *instance, const char *key,
                  int tls_port) {
    return sdscatprintf(sdsempty(), NICKV_MSG_HELLO " %s %d %d %s %s %d", host, port, rdma_port, instance, key,
                        tls_port);
}

sds nickvMsgLease(long long t, long long ms, const char *instance, const char *key) {
    return sdscatprintf(sdsempty(), NICKV_MSG_LEASE " %lld %lld %s %s", t, ms, instance, key);
}

sds nickvMsgLeaseAt(long long t, long long ms, const char *instance, const char *key, long long offset) {
    return sdscatprintf(sdsempty(), NICKV_MSG_LEASE " %lld %lld %s %s %lld", t, ms, instance, key, offset);
}

sds nickvMsgAdd(long long id, const char *ip, int port) {
    return sdscatprintf(sdsempty(), NICKV_MSG_ADD " %lld %s %d", id, ip, port);
}

sds nickvMsgDel(long long id) {
    return sdscatprintf(sdsempty(), NICKV_MSG_DEL " %lld", id);
}

sds nickvMsgAck(long long id, long long offset) {
    return sdscatprintf(sdsempty(), NICKV_MSG_ACK " %lld %lld", id, offset);
}

sds nickvMsgBacklog(long long first, long long last, int slots) {
    return sdscatprintf(sdsempty(), NICKV_MSG_BACKLOG " %lld %lld %d", first, last, slots);
}

sds nickvMsgHealth(int min_slaves, int nvalid, const char *valid, int njoining, const char *joining) {
    sds msg = sdscatprintf(sdsempty(), NICKV_MSG_HEALTH " %d %d%s", min_slaves, nvalid, valid);
    if (njoining) msg = sdscatprintf(msg, " %d%s", njoining, joining);
    return msg;
}
