/* nickv_coord.c -- many Nic-KVs, one leader: leadership and the shard's record in etcd.
 *
 * Copyright (c) 2026, the SKV authors. BSD 3-Clause licence (see LICENSE).
 *
 * ========================================================================
 * Why, and what
 * ========================================================================
 *
 * One Nic-KV on the master's own DPU dies with the master's server (power,
 * its uplink). With `coordinator` set, a Nic-KV runs on every server's DPU,
 * all for one master-name, and etcd (not a consensus of ours) says which one
 * leads. The leader alone grants the master's lease, names replicas valid
 * to it (health), promotes, repoints and writes the shard's record; the
 * others (standbys) probe, answer SENTINEL from the record, and campaign
 * when the leader key is gone. Without `coordinator` nothing here runs and
 * every function below answers as for the only Nic-KV there is.
 *
 * Keys, under /skv/<master-name>/ (values are text):
 *
 *   leader             "<instance> <local-node>", attached to the holder's
 *                      etcd lease (leader-ttl seconds), created only if absent
 *   record             "epoch <n> master <ip> <port> named <k> (<ip> <port>)*k
 *                       successor <instance|->", written only by a txn that
 *                      checks that the leader key is the writer's
 *   member/<ip:port>   "<instance>": the Nic-KV local to that node, alive
 *                      (attached to its etcd lease)
 *
 * ========================================================================
 * The chain of deadlines (why two masters never both take writes)
 * ========================================================================
 *
 * 1. A keep-alive of our etcd lease sent at s (our CLOCK_MONOTONIC) and
 *    answered with TTL T: etcd received it after s, so the lease, and the
 *    leader key with it, cannot expire before s + T on etcd's clock, and no
 *    other Nic-KV can create the leader key before that.
 * 2. We count our leadership as held until held = s + T - 10 % of T - 10 ms
 *    (the clocks' rates differ by less than 10 %, as for the master's lease).
 * 3. A grant of the master's lease sent at g for ms = lease-time runs out,
 *    in real time, by g + ms (src/nickv_lease.c; what goes on the wire is
 *    more, by the age of the master's clock it is built on: nkLeaseGrantMs
 *    shows the same bound holds); we send it only when g + ms + 10 % of ms
 *    + 10 ms <= held (nkCoordMayGrant). So every lease we granted has run
 *    out before the leader key can expire.
 * 4. A new leader creates the key after it expired: by then the old
 *    leader's grants have all run out, whatever became of the old leader
 *    (killed, stopped, cut off from etcd, its whole server gone). It
 *    promotes (after hearing the replicas the record names: 5.) and grants.
 * 5. Acknowledged writes: the master counts for WAIT and min-replicas only
 *    replicas its grantor named valid (health). The leader names a replica
 *    only once the record in etcd lists it (nkCoordMayName): a new leader
 *    reads the record and hears every replica it names before promoting,
 *    as the single Nic-KV hears those it named itself.
 * 6. A promotion is written to the record (guarded by the leader key)
 *    before REPLICAOF NO ONE is sent (nkCoordPublish): a Nic-KV that leads
 *    later knows the master, and its epoch.
 * 7. (DESIGN.md) A new leader promotes nobody for a lease-time after it won.
 * 8. A keep-alive answered after our count (held) ran out counts for
 *    nothing: a new lease is taken, the leader key moved onto it if it is
 *    still ours on the old one, and the old one revoked (roundLease). etcd
 *    renews an expired lease that a change of etcd leader revived before
 *    its sweep, and a standby revokes a lease that its reads proved
 *    expired (roundKeyExpiring): counted, such a renewal could let us grant
 *    after that revoke let another Nic-KV lead.
 *
 * It assumes what the master's lease assumes (clock rates within 10 %),
 * etcd's own guarantee that a lease does not expire before its TTL after a
 * keep-alive it acknowledged, and that a Nic-KV that is not the leader sends
 * no grant (one instance id per process; the master takes grants from one
 * process at a time: src/nickv_server.c, "One Nic-KV").
 *
 * ========================================================================
 * Roles
 * ========================================================================
 *
 *   STANDBY    --the leader key is absent, no successor was named to us
 *                lately, we know the master's nickv-lease (coordThread:
 *                create)--> LEADER
 *   LEADER     --a keep-alive failed for longer than held allows, the key
 *                is gone or another's, or etcd says the lease expired (a
 *                renewal too late, 8., moves the key to a new lease: a
 *                leadership counted anew from it)--> STANDBY
 *   LEADER     --not on the master's server, the master valid for
 *                NK_COORD_MOVE_STABLE_MS, a Nic-KV on its server alive
 *                (member key): no more grants--> RESIGNING
 *   RESIGNING  --every lease granted has run out: the record names that
 *                Nic-KV successor, the leader key is deleted--> STANDBY
 *
 * Only the leader on the master's own server (local-node) opens the link:
 * it fans the stream out (nkCoordFanout). Leadership moves to that Nic-KV
 * after a promotion made elsewhere (RESIGNING), costing writes the time
 * from the master's lease's end to the successor's first grant: the drift
 * margin and a few etcd calls (resignTimer, publish, roundWait).
 *
 * The etcd calls block, so they run in a thread of their own (coordThread),
 * which shares with the main thread only the struct below, under its lock.
 * It makes a round every NK_COORD_TICK_US, at once when the main thread has
 * a record to write (S.wake), and wakes the main thread (a byte on a pipe,
 * then the failover's tick through hooks.changed) when a round won or lost
 * the leadership or wrote, was refused or read a new record: a standby
 * that wins, and a promotion's record, cost no wait for the next tick.
 */

#include "nickv.h"
#include "nickv_resolve.h"
#include "nickv_coord.h"
#include "nickv_etcd.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "monotonic.h"
#include "util.h"
#include "zmalloc.h"

#define NK_COORD_DRIFT_PCT 10            /* clock rates differ by less */
#define NK_COORD_MARGIN_US 10000         /* ms reads, scheduling */
#define NK_COORD_TICK_US 100000          /* the thread's round, this often (and at
                                          * once for a record to write) */
#define NK_COORD_AUTH_TIMEOUT_MS 5000    /* an etcd authentication (a bcrypt) */
#define NK_COORD_NAMED 32                /* replicas the record can name */
#define NK_COORD_MEMBERS 64              /* member keys read, at most */
#define NK_COORD_MEMBERS_US 1000000LL    /* ... once a second */

#define NK_COORD_MOVE_STABLE_MS 5000     /* master valid this long before leadership moves */
#define NK_COORD_SUCCESSOR_MS 3000       /* a named successor has this long to campaign */
#define NK_COORD_WATCH_US 10000          /* the successor-to-be looks at the leader key this often */
#define NK_COORD_WATCH_MAX_US (NK_COORD_MOVE_STABLE_MS * 3000LL)  /* ... for this long at most */
#define NK_COORD_TTL_READ_US 100000      /* a standby reads the leader's lease's TTL this often */
#define NK_COORD_RESIGN_PAUSE_MS 3000    /* a leader that resigned campaigns no sooner */

typedef struct coordAddr {
    char ip[NK_COORD_ADDR];
    int port;
} coordAddr;

typedef struct coordRecord {
    long long epoch;                     /* 0: no record */
    coordAddr master;
    coordAddr named[NK_COORD_NAMED];
    int nnamed;
    char successor[NICKV_INSTANCE_LEN + 1];
} coordRecord;

typedef enum { CO_OFF, CO_STANDBY, CO_LEADER, CO_RESIGNING } coordRole;
static const char *roleNames[] = {"off", "standby", "leader", "resigning"};
/* The moves between roles (the diagram under "Roles" above), checked by
 * coordSetRole, the one writer of C.role. OFF is where a Nic-KV starts;
 * nkCoordInit moves it to STANDBY when a coordinator is set. */
static const unsigned coordMoves[] = {
    [CO_OFF]       = 1u << CO_STANDBY,
    [CO_STANDBY]   = 1u << CO_LEADER,
    [CO_LEADER]    = 1u << CO_STANDBY | 1u << CO_RESIGNING,
    [CO_RESIGNING] = 1u << CO_STANDBY,
};

/* Shared with the thread, under lock. */
static struct {
    pthread_mutex_t lock;
    pthread_cond_t wake;                 /* main -> thread: a round now (kick) */
    int kick;
    int notify_fd[2];                    /* thread -> main: a round changed something */
    pthread_t thread;
    int running, stop;
    /* main -> thread */
    int campaign;                        /* create the leader key if absent */
    int resign;                          /* publish, then delete our leader key */
    sds publish;                         /* the record to write (NULL: none) */
    long long publish_epoch;
    long long publish_gen;               /* ... its number (publish counts them) */
    char member_check[NK_COORD_ADDR + 8]; /* ip:port whose member key to read ("") */
    int watch_key;                       /* between rounds, look at the leader key often */
    /* thread -> main */
    int leader;                          /* the leader key is ours, as last read */
    long long held_us;                   /* ... and counts as ours until then */
    long long lease_ttl;                 /* granted by etcd */
    sds leader_val;                      /* the leader key ("" none) */
    sds record_val;                      /* the record ("" none) */
    long long published_epoch;           /* the last record written, its epoch */
    long long published_gen;             /* ... and the highest publish_gen written */
    int publish_refused;                 /* ... or refused (not the leader) */
    int member_present;                  /* member_check's key exists (-1: not read
                                          * since it was set) */
    long long member_gen;                /* bumped whenever member_check is set anew */
    char member_instance[NICKV_INSTANCE_LEN + 1];
    coordAddr members[NK_COORD_MEMBERS]; /* the member keys' nodes (nkCoordMember) */
    int nmembers;
    int members_read;                    /* read at least once */
    int resigned;                        /* the key was deleted on resign */
    int key_lease_alive;                 /* absent, but its holder's lease lives */
    int successor_wait;                  /* free, but a named successor may take it first */
    int etcd_ok;
    char etcd_err[256];
    char endpoint[128];
    long long keepalive_failures, rounds;
    long long revoked;                   /* dead leaders' etcd leases revoked (roundKeyExpiring) */
    long long lapses;                    /* our etcd lease given up: renewed too late (roundLease) */
} S;

