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
 *   - from the master, once a second: what the shard is: the slots the
 *     master owns (its "myself" line), its node id and config epoch, and
 *     its members, the nodes the view lists as the master's replicas
 *     (node id, address). A master at the same address with another node
 *     id that owns none of the shard's slots (restarted without its
 *     nodes.conf) is not taken as the shard's master;
 *   - from each member the probes reach at the address the view gives
 *     (a replica that streams from us or from the master), once a second,
 *     and every probe interval while the master is invalid.
 *
 * A member's view names a successor when the shard's master owns none of
 * the shard's slots in it (the cluster gave them to another node: a
 * failover after a crash, CLUSTER FAILOVER FORCE or TAKEOVER) and a member
 * is a master there, not failing, at a numeric address, with a config
 * epoch above the one the shard's master had, owning slots of the shard
 * (the most of them, then the higher epoch). Members only: a reshard gives
 * slots to other shards' masters, which are never followed (nor is the
 * master's own word that it now replicates from a node that is not a
 * member: a master emptied by a reshard that the cluster then makes
 * another shard's replica, nkClusterMayFollow). The failover (tickWatching)
 * moves the probe to the successor; once that node answers its INFO as a
 * master, the link follows it as it follows any master that moved
 * (foMasterServes), and its own view says what the shard is from then on.
 *
 * What this trusts. The views are asked of the members, at the addresses
 * the master's view gives, on the probe connections the failover commands
 * nodes on (with masterauth: any of them may become the master Nic-KV
 * authenticates to); a successor must be a member. A member can lie in
 * its view, as it can claim slots on the cluster bus, which Redis Cluster
 * does not authenticate: a hostile cluster node threatens the cluster
 * itself, and Nic-KV follows the cluster. Host names in a view
 * (cluster-announce-hostname) are never looked up: numeric addresses
 * only. A view is parsed with bounds on its lines and slot ranges.
 *
 * The shard is written in the state file (stateSave: "cluster",
 * "cluster-slots" and "cluster-member" lines, state file format 2), so
 * that a Nic-KV restarted while its master is dead knows it serves a
 * cluster (and never tries a failover of its own, or REPLICAOF on a
 * cluster node), which slots are its shard and whom to ask.
 */

#include "nickv.h"
#include "nickv_resolve.h"
#include "nickv_probe.h"
#include "nickv_cluster.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>

#include "monotonic.h"
#include "util.h"
#include "zmalloc.h"

#define NK_CLUSTER_SLOTS 16384
#define NK_CLUSTER_ID_LEN 40
#define NK_CLUSTER_ASK_US 1000000LL    /* each member's view, this often */
#define NK_CLUSTER_MEMBERS 32           /* a shard's replicas, at most */
#define NK_CLUSTER_VIEW_MAX 4096        /* nodes in one view, at most */
#define NK_CLUSTER_RANGES_MAX 32768     /* slot ranges in one view, at most (a
                                         * real one has at most 16384, and a
                                         * few importing or migrating) */
#define NK_CLUSTER_IP 256               /* an address in a view */
#define NK_CLUSTER_MEMBER_KEEP_US 60000000LL /* a member the master's view no
                                         * longer lists stays one this long */
#define NK_CLUSTER_STATE_RANGES 128     /* slot ranges per state file line */

typedef struct clusterEntry {
    char id[NK_CLUSTER_ID_LEN + 1];
    char ip[NK_CLUSTER_IP];
    int port;
    int myself, master, fail, pfail, handshake, noaddr;
    char master_id[NK_CLUSTER_ID_LEN + 1];  /* a replica's master, "" if none */
    long long epoch;                         /* config epoch */
    unsigned char *slots;                    /* NK_CLUSTER_SLOTS bits, NULL: none */
} clusterEntry;

typedef struct clusterMember {
    char id[NK_CLUSTER_ID_LEN + 1];
    char ip[NK_CLUSTER_IP];
    int port;
    long long seen_us;          /* last listed by the shard's master's view */
} clusterMember;

