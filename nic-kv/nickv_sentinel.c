/* nickv_sentinel.c -- clients find the master through Nic-KV, as through
 * Redis Sentinel.
 *
 * Copyright (c) 2026, the SKV authors. BSD 3-Clause licence (see LICENSE).
 *
 * Client libraries that support Sentinel (redis-py's redis.sentinel,
 * Jedis's JedisSentinelPool, go-redis's FailoverClient, ...) find the
 * master with a few SENTINEL subcommands. Nic-KV answers those from what
 * its probes see (nickv_probe.c), for the one master it follows, named by
 * master-name:
 *
 *   SENTINEL GET-MASTER-ADDR-BY-NAME <name>   [ip, port], or a null array
 *   SENTINEL MASTERS | MASTER <name>          the master's state, as
 *                                             field/value pairs
 *   SENTINEL REPLICAS|SLAVES <name>           the replicas' states
 *   SENTINEL SENTINELS <name>                 none: Nic-KV is the only one
 *
 * The fields are Sentinel's; those Nic-KV has no value for are 0 or "".
 * A master that does not answer its probes is flagged s_down and o_down
 * (Nic-KV is the only observer: its quorum is 1), which tells a client
 * not to use it; a replica, s_down. The master is the one the link
 * follows: after someone else's failover it is the new one (NIC-KV.md,
 * "Following a master change").
 */

#include "nickv.h"

#include <stdio.h>
#include <string.h>

#include "util.h"

#define NK_SENTINEL_NODES 1024

static sds bulk(sds s, const char *v) {
    return sdscatfmt(s, "$%u\r\n%s\r\n", (unsigned)strlen(v), v);
}

static sds bulkLL(sds s, long long v) {
    char buf[LONG_STR_SIZE];
    ll2string(buf, sizeof(buf), v);
    return bulk(s, buf);
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

/* The pairs a master's and a replica's state share, in Sentinel's order. */
#define COMMON_PAIRS 14
static sds commonState(sds s, int pairs, const char *name, const nkProbeView *v,
                       const char *flags, const char *role) {
    s = sdscatfmt(s, "*%i\r\n", pairs * 2);
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

static sds masterState(sds s, const nkProbeView *m, int nreplicas) {
    s = commonState(s, COMMON_PAIRS + 6, nk.cfg.master_name, m,
                    m->valid ? "master" : "master,s_down,o_down", "master");
    s = pairLL(s, "config-epoch", 0);
    s = pairLL(s, "num-slaves", nreplicas);
    s = pairLL(s, "num-other-sentinels", 0);
    s = pairLL(s, "quorum", 1);
    s = pairLL(s, "failover-timeout", 0);
    return pairLL(s, "parallel-syncs", 1);
}

static sds replicaState(sds s, const nkProbeView *r, const nkProbeView *m) {
    char name[300];
    snprintf(name, sizeof(name), strchr(r->addr, ':') ? "[%s]:%d" : "%s:%d", r->addr, r->port);
    s = commonState(s, COMMON_PAIRS + 7, name, r, r->valid ? "slave" : "slave,s_down", "slave");
    s = pairLL(s, "master-link-down-time", 0);
    s = pair(s, "master-link-status", "ok");
    s = pair(s, "master-host", m->addr);
    s = pairLL(s, "master-port", m->port);
    s = pairLL(s, "slave-priority", 100);
    s = pairLL(s, "slave-repl-offset", 0);
    return pairLL(s, "replica-announced", 1);
}

void nkSentinelCommand(nkClient *c, int argc, sds *argv) {
    static nkProbeView v[NK_SENTINEL_NODES];
    int n, nreplicas = 0;
    const char *sub = argc >= 2 ? argv[1] : "";
    sds out;

    if (argc < 2) {
        nkClientReply(c, "-ERR wrong number of arguments for 'sentinel' command\r\n");
        return;
    }
    n = nkProbeNodes(v, NK_SENTINEL_NODES);
    if (n == 0) {
        nkClientReply(c, "-ERR Nic-KV is starting\r\n");
        return;
    }
    for (int i = 1; i < n; i++) if (v[i].listed) nreplicas++;
    if (!strcasecmp(sub, "masters") && argc == 2) {
        out = sdsnew("*1\r\n");
        out = masterState(out, &v[0], nreplicas);
    } else if (!strcasecmp(sub, "get-master-addr-by-name") && argc == 3) {
        if (strcmp(argv[2], nk.cfg.master_name)) {
            nkClientReply(c, "*-1\r\n");
            return;
        }
        out = bulkLL(bulk(sdsnew("*2\r\n"), v[0].addr), v[0].port);
    } else if ((!strcasecmp(sub, "master") || !strcasecmp(sub, "replicas") ||
                !strcasecmp(sub, "slaves") || !strcasecmp(sub, "sentinels")) && argc == 3) {
        if (strcmp(argv[2], nk.cfg.master_name)) {
            nkClientReply(c, "-ERR No such master with that name\r\n");
            return;
        }
        if (!strcasecmp(sub, "master")) {
            out = masterState(sdsempty(), &v[0], nreplicas);
        } else if (!strcasecmp(sub, "sentinels")) {
            out = sdsnew("*0\r\n");
        } else {
            out = sdscatfmt(sdsempty(), "*%i\r\n", nreplicas);
            for (int i = 1; i < n; i++)
                if (v[i].listed) out = replicaState(out, &v[i], &v[0]);
        }
    } else {
        sds a = sdscatrepr(sdsempty(), sub, strlen(sub) > 64 ? 64 : strlen(sub));
        nkClientReply(c, "-ERR unknown SENTINEL subcommand or wrong number of arguments for %s "
                      "(Nic-KV answers MASTERS, MASTER, GET-MASTER-ADDR-BY-NAME, REPLICAS, SLAVES, "
                      "SENTINELS)\r\n", a);
        sdsfree(a);
        return;
    }
    nkClientWriteRaw(c, out, sdslen(out));
    sdsfree(out);
}