/* Main thread only. */
static struct {
    coordRole role;
    coordAddr local;
    sds key_leader, key_record, key_member_prefix;
    sds my_value;                        /* the leader key's value when ours */
    coordRecord rec;                     /* as last read */
    /* Replicas the record lists (so the leader may name them), and when we
     * last named each: one not named for a while leaves the record. */
    struct { coordAddr a; long long named_ms; } recorded[NK_COORD_NAMED];
    int nrecorded;
    coordAddr wanted[NK_COORD_NAMED];    /* to name, once recorded */
    int nwanted;
    long long publishing_epoch;          /* a publish in flight (-1: none) */
    long long publishing_gen;            /* ... its publish_gen */
    coordAddr publishing_named[NK_COORD_NAMED];
    int publishing_nnamed;
    long long master_valid_since_ms;
    long long resign_started_us;
    long long resigned_at_us;
    int resign_sent;
    long long resign_timer;              /* an ae timer at our last grant's end (-1: none) */
    long long watch_since_us;            /* the successor-to-be since then (0: not) */
    char last_err[256];
    long long won, lost, resigns;
    int was_leader;
    char successor[NICKV_INSTANCE_LEN + 1];
    long long tampered;                  /* records the leader did not write */
    int wrote;                           /* a record of ours was written in this leadership */
    long long held_back;                 /* grants not sent: leadership too short */
    const char *campaign_held;           /* why a standby does not campaign ("" it does) */
} C;
static nkCoordHooks hooks;              /* the layers above (nkCoordInit) */

static long long coordNowUs(void) { return (long long)getMonotonicUs(); }

/* The one place C.role changes: a move the table above does not allow is
 * a bug (abort in the debug build, logged in the release build, where the
 * move is made anyway as before). */
static void coordSetRole(coordRole to) {
    if (!(coordMoves[C.role] & (1u << to)))
        nkBug("coordinator: no move from %s to %s", roleNames[C.role], roleNames[to]);
    nkLog(LL_VERBOSE, "Coordinator: %s -> %s", roleNames[C.role], roleNames[to]);
    C.role = to;
}

int nkCoordOn(void) {
    return nk.cfg.coordinator && nk.cfg.coordinator[0];
}

/* ---------------------------------------------------------- The record --- */

static int addrParse(const char *s, coordAddr *a) {
    const char *colon = strrchr(s, ':');
    long long port;
    if (!colon || colon == s || (size_t)(colon - s) >= sizeof(a->ip)) return 0;
    if (!string2ll(colon + 1, strlen(colon + 1), &port) || port <= 0 || port > 65535) return 0;
    memcpy(a->ip, s, (size_t)(colon - s));
    a->ip[colon - s] = '\0';
    a->port = (int)port;
    return nkAddrNumeric(a->ip);
}

static int addrIs(const coordAddr *a, const char *ip, int port) {
    return a->port == port && !strcmp(a->ip, ip);
}

/* Strictly, as INFO is read: a record that does not parse is no record
 * (and said so). */
static int recordParse(const char *v, coordRecord *r) {
    int argc, ok = 0;
    sds *argv = sdssplitargs(v, &argc);
    long long n, port;
    memset(r, 0, sizeof(*r));
    if (!argv || argc < 8) goto end;
    /* Epochs grow by one per master change: far below 2^62, which leaves
     * room for the failover's increments. */
    if (strcmp(argv[0], "epoch") || !string2ll(argv[1], sdslen(argv[1]), &r->epoch) || r->epoch < 1 ||
        r->epoch > (1LL << 62))
        goto end;
    if (strcmp(argv[2], "master") || sdslen(argv[3]) >= NK_COORD_ADDR || !nkAddrNumeric(argv[3])) goto end;
    if (!string2ll(argv[4], sdslen(argv[4]), &port) || port <= 0 || port > 65535) goto end;
    snprintf(r->master.ip, sizeof(r->master.ip), "%s", argv[3]);
    r->master.port = (int)port;
    if (strcmp(argv[5], "named") || !string2ll(argv[6], sdslen(argv[6]), &n) || n < 0 ||
        n > NK_COORD_NAMED || argc != 7 + 2 * n + 2)
        goto end;
    for (int i = 0; i < n; i++) {
        sds ip = argv[7 + 2 * i], p = argv[8 + 2 * i];
        if (sdslen(ip) >= NK_COORD_ADDR || !nkAddrNumeric(ip) || !string2ll(p, sdslen(p), &port) ||
            port <= 0 || port > 65535)
            goto end;
        snprintf(r->named[i].ip, sizeof(r->named[i].ip), "%s", ip);
        r->named[i].port = (int)port;
    }
    r->nnamed = (int)n;
    if (strcmp(argv[7 + 2 * n], "successor")) goto end;
    sds succ = argv[8 + 2 * n];
    if (strcmp(succ, "-")) {
        if (sdslen(succ) != NICKV_INSTANCE_LEN) goto end;
        memcpy(r->successor, succ, NICKV_INSTANCE_LEN + 1);
    }
    ok = 1;
end:
    if (argv) sdsfreesplitres(argv, argc);
    if (!ok) memset(r, 0, sizeof(*r));
    return ok;
}

static sds recordFormat(long long epoch, const char *ip, int port, const coordAddr *named, int nnamed,
                        const char *successor) {
    sds s = sdscatprintf(sdsempty(), "epoch %lld master %s %d named %d", epoch, ip, port, nnamed);
    for (int i = 0; i < nnamed; i++) s = sdscatprintf(s, " %s %d", named[i].ip, named[i].port);
    return sdscatprintf(s, " successor %s", successor && successor[0] ? successor : "-");
}

/* ---------------------------------------------------------- The thread --- */

/* What the thread keeps from round to round (its own, not shared). */
typedef struct coordThreadState {
    nkEtcd *e;
    long long lease, ttl;                /* our etcd lease, and its TTL */
    long long lease_until;               /* ... counts as held until then (its last keep-alive) */
    long long dropped_lease;             /* a lease of ours given up whose revoke failed */
    int member_put;                      /* our member key is written */
    char succ[NICKV_INSTANCE_LEN + 1];   /* the successor last named (successorWaits) */
    long long succ_seen_us;
    long long key_lease;                 /* the leader key's lease, when another's */
    long long ttl_read_us;               /* ... whose TTL was last read then */
    int key_expiring;                    /* ... with less than a second left */
    long long zero_lease;                /* the lease of the run of TTL 0 reads below */
    long long zero_since_us;             /* ... that began with a read answered then (0: none) */
    long long zero_sent_us;              /* ... whose last read was sent then */
    long long zero_term;                 /* ... all answered in this etcd raft term */
    long long members_us;                /* the member keys were last read then */
    sds member_key;
} coordThreadState;

/* The successor a record names (a leader resigned for it, the one on the
 * master's server), and since when this thread knows that name: t->succ
 * and t->succ_seen_us, from every round's read of the record, whether or
 * not we campaign in it. The hold (successorWaits) counts from the first
 * round that read the name. It once counted from the first round that
 * campaigned, and the main thread held a standby from campaigning for
 * NK_COORD_SUCCESSOR_MS before that: a successor new to this thread (a
 * Nic-KV restarted, so a new instance id) that died after being named
 * left the group without a leader for both holds, 6 s. *named: the record
 * names one. */
static void successorSeen(coordThreadState *t, const char *rval, int *named) {
    coordRecord r;
    int has = rval && recordParse(rval, &r) && r.successor[0];
    if (named) *named = has;
    if (!has || !strcmp(r.successor, nk.instance)) {
        t->succ[0] = '\0';
        return;
    }
    if (strcmp(t->succ, r.successor)) {
        memcpy(t->succ, r.successor, NICKV_INSTANCE_LEN + 1);
        t->succ_seen_us = coordNowUs();
    }
}

/* The leader key is free: does the record name another Nic-KV its
 * successor, named less than NK_COORD_SUCCESSOR_MS ago? Then it has that
 * long to take the key first. Read here, in the round that campaigns (the
 * resigner writes the record, then frees the key), and the only hold for
 * a successor: the main thread shows it (INFO campaign_held). On an etcd
 * error: no campaign this round. */
static int successorWaits(coordThreadState *t, int *named) {
    char err[256];
    sds v = NULL;
    if (nkEtcdGet(t->e, C.key_record, &v, NULL, err, sizeof(err)) == -1) return 1;
    successorSeen(t, v, named);
    sdsfree(v);
    return t->succ[0] && coordNowUs() - t->succ_seen_us < NK_COORD_SUCCESSOR_MS * 1000LL;
}

/* The leader key is absent, and was last seen attached to another Nic-KV's
 * etcd lease, *seen: may we create it? Not while etcd still has that lease
 * (the key was deleted by hand, not expired: its holder, perhaps cut off
 * from etcd, may grant until its lease runs out), unless the record names
 * a successor (a leader that resigned deleted its key once its grants had
 * run out). 1 yes, 0 not yet (*alive set), -1 on an etcd error. */
static int keyLeaseGone(nkEtcd *e, long long *seen, int successor_named, int *alive, char *err, size_t errlen) {
    int exists;
    *alive = 0;
    if (!*seen || successor_named) return 1;
    if (nkEtcdLeaseExists(e, *seen, &exists, err, errlen) == -1) return -1;
    if (exists) {
        *alive = 1;
        return 0;
    }
    *seen = 0;
    return 1;
}