/* The shard: its master's node id, config epoch, slots and members. */
typedef struct clusterShard {
    int have;
    char id[NK_CLUSTER_ID_LEN + 1];
    long long epoch;
    unsigned char slots[NK_CLUSTER_SLOTS / 8];
    clusterMember member[NK_CLUSTER_MEMBERS];
    int nmembers;
} clusterShard;

static struct {
    int mode;                                /* 1: cluster mode, 0: not, -1: unknown */
    char mode_from[64];                      /* who said so */
    clusterShard shard;                      /* as the master's view said */
    clusterShard loaded;                     /* as the state file said, until applied */
    /* A successor a member's view named, for the failover to follow. */
    int moved;
    char to_ip[NK_CLUSTER_IP];
    int to_port;
    char to_id[NK_CLUSTER_ID_LEN + 1];
    long long to_epoch;
    char to_from[NK_CLUSTER_IP + 8];         /* whose view named it */
    /* The members' requests: one at a time each. */
    struct { int pending; long long asked_us; } asked[NK_CLUSTER_MEMBERS + 1];
    long long views, view_errors, follows;
    char state[400];                         /* INFO cluster_shard */
    char hold[320];                          /* why the master's move is not followed */
    char last_err[256];                      /* the last view that did not parse */
    int dirty;                               /* the shard changed: the state file */
    int replicas;                            /* the master's view lists this many (-1: unread) */
    int stall_warned;                        /* min-slaves said too high for them (the pair, once) */
    int stall_warned_for[2];
} C = { .mode = -1, .replicas = -1 };

#define S (C.shard)

/* ----------------------------------------------------------- Parsing --- */

static int slotGet(const unsigned char *s, int i) { return s[i >> 3] & (1 << (i & 7)); }

/* Slots a..b (0 <= a <= b < NK_CLUSTER_SLOTS) into s, whole bytes at a time. */
static void slotFill(unsigned char *s, int a, int b) {
    for (; a <= b && (a & 7); a++) s[a >> 3] |= (unsigned char)(1 << (a & 7));
    if (b - a + 1 >= 8) {
        int whole = (b - a + 1) / 8;
        memset(s + (a >> 3), 0xff, (size_t)whole);
        a += whole * 8;
    }
    for (; a <= b; a++) s[a >> 3] |= (unsigned char)(1 << (a & 7));
}

static int slotCount(const unsigned char *s) {
    int k = 0;
    if (!s) return 0;
    for (int i = 0; i < NK_CLUSTER_SLOTS / 8; i++) k += __builtin_popcount(s[i]);
    return k;
}

/* How many of the shard's slots s holds. */
static int overlap(const unsigned char *s) {
    int k = 0;
    if (!s) return 0;
    for (int i = 0; i < NK_CLUSTER_SLOTS / 8; i++) k += __builtin_popcount(s[i] & S.slots[i]);
    return k;
}

/* "N" or "N-M" into slots; importing and migrating entries ("[N->-id]",
 * "[N-<-id]") are not owned slots: skipped. 0, or -1 if malformed. */
