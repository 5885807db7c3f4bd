/* nickv_sentinel.c -- clients find the master through Nic-KV, as through
 * Redis Sentinel.
 *
 * Copyright (c) 2026, the SKV authors. BSD 3-Clause licence (see LICENSE).
 *
 * Client libraries that support Sentinel (redis-py's redis.sentinel,
 * Jedis's JedisSentinelPool, go-redis's FailoverClient, ...) find the
 * master with a few SENTINEL subcommands. Nic-KV answers those for the one
 * master it follows, named by master-name: the master the failover names
 * (nkFailoverMaster: its own promotions, the master's moves, the
 * coordinator's record), its state and the replicas' as the probes see
 * them (nickv_probe.c):
 *
 *   SENTINEL GET-MASTER-ADDR-BY-NAME <name>   [ip, port], or a null array
 *   SENTINEL MASTERS | MASTER <name>          the master's state, as
 *                                             field/value pairs
 *   SENTINEL REPLICAS|SLAVES <name>           the replicas' states
 *   SENTINEL SENTINELS <name>                 none: Nic-KV is the only one
 *
 * To a client that chose RESP3 (HELLO 3: redis-py 8 does), each state is a
 * map and the null array RESP3's null, as redis-sentinel 7.0 answers.
 * The fields are Sentinel's; those Nic-KV has no value for are 0 or "".
 * A master that does not answer its probes is flagged s_down and o_down
 * (Nic-KV is the only observer: its quorum is 1), which tells a client
 * not to use it; a replica, s_down. So is a master the probes do not read
 * as one yet (they follow a REPLICAOF ahead of the failover). After
 * someone else's failover the master is the new one once it answers as
 * one (NIC-KV.md, "Following a master change").
 */

#include "nickv.h"
#include "nickv_resp.h"
#include "nickv_coord.h"
#include "nickv_probe.h"
#include "nickv_cluster.h"
#include "nickv_failover.h"
#include "nickv_client.h"
#include "nickv_sentinel.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>

#include "util.h"

#define NK_SENTINEL_NODES 1024
#define NK_SUBSCRIPTIONS_MAX 1024           /* channels and patterns per client */

static sds bulk(sds s, const char *v) {
    return nkCatBulk(s, v, strlen(v));
}

static sds bulkLL(sds s, long long v) {
    return nkCatBulkLL(s, v);
}

/* One field/value pair. */
static sds pair(sds s, const char *field, const char *value) {
    return bulk(bulk(s, field), value);
}

static sds pairLL(sds s, const char *field, long long value) {
    return bulkLL(bulk(s, field), value);
}

static long long lastOk(const nkProbeView *v) {
    return v->answered_ms_ago < 0 ? 0 : v->answered_ms_ago;
}

/* The pairs a master's and a replica's state share, in Sentinel's order.
 * A state is a map (RESP3), or its keys and values in turn (RESP2), as
 * Sentinel's: every value a bulk string, numbers included. */
#define COMMON_PAIRS 14
static sds commonState(sds s, int resp, int pairs, const char *name, const nkProbeView *v,
                       const char *flags, const char *role) {
    s = nkCatMapLen(s, resp, pairs);
    s = pair(s, "name", name);
    s = pair(s, "ip", v->addr);
    s = pairLL(s, "port", v->port);
    s = pair(s, "runid", "");
    s = pair(s, "flags", flags);
    s = pairLL(s, "link-pending-commands", 0);
    s = pairLL(s, "link-refcount", 1);
    s = pairLL(s, "last-ping-sent", 0);
    s = pairLL(s, "last-ok-ping-reply", lastOk(v));
    s = pairLL(s, "last-ping-reply", lastOk(v));
    s = pairLL(s, "down-after-milliseconds", nk.cfg.waiting_time);
    s = pairLL(s, "info-refresh", 1000);
    s = pair(s, "role-reported", role);
    return pairLL(s, "role-reported-time", v->since_ms);
}

static sds masterState(sds s, int resp, const nkProbeView *m, int nreplicas) {
    /* Flags in redis-sentinel's order (s_down, o_down, the role,
     * disconnected). */
    s = commonState(s, resp, COMMON_PAIRS + 6, nk.cfg.master_name, m,
                    m->valid ? "master" : "s_down,o_down,master", "master");
    s = pairLL(s, "config-epoch", 0);
    s = pairLL(s, "num-slaves", nreplicas);
    s = pairLL(s, "num-other-sentinels", 0);
    s = pairLL(s, "quorum", 1);
    s = pairLL(s, "failover-timeout", 0);
    return pairLL(s, "parallel-syncs", 1);
}