/* The thread tells the main thread a round brought news (a byte on a
 * pipe the event loop watches): it decides now, not at its next tick. */
static void coordNotify(void) {
    char b = 1;
    if (write(S.notify_fd[1], &b, 1) == -1 && errno != EAGAIN) {
        /* full (EAGAIN): a byte is already waiting; else the next tick */
    }
}

static void coordNotified(aeEventLoop *el, int fd, void *data, int mask) {
    char buf[64];
    (void)el;
    (void)data;
    (void)mask;
    while (read(fd, buf, sizeof(buf)) > 0) {}
    hooks.changed();
}

/* The nodes the deployment's Nic-KVs registered (member/<ip:port>, each
 * attached to its Nic-KV's etcd lease), into S.members: members, with etcd's
 * authentication only (nickv_member.c). A list that cannot be read leaves
 * the last one. */
static void coordReadMembers(nkEtcd *e) {
    sds keys[NK_COORD_MEMBERS];
    coordAddr got[NK_COORD_MEMBERS];
    int n = 0, kept = 0;
    char err[256];
    if (nkEtcdList(e, C.key_member_prefix, keys, NK_COORD_MEMBERS, &n, err, sizeof(err)) == -1) return;
    for (int i = 0; i < n; i++) {
        nkNodeAddr a;
        const char *why;
        size_t plen = sdslen(C.key_member_prefix);
        if (sdslen(keys[i]) > plen && nkMemberParse(keys[i] + plen, &a, &why) && strlen(a.ip) < NK_COORD_ADDR) {
            memcpy(got[kept].ip, a.ip, strlen(a.ip) + 1);
            got[kept++].port = a.port;
        }
        sdsfree(keys[i]);
    }
    pthread_mutex_lock(&S.lock);
    memcpy(S.members, got, sizeof(got[0]) * (size_t)kept);
    S.nmembers = kept;
    S.members_read = 1;
    pthread_mutex_unlock(&S.lock);
}

/* Is ip:port a node a Nic-KV of the deployment registered (with etcd's
 * authentication; never with coordinator-insecure)? Main thread. */
int nkCoordMember(const char *ip, int port) {
    int found = 0;
    if (C.role == CO_OFF || !nk.cfg.coordinator_user) return 0;
    pthread_mutex_lock(&S.lock);
    for (int i = 0; i < S.nmembers && !found; i++)
        found = S.members[i].port == port && nkSameAddr(ip, S.members[i].ip);
    pthread_mutex_unlock(&S.lock);
    return found;
}

/* ... and all of them, up to max (the same condition). Main thread. */
int nkCoordMembers(nkNodeAddr *out, int max) {
    int n = 0;
    if (C.role == CO_OFF || !nk.cfg.coordinator_user) return 0;
    pthread_mutex_lock(&S.lock);
    for (int i = 0; i < S.nmembers && n < max; i++, n++) {
        snprintf(out[n].ip, sizeof(out[n].ip), "%s", S.members[i].ip);
        out[n].port = S.members[i].port;
    }
    pthread_mutex_unlock(&S.lock);
    return n;
}


/* One round: what the main thread asked (in), what etcd said (out). */
typedef struct coordRound {
    char err[256];
    int ok, campaign, resign, leader, refused, present, lease_alive, successor_wait;
    long long pub_epoch, pub_gen, published, held, until, check_gen;
    sds pub, lval, rval;
    char check[sizeof(S.member_check)], inst[NICKV_INSTANCE_LEN + 1];
} coordRound;

/* The main thread's requests, copied under the lock. 0: asked to stop. */
static int roundIn(coordRound *r) {
    memset(r, 0, sizeof(*r));
    r->ok = 1;
    r->present = -1;
    r->published = -1;
    pthread_mutex_lock(&S.lock);
    if (S.stop) {
        pthread_mutex_unlock(&S.lock);
        return 0;
    }
    r->campaign = S.campaign;
    r->resign = S.resign;
    if (S.publish) {
        r->pub = sdsdup(S.publish);
        r->pub_epoch = S.publish_epoch;
        r->pub_gen = S.publish_gen;
    }
    memcpy(r->check, S.member_check, sizeof(r->check));
    r->check_gen = S.member_gen;
    r->held = S.held_us;
    pthread_mutex_unlock(&S.lock);
    return 1;
}

/* A token, our etcd lease kept alive, and until when the leadership would
 * count as held (until: 0 when the round failed). */
static void roundLease(coordThreadState *t, coordRound *r) {
    long long s;
    /* A token first when we hold none (etcd with authentication): under
     * a deadline of its own, as a loaded member's bcrypt can take longer
     * than a call may (nickv_etcd.c). Only after a member restart does a
     * leader need one again; its held time runs out meanwhile. */
    if (nkEtcdAuthenticate(t->e, NK_COORD_AUTH_TIMEOUT_MS, r->err, sizeof(r->err)) == -1) r->ok = 0;
    /* Our etcd lease: granted once, kept alive every round. */
    s = coordNowUs();
    if (!r->ok) {
        /* no token: nothing else this round */
    } else if (!t->lease) {
        if (nkEtcdLeaseGrant(t->e, nk.cfg.leader_ttl, &t->lease, &t->ttl, r->err, sizeof(r->err)) == -1) {
            t->lease = 0;
            r->ok = 0;
        } else {
            t->member_put = 0;
            t->lease_until = 0;
        }
    } else {
        long long ttl;
        if (nkEtcdLeaseKeepAlive(t->e, t->lease, &ttl, r->err, sizeof(r->err)) == -1) {
            r->ok = 0;
        } else if (ttl <= 0) {
            snprintf(r->err, sizeof(r->err), "our etcd lease %lld expired", t->lease);
            t->lease = 0;
            r->held = 0;
            r->ok = 0;
        } else if (t->lease_until && coordNowUs() > t->lease_until) {
            /* Renewed after our own count of it had run out. etcd renews
             * an expired lease that a change of etcd leader revived
             * before its sweep, and a standby may be about to revoke it
             * on a run of reads that proved it expired (roundKeyExpiring):
             * a lease whose count ran out never counts again (the chain,
             * 8.). A new lease; the leader key, if still ours on the old
             * one, moved onto it in one step (a revoke of the old one
             * that comes after no longer takes it; one that came before
             * took it, and the move fails); the old one revoked, our
             * member key with it (written anew below). */
            long long old = t->lease, id, granted;
            int moved;
            char rerr[256];
            pthread_mutex_lock(&S.lock);
            S.lapses++;
            pthread_mutex_unlock(&S.lock);
            s = coordNowUs();
            if (nkEtcdLeaseGrant(t->e, nk.cfg.leader_ttl, &id, &granted, r->err, sizeof(r->err)) == -1) {
                t->lease = 0;
                r->held = 0;
                r->ok = 0;
            } else {
                t->lease = id;
                t->ttl = granted;
                t->member_put = 0;
                /* Moved or not, failed or not: roundLeaderKey reads where
                 * the key is, and on which lease. */
                (void)nkEtcdMoveLease(t->e, C.key_leader, C.my_value, old, id, &moved, rerr, sizeof(rerr));
            }
            if (nkEtcdLeaseRevoke(t->e, old, rerr, sizeof(rerr)) == -1) t->dropped_lease = old;
        }
    }
    if (r->ok && t->lease) {
        r->until = s + t->ttl * 1000000LL - t->ttl * 1000000LL * NK_COORD_DRIFT_PCT / 100 - NK_COORD_MARGIN_US;
        t->lease_until = r->until;
    }
}

/* Our member key, attached to our etcd lease, once per lease. */
static void roundMemberPut(coordThreadState *t, coordRound *r) {
    int won;
    sds cur = NULL;
    if (!r->ok || !t->lease || t->member_put || !C.local.port) return;
    if (nkEtcdCreate(t->e, t->member_key, nk.instance, t->lease, &won, &cur, r->err, sizeof(r->err)) == -1) {
        r->ok = 0;
    } else if (won) {
        t->member_put = 1;
        t->dropped_lease = 0;
    } else if (cur && !strcmp(cur, nk.instance) && t->dropped_lease) {
        /* Ours, but on a lease we gave up (roundLease): it would go with
         * that lease. Revoked, the key with it; written anew next round. */
        char rerr[256];
        int exists = 1;
        if (nkEtcdLeaseRevoke(t->e, t->dropped_lease, rerr, sizeof(rerr)) == 0 ||
            (nkEtcdLeaseExists(t->e, t->dropped_lease, &exists, rerr, sizeof(rerr)) == 0 && !exists))
            t->dropped_lease = 0;
    } else if (cur && strcmp(cur, nk.instance)) {
        /* Another Nic-KV for our node: a previous run of ours whose
         * lease has not expired yet (killed), or a mistake. We do
         * not lead until the key is ours. */
        snprintf(r->err, sizeof(r->err), "another Nic-KV (instance %.40s) says it is on the server of %s:%d "
                 "(local-node): this one does not campaign until that key expires", cur, C.local.ip,
                 C.local.port);
        r->ok = 0;
    } else {
        /* Ours: on this lease? On an earlier one (expired, given up) it
         * would go with that one: revoked next round, then written anew. */
        long long kl = 0;
        sds v = NULL;
        if (nkEtcdGetLease(t->e, t->member_key, &v, NULL, &kl, r->err, sizeof(r->err)) == -1) r->ok = 0;
        else if (v && kl && kl != t->lease) t->dropped_lease = kl;
        else if (v) t->member_put = 1;
        sdsfree(v);
    }
    sdsfree(cur);
}

