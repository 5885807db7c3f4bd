/* nickv_cluster.c -- Redis Cluster: the cluster's own view of the shard
 * Nic-KV serves is the authority for where that shard's master is.
 *
 * Copyright (c) 2026, the SKV authors. BSD 3-Clause licence (see LICENSE).
 *
 * In cluster mode the cluster elects a shard's master (its bus, its
 * epochs); Nic-KV never promotes (nickv_failover.c, foBlocker) and
 * follows. A planned CLUSTER FAILOVER shows on the master's own INFO (it
 * says role:slave, master_host the new one: the probes follow it). A
 * master that crashed says nothing: the cluster promotes one of its
 * replicas, and only the cluster's view tells which. So, with the probes,
 * Nic-KV reads CLUSTER NODES:
 *
 *   - from the master, once a second: what the shard is. The shard is the
 *     slots the master owns (its "myself" line), with the master's node id
 *     and config epoch. Slots rather than node ids: the cluster may move a
 *     replica to another shard (replica migration), and a replica's master
 *     is then another shard's, while the slots say which node took over
 *     ours;
 *   - from every replica the probes watch (the shard's replicas: they
 *     streamed from us or from the master), once a second, and every
 *     probe round while the master is invalid.
 *
 * A view names a successor when the master's node is flagged fail in it,
 * or is a replica in it (a failover the master took part in), and a
 * master node that is not failing, at a numeric address, with a config
 * epoch above the one the master had, owns slots of the shard (the most
 * of them wins, then the higher epoch). The failover (tickWatching) then
 * moves the probe there; once that node answers its INFO as a master, the
 * link follows it as it follows any master that moved (foMasterServes).
 * The new master's own view then says what the shard is.
 *
 * What this trusts. The views come from nodes the master listed, on the
 * probe connections the failover commands them on (masterauth); the node
 * followed must answer the probe's INFO as a master. A cluster node can
 * already claim any slots on the cluster bus, which Redis Cluster does
 * not authenticate: a hostile cluster member is not something Nic-KV can
 * protect the cluster from, and NIC-KV.md says so. Host names in a view
 * (cluster-announce-hostname) are never looked up: numeric addresses
 * only.
 *
 * The shard is written in the state file (stateSave: a "cluster" line),
 * so that a Nic-KV restarted while its master is dead knows it serves a
 * cluster (and never tries a failover of its own, or REPLICAOF on a
 * cluster node) and which slots are its shard.
 */

#include "nickv.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>

#include "monotonic.h"
#include "util.h"
#include "zmalloc.h"

#define NK_CLUSTER_SLOTS 16384
#define NK_CLUSTER_ID_LEN 40
#define NK_CLUSTER_ASK_US 1000000LL    /* each node's view, this often */
#define NK_CLUSTER_ASKED 64            /* nodes asked at a time, at most */
#define NK_CLUSTER_VIEW_MAX 4096       /* nodes in one view, at most */
#define NK_CLUSTER_IP 256              /* an address in a view */

typedef struct clusterEntry {
    char id[NK_CLUSTER_ID_LEN + 1];
    char ip[NK_CLUSTER_IP];
    int port;
    int myself, master, fail, pfail, handshake, noaddr;
    char master_id[NK_CLUSTER_ID_LEN + 1];  /* a replica's master, "" if none */
    long long epoch;                         /* config epoch */
    int nslots;
    unsigned char *slots;                    /* NK_CLUSTER_SLOTS bits */
} clusterEntry;

static struct {
    int mode;                                /* 1: cluster mode, 0: not, -1: unknown */
    char mode_from[64];                      /* who said so */
    /* The shard: its master's node id, config epoch and slots, as the
     * master's own view (or the state file, or the view we followed) said. */
    int have_shard;
    char id[NK_CLUSTER_ID_LEN + 1];
    long long epoch;
    unsigned char slots[NK_CLUSTER_SLOTS / 8];
    int nslots;
    /* A successor a view named, for the failover to follow. */
    int moved;
    char to_ip[NK_CLUSTER_IP];
    int to_port;
    char to_id[NK_CLUSTER_ID_LEN + 1];
    long long to_epoch;
    char to_from[NK_CLUSTER_IP + 8];           /* whose view named it */
    /* Nodes asked, so that a silent one is not asked again and again. */
    struct { char ip[NK_CLUSTER_IP]; int port; int pending; long long asked_us; } asked[NK_CLUSTER_ASKED];
    int nasked;
    long long views, view_errors, follows;
    char state[256];                         /* INFO cluster_shard */
    char last_err[256];                      /* the last view that did not parse */
    int dirty;                               /* the shard changed: the state file */
} C = { .mode = -1 };