static sds replicaState(sds s, int resp, const nkProbeView *r, const nkProbeView *m) {
    char name[300];
    snprintf(name, sizeof(name), strchr(r->addr, ':') ? "[%s]:%d" : "%s:%d", r->addr, r->port);
    s = commonState(s, resp, COMMON_PAIRS + 7, name, r,
                    r->valid ? "slave" : (r->refused ? "s_down,slave,disconnected" : "s_down,slave"), "slave");
    s = pairLL(s, "master-link-down-time", 0);
    s = pair(s, "master-link-status", r->listed ? "ok" : "err");
    s = pair(s, "master-host", m->addr);
    s = pairLL(s, "master-port", m->port);
    s = pairLL(s, "slave-priority", 100);
    s = pairLL(s, "slave-repl-offset", 0);
    return pairLL(s, "replica-announced", 1);
}

/* Whether a client's name is master-name: every byte of it, so that
 * "mymaster\0junk" is not "mymaster". (master-name is never empty:
 * nickv_config.c refuses "".) */
static int isOurName(const sds name) {
    return sdslen(name) == strlen(nk.cfg.master_name) &&
           !memcmp(name, nk.cfg.master_name, sdslen(name));
}

/* Is replica r one of master m's, as redis-sentinel lists them? One the
 * master lists, and one it no longer lists that does not answer: Sentinel
 * keeps the replicas it learnt, a dead one flagged s_down (an old master
 * after a failover among them), until SENTINEL RESET. Not one that is not
 * listed but answers: it may have become a master of its own (REPLICAOF NO
 * ONE), and a client that picks replicas by their flags would read its
 * diverging data. Not one at the master's own address: the old master
 * watched before the probe moved, or the winner still in the list, is the
 * master there. */
static int sentinelListed(const nkProbeView *r, const nkProbeView *m) {
    return !r->is_master && (r->listed || !r->valid) && !(r->port == m->port && !strcmp(r->reach, m->addr));
}

/* The probes' nodes into v (at most NK_SENTINEL_NODES), v[0] the master
 * as clients are told: 0 while Nic-KV is starting, or how many, with the
 * replicas it has (sentinelListed) in *nreplicas. */
static int sentinelView(nkProbeView *v, int *nreplicas) {
    int n = nkProbeNodes(v, NK_SENTINEL_NODES);
    *nreplicas = 0;
    if (n == 0) return 0;
    /* The master is where the failover says (its own promotions, the
     * coordinator's record), not wherever the probes look meanwhile (a
     * chain of REPLICAOF they follow): while they do not read that node
     * as the master, it is flagged down. */
    const char *mip;
    int mport;
    nkFailoverMaster(&mip, &mport);
    if (v[0].port != mport || strcmp(v[0].reach, mip)) {
        v[0].valid = 0;
        v[0].answered_ms_ago = -1;
        v[0].since_ms = 0;
    }
    v[0].addr = mip;
    v[0].port = mport;
    for (int i = 1; i < n; i++) if (sentinelListed(&v[i], &v[0])) (*nreplicas)++;
    return n;
}

/* INFO sentinel, in redis-sentinel's words, so that tools that read a
 * Sentinel's INFO (Prometheus' redis_exporter among them: its
 * redis_sentinel_master_status) see the master Nic-KV follows and its
 * failover state in master0's status:
 *
 *   ok        the master answers the probes;
 *   odown     it does not (Nic-KV is the only observer: sdown is odown),
 *             and a failover is under way, or is not this Nic-KV's to
 *             make (failover off, a standby, a cluster shard);
 *   blocked   it does not, and this Nic-KV would replace it but will not,
 *             or its last attempt was called off (in the last 5 s):
 *             INFO failover's failover_blocked and last_failover say why.
 *
 * address is where clients are sent, so it changes with every failover;
 * slaves the replicas the master lists; sentinels 1, Nic-KV itself. */