/* Another's leader key: does its etcd lease have less than a second left
 * (TTL 0 of one granted 2 s or more), as when its holder died (it renews
 * every round)? Then roundWait reads the key every NK_COORD_WATCH_US, and
 * the round that campaigns starts as soon as it is gone, not up to a
 * round later. The read decides nothing: the campaign is the round's.
 *
 * etcd revokes an expired lease at its sweep, every 500 ms: 0-500 ms
 * after its expiry, while nobody leads. A run of reads proves the expiry
 * sooner, and then this standby revokes the lease itself:
 *   - a read answered at a (our clock) with TTL 0 says that at some etcd
 *     time e <= a less than a second was left: the expiry, unless renewed
 *     later, comes before e + 1 s <= a + 1 s;
 *   - a renewal at p sets the TTL to granted G >= 2 s: a read at e' with
 *     e' - p < G - 1 s reads 1 or more. Reads each answered less than
 *     G - 1 s (on etcd's clock: (G - 1) / 1.1 s less 10 ms on ours) after
 *     the previous one was sent, all 0, all from one etcd leader (one
 *     raft term, confirmed by a linearizable read at the end: the lease
 *     lives in that leader's lessor), leave no renewal unseen between the
 *     first and the last;
 *   - so a last read sent at least 1 s (plus the drift margin) after a
 *     found the lease past its expiry, with no renewal since the first.
 *     etcd renews no lease past its expiry (it waits for the sweep), so
 *     revoking it then is the sweep come early: the holder's grants had
 *     all run out (the chain, 1.-3.).
 *   - One hole: a change of etcd leader after that linearizable read and
 *     before the revoke revives every lease, expired or not, and its
 *     holder's next keep-alive succeeds. That holder counts nothing on a
 *     renewal answered after its count ran out (roundLease, the chain,
 *     8.), and it had run out before our last read was sent.
 * Read every NK_COORD_TTL_READ_US: it reads 0 a second before the expiry,
 * and the revoke comes 1.11 s after the first 0 (roundWait reads then). */
#define NK_COORD_EXPIRED_US (1000000LL + 1000000LL * NK_COORD_DRIFT_PCT / 100 + NK_COORD_MARGIN_US)

/* One read of the TTL of the leader key's lease (another's), in the run
 * above; revokes it when the run proves it expired. Returns 1 when it
 * revoked it. */
static int keyLeaseRead(coordThreadState *t) {
    long long sent = coordNowUs(), got, ttl, granted, term, klease = 0;
    char err[256];
    sds v = NULL;
    int same;
    t->ttl_read_us = sent;
    /* A read that failed leaves the run as it was: the next one that
     * succeeds is judged by its gap from the last that did. */
    if (nkEtcdLeaseTTL(t->e, t->key_lease, &ttl, &granted, err, sizeof(err)) == -1) return 0;
    got = coordNowUs();
    term = nkEtcdLastTerm(t->e);
    t->key_expiring = ttl <= 0 && granted >= 2;
    if (!t->key_expiring) {
        t->zero_since_us = 0;
        return 0;
    }
    /* A gap of G - 1 s on etcd's clock is less on ours by the drift. */
    if (!t->zero_since_us || !term || term != t->zero_term ||
        got - t->zero_sent_us >= (granted - 1) * 1000000LL * 100 / (100 + NK_COORD_DRIFT_PCT) - NK_COORD_MARGIN_US) {
        t->zero_since_us = got;         /* a run begins (again) */
        t->zero_sent_us = sent;
        t->zero_term = term;
        return 0;
    }
    t->zero_sent_us = sent;
    if (sent < t->zero_since_us + NK_COORD_EXPIRED_US) return 0;
    t->zero_since_us = 0;
    /* Every read of the run came from the leader of one raft term (the
     * answering member's term, the same in all; the member forwards the
     * read to its leader). A linearizable read in that term now, which its
     * leader answers only once a quorum confirmed it leads, says that no
     * other etcd leader (which would have revived the lease, and might
     * have renewed it unseen by these reads) came between; and that the
     * key is still on that lease. */
    if (nkEtcdGetLease(t->e, C.key_leader, &v, NULL, &klease, err, sizeof(err)) == -1) return 0;
    same = v && klease == t->key_lease && nkEtcdLastTerm(t->e) == t->zero_term;
    sdsfree(v);
    if (!same) return 0;
    if (nkEtcdLeaseRevoke(t->e, t->key_lease, err, sizeof(err)) == -1) return 0;
    pthread_mutex_lock(&S.lock);
    S.revoked++;
    pthread_mutex_unlock(&S.lock);
    return 1;
}

/* Read in every round while another leads; roundWait adds the run's last
 * read at the very time it may prove the expiry. */
static void roundKeyExpiring(coordThreadState *t, coordRound *r) {
    if (!r->ok) return;                 /* nothing read: the run as it was */
    if (!r->lval || !strcmp(r->lval, C.my_value) || !t->key_lease) {
        t->key_expiring = 0;
        t->zero_since_us = 0;
        return;
    }
    if (t->zero_lease != t->key_lease) {
        t->zero_lease = t->key_lease;
        t->zero_since_us = 0;
    }
    if (coordNowUs() - t->ttl_read_us >= NK_COORD_TTL_READ_US - NK_COORD_TICK_US / 2) keyLeaseRead(t);
}

/* The leader key: ours (and resigned, if asked), or created if free and we
 * campaign. */
static void roundLeaderKey(coordThreadState *t, coordRound *r) {
    long long klease = 0;
    int succ_named = 0;
    if (r->ok && nkEtcdGetLease(t->e, C.key_leader, &r->lval, NULL, &klease, r->err, sizeof(r->err)) == -1)
        r->ok = 0;
    if (r->ok && r->lval && strcmp(r->lval, C.my_value)) t->key_lease = klease != t->lease ? klease : 0;
    if (r->ok && r->lval && !strcmp(r->lval, C.my_value) && klease != t->lease) {
        /* Our value on a lease we gave up (roundLease): not a leadership
         * of ours. Deleted, so that every Nic-KV may campaign; we may as
         * well, with our new lease, from the next round. */
        int done;
        if (nkEtcdDeleteIf(t->e, C.key_leader, C.my_value, &done, r->err, sizeof(r->err)) == -1) r->ok = 0;
        sdsfree(r->lval);
        r->lval = NULL;         /* deleted, or another's since: the campaign's create says */
    }
    roundKeyExpiring(t, r);
    if (r->ok && r->lval && !strcmp(r->lval, C.my_value)) {
        r->leader = 1;
        if (r->resign) {
            int done = 0;
            if (r->pub && nkEtcdPutIf(t->e, C.key_leader, C.my_value, C.key_record, r->pub, &done, r->err,
                                      sizeof(r->err)) == 0 && done)
                r->published = r->pub_epoch;
            /* The key goes only with the record naming the successor
             * written: without it the successor, like every standby,
             * waits for our etcd lease (keyLeaseGone), and nobody leads
             * until we campaign again. A failed write is tried again
             * next round (S.publish stays). */
            if (r->pub && r->published < 0) {
                /* next round */
            } else if (nkEtcdDeleteIf(t->e, C.key_leader, C.my_value, &done, r->err, sizeof(r->err)) == 0 && done) {
                r->leader = 0;
                sdsfree(r->lval);
                r->lval = NULL;
                pthread_mutex_lock(&S.lock);
                S.resigned = 1;
                S.resign = 0;
                pthread_mutex_unlock(&S.lock);
            }
        }
    } else if (r->ok && !r->lval && r->campaign && t->lease && r->until > coordNowUs() &&
               !(r->successor_wait = successorWaits(t, &succ_named))) {
        int won, gone = keyLeaseGone(t->e, &t->key_lease, succ_named, &r->lease_alive, r->err, sizeof(r->err));
        if (gone == -1) {
            r->ok = 0;
        } else if (gone == 0) {
            /* held back until etcd drops that lease (INFO campaign_held) */
        } else if (nkEtcdCreate(t->e, C.key_leader, C.my_value, t->lease, &won, &r->lval, r->err,
                                sizeof(r->err)) == -1) {
            r->ok = 0;
        } else if (won) {
            r->leader = 1;
            r->lval = sdsnew(C.my_value);
        }
    }
}

/* The record: ours to write while we lead, never back to an older epoch
 * than it holds (a write of ours that waited while another leader wrote a
 * newer one). Then the member keys, and the one member asked about. */
static void roundRecord(coordThreadState *t, coordRound *r) {
    if (r->ok && nkEtcdGet(t->e, C.key_record, &r->rval, NULL, r->err, sizeof(r->err)) == -1) r->ok = 0;
    if (r->ok) successorSeen(t, r->rval, NULL);
    if (r->ok && r->leader && r->pub && r->published < 0 && !r->resign) {
        int done;
        coordRecord cur;
        if (r->rval && recordParse(r->rval, &cur) && cur.epoch > r->pub_epoch) {
            r->refused = 1;
        } else if (nkEtcdPutIf(t->e, C.key_leader, C.my_value, C.key_record, r->pub, &done, r->err,
                               sizeof(r->err)) == -1) {
            r->ok = 0;
        } else if (done) {
            r->published = r->pub_epoch;
            sdsfree(r->rval);
            r->rval = sdsdup(r->pub);
        } else {
            r->refused = 1;
        }
    } else if (r->pub && !r->leader && r->ok) {
        r->refused = 1;
    }
    if (r->ok && nk.cfg.coordinator_user && coordNowUs() - t->members_us >= NK_COORD_MEMBERS_US) {
        coordReadMembers(t->e);
        t->members_us = coordNowUs();
    }
    if (r->ok && r->check[0]) {
        sds mk = sdscatfmt(sdsempty(), "%S%s", C.key_member_prefix, r->check), v = NULL;
        if (nkEtcdGet(t->e, mk, &v, NULL, r->err, sizeof(r->err)) == 0) {
            r->present = v != NULL;
            if (v && sdslen(v) == NICKV_INSTANCE_LEN) memcpy(r->inst, v, NICKV_INSTANCE_LEN + 1);
            else if (v) r->present = 0;
            sdsfree(v);
        } else {
            r->ok = 0;
        }
        sdsfree(mk);
    }
}