static int slotRange(const char *w, size_t len, unsigned char *slots) {
    long long a, b;
    const char *dash = memchr(w, '-', len);
    if (len && w[0] == '[') return 0;
    if (dash) {
        if (!string2ll(w, (size_t)(dash - w), &a) || !string2ll(dash + 1, len - (size_t)(dash - w) - 1, &b))
            return -1;
    } else {
        if (!string2ll(w, len, &a)) return -1;
        b = a;
    }
    if (a < 0 || b < a || b >= NK_CLUSTER_SLOTS) return -1;
    slotFill(slots, (int)a, (int)b);
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
 * <slot>...". 0, or -1 (malformed: the whole view is dropped); *ranges
 * counts the slot words, against the view's bound. */
static int entryParse(const char *line, clusterEntry *e, int *ranges) {
    int argc, ret = -1;
    sds *argv = sdssplitlen(line, (ssize_t)strlen(line), " ", 1, &argc);
    long long v;
    memset(e, 0, sizeof(*e));
    if (!argv || argc < 8 || !isNodeId(argv[0])) goto out;
    if ((*ranges += argc - 8) > NK_CLUSTER_RANGES_MAX) goto out;
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
            if (slotRange(argv[i], sdslen(argv[i]), e->slots) == -1) goto out;
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

static void viewFree(clusterEntry *e, int n) {
    for (int i = 0; i < n; i++) zfree(e[i].slots);
    zfree(e);
}

/* A whole view: its entries (*n of them), or NULL if it is too large or
 * any line is malformed (why says which). The lines are counted before
 * anything is split or allocated. */
static clusterEntry *viewParse(const char *reply, size_t len, int *n, char *why, size_t whylen) {
    int lines = 0, ranges = 0;
    const char *p = reply, *end = reply + len;
    *n = 0;
    for (const char *nl; p < end && (nl = memchr(p, '\n', (size_t)(end - p))); p = nl + 1)
        if (++lines > NK_CLUSTER_VIEW_MAX) {
            snprintf(why, whylen, "more than %d lines", NK_CLUSTER_VIEW_MAX);
            return NULL;
        }
    clusterEntry *e = zcalloc(sizeof(*e) * (size_t)(lines + 1));
    for (p = reply; p < end;) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        size_t l = nl ? (size_t)(nl - p) : (size_t)(end - p);
        sds line = sdstrim(sdsnewlen(p, l), "\r ");
        p += l + (nl ? 1 : 0);
        if (!sdslen(line)) {
            sdsfree(line);
            continue;
        }
        /* Its words counted before it is split: a line of millions of
         * them is refused without allocating each. */
        int words = 1;
        for (const char *q = line; (q = memchr(q, ' ', sdslen(line) - (size_t)(q - line))); q++)
            if (++words > NK_CLUSTER_RANGES_MAX + 8) break;
        if (words > NK_CLUSTER_RANGES_MAX + 8) ranges = NK_CLUSTER_RANGES_MAX + 1;
        if (*n > lines || words > NK_CLUSTER_RANGES_MAX + 8 || entryParse(line, &e[*n], &ranges) == -1) {
            snprintf(why, whylen, "%s: %.80s", ranges > NK_CLUSTER_RANGES_MAX ? "too many slot ranges" :
                     "a line does not parse", line);
            sdsfree(line);
            viewFree(e, *n);
            *n = 0;
            return NULL;
        }
        sdsfree(line);
        (*n)++;
    }
    return e;
}

static clusterEntry *viewFind(clusterEntry *e, int n, const char *id) {
    for (int i = 0; i < n; i++)
        if (!strcmp(e[i].id, id)) return &e[i];
    return NULL;
}

static const clusterMember *memberFind(const char *id) {
    for (int i = 0; i < S.nmembers; i++)
        if (!strcmp(S.member[i].id, id)) return &S.member[i];
    return NULL;
}

static int memberAt(const char *ip, int port) {
    for (int i = 0; i < S.nmembers; i++)
        if (S.member[i].port == port && !strcmp(S.member[i].ip, ip)) return i;
    return -1;
}

/* ------------------------------------------------------------- Views --- */

void nkClusterMode(int mode, const char *from) {
    int master = !strcmp(from, "the master");
    if (mode < 0) return;
    /* The master's word is final; the others' stand while it has not
     * spoken. */
    if (C.mode >= 0 && !master) return;
    if (mode != C.mode && (C.mode == 1 || mode == 1)) {
        nkLog(LL_NOTICE, "Cluster: the shard %s in cluster mode (as %s says)", mode ? "runs" : "does not run", from);
        C.dirty = 1;             /* the state file's format and lines change */
    }
    C.mode = mode;
    snprintf(C.mode_from, sizeof(C.mode_from), "%s", from);
}

int nkClusterOn(void) {
    return C.mode == 1;
}

/* The same shard, as the state file says it (when members were seen aside). */
static int shardSame(const clusterShard *a, const clusterShard *b) {
    if (a->have != b->have || strcmp(a->id, b->id) || a->epoch != b->epoch || a->nmembers != b->nmembers ||
        memcmp(a->slots, b->slots, sizeof(a->slots)))
        return 0;
    for (int i = 0; i < a->nmembers; i++)
        if (strcmp(a->member[i].id, b->member[i].id) || strcmp(a->member[i].ip, b->member[i].ip) ||
            a->member[i].port != b->member[i].port)
            return 0;
    return 1;
}

/* The master's own view: what the shard is. */
/* min-slaves as high as the shard's replica count stalls the shard after
 * every failover the cluster makes: the promoted replica's master is the
 * node that died, so it has one replica less than min-slaves needs and
 * refuses writes (-NOREPLICAS) until that node is back (33.5 s and 13.9 s
 * measured with one replica per shard, against about 5 s for the
 * cluster's own failover). Said once per (min-slaves, replicas) pair, and
 * in INFO (cluster_min_slaves_stalls). */
static int minSlavesStalls(void) {
    return C.mode == 1 && C.replicas >= 0 && nk.cfg.min_slaves > 0 && nk.cfg.min_slaves >= C.replicas;
}

static void minSlavesCheck(void) {
    if (!minSlavesStalls()) {
        C.stall_warned = 0;
        return;
    }
    if (C.stall_warned && C.stall_warned_for[0] == nk.cfg.min_slaves && C.stall_warned_for[1] == C.replicas)
        return;
    C.stall_warned = 1;
    C.stall_warned_for[0] = nk.cfg.min_slaves;
    C.stall_warned_for[1] = C.replicas;
    nkLog(LL_WARNING, "Cluster: min-slaves %d with %d replica(s) in this shard: after the cluster fails "
          "the master over, the new master has %d and refuses writes (-NOREPLICAS) until the old one "
          "is back; set min-slaves below the shard's replica count (0 with one replica)",
          nk.cfg.min_slaves, C.replicas, C.replicas - 1 > 0 ? C.replicas - 1 : 0);
}

static void masterView(clusterEntry *e, int n, const char *ip, int port) {
    clusterEntry *me = NULL;
    clusterShard s;
    long long now = getMonotonicUs();
    for (int i = 0; i < n; i++)
        if (e[i].myself) me = &e[i];
    if (!me) return;
    /* A replica now: its INFO says where to (the probes), which is
     * followed if that is a member (nkClusterMayFollow). */
    if (!me->master) return;
    if (S.have && strcmp(me->id, S.id) && !overlap(me->slots)) {
        /* Another node at the master's address, owning none of the
         * shard's slots: not the shard's master (the members say who is). */
        snprintf(C.hold, sizeof(C.hold), "the node at %s:%d is %.12s, not the shard's master %.12s, and owns "
                 "none of its slots", ip, port, me->id, S.id);
        return;
    }
    C.hold[0] = '\0';
    memset(&s, 0, sizeof(s));
    s.have = 1;
    memcpy(s.id, me->id, sizeof(s.id));
    s.epoch = me->epoch;
    if (me->slots) memcpy(s.slots, me->slots, sizeof(s.slots));
    /* The master itself is one (a planned failover's new master replicates
     * from it a moment before it takes over), then its replicas. */
    for (int i = 0; i < n && s.nmembers < NK_CLUSTER_MEMBERS; i++) {
        clusterEntry *r = &e[i];
        if ((r != me && strcmp(r->master_id, me->id)) || r->handshake || r->noaddr || !r->port ||
            !nkAddrNumeric(r->ip))
            continue;
        memcpy(s.member[s.nmembers].id, r->id, sizeof(s.member[0].id));
        snprintf(s.member[s.nmembers].ip, sizeof(s.member[0].ip), "%s", r->ip);
        s.member[s.nmembers].port = r->port;
        s.member[s.nmembers].seen_us = now;
        s.nmembers++;
    }
    /* The members the last view listed and this one does not stay for a
     * while: a new master's first view may not list yet the old master
     * that is becoming its replica (CLUSTER FAILOVER), which the cluster
     * may promote back next. */
    for (int i = 0; i < S.nmembers && s.nmembers < NK_CLUSTER_MEMBERS; i++) {
        int listed = 0;
        for (int j = 0; j < s.nmembers && !listed; j++) listed = !strcmp(s.member[j].id, S.member[i].id);
        if (!listed && now - S.member[i].seen_us < NK_CLUSTER_MEMBER_KEEP_US) s.member[s.nmembers++] = S.member[i];
    }
    if (!shardSame(&s, &S)) C.dirty = 1;
    S = s;
    C.moved = 0;
    C.replicas = 0;
    for (int i = 0; i < n; i++)
        if (&e[i] != me && !strcmp(e[i].master_id, me->id)) C.replicas++;
    minSlavesCheck();
}

/* A member's view: does it name a successor to the shard's master? */
static void memberView(clusterEntry *e, int n, const char *from_ip, int from_port) {
    clusterEntry *old, *best = NULL;
    int best_k = 0;
    if (!S.have) return;
    old = viewFind(e, n, S.id);
    /* The shard's master still owns slots of the shard in this view. */
    if (old && overlap(old->slots)) return;
    for (int i = 0; i < n; i++) {
        clusterEntry *x = &e[i];
        int k;
        if (x == old || !x->master || x->fail || x->pfail || x->handshake || x->noaddr || !x->port) continue;
        if (x->epoch <= S.epoch || !memberFind(x->id) || !nkAddrNumeric(x->ip)) continue;
        if (!(k = overlap(x->slots))) continue;
        if (!best || k > best_k || (k == best_k && x->epoch > best->epoch)) {
            best = x;
            best_k = k;
        }
    }
    if (!best) return;
    C.moved = 1;
    snprintf(C.to_ip, sizeof(C.to_ip), "%s", best->ip);
    C.to_port = best->port;
    memcpy(C.to_id, best->id, sizeof(C.to_id));
    C.to_epoch = best->epoch;
    snprintf(C.to_from, sizeof(C.to_from), "%s:%d", from_ip, from_port);
}

/* A node's CLUSTER NODES; tag: the member's index, NK_CLUSTER_MEMBERS for
 * the master. */
static void viewReply(long long tag, const char *ip, int port, const char *reply, size_t len, int is_error) {
    int n, is_master = tag == NK_CLUSTER_MEMBERS;
    char why[160];
    if (tag >= 0 && tag <= NK_CLUSTER_MEMBERS) C.asked[tag].pending = 0;
    if (C.mode != 1) return;
    /* (A connection lost before the answer: the node's death, not its word.) */
    if (is_error && len == 15 && !memcmp(reply, "connection lost", 15)) return;
    if (is_error) {
        /* A node that refuses (NOPERM: the nickv user lacks cluster|nodes)
         * is counted and said, not waited on in silence. */
        snprintf(why, sizeof(why), "%.*s", (int)(len > 120 ? 120 : len), reply);
        C.view_errors++;
        if (strcmp(why, C.last_err))
            nkLog(LL_WARNING, "Cluster: %s:%d answers CLUSTER NODES with an error: %s%s", ip, port, why,
                  !strncmp(why, "NOPERM", 6) ? " (Nic-KV's user needs +cluster|nodes: NIC-KV.md, "
                  "\"Security model\")" : "");
        snprintf(C.last_err, sizeof(C.last_err), "%s", why);
        return;
    }
    clusterEntry *e = viewParse(reply, len, &n, why, sizeof(why));
    if (!e) {
        C.view_errors++;
        if (strcmp(why, C.last_err))
            nkLog(LL_WARNING, "Cluster: the view (CLUSTER NODES) of %s:%d is dropped: %s", ip, port, why);
        snprintf(C.last_err, sizeof(C.last_err), "%s", why);
        return;
    }
    C.views++;
    nkProbeView m;
    /* The master's view, if it is still the node the probes read as the
     * master (a reply sent before the probe moved is another node's). */
    if (is_master) {
        if (nkProbeNodes(&m, 1) == 1 && m.is_master && m.port == port && !strcmp(m.addr, ip))
            masterView(e, n, ip, port);
    } else if (tag >= 0 && tag < S.nmembers && S.member[tag].port == port) memberView(e, n, ip, port);
    viewFree(e, n);
}

/* ------------------------------------------------------------- Ticks --- */

static void ask(int slot, const nkProbeView *v, long long now, long long every_us) {
    if (C.asked[slot].pending || now - C.asked[slot].asked_us < every_us) return;
    /* Pending before the send: a connection that fails at once answers
     * "connection lost" inside nkProbeCommand. */
    C.asked[slot].pending = 1;
    C.asked[slot].asked_us = now;
    if (nkProbeCommand(v->addr, v->port, viewReply, slot, "CLUSTER", "NODES", NULL) == -1)
        C.asked[slot].pending = 0;
}

void nkClusterTick(void) {
    nkProbeView v[NICKV_HEALTH_MAX + 1];
    /* Only in cluster mode (the master's INFO, the state file, or a
     * candidate's INFO said so): outside it, every failover tick returns
     * here, before copying the probes' nodes. */
    if (C.mode != 1) return;
    int n = nkProbeNodes(v, NICKV_HEALTH_MAX + 1);
    long long now = getMonotonicUs();
    if (n < 1 || !v[0].is_master) return;
    int master_down = !v[0].valid;
    /* A master the probes just moved to: its view at once. */
    static char last_ip[NK_CLUSTER_IP];
    static int last_port;
    if (v[0].port != last_port || strcmp(v[0].addr, last_ip)) {
        snprintf(last_ip, sizeof(last_ip), "%s", v[0].addr);
        last_port = v[0].port;
        C.asked[NK_CLUSTER_MEMBERS].asked_us = 0;
    }
    if (v[0].valid && v[0].connected) ask(NK_CLUSTER_MEMBERS, &v[0], now, NK_CLUSTER_ASK_US);
    /* The members, where the probes reach them at the address the
     * master's view gives: every probe interval while the master is
     * invalid. */
    for (int i = 1; i < n; i++) {
        int m;
        if (!v[i].valid || !v[i].connected) continue;
        if ((m = memberAt(v[i].reach, v[i].port)) < 0 && (m = memberAt(v[i].addr, v[i].port)) < 0) continue;
        ask(m, &v[i], now, master_down ? nk.cfg.probe_interval * 1000LL : NK_CLUSTER_ASK_US);
    }
    /* The shard as it stands, for INFO. */
    int nslots = slotCount(S.slots);
    if (C.hold[0]) snprintf(C.state, sizeof(C.state), "lost: %s", C.hold);
    else if (!S.have) snprintf(C.state, sizeof(C.state), "pending: the master's view not read yet");
    else if (master_down)
        snprintf(C.state, sizeof(C.state), "lost: the master %s:%d is invalid (%.120s); waiting for the cluster "
                 "to promote one of its replicas", v[0].addr, v[0].port, v[0].why);
    else if (!nslots) snprintf(C.state, sizeof(C.state), "lost: the master %s:%d owns no slots", v[0].addr, v[0].port);
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
          C.to_ip, C.to_port, C.to_id, C.to_epoch, S.id, S.epoch, C.to_from);
    /* Not taken as the shard's master until it answers as one: its own
     * view says what the shard is then (masterView). */
    C.moved = 0;
    C.follows++;
}