sds nkSentinelInfo(sds s) {
    static nkProbeView v[NK_SENTINEL_NODES];
    int nreplicas;
    const char *status = "odown";
    if (sentinelView(v, &nreplicas) == 0) {
        v[0].valid = 0;
        nkFailoverMaster(&v[0].addr, &v[0].port);
    }
    if (v[0].valid)
        status = "ok";
    else if (nk.cfg.failover && !nkClusterOn() && nkCoordLeader() && nkFailoverBlocked()[0])
        status = "blocked";
    char addr[300];
    /* ip:port, an IPv6 address unbracketed, as redis-sentinel writes it. */
    snprintf(addr, sizeof(addr), "%s:%d", v[0].addr, v[0].port);
    return sdscatprintf(s,
        "# Sentinel\r\n"
        "sentinel_masters:1\r\n"
        "sentinel_tilt:0\r\n"
        "sentinel_tilt_since_seconds:-1\r\n"
        "sentinel_running_scripts:0\r\n"
        "sentinel_scripts_queue_length:0\r\n"
        "sentinel_simulate_failure_flags:0\r\n"
        "master0:name=%s,status=%s,address=%s,slaves=%d,sentinels=1\r\n\r\n",
        nk.cfg.master_name, status, addr, nreplicas);
}

/* SENTINEL CKQUORUM <name>: as Sentinel words it (redis_exporter reads the
 * "+OK"), the Nic-KVs that can decide a failover: this one, or with a
 * coordinator the group through etcd; -NOQUORUM when none will (failover
 * no). SENTINEL RESET <pattern>: the masters matched (this one or none).
 * Sentinel then forgets the replicas and Sentinels it learnt; Nic-KV
 * keeps no such list (it names what the master lists, and its members
 * come from its configuration or etcd), so there is nothing to forget.
 * NULL: CKQUORUM of another name. */
static sds sentinelCheckOrReset(const char *sub, sds name) {
    if (!strcasecmp(sub, "reset"))
        return sdscatfmt(sdsempty(), ":%i\r\n", stringmatchlen(name, (int)sdslen(name), nk.cfg.master_name,
                                                              (int)strlen(nk.cfg.master_name), 0) ? 1 : 0);
    if (!isOurName(name)) return NULL;
    if (!nk.cfg.failover && !nkClusterOn())
        return sdsnew("-NOQUORUM Nic-KV does not fail this master over (failover no)\r\n");
    return sdsnew(nkClusterOn() ? "+OK 1 usable Sentinels. The cluster fails this shard over; Nic-KV follows\r\n"
                                : (nkCoordOn() ? "+OK 1 usable Sentinels. Quorum and failover authorization can be "
                                                 "reached (etcd: the coordinator's leader fails over)\r\n"
                                               : "+OK 1 usable Sentinels. Quorum and failover authorization can be "
                                                 "reached\r\n"));
}

void nkSentinelCommand(nkClient *c, int argc, sds *argv) {
    static nkProbeView v[NK_SENTINEL_NODES];
    int n, nreplicas;
    const char *sub = argc >= 2 ? argv[1] : "";
    sds out;

    if (argc < 2) {
        nkClientReply(c, "-ERR wrong number of arguments for 'sentinel' command\r\n");
        return;
    }
    n = sentinelView(v, &nreplicas);
    if (n == 0) {
        nkClientReply(c, "-ERR Nic-KV is starting\r\n");
        return;
    }
    if (!strcasecmp(sub, "masters") && argc == 2) {
        out = sdsnew("*1\r\n");
        out = masterState(out, c->resp, &v[0], nreplicas);
    } else if (!strcasecmp(sub, "get-master-addr-by-name") && argc == 3) {
        if (!isOurName(argv[2])) {
            out = nkCatNullArray(sdsempty(), c->resp);
            nkClientWriteRaw(c, out, sdslen(out));
            sdsfree(out);
            return;
        }
        out = bulkLL(bulk(sdsnew("*2\r\n"), v[0].addr), v[0].port);
    } else if ((!strcasecmp(sub, "master") || !strcasecmp(sub, "replicas") ||
                !strcasecmp(sub, "slaves") || !strcasecmp(sub, "sentinels")) && argc == 3) {
        if (!isOurName(argv[2])) {
            nkClientReply(c, "-ERR No such master with that name\r\n");
            return;
        }
        if (!strcasecmp(sub, "master")) {
            out = masterState(sdsempty(), c->resp, &v[0], nreplicas);
        } else if (!strcasecmp(sub, "sentinels")) {
            out = sdsnew("*0\r\n");
        } else {
            out = sdscatfmt(sdsempty(), "*%i\r\n", nreplicas);
            for (int i = 1; i < n; i++)
                if (sentinelListed(&v[i], &v[0])) out = replicaState(out, c->resp, &v[i], &v[0]);
        }
    } else if (!strcasecmp(sub, "myid") && argc == 2) {
        out = bulk(sdsempty(), nk.instance);
    } else if ((!strcasecmp(sub, "ckquorum") || !strcasecmp(sub, "reset")) && argc == 3) {
        out = sentinelCheckOrReset(sub, argv[2]);
        if (!out) {
            nkClientReply(c, "-ERR No such master with that name\r\n");
            return;
        }
    } else {
        sds a = sdscatrepr(sdsempty(), argv[1], sdslen(argv[1]) > 64 ? 64 : sdslen(argv[1]));
        nkClientReply(c, "-ERR unknown SENTINEL subcommand or wrong number of arguments for %s "
                      "(Nic-KV answers MASTERS, MASTER, GET-MASTER-ADDR-BY-NAME, REPLICAS, SLAVES, "
                      "SENTINELS, MYID, CKQUORUM, RESET, and to an admin FAILOVER, SET)\r\n", a);
        sdsfree(a);
        return;
    }
    nkClientWriteRaw(c, out, sdslen(out));
    sdsfree(out);
}