/* The round's findings into S, under the lock; frees the round. Returns 1
 * when the main thread should act at once: leadership won or lost, a
 * record written, refused, or changed by another leader. */
static int roundOut(coordThreadState *t, coordRound *r) {
    pthread_mutex_lock(&S.lock);
    int was_leader = S.leader;
    S.rounds++;
    S.etcd_ok = r->ok;
    if (!r->ok) {
        memcpy(S.etcd_err, r->err, sizeof(S.etcd_err));
        S.keepalive_failures++;
    } else S.etcd_err[0] = '\0';
    snprintf(S.endpoint, sizeof(S.endpoint), "%s", nkEtcdEndpoint(t->e));
    S.lease_ttl = t->ttl;
    /* Leadership counts only from a keep-alive that etcd answered
     * (until), and never longer than the last one allows (held). */
    if (!t->lease) {
        S.leader = 0;
        S.held_us = 0;
    } else if (r->ok) {
        S.leader = r->leader;
        S.held_us = r->leader ? r->until : 0;
    } else {
        S.held_us = r->held;    /* runs out by itself */
    }
    if (r->lval || r->ok) {
        sdsfree(S.leader_val);
        S.leader_val = r->lval ? r->lval : sdsempty();
        r->lval = NULL;
    }
    int record_moved = r->ok && strcmp(S.record_val, r->rval ? r->rval : "") != 0;
    if (r->ok) {
        sdsfree(S.record_val);
        S.record_val = r->rval ? r->rval : sdsempty();
        r->rval = NULL;
    }
    if (r->published >= 0) {
        S.published_epoch = r->published;
        if (r->pub_gen > S.published_gen) S.published_gen = r->pub_gen;
        /* Only the very record this round wrote: an older one of the
         * same epoch (another list of replicas, or without the successor)
         * once stood for a newer one still to write. */
        if (S.publish && S.publish_gen == r->pub_gen) {
            sdsfree(S.publish);
            S.publish = NULL;
        }
    }
    if (r->refused && r->pub_gen == S.publish_gen) S.publish_refused = 1;
    S.key_lease_alive = r->lease_alive;
    S.successor_wait = r->successor_wait;
    int news = S.leader != was_leader || r->published >= 0 || r->refused || record_moved;
    if (r->present >= 0 && r->check_gen == S.member_gen) {
        S.member_present = r->present;
        memcpy(S.member_instance, r->inst, sizeof(r->inst));
    }
    pthread_mutex_unlock(&S.lock);
    sdsfree(r->lval);
    sdsfree(r->rval);
    sdsfree(r->pub);
    return news;
}

/* Wait on S.wake (S.lock held) for at most us, or a kick. */
static void waitKick(long long us) {
    struct timespec ts;
    if (us <= 0 || S.kick || S.stop) return;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    ts.tv_sec += (time_t)(us / 1000000);
    ts.tv_nsec += (long)(us % 1000000) * 1000;
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
    }
    while (!S.kick && !S.stop && pthread_cond_timedwait(&S.wake, &S.lock, &ts) != ETIMEDOUT) {}
}

/* Until the next round's time (the round began at t0), or a kick: a record
 * to write. The successor-to-be (S.watch_key), and a standby that saw the
 * leader's etcd lease about to expire (roundKeyExpiring), read the leader
 * key every NK_COORD_WATCH_US meanwhile, and start the next round as soon
 * as it is gone: a handover's pause at the master is then the resigner's
 * margin and a few etcd calls, and a dead leader's successor campaigns
 * within 10 ms of etcd's revocation, not up to a round more. (A read only:
 * whether it may campaign is the round's, as for every standby.) */
static void roundWait(coordThreadState *t, long long t0) {
    pthread_mutex_lock(&S.lock);
    while (!S.kick && !S.stop) {
        long long left = NK_COORD_TICK_US - (coordNowUs() - t0);
        if (left <= 0) break;
        if (!S.watch_key && !t->key_expiring) {
            waitKick(left);
            break;
        }
        waitKick(left < NK_COORD_WATCH_US ? left : NK_COORD_WATCH_US);
        if (S.kick || S.stop || coordNowUs() - t0 >= NK_COORD_TICK_US) break;
        pthread_mutex_unlock(&S.lock);
        /* The run's read that may prove the expiry, as soon as it may. */
        if (t->key_expiring && t->zero_since_us && coordNowUs() >= t->zero_since_us + NK_COORD_EXPIRED_US &&
            keyLeaseRead(t)) {
            pthread_mutex_lock(&S.lock);
            break;
        }
        char err[256];
        sds v = NULL;
        int rc = nkEtcdGet(t->e, C.key_leader, &v, NULL, err, sizeof(err));
        int gone = rc == 0 && !v;
        sdsfree(v);
        pthread_mutex_lock(&S.lock);
        if (gone) break;
        if (rc != 0) {
            /* etcd in trouble: no more reads this round (the round's own
             * calls say what is wrong). */
            left = NK_COORD_TICK_US - (coordNowUs() - t0);
            waitKick(left);
            break;
        }
    }
    S.kick = 0;
    pthread_mutex_unlock(&S.lock);
}

/* The etcd thread: a round every NK_COORD_TICK_US (or at once when
 * kicked), each in the steps above, until nkCoordShutdown. */
static void *coordThread(void *arg) {
    char err[256];
    coordThreadState t = {.e = arg};
    t.member_key = sdscatfmt(sdsempty(), "%S%s:%i", C.key_member_prefix, C.local.ip, C.local.port);
    while (1) {
        long long t0 = coordNowUs();
        coordRound r;
        if (!roundIn(&r)) break;
        roundLease(&t, &r);
        roundMemberPut(&t, &r);
        roundLeaderKey(&t, &r);
        roundRecord(&t, &r);
        if (roundOut(&t, &r)) coordNotify();
        roundWait(&t, t0);
    }
    if (t.lease) nkEtcdLeaseRevoke(t.e, t.lease, err, sizeof(err));
    sdsfree(t.member_key);
    nkEtcdFree(t.e);
    return NULL;
}

/* ------------------------------------------------------------ Start-up --- */

int nkCoordInit(const nkCoordHooks *h) {
    char err[256];
    hooks = *h;
    /* C.role starts at CO_OFF (zero, static storage). */
    C.publishing_epoch = -1;
    C.resign_timer = -1;
    if (!nkCoordOn()) return 0;
    for (const char *p = nk.cfg.master_name; *p; p++) {
        if (!isalnum((unsigned char)*p) && !strchr("._-", *p)) {
            nkLog(LL_WARNING, "Coordinator: master-name \"%s\" names keys in etcd: use letters, digits, "
                  "'.', '_' and '-' only", nk.cfg.master_name);
            return -1;
        }
    }
    if (!nk.cfg.local_node || !addrParse(nk.cfg.local_node, &C.local)) {
        nkLog(LL_WARNING, "Coordinator: local-node must be the numeric ip:port of the SKV node on this "
              "Nic-KV's server (it is \"%s\")", nk.cfg.local_node ? nk.cfg.local_node : "");
        return -1;
    }
    char lerr[256];
    if (nkCoordCheckLeaseTime(hooks.lease_max_ms(), lerr, sizeof(lerr)) == -1) {
        nkLog(LL_WARNING, "Coordinator: %s", lerr);
        return -1;
    }
    if (!nk.cfg.failover)
        nkLog(LL_WARNING, "Coordinator: failover is off: the leader grants and names replicas, but a "
              "master that dies is not replaced");
    int timeout = nk.cfg.leader_ttl * 1000 / 4;
    if (timeout > 500) timeout = 500;
    nkEtcd *e = nkEtcdNew(nk.cfg.coordinator, timeout, err, sizeof(err));
    if (!e) {
        nkLog(LL_WARNING, "Coordinator: %s", err);
        return -1;
    }
    /* Whoever writes to etcd names the leader and the master: secure by
     * default, an etcd user of our own (its role: readwrite on our
     * prefix), or an explicit opt-out. */
    if (nk.cfg.coordinator_user && nk.cfg.coordinator_user[0]) {
        if (nkEtcdSetAuth(e, nk.cfg.coordinator_user,
                          nk.cfg.coordinator_password ? nk.cfg.coordinator_password : "") == -1) {
            nkLog(LL_WARNING, "Coordinator: coordinator-user needs coordinator-password");
            nkEtcdFree(e);
            return -1;
        }
    } else if (!nk.cfg.coordinator_insecure) {
        nkLog(LL_WARNING, "Coordinator: set coordinator-user and coordinator-password (an etcd user "
              "with readwrite on /skv/%s/ only): without authentication anyone who reaches etcd names "
              "the leader and the master. coordinator-insecure yes runs without, for tests",
              nk.cfg.master_name);
        nkEtcdFree(e);
        return -1;
    } else {
        nkLog(LL_WARNING, "Coordinator: coordinator-insecure yes: etcd without authentication; anyone "
              "who reaches it can name the leader and the master");
    }
    if ((nk.cfg.coordinator_tls_ca && nk.cfg.coordinator_tls_ca[0]) ||
        (nk.cfg.coordinator_tls_cert && nk.cfg.coordinator_tls_cert[0]) ||
        (nk.cfg.coordinator_tls_key && nk.cfg.coordinator_tls_key[0])) {
#define NZ(s) ((s) && (s)[0] ? (s) : NULL)
        if (nkEtcdSetTls(e, NZ(nk.cfg.coordinator_tls_ca), NZ(nk.cfg.coordinator_tls_cert),
                         NZ(nk.cfg.coordinator_tls_key), err, sizeof(err)) == -1) {
#undef NZ
            nkLog(LL_WARNING, "Coordinator: %s", err);
            nkEtcdFree(e);
            return -1;
        }
    }
    C.key_leader = sdscatfmt(sdsempty(), "/skv/%s/leader", nk.cfg.master_name);
    C.key_record = sdscatfmt(sdsempty(), "/skv/%s/record", nk.cfg.master_name);
    C.key_member_prefix = sdscatfmt(sdsempty(), "/skv/%s/member/", nk.cfg.master_name);
    C.my_value = sdscatfmt(sdsempty(), "%s %s:%i", nk.instance, C.local.ip, C.local.port);
    coordSetRole(CO_STANDBY);
    pthread_mutex_init(&S.lock, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&S.wake, &ca);
    pthread_condattr_destroy(&ca);
    if (pipe2(S.notify_fd, O_NONBLOCK | O_CLOEXEC) == -1 ||
        aeCreateFileEvent(nk.el, S.notify_fd[0], AE_READABLE, coordNotified, NULL) == AE_ERR) {
        nkLog(LL_WARNING, "Coordinator: cannot create its notification pipe: %s", strerror(errno));
        nkEtcdFree(e);
        return -1;
    }
    S.leader_val = sdsempty();
    S.record_val = sdsempty();
    S.published_epoch = -1;
    if (pthread_create(&S.thread, NULL, coordThread, e) != 0) {
        nkLog(LL_WARNING, "Coordinator: cannot start its thread");
        nkEtcdFree(e);
        return -1;
    }
    S.running = 1;
    nkLog(LL_NOTICE, "Coordinator: %s, leader key %s (etcd lease %d s), this Nic-KV on the server of %s:%d",
          nk.cfg.coordinator, C.key_leader, nk.cfg.leader_ttl, C.local.ip, C.local.port);
    return 0;
}