int nkClusterMayFollow(const char *ip, int port) {
    if (C.mode != 1 || !S.have || memberAt(ip, port) >= 0) return 1;
    snprintf(C.hold, sizeof(C.hold), "the master replicates from %s:%d, which is not a node of its shard (a "
             "master emptied by a reshard and moved to another shard?): not followed", ip, port);
    nkLogRepeat(LL_WARNING, NULL, "Cluster: %s", C.hold);
    return 0;
}

/* ------------------------------------------------------ State, INFO --- */

sds nkClusterStateLines(sds s) {
    if (C.mode != 1) return s;
    if (!S.have) return sdscat(s, "cluster - 0\n");
    s = sdscatprintf(s, "cluster %s %lld\n", S.id, S.epoch);
    int k = 0;
    for (int i = 0; i < NK_CLUSTER_SLOTS;) {
        if (!slotGet(S.slots, i)) {
            i++;
            continue;
        }
        int j = i;
        while (j + 1 < NK_CLUSTER_SLOTS && slotGet(S.slots, j + 1)) j++;
        s = sdscatprintf(s, "%s%d-%d", k % NK_CLUSTER_STATE_RANGES ? "," : (k ? "\ncluster-slots " : "cluster-slots "),
                         i, j);
        k++;
        i = j + 1;
    }
    if (k) s = sdscat(s, "\n");
    for (int i = 0; i < S.nmembers; i++)
        s = sdscatprintf(s, "cluster-member %s %s %d\n", S.member[i].id, S.member[i].ip, S.member[i].port);
    return s;
}