/* ------------------------------------------------------------ Pub/Sub --- */

/* Clients that wait for Sentinel's events rather than ask again (Jedis'
 * JedisSentinelPool, Lettuce, redis-py's pubsub) SUBSCRIBE (or PSUBSCRIBE)
 * on Nic-KV's port. Nic-KV publishes, as Sentinel does:
 *
 *   +switch-master <name> <old-ip> <old-port> <new-ip> <new-port>
 *
 * and the instance events of nkSentinelEvent (+sdown, +odown, +slave,
 * +try-failover, +failover-end...)
 * at every master change, its own failovers and those it follows. A
 * subscribed client may still send any command (Sentinel's RESP2 limits
 * are not enforced); PING answers as in subscribed mode. To a RESP3
 * client (HELLO 3) the (un)subscribe replies and the messages are pushes
 * ('>'), and a mass UNSUBSCRIBE with nothing to drop names a null. */

static sds replyCount(sds s, int resp, const char *kind, const char *name, size_t count) {
    s = nkCatPushLen(s, resp, 3);
    s = bulk(s, kind);
    s = name ? bulk(s, name) : nkCatNull(s, resp);
    return sdscatfmt(s, ":%U\r\n", (unsigned long long)count);
}

static size_t subCount(nkClient *c) {
    return (c->channels ? listLength(c->channels) : 0) + (c->patterns ? listLength(c->patterns) : 0);
}

static listNode *subFind(list *l, const char *name) {
    listIter li;
    listNode *ln;
    if (!l) return NULL;
    listRewind(l, &li);
    while ((ln = listNext(&li)))
        if (!strcmp(listNodeValue(ln), name)) return ln;
    return NULL;
}

/* SUBSCRIBE, PSUBSCRIBE, UNSUBSCRIBE, PUNSUBSCRIBE. */
void nkPubsubCommand(nkClient *c, int argc, sds *argv) {
    int pattern = tolower((unsigned char)argv[0][0]) == 'p';
    const char *cmd = argv[0] + pattern;
    list **l = pattern ? &c->patterns : &c->channels;
    sds out = sdsempty();
    if (!strcasecmp(cmd, "subscribe")) {
        if (argc < 2) {
            nkClientReply(c, "-ERR wrong number of arguments for '%s' command\r\n", argv[0]);
            sdsfree(out);
            return;
        }
        for (int i = 1; i < argc; i++) {
            if (!*l) *l = listCreate();
            if (!subFind(*l, argv[i])) {
                if (subCount(c) >= NK_SUBSCRIPTIONS_MAX) {
                    nkClientWriteRaw(c, out, sdslen(out));  /* the replies so far first */
                    sdsclear(out);
                    nkClientReply(c, "-ERR too many subscriptions (Nic-KV keeps %d per client)\r\n",
                                  NK_SUBSCRIPTIONS_MAX);
                    break;
                }
                listAddNodeTail(*l, sdsdup(argv[i]));
            }
            out = replyCount(out, c->resp, pattern ? "psubscribe" : "subscribe", argv[i], subCount(c));
        }
    } else {
        /* UNSUBSCRIBE [name...]: the names given, or every one. */
        if (argc == 1 && *l && listLength(*l)) {
            while (listLength(*l)) {
                listNode *ln = listFirst(*l);
                sds name = listNodeValue(ln);
                listDelNode(*l, ln);
                out = replyCount(out, c->resp, pattern ? "punsubscribe" : "unsubscribe", name, subCount(c));
                sdsfree(name);
            }
        } else if (argc == 1) {
            out = replyCount(out, c->resp, pattern ? "punsubscribe" : "unsubscribe", NULL, subCount(c));
        }
        for (int i = 1; i < argc; i++) {
            listNode *ln = subFind(*l, argv[i]);
            if (ln) {
                sdsfree(listNodeValue(ln));
                listDelNode(*l, ln);
            }
            out = replyCount(out, c->resp, pattern ? "punsubscribe" : "unsubscribe", argv[i], subCount(c));
        }
    }
    nkClientWriteRaw(c, out, sdslen(out));
    sdsfree(out);
}