/* ----------------------------------------------------------- Parsing --- */

static int slotGet(const unsigned char *s, int i) { return s[i >> 3] & (1 << (i & 7)); }
static void slotSet(unsigned char *s, int i) { s[i >> 3] |= (unsigned char)(1 << (i & 7)); }

/* "N" or "N-M" into slots; importing and migrating entries ("[N->-id]",
 * "[N-<-id]") are not owned slots: skipped. 0, or -1 if malformed. */
static int slotRange(const char *w, unsigned char *slots, int *nslots) {
    long long a, b;
    const char *dash = strchr(w, '-');
    if (w[0] == '[') return 0;
    if (dash) {
        if (!string2ll(w, (size_t)(dash - w), &a) || !string2ll(dash + 1, strlen(dash + 1), &b)) return -1;
    } else {
        if (!string2ll(w, strlen(w), &a)) return -1;
        b = a;
    }
    if (a < 0 || b < a || b >= NK_CLUSTER_SLOTS) return -1;
    for (long long i = a; i <= b; i++)
        if (!slotGet(slots, (int)i)) {
            slotSet(slots, (int)i);
            (*nslots)++;
        }
    return 0;
}

static int isNodeId(const char *w) {
    if (strlen(w) != NK_CLUSTER_ID_LEN) return 0;
    for (; *w; w++)
        if (!isxdigit((unsigned char)*w)) return 0;
    return 1;
}

/* One line of CLUSTER NODES: "<id> <ip:port@cport[,hostname]> <flags>
 * <master-id|-> <ping-sent> <pong-recv> <config-epoch> <link-state>
 * <slot>...". 0, or -1 (malformed: the whole view is dropped). */
static int entryParse(const char *line, clusterEntry *e) {
    int argc, ret = -1;
    sds *argv = sdssplitlen(line, (ssize_t)strlen(line), " ", 1, &argc);
    long long v;
    memset(e, 0, sizeof(*e));
    if (!argv || argc < 8 || !isNodeId(argv[0])) goto out;
    memcpy(e->id, argv[0], NK_CLUSTER_ID_LEN + 1);
    /* The address: up to '@' (the bus port), its port after the last ':'
     * (an IPv6 address has colons of its own). */
    char *at = strchr(argv[1], '@'), *colon;
    if (at) *at = '\0';
    colon = strrchr(argv[1], ':');
    if (!colon || (size_t)(colon - argv[1]) >= sizeof(e->ip)) goto out;
    memcpy(e->ip, argv[1], (size_t)(colon - argv[1]));
    e->ip[colon - argv[1]] = '\0';
    if (!string2ll(colon + 1, strlen(colon + 1), &v) || v < 0 || v > 65535) goto out;
    e->port = (int)v;
    int nf;
    sds *flags = sdssplitlen(argv[2], (ssize_t)sdslen(argv[2]), ",", 1, &nf);
    for (int i = 0; flags && i < nf; i++) {
        if (!strcmp(flags[i], "myself")) e->myself = 1;
        else if (!strcmp(flags[i], "master")) e->master = 1;
        else if (!strcmp(flags[i], "fail")) e->fail = 1;
        else if (!strcmp(flags[i], "fail?")) e->pfail = 1;
        else if (!strcmp(flags[i], "handshake")) e->handshake = 1;
        else if (!strcmp(flags[i], "noaddr")) e->noaddr = 1;
    }
    if (flags) sdsfreesplitres(flags, nf);
    if (strcmp(argv[3], "-")) {
        if (!isNodeId(argv[3])) goto out;
        memcpy(e->master_id, argv[3], NK_CLUSTER_ID_LEN + 1);
    }
    if (!string2ll(argv[6], sdslen(argv[6]), &v) || v < 0) goto out;
    e->epoch = v;
    if (argc > 8) {
        e->slots = zcalloc(NK_CLUSTER_SLOTS / 8);
        for (int i = 8; i < argc; i++)
            if (slotRange(argv[i], e->slots, &e->nslots) == -1) goto out;
    }
    ret = 0;
out:
    if (argv) sdsfreesplitres(argv, argc);
    if (ret == -1) {
        zfree(e->slots);
        e->slots = NULL;
    }
    return ret;
}