int nkClusterStateRead(int argc, sds *argv) {
    long long v;
    clusterShard *l = &C.loaded;
    if (!strcmp(argv[0], "cluster") && argc == 3 && (!strcmp(argv[1], "-") || isNodeId(argv[1])) &&
        string2ll(argv[2], sdslen(argv[2]), &v) && v >= 0) {
        l->have = strcmp(argv[1], "-") != 0;
        if (l->have) memcpy(l->id, argv[1], sizeof(l->id));
        l->epoch = v;
        return 0;
    }
    if (!strcmp(argv[0], "cluster-slots") && argc == 2) {
        int nr, ok = 1;
        sds *r = sdssplitlen(argv[1], (ssize_t)sdslen(argv[1]), ",", 1, &nr);
        if (!r || nr > NK_CLUSTER_STATE_RANGES) ok = 0;
        for (int i = 0; ok && i < nr; i++)
            if (slotRange(r[i], sdslen(r[i]), l->slots) == -1) ok = 0;
        if (r) sdsfreesplitres(r, nr);
        return ok ? 0 : -1;
    }
    if (!strcmp(argv[0], "cluster-member") && argc == 4 && isNodeId(argv[1]) && nkAddrNumeric(argv[2]) &&
        string2ll(argv[3], sdslen(argv[3]), &v) && v > 0 && v < 65536) {
        if (l->nmembers == NK_CLUSTER_MEMBERS) return 0;
        memcpy(l->member[l->nmembers].id, argv[1], sizeof(l->member[0].id));
        snprintf(l->member[l->nmembers].ip, sizeof(l->member[0].ip), "%s", argv[2]);
        l->member[l->nmembers].port = (int)v;
        l->nmembers++;
        return 0;
    }
    return -1;
}