int nkPubsubSubscribed(nkClient *c) {
    return subCount(c) > 0;
}

void nkPubsubClientFree(nkClient *c) {
    list *ls[2] = {c->channels, c->patterns};
    for (int j = 0; j < 2; j++) {
        if (!ls[j]) continue;
        while (listLength(ls[j])) {
            sdsfree(listNodeValue(listFirst(ls[j])));
            listDelNode(ls[j], listFirst(ls[j]));
        }
        listRelease(ls[j]);
    }
    c->channels = c->patterns = NULL;
}

/* Send message on channel to every client subscribed to it. */
static void publish(const char *channel, const char *message) {
    listIter li;
    listNode *ln;
    listRewind(nk.clients, &li);
    while ((ln = listNext(&li))) {
        nkClient *c = listNodeValue(ln);
        listIter si;
        listNode *sn;
        if (!c->conn || c->state != NK_CLIENT_CONNECTED || !subCount(c)) continue;
        sds out = sdsempty();
        if (subFind(c->channels, channel))
            out = bulk(bulk(bulk(nkCatPushLen(out, c->resp, 3), "message"), channel), message);
        if (c->patterns) {
            listRewind(c->patterns, &si);
            while ((sn = listNext(&si))) {
                sds pat = listNodeValue(sn);
                if (stringmatchlen(pat, (int)sdslen(pat), channel, (int)strlen(channel), 0))
                    out = bulk(bulk(bulk(bulk(nkCatPushLen(out, c->resp, 4), "pmessage"), pat), channel), message);
            }
        }
        if (sdslen(out)) {
            nkClientWriteRaw(c, out, sdslen(out));
            nkClientFlushSoon(c);
        }
        sdsfree(out);
    }
}

/* Sentinel's instance events, in its message format, for the tools that
 * watch its channels:
 *
 *   <event> master <name> <ip> <port>[ <extra>]
 *   <event> slave <ip>:<port> <ip> <port> @ <name> <master-ip> <master-port>
 *
 * +sdown / -sdown: a node the probes find invalid / valid again (Nic-KV's
 * probes are the one judge: every +sdown of the master is at once an
 * +odown, "#quorum 1/1", and -sdown a -odown); +slave: a replica the
 * master lists appears; +try-failover: an attempt begins (once per
 * epoch); +failover-end: the promotion is made, before +switch-master. */
void nkSentinelEvent(const char *event, int is_master, const char *ip, int port, const char *master_ip,
                     int master_port, const char *extra) {
    char msg[1024];
    const char *name = nk.cfg.master_name ? nk.cfg.master_name : "mymaster";
    if (is_master)
        snprintf(msg, sizeof(msg), "master %s %s %d%s%s", name, ip, port, extra ? " " : "", extra ? extra : "");
    else
        snprintf(msg, sizeof(msg), "slave %s:%d %s %d @ %s %s %d%s%s", ip, port, ip, port, name, master_ip,
                 master_port, extra ? " " : "", extra ? extra : "");
    publish(event, msg);
}

void nkSentinelSwitchMaster(const char *old_ip, int old_port, const char *new_ip, int new_port) {
    char msg[1024];
    snprintf(msg, sizeof(msg), "%s %s %d %s %d", nk.cfg.master_name ? nk.cfg.master_name : "mymaster",
             old_ip, old_port, new_ip, new_port);
    publish("+switch-master", msg);
}