/* A whole view: its entries (*n of them), or NULL if any line is
 * malformed (why says which). */
static clusterEntry *viewParse(const char *reply, size_t len, int *n, char *why, size_t whylen) {
    int count;
    sds *lines = sdssplitlen(reply, (ssize_t)len, "\n", 1, &count);
    clusterEntry *e = NULL;
    *n = 0;
    if (!lines) {
        snprintf(why, whylen, "empty");
        return NULL;
    }
    if (count > NK_CLUSTER_VIEW_MAX) {
        snprintf(why, whylen, "more than %d nodes", NK_CLUSTER_VIEW_MAX);
        goto out;
    }
    e = zcalloc(sizeof(*e) * (size_t)(count ? count : 1));
    for (int i = 0; i < count; i++) {
        sdstrim(lines[i], "\r ");
        if (!sdslen(lines[i])) continue;
        if (entryParse(lines[i], &e[*n]) == -1) {
            snprintf(why, whylen, "line %d does not parse: %.80s", i + 1, lines[i]);
            for (int j = 0; j < *n; j++) zfree(e[j].slots);
            zfree(e);
            e = NULL;
            *n = 0;
            goto out;
        }
        (*n)++;
    }
out:
    sdsfreesplitres(lines, count);
    return e;
}

static void viewFree(clusterEntry *e, int n) {
    for (int i = 0; i < n; i++) zfree(e[i].slots);
    zfree(e);
}

static clusterEntry *viewFind(clusterEntry *e, int n, const char *id) {
    for (int i = 0; i < n; i++)
        if (!strcmp(e[i].id, id)) return &e[i];
    return NULL;
}

static int overlap(const clusterEntry *e) {
    int k = 0;
    if (!e->slots) return 0;
    for (int i = 0; i < NK_CLUSTER_SLOTS / 8; i++) k += __builtin_popcount(e->slots[i] & C.slots[i]);
    return k;
}

/* ------------------------------------------------------------- Views --- */

static void shardTake(const clusterEntry *me) {
    if (!C.have_shard || strcmp(C.id, me->id) || C.epoch != me->epoch || C.nslots != me->nslots ||
        (me->slots && memcmp(C.slots, me->slots, sizeof(C.slots))))
        C.dirty = 1;
    C.have_shard = 1;
    memcpy(C.id, me->id, sizeof(C.id));
    C.epoch = me->epoch;
    memset(C.slots, 0, sizeof(C.slots));
    if (me->slots) memcpy(C.slots, me->slots, sizeof(C.slots));
    C.nslots = me->nslots;
}

void nkClusterMode(int mode, const char *from) {
    if (mode < 0 || mode == C.mode) return;
    /* The master's word is final; a replica's or the state file's only
     * stand while the master has not said. */
    if (C.mode >= 0 && strcmp(from, "the master")) return;
    if (C.mode >= 0 || mode == 1)
        nkLog(LL_NOTICE, "Cluster: the shard %s in cluster mode (as %s says)", mode ? "runs" : "does not run", from);
    C.mode = mode;
    snprintf(C.mode_from, sizeof(C.mode_from), "%s", from);
    C.dirty = 1;
}

int nkClusterOn(void) {
    return C.mode == 1;
}

/* The master's own view: what the shard is. */
static void masterView(clusterEntry *e, int n) {
    clusterEntry *me = NULL;
    for (int i = 0; i < n; i++)
        if (e[i].myself) me = &e[i];
    if (!me || !me->master) return;         /* a replica now: its INFO says where to (probes) */
    shardTake(me);
    C.moved = 0;
}

/* A replica's view: does it name a successor to the shard's master? */
static void replicaView(clusterEntry *e, int n, const char *from_ip, int from_port) {
    clusterEntry *old, *best = NULL;
    int best_k = 0;
    if (!C.have_shard) return;
    old = viewFind(e, n, C.id);
    if (!old) return;
    /* Still a master in this view (one emptied by resharding too: that is
     * no failover). */
    if (old->master && !old->fail) return;
    for (int i = 0; i < n; i++) {
        clusterEntry *x = &e[i];
        int k;
        if (x == old || !x->master || x->fail || x->pfail || x->handshake || x->noaddr || !x->port) continue;
        if (x->epoch <= C.epoch || !nkAddrNumeric(x->ip)) continue;
        if (!(k = overlap(x))) continue;
        if (!best || k > best_k || (k == best_k && x->epoch > best->epoch)) {
            best = x;
            best_k = k;
        }
    }
    if (!best) return;
    if (C.moved && !strcmp(C.to_id, best->id) && C.to_epoch >= best->epoch) return;
    C.moved = 1;
    snprintf(C.to_ip, sizeof(C.to_ip), "%s", best->ip);
    C.to_port = best->port;
    memcpy(C.to_id, best->id, sizeof(C.to_id));
    C.to_epoch = best->epoch;
    snprintf(C.to_from, sizeof(C.to_from), "%s:%d", from_ip, from_port);
}