void nkClusterStateApply(int found) {
    if (found) {
        nkClusterMode(1, "the state file");
        S = C.loaded;
        for (int i = 0; i < S.nmembers; i++) S.member[i].seen_us = getMonotonicUs();
    }
    memset(&C.loaded, 0, sizeof(C.loaded));
    C.dirty = 0;
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
        "cluster_enabled:%d\r\n"           /* redis-server's name for it (redis_exporter) */
        "cluster_mode:%s\r\n"
        "cluster_mode_from:%s\r\n"
        "cluster_shard:%s\r\n"
        "cluster_shard_master_id:%s\r\n"
        "cluster_shard_config_epoch:%lld\r\n"
        "cluster_shard_slots:%d\r\n"
        "cluster_shard_members:%d\r\n"
        "cluster_views:%lld\r\n"
        "cluster_view_errors:%lld\r\n"
        "cluster_follows:%lld\r\n"
        "cluster_shard_replicas:%d\r\n"
        "cluster_min_slaves_stalls:%s\r\n\r\n",
        C.mode == 1, C.mode == 1 ? "yes" : (C.mode == 0 ? "no" : "unknown"), C.mode_from, C.mode == 1 ? C.state : "",
        S.have ? S.id : "", S.epoch, slotCount(S.slots), S.nmembers, C.views, C.view_errors, C.follows,
        C.replicas, minSlavesStalls() ? "yes" : "no");
}

void nkClusterResetStats(void) {
    C.views = C.view_errors = C.follows = 0;
}