void nkCoordShutdown(void) {
    if (!S.running) return;
    /* The thread revokes our etcd lease as it leaves, so that a standby
     * leads at once: not before every lease we granted has run out (the
     * event loop no longer runs: nothing more is granted). */
    if (C.role != CO_STANDBY) {
        long long bound = hooks.lease_bound_us();
        while (coordNowUs() < bound) usleep(10000);
    }
    pthread_mutex_lock(&S.lock);
    S.stop = 1;
    pthread_cond_signal(&S.wake);
    pthread_mutex_unlock(&S.lock);
    pthread_join(S.thread, NULL);
    S.running = 0;
}

/* ----------------------------------------------------- What others ask --- */

static long long heldUs(void) {
    long long held;
    if (!S.running) return 0;
    pthread_mutex_lock(&S.lock);
    held = S.leader ? S.held_us : 0;
    pthread_mutex_unlock(&S.lock);
    return held;
}

int nkCoordLeader(void) {
    if (!nkCoordOn()) return 1;
    return C.role == CO_LEADER && heldUs() > coordNowUs();
}

/* Handing over (RESIGNING), while our leadership surely holds: no grant
 * goes, but the probe confirms what the master's stream reached for its
 * WAITs (nic-kv/nickv_probe.c, probeWant), until the key is deleted: a
 * WAIT on a direct replica waited out the whole handover before. */
int nkCoordResigning(void) {
    return nkCoordOn() && C.role == CO_RESIGNING && heldUs() > coordNowUs();
}

/* A grant of ms sent now runs out before our leadership can have (3.). */
int nkCoordMayGrant(long long ms) {
    if (!nkCoordOn()) return 1;
    if (C.role != CO_LEADER) return 0;
    long long now = coordNowUs(), held = heldUs();
    long long end = now + ms * 1000 + ms * 1000 * NK_COORD_DRIFT_PCT / 100 + NK_COORD_MARGIN_US;
    if (end <= held) return 1;
    if (held > now) {
        /* We lead, but not for long enough: the last keep-alive answered
         * is too old (etcd slow), or lease-time too long for leader-ttl. */
        C.held_back++;
        nkLogRepeat(LL_WARNING, "Coordinator: held back", "Coordinator: a grant of %lld ms held back: our "
                    "leadership surely holds only %lld ms more (etcd answers slowly?)", ms, (held - now) / 1000);
    }
    return 0;
}

/* lease-time must fit in a leadership with a few rounds of the thread to
 * spare: a grant needs lease-time + 10 % + 10 ms before held, which a
 * keep-alive moves to 90 % of leader-ttl after it was sent. */
int nkCoordCheckLeaseTime(long long ms, char *err, size_t errlen) {
    long long room = (long long)nk.cfg.leader_ttl * 1000 * (100 - NK_COORD_DRIFT_PCT) / 100 -
                     NK_COORD_MARGIN_US / 1000 - 3 * NK_COORD_TICK_US / 1000;
    long long need = ms + ms * NK_COORD_DRIFT_PCT / 100 + NK_COORD_MARGIN_US / 1000;
    if (!nkCoordOn() || need <= room / 2) return 0;
    snprintf(err, errlen, "lease-time %lld is too long for leader-ttl %d: with a coordinator it must be at "
             "most %lld ms (a grant must end well before the leader's etcd lease can)", ms, nk.cfg.leader_ttl,
             (room / 2 - NK_COORD_MARGIN_US / 1000) * 100 / (100 + NK_COORD_DRIFT_PCT));
    return -1;
}

int nkCoordLocal(const char *ip, int port) {
    return nkCoordOn() && addrIs(&C.local, ip, port);
}

/* The link: only the leader on the master's own server fans out. */
int nkCoordFanout(const char *ip, int port) {
    if (!nkCoordOn()) return 1;
    return C.role == CO_LEADER && nkCoordLocal(ip, port) && heldUs() > coordNowUs();
}

/* May the leader name ip:port valid to the master? Once the record lists it
 * (5.); until then it is asked for, and counts out. */
int nkCoordMayName(const char *ip, int port) {
    if (!nkCoordOn()) return 1;
    for (int i = 0; i < C.nrecorded; i++)
        if (addrIs(&C.recorded[i].a, ip, port)) {
            C.recorded[i].named_ms = coordNowUs() / 1000;
            return 1;
        }
    for (int i = 0; i < C.nwanted; i++)
        if (addrIs(&C.wanted[i], ip, port)) return 0;
    if (C.nwanted < NK_COORD_NAMED && strlen(ip) < NK_COORD_ADDR) {
        snprintf(C.wanted[C.nwanted].ip, NK_COORD_ADDR, "%s", ip);
        C.wanted[C.nwanted++].port = port;
    }
    return 0;
}

/* Named in the record (a previous leader may have named it): heard from
 * before a promotion. */
int nkCoordNamed(const char *ip, int port) {
    if (!nkCoordOn()) return 0;
    for (int i = 0; i < C.rec.nnamed; i++)
        if (addrIs(&C.rec.named[i], ip, port)) return 1;
    return 0;
}

/* The record's replicas, to be probed even after the master is gone. */
int nkCoordRecordNamed(char ip[][NK_COORD_ADDR], int *ports, int max) {
    int n = 0;
    for (int i = 0; i < C.rec.nnamed && n < max; i++, n++) {
        memcpy(ip[n], C.rec.named[i].ip, NK_COORD_ADDR);
        ports[n] = C.rec.named[i].port;
    }
    return n;
}

/* Write the record (master, epoch, and the replicas recorded so far),
 * guarded by our leadership. nkCoordPublished says when it is written.
 * One that names a successor is a resign's: the same round deletes our
 * leader key (S.resign, set under the same lock: set after it, a round
 * woken in between wrote the record alone, and the key went a round,
 * 100 ms of the master's pause, later). */
static void publish(long long epoch, const char *ip, int port, const coordAddr *named, int nnamed,
                    const char *successor) {
    static long long gen;
    sds v = recordFormat(epoch, ip, port, named, nnamed, successor);
    pthread_mutex_lock(&S.lock);
    if (successor && successor[0]) S.resign = 1;
    sdsfree(S.publish);
    S.publish = v;
    S.publish_epoch = epoch;
    S.publish_gen = ++gen;
    C.publishing_gen = gen;
    S.publish_refused = 0;
    S.kick = 1;                         /* written now, not at the next round */
    pthread_cond_signal(&S.wake);
    pthread_mutex_unlock(&S.lock);
    C.publishing_epoch = epoch;
    C.publishing_nnamed = nnamed;
    memcpy(C.publishing_named, named, sizeof(coordAddr) * (size_t)nnamed);
}

static int recordedList(coordAddr *out) {
    int n = 0;
    for (int i = 0; i < C.nrecorded; i++) out[n++] = C.recorded[i].a;
    return n;
}

void nkCoordPublish(long long epoch, const char *ip, int port) {
    coordAddr named[NK_COORD_NAMED];
    int n;
    if (!nkCoordOn()) return;
    n = recordedList(named);
    publish(epoch, ip, port, named, n, NULL);
}

/* 1: the record of epoch is written; -1: refused (we do not lead); 0: not yet. */
int nkCoordPublished(long long epoch) {
    int r = 0;
    if (!nkCoordOn()) return 1;
    pthread_mutex_lock(&S.lock);
    if (S.published_epoch >= epoch) r = 1;
    else if (S.publish_refused) r = -1;
    pthread_mutex_unlock(&S.lock);
    return r;
}

/* The same for the publish numbered gen (publish): 1 written, -1 refused,
 * 0 not yet. By epoch alone, a record of the same epoch written before
 * (every change of the named replicas is one) said a new list was written
 * at once, and its replicas were named to the master before etcd listed
 * them (DESIGN.md's chain, 5.). */