static int askedFind(const char *ip, int port) {
    for (int i = 0; i < C.nasked; i++)
        if (C.asked[i].port == port && !strcmp(C.asked[i].ip, ip)) return i;
    return -1;
}

/* A node's CLUSTER NODES (tag 1: the probes' master's). */
static void viewReply(long long tag, const char *ip, int port, const char *reply, size_t len, int is_error) {
    int i = askedFind(ip, port), n;
    char why[160];
    if (i >= 0) C.asked[i].pending = 0;
    if (is_error) {
        /* Cluster support disabled: not a cluster node (a replica says so
         * only while the master has not: nkClusterMode). */
        if (len >= 10 && strstr(reply, "cluster support disabled"))
            nkClusterMode(0, tag ? "the master" : "a replica");
        return;
    }
    nkClusterMode(1, tag ? "the master" : "a replica");
    clusterEntry *e = viewParse(reply, len, &n, why, sizeof(why));
    if (!e) {
        C.view_errors++;
        if (strcmp(why, C.last_err))
            nkLog(LL_WARNING, "Cluster: the view (CLUSTER NODES) of %s:%d is malformed: %s", ip, port, why);
        snprintf(C.last_err, sizeof(C.last_err), "%s", why);
        return;
    }
    C.views++;
    if (tag) masterView(e, n);
    else replicaView(e, n, ip, port);
    viewFree(e, n);
}

/* ------------------------------------------------------------- Ticks --- */

static void ask(const nkProbeView *v, long long now, int every_round) {
    int i = askedFind(v->addr, v->port);
    if (i < 0) {
        if (C.nasked == NK_CLUSTER_ASKED) {
            /* The oldest entry that is not waiting goes. */
            for (i = 0; i < C.nasked && C.asked[i].pending; i++)
                ;
            if (i == C.nasked) return;
            C.asked[i] = C.asked[--C.nasked];
        }
        i = C.nasked++;
        memset(&C.asked[i], 0, sizeof(C.asked[i]));
        snprintf(C.asked[i].ip, sizeof(C.asked[i].ip), "%s", v->addr);
        C.asked[i].port = v->port;
    }
    /* One at a time: a node that does not answer is not asked again
     * until its probe connection is lost (which answers it). */
    if (C.asked[i].pending) return;
    if (!every_round && now - C.asked[i].asked_us < NK_CLUSTER_ASK_US) return;
    if (nkProbeCommand(v->addr, v->port, viewReply, v->is_master, "CLUSTER", "NODES", NULL) == 0) {
        C.asked[i].pending = 1;
        C.asked[i].asked_us = now;
    }
}

void nkClusterTick(void) {
    nkProbeView v[NICKV_HEALTH_MAX + 1];
    int n = nkProbeNodes(v, NICKV_HEALTH_MAX + 1);
    long long now = getMonotonicUs();
    if (n < 1 || !v[0].is_master) return;
    /* Not a cluster node as far as the master said: nothing to read.
     * Unknown (the master not read yet since start): the replicas say. */
    if (C.mode == 0) return;
    int master_down = !v[0].valid;
    if (v[0].valid && v[0].connected && C.mode == 1) ask(&v[0], now, 0);
    for (int i = 1; i < n; i++)
        if (v[i].valid && v[i].connected && nkAddrNumeric(v[i].reach)) ask(&v[i], now, master_down);
    /* The shard as it stands, for INFO. */
    if (C.mode != 1) snprintf(C.state, sizeof(C.state), "%s", C.mode < 0 ? "pending" : "");
    else if (!C.have_shard) snprintf(C.state, sizeof(C.state), "pending: the master's view not read yet");
    else if (!master_down && C.nslots == 0)
        snprintf(C.state, sizeof(C.state), "lost: the master %s:%d owns no slots", v[0].addr, v[0].port);
    else if (master_down)
        snprintf(C.state, sizeof(C.state), "lost: the master %s:%d is invalid (%s); waiting for the cluster "
                 "to promote one of its replicas", v[0].addr, v[0].port, v[0].why);
    else snprintf(C.state, sizeof(C.state), "ok");
}

int nkClusterSuccessor(const char *master_ip, int master_port, const char **ip, int *port) {
    if (!C.moved) return 0;
    if (C.to_port == master_port && !strcmp(C.to_ip, master_ip)) {
        C.moved = 0;
        return 0;
    }
    *ip = C.to_ip;
    *port = C.to_port;
    return 1;
}

void nkClusterFollowed(void) {
    if (!C.moved) return;
    nkLog(LL_WARNING, "Cluster: the cluster promoted %s:%d (node %.12s, config epoch %lld) in place of the "
          "shard's master (node %.12s, config epoch %lld), as %s's view says: following it",
          C.to_ip, C.to_port, C.to_id, C.to_epoch, C.id, C.epoch, C.to_from);
    /* The successor is the shard's master from now on; its own view
     * corrects the slots once it is read. */
    memcpy(C.id, C.to_id, sizeof(C.id));
    C.epoch = C.to_epoch;
    C.moved = 0;
    C.follows++;
    C.dirty = 1;
}

/* ------------------------------------------------------ State, INFO --- */

sds nkClusterStateLine(sds s) {
    if (C.mode != 1) return s;
    s = sdscatprintf(s, "cluster %s %lld ", C.have_shard ? C.id : "-", C.have_shard ? C.epoch : 0);
    int any = 0;
    for (int i = 0; i < NK_CLUSTER_SLOTS;) {
        if (!slotGet(C.slots, i)) { i++; continue; }
        int j = i;
        while (j + 1 < NK_CLUSTER_SLOTS && slotGet(C.slots, j + 1)) j++;
        s = sdscatprintf(s, "%s%d-%d", any ? "," : "", i, j);
        any = 1;
        i = j + 1;
    }
    return sdscat(s, any ? "\n" : "-\n");
}

int nkClusterStateRead(int argc, sds *argv) {
    long long v;
    if (argc != 4 || (strcmp(argv[1], "-") && !isNodeId(argv[1])) || !string2ll(argv[2], sdslen(argv[2]), &v) ||
        v < 0)
        return -1;
    unsigned char slots[NK_CLUSTER_SLOTS / 8] = {0};
    int nslots = 0;
    if (strcmp(argv[3], "-")) {
        int nr;
        sds *r = sdssplitlen(argv[3], (ssize_t)sdslen(argv[3]), ",", 1, &nr);
        for (int i = 0; r && i < nr; i++)
            if (slotRange(r[i], slots, &nslots) == -1) {
                sdsfreesplitres(r, nr);
                return -1;
            }
        if (r) sdsfreesplitres(r, nr);
    }
    nkClusterMode(1, "the state file");
    if (strcmp(argv[1], "-")) {
        C.have_shard = 1;
        memcpy(C.id, argv[1], sizeof(C.id));
        C.epoch = v;
        memcpy(C.slots, slots, sizeof(C.slots));
        C.nslots = nslots;
    }
    C.dirty = 0;
    return 0;
}

/* The shard changed since the state file was written (cleared). */
int nkClusterDirty(void) {
    int d = C.dirty;
    C.dirty = 0;
    return d;
}

sds nkClusterInfo(sds s) {
    return sdscatprintf(s,
        "# Cluster\r\n"
        "cluster_mode:%s\r\n"
        "cluster_mode_from:%s\r\n"
        "cluster_shard:%s\r\n"
        "cluster_shard_master_id:%s\r\n"
        "cluster_shard_config_epoch:%lld\r\n"
        "cluster_shard_slots:%d\r\n"
        "cluster_views:%lld\r\n"
        "cluster_view_errors:%lld\r\n"
        "cluster_follows:%lld\r\n\r\n",
        C.mode == 1 ? "yes" : (C.mode == 0 ? "no" : "unknown"), C.mode_from, C.mode == 1 ? C.state : "",
        C.have_shard ? C.id : "", C.epoch, C.nslots, C.views, C.view_errors, C.follows);
}

void nkClusterResetStats(void) {
    C.views = C.view_errors = C.follows = 0;
}