static int publishedGen(long long gen) {
    int r = 0;
    pthread_mutex_lock(&S.lock);
    if (S.published_gen >= gen) r = 1;
    else if (S.publish_refused) r = -1;
    pthread_mutex_unlock(&S.lock);
    return r;
}

/* ---------------------------------------------------------------- Tick --- */

static void adoptRecord(void) {
    long long now_ms = coordNowUs() / 1000;
    C.nrecorded = 0;
    for (int i = 0; i < C.rec.nnamed; i++) {
        C.recorded[C.nrecorded].a = C.rec.named[i];
        C.recorded[C.nrecorded++].named_ms = now_ms;
    }
}

/* What the thread found, copied under the lock for one tick. */
typedef struct coordSeen {
    int leader, etcd_ok, resigned, present, key_lease_alive, successor_wait;
    char err[256], inst[NICKV_INSTANCE_LEN + 1];
    sds rv;
} coordSeen;

static void tickSeen(coordSeen *v, long long now) {
    pthread_mutex_lock(&S.lock);
    v->leader = S.leader && S.held_us > now;
    v->etcd_ok = S.etcd_ok;
    memcpy(v->err, S.etcd_err, sizeof(v->err));
    v->rv = sdsdup(S.record_val);
    v->resigned = S.resigned;
    S.resigned = 0;
    v->present = S.member_present;
    memcpy(v->inst, S.member_instance, sizeof(v->inst));
    v->key_lease_alive = S.key_lease_alive;
    v->successor_wait = S.successor_wait;
    pthread_mutex_unlock(&S.lock);
}

/* etcd's errors logged as they change; the record read, into C.rec (a
 * record that does not parse is ignored, and said so). */
static void tickRecord(coordSeen *v) {
    if (!v->etcd_ok && strcmp(v->err, C.last_err))
        nkLogRepeat(LL_WARNING, "Coordinator: etcd", "Coordinator: %s%s", v->err, C.role == CO_LEADER ?
                    " (the master's lease is granted only while our leadership surely holds)" : "");
    else if (v->etcd_ok && C.last_err[0])
        nkLog(LL_NOTICE, "Coordinator: etcd answers again");
    snprintf(C.last_err, sizeof(C.last_err), "%s", v->etcd_ok ? "" : v->err);

    coordRecord r;
    if (sdslen(v->rv) && recordParse(v->rv, &r)) {
        C.rec = r;
    } else if (sdslen(v->rv)) {
        sds shown = sdscatrepr(sdsempty(), v->rv, sdslen(v->rv) > 200 ? 200 : sdslen(v->rv));
        nkLogRepeat(LL_WARNING, "Coordinator: record", "Coordinator: the record %s does not parse "
                    "(%s): ignored", C.key_record, shown);
        sdsfree(shown);
    }
    sdsfree(v->rv);
    v->rv = NULL;
}

/* RESIGNING -> STANDBY: the thread deleted our leader key. */
static void roleResigned(long long now) {
    nkLog(LL_WARNING, "Coordinator: leadership handed to the Nic-KV on the master's server");
    coordSetRole(CO_STANDBY);
    C.resigned_at_us = now;
    C.resigns++;
    hooks.drop_master_conn();
}

/* STANDBY -> LEADER: the thread created the leader key. */
static void roleWon(void) {
    coordSetRole(CO_LEADER);
    C.won++;
    /* Our first record (the view we adopt, confirmed) goes at once:
     * from then on a newer one is not a previous leader's. */
    C.wrote = 0;
    adoptRecord();
    /* Every lease a previous leader granted ran out before its key
     * could expire (the chain at the top). But a key can also vanish
     * before its time: deleted by hand (etcdctl del), its lease revoked,
     * or by an etcd bug (etcd-io/etcd#15247, a stale etcd leader
     * revoking leases, fixed after 3.4.23). So we promote nobody for
     * one more lease-time, as a restarted Nic-KV does. */
    hooks.granted(hooks.lease_max_ms());
    nkLog(LL_WARNING, "Coordinator: this Nic-KV leads %s (record: epoch %lld, master %s:%d)",
          nk.cfg.master_name, C.rec.epoch, C.rec.epoch ? C.rec.master.ip : "-",
          C.rec.epoch ? C.rec.master.port : 0);
}

/* LEADER or RESIGNING -> STANDBY: the leader key is no longer surely ours. */
static void roleLost(const coordSeen *v) {
    nkLog(LL_WARNING, "Coordinator: this Nic-KV no longer leads %s%s%s", nk.cfg.master_name,
          v->etcd_ok ? "" : ": ", v->etcd_ok ? "" : v->err);
    coordSetRole(CO_STANDBY);
    C.lost++;
    /* A record we did not get written is not written later, when we
     * may lead again with another view. */
    pthread_mutex_lock(&S.lock);
    S.resign = 0;
    sdsfree(S.publish);
    S.publish = NULL;
    pthread_mutex_unlock(&S.lock);
    C.publishing_epoch = -1;
    /* Our probe connection to the master may hold its grantor's
     * place: the new leader takes it once our lease ran out. */
    hooks.drop_master_conn();
}

/* STANDBY: campaign when the key is free, unless we resigned lately (the
 * thread itself holds for a successor named to somebody else lately, and
 * for a deleted key whose holder's lease lives). Sets C.campaign_held
 * (why not; "" when we do); returns whether the thread should campaign. */
static int standbyCampaign(const coordSeen *v, long long now) {
    int campaign = C.role == CO_STANDBY;
    C.campaign_held = "";
    /* Nor while we do not know the master's nickv-lease: not having
     * reached it since we started (a standby restarted just before the
     * master's server stopped), we could lead but never fail it over
     * ("not known yet"), and a standby that knows it would not lead. */
    if (campaign && hooks.master_lease() < 0) {
        campaign = 0;
        C.campaign_held = "master-lease-unknown";
    }
    if (campaign && C.resigned_at_us && now - C.resigned_at_us < NK_COORD_RESIGN_PAUSE_MS * 1000LL) {
        campaign = 0;
        C.campaign_held = "resigned-lately";
    }
    /* The thread's own holds: a successor was named to another Nic-KV
     * lately (successorWaits), or the key was deleted while its holder's
     * etcd lease lives (keyLeaseGone). */
    if (campaign && v->successor_wait) C.campaign_held = "successor-named";
    if (campaign && v->key_lease_alive) C.campaign_held = "leader-lease-alive";
    return campaign;
}

/* A newer record than our view: followed (1: the tick stops here, and
 * runs again with the new view), or, while we lead and have written ours,
 * counted as tampered with and rewritten. */
static int tickFollowRecord(const char *master_ip, int master_port, int watching, long long epoch,
                            int just_won) {
    /* A newer record: the master moved. A standby also takes the record's
     * master over what its own probes saw: the leader owns that. */
    if (C.rec.epoch && watching && C.role != CO_LEADER &&
        (C.rec.epoch > epoch || !addrIs(&C.rec.master, master_ip, master_port))) {
        hooks.follow(C.rec.master.ip, C.rec.master.port, C.rec.epoch);
        return 1;
    }
    if (C.rec.epoch && watching && C.role == CO_LEADER && C.rec.epoch > epoch) {
        /* Until our first record is written, a newer one is a previous
         * leader's (read in the round we won, or just after): adopted. */
        if (just_won || !C.wrote) {
            hooks.follow(C.rec.master.ip, C.rec.master.port, C.rec.epoch);
            return 1;
        }
        /* Only the leader writes the record, guarded by its key: a newer
         * one while we lead was written by someone else. Not followed. */
        nkLogRepeat(LL_WARNING, "Coordinator: tampered", "Coordinator: the record %s names epoch %lld, "
                    "newer than ours (%lld), while this Nic-KV leads: written by something else than the "
                    "leader; ignored, and rewritten", C.key_record, C.rec.epoch, epoch);
        C.tampered++;
        /* Our master, at its epoch: the record is rewritten next tick. */
        if (master_ip[0]) hooks.follow(master_ip, master_port, C.rec.epoch);
        return 1;
    }
    return 0;
}

/* LEADER: a record we asked for is written (its names become ours to
 * name, those it dropped no longer are) or refused. */
static void leaderPublished(long long now_ms) {
    if (C.publishing_epoch < 0) return;
    int r2 = publishedGen(C.publishing_gen);
    if (r2 == 1) {
        C.wrote = 1;
        for (int i = 0; i < C.publishing_nnamed; i++) {
            int have = 0;
            for (int j = 0; j < C.nrecorded; j++)
                if (addrIs(&C.recorded[j].a, C.publishing_named[i].ip, C.publishing_named[i].port)) have = 1;
            if (!have && C.nrecorded < NK_COORD_NAMED) {
                C.recorded[C.nrecorded].a = C.publishing_named[i];
                C.recorded[C.nrecorded++].named_ms = now_ms;
            }
        }
        /* Dropped from the record: no longer ours to name. */
        for (int j = 0; j < C.nrecorded; j++) {
            int in = 0;
            for (int i = 0; i < C.publishing_nnamed; i++)
                if (addrIs(&C.recorded[j].a, C.publishing_named[i].ip, C.publishing_named[i].port)) in = 1;
            if (!in) C.recorded[j--] = C.recorded[--C.nrecorded];
        }
        C.nwanted = 0;
        C.publishing_epoch = -1;
    } else if (r2 == -1) {
        C.publishing_epoch = -1;
    }
}

/* LEADER: names to record; replicas not named for a while leave the
 * record; a record that differs from our view is written. */
static void leaderRecord(const char *master_ip, int master_port, int watching, long long *epochp,
                         long long lease_bound_us, long long now) {
    long long epoch = *epochp;
    long long now_ms = now / 1000, window = NICKV_HEALTH_TIMEOUT_MS + 2LL * nk.cfg.lease_time + 1000;
    /* ... counted back from the last lease the master may hold, not
     * from now: while a dead master is not replaced (no candidate), the
     * replicas it counted stay in the record. */
    if (lease_bound_us < now) window += (now - lease_bound_us) / 1000;
    leaderPublished(now_ms);
    int stale = 0;
    for (int j = 0; j < C.nrecorded; j++)
        if (now_ms - C.recorded[j].named_ms > window) stale = 1;
    int differs = !C.rec.epoch || C.rec.epoch != epoch || !addrIs(&C.rec.master, master_ip, master_port) ||
                  C.rec.successor[0] || !C.wrote;
    if (epoch < 1) epoch = 1;     /* a record's epochs start at 1 (and for the rest of the tick) */
    *epochp = epoch;
    if (C.publishing_epoch < 0 && watching && epoch >= C.rec.epoch && master_ip[0] &&
        (C.nwanted || stale || differs)) {
        coordAddr named[NK_COORD_NAMED];
        int n = 0;
        /* One not named for the window leaves the record, and from now
         * on is not named again until a record lists it anew. */
        for (int j = 0; j < C.nrecorded; j++)
            if (now_ms - C.recorded[j].named_ms > window) C.recorded[j--] = C.recorded[--C.nrecorded];
        for (int j = 0; j < C.nrecorded; j++) named[n++] = C.recorded[j].a;
        for (int i = 0; i < C.nwanted && n < NK_COORD_NAMED; i++) named[n++] = C.wanted[i];
        publish(epoch, master_ip, master_port, named, n, NULL);
    }
}

/* LEADER -> RESIGNING: leadership moves to the Nic-KV on the master's
 * server, once the master has been valid long enough and that Nic-KV is
 * alive (its member key). Sets check: the member key the thread reads. */
static void leaderMaybeResign(const char *master_ip, int master_port, int master_valid, int watching,
                              long long epoch, long long lease_bound_us, const coordSeen *v, long long now,
                              char *check, size_t checklen) {
    if (nkCoordLocal(master_ip, master_port) || !master_ip[0]) return;
    snprintf(check, checklen, "%s:%d", master_ip, master_port);
    if (watching && master_valid && v->present == 1 && strcmp(v->inst, nk.instance) &&
        now / 1000 - C.master_valid_since_ms >= NK_COORD_MOVE_STABLE_MS && C.publishing_epoch < 0 &&
        C.rec.epoch == epoch) {
        coordSetRole(CO_RESIGNING);
        C.resign_started_us = now;
        C.resign_sent = 0;
        memcpy(C.successor, v->inst, sizeof(C.successor));
        nkLog(LL_WARNING, "Coordinator: the Nic-KV on the master's server (%s:%d) is alive: "
              "no more grants; leadership goes to it once our last lease ran out (in %lld ms)",
              master_ip, master_port, lease_bound_us > now ? (lease_bound_us - now) / 1000 : 0);
    }
}

/* The bound of our last grant passed: decide now, not at the next tick
 * (up to a probe interval later, while the master takes no writes). */
static int resignTimer(aeEventLoop *el, long long id, void *data) {
    (void)el;
    (void)id;
    (void)data;
    C.resign_timer = -1;
    hooks.changed();
    return AE_NOMORE;
}

/* RESIGNING: once every lease we granted has run out, the record names
 * the successor and the thread deletes our leader key. */
static void resigningTick(const char *master_ip, int master_port, long long epoch, long long lease_bound_us,
                          long long now) {
    if (C.resign_sent) return;
    if (now <= lease_bound_us) {
        if (C.resign_timer == -1)
            C.resign_timer = aeCreateTimeEvent(nk.el, (lease_bound_us - now) / 1000 + 1, resignTimer, NULL, NULL);
        return;
    }
    coordAddr named[NK_COORD_NAMED];
    int n = recordedList(named);
    publish(epoch, master_ip, master_port, named, n, C.successor);   /* and S.resign */
    C.resign_sent = 1;
}

/* Called by the failover's tick: what the thread found, into the roles.
 * First the moves the thread's findings make (resigned, won, lost), then
 * what each role does. */
void nkCoordTick(const char *master_ip, int master_port, int master_valid, int watching, long long epoch,
                 long long lease_bound_us) {
    int just_won = 0;
    long long now = coordNowUs();
    coordSeen v;
    if (!nkCoordOn()) return;
    tickSeen(&v, now);
    tickRecord(&v);

    if (C.role == CO_RESIGNING && v.resigned) {
        roleResigned(now);
    } else if (C.role == CO_STANDBY && v.leader) {
        roleWon();
        just_won = 1;
        v.present = -1;         /* read before we led: not about now */
    } else if (C.role != CO_STANDBY && !v.leader) {
        roleLost(&v);
    }

    int campaign = standbyCampaign(&v, now);
    if (tickFollowRecord(master_ip, master_port, watching, epoch, just_won)) return;

    if (master_valid) {
        if (!C.master_valid_since_ms) C.master_valid_since_ms = now / 1000;
    } else C.master_valid_since_ms = 0;

    char check[sizeof(S.member_check)] = "";
    if (C.role == CO_LEADER) {
        leaderRecord(master_ip, master_port, watching, &epoch, lease_bound_us, now);
        leaderMaybeResign(master_ip, master_port, master_valid, watching, epoch, lease_bound_us, &v, now, check,
                          sizeof(check));
    }
    if (C.role == CO_RESIGNING) resigningTick(master_ip, master_port, epoch, lease_bound_us, now);
    if (C.role != CO_LEADER && C.role != CO_RESIGNING) C.nwanted = 0;

    /* The Nic-KV the leader will resign to (leaderMaybeResign): a
     * standby on the master's server while another leads. */
    int successor_to_be = C.role == CO_STANDBY && master_ip[0] && nkCoordLocal(master_ip, master_port);

    pthread_mutex_lock(&S.lock);
    successor_to_be = successor_to_be && S.leader_val && sdslen(S.leader_val) && strcmp(S.leader_val, C.my_value);
    if (!successor_to_be) C.watch_since_us = 0;
    else if (!C.watch_since_us) C.watch_since_us = now;
    S.campaign = campaign;
    S.watch_key = successor_to_be && now - C.watch_since_us < NK_COORD_WATCH_MAX_US;
    /* Another node to check, or a leadership just won: what the thread
     * read before is not about it (a value from our last leadership made
     * a new leader resign at once to a Nic-KV long gone). */
    if (just_won || strcmp(S.member_check, check)) {
        memcpy(S.member_check, check, sizeof(check));
        S.member_present = -1;
        S.member_gen++;
    }
    pthread_mutex_unlock(&S.lock);
    if ((C.role == CO_LEADER) != C.was_leader) hooks.fanout_changed();
    C.was_leader = C.role == CO_LEADER;
}

/* ---------------------------------------------------------------- INFO --- */

sds nkCoordInfo(sds s) {
    long long now = coordNowUs(), held;
    int etcd_ok;
    char err[256], endpoint[128];
    sds lv;
    if (!nkCoordOn()) return sdscat(s, "# Coordinator\r\ncoordinator:\r\ncoordinator_role:off\r\n");
    pthread_mutex_lock(&S.lock);
    held = S.leader ? S.held_us : 0;
    etcd_ok = S.etcd_ok;
    memcpy(err, S.etcd_err, sizeof(err));
    memcpy(endpoint, S.endpoint, sizeof(endpoint));
    lv = sdsdup(S.leader_val);
    long long ttl = S.lease_ttl, failures = S.keepalive_failures, rounds = S.rounds;
    long long revoked = S.revoked, lapses = S.lapses;
    sds members = sdsempty();
    for (int i = 0; nk.cfg.coordinator_user && i < S.nmembers; i++)
        members = sdscatprintf(members, "%s%s:%d", i ? "," : "", S.members[i].ip, S.members[i].port);
    pthread_mutex_unlock(&S.lock);
    s = sdscatprintf(s,
        "# Coordinator\r\n"
        "coordinator:%s\r\n"
        "coordinator_role:%s\r\n"
        "local_node:%s:%d\r\n"
        "leader:%s\r\n"
        "leader_held_ms:%lld\r\n"
        "etcd_lease_ttl:%lld\r\n"
        "etcd_ok:%d\r\n"
        "etcd_endpoint:%s\r\n"
        "etcd_error:%s\r\n"
        "etcd_rounds:%lld\r\n"
        "etcd_failed_rounds:%lld\r\n"
        "record_epoch:%lld\r\n"
        "record_master:%s:%d\r\n"
        "record_named:%d\r\n"
        "leaderships_won:%lld\r\n"
        "leaderships_lost:%lld\r\n"
        "leaderships_handed_over:%lld\r\n"
        "records_not_ours:%lld\r\n"
        "grants_held_back:%lld\r\n"
        "leader_leases_revoked:%lld\r\n"
        "etcd_lease_lapses:%lld\r\n"
        "campaign_held:%s\r\n"
        "registered_members:%s\r\n",
        nk.cfg.coordinator, roleNames[C.role], C.local.ip, C.local.port, lv,
        held > now ? (held - now) / 1000 : 0, ttl, etcd_ok, endpoint, err, rounds, failures, C.rec.epoch,
        C.rec.epoch ? C.rec.master.ip : "", C.rec.epoch ? C.rec.master.port : 0, C.rec.nnamed, C.won,
        C.lost, C.resigns, C.tampered, C.held_back, revoked, lapses, C.campaign_held ? C.campaign_held : "", members);
    sdsfree(lv);
    sdsfree(members);
    return s;
}
