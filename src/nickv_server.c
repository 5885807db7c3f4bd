/* nickv_server.c -- the master's and the replica's side of Nic-KV.
 *
 * Copyright (c) 2026, the SKV authors. BSD 3-Clause licence (see LICENSE).
 *
 * Nic-KV (nic-kv/) takes the replication fan-out off the master: the
 * master streams to Nic-KV only, Nic-KV streams to the replicas. The whole
 * protocol is written down at the top of nic-kv/nickv.c. This file is what
 * runs inside redis-server:
 *
 * Master side
 *   - The daemon's replication link says who it is with REPLCONF nickv
 *     "hello <host> <port> <rdma-port>" before its PSYNC; the reply gives
 *     the replication id and offset to PSYNC from, so the daemon joins
 *     without a full sync (it holds no data). Later REPLCONF nickv
 *     messages report the replicas behind it ("add", "del", "ack") and its
 *     backlog ("backlog <first> <last>").
 *   - Those replicas are "virtual": they are not in server.slaves (the
 *     master sends them nothing), but WAIT, min-replicas-to-write and INFO
 *     count them with the acknowledgements Nic-KV relays. The daemon's own
 *     link is in server.slaves but counts as no replica.
 *   - A replica that advertises "capa nickv" is redirected to a healthy
 *     Nic-KV when its PSYNC asks for an offset Nic-KV's backlog holds
 *     (reply "+NICKV <host> <port> <rdma-port>"). A direct replica with
 *     that capa is handed over by closing its link once it is online and
 *     in Nic-KV's range: it reconnects and is redirected. Replicas
 *     without the capa (upstream Redis) replicate directly, as upstream.
 *
 * Replica side
 *   - Advertises "capa nickv" ("nickv-hold" for a while after a redirect
 *     that did not work out, so the master keeps serving it directly), and
 *     "capa nickv-via" to Nic-KV when it follows a redirect there.
 *   - On "+NICKV", the next connect goes to Nic-KV instead of the master,
 *     with the same PSYNC; every later reconnect goes to the master again,
 *     which redirects it again if Nic-KV is healthy. So when Nic-KV dies
 *     replicas fall back to the master (with a partial resync), and move
 *     back when it returns. server.masterhost never changes: ROLE and INFO
 *     keep naming the real master (INFO nickv says the link's path).
 */

#include "server.h"
#include "cluster.h"
#include "nickv_server.h"
#include "nickv_proto.h"
#include "nickv_msg.h"
#include "rdma.h"
#include "sha256.h"

#include <ctype.h>

int nickvOffload = 1;
char *nickvUser = NULL;

/* Liveness (timers in nickv_proto.h). The daemon reports to us every
 * NICKV_HEARTBEAT_MS: after NICKV_DAEMON_TIMEOUT_MS without a report it is
 * dead to us, and its link is closed. While a healthy daemon is attached
 * and the stream is idle, we PING into it every NICKV_PING_MS, so that a
 * replica behind Nic-KV hears something at least that often: after
 * NICKV_VIA_TIMEOUT_MS of silence it leaves Nic-KV and comes to us, and a
 * handshake through Nic-KV gets NICKV_VIA_HANDSHAKE_MS. */
/* A replica handed over to Nic-KV that it does not report within this
 * (a handshake through it gets NICKV_VIA_HANDSHAKE_MS) no longer holds
 * the next hand-over back. */
#define NICKV_HANDOFF_WAIT_MS 3000
/* How long a replica that advertises nickv-hold stays with the master. */
#define NICKV_HOLD_SECONDS 30

typedef struct nickvReplica {
    long long id;             /* Nic-KV's id for it */
    char ip[NET_IP_STR_LEN];
    int port;                 /* its listening port */
    long long ack_off;
    time_t ack_time;
} nickvReplica;

/* Where a replica's link goes: see "Replica side" below. */
typedef enum {
    NICKV_PATH_MASTER = 0,    /* to the master, which may redirect it */
    NICKV_PATH_HELD,          /* to the master, which must keep it (nickv-hold) */
    NICKV_PATH_REDIRECTED,    /* the next connect goes to Nic-KV */
    NICKV_PATH_VIA            /* the link goes through Nic-KV */
} nickvPath;

/* A Nic-KV process as its messages prove it (nickv_proto.h, hello): its
 * instance id, which is public, and the SHA-256 of its key, which only
 * that process holds. Two messages come from the same Nic-KV only when
 * both match (nickvIdentSame); an instance id alone proves nothing. */
typedef struct nickvIdent {
    char instance[NICKV_INSTANCE_LEN + 1];    /* "": none */
    unsigned char key[SHA256_BLOCK_SIZE];
} nickvIdent;

/* A replica as Nic-KV names it in its health messages. */
typedef struct nickvNamed {
    char addr[NET_HOST_STR_LEN];
    int port;
    mstime_t until;             /* joining: counted until then */
} nickvNamed;

static struct {
    /* Master side. */
    uint64_t daemon_id;       /* client id of the daemon's link, 0 = none */
    char daemon_host[NET_HOST_STR_LEN];
    int daemon_port, daemon_rdma_port, daemon_tls_port;
    long long backlog_first, backlog_last;
    int backlog_known;         /* the daemon reported its backlog since it joined */
    long long daemon_slots;    /* clients it can still take; -1: not reported */
    list *replicas;           /* nickvReplica */
    long long redirects, handoffs, daemon_joins, daemon_timeouts, daemons_refused;
    char handoff_addr[NET_HOST_STR_LEN];   /* the replica last handed over ... */
    int handoff_port;
    mstime_t handoff_at;       /* ... then (0: none in transit) */
    long long stream_writes;
    mstime_t daemon_heard;     /* when the daemon last reported */
    mstime_t daemon_hello;     /* when it said hello */
    long long held;            /* the most of our stream Nic-KV said it holds ... */
    char held_replid[CONFIG_RUN_ID_SIZE + 1];   /* ... in this history */
    long long daemon_ack;      /* its last ACK of the stream ... */
    mstime_t daemon_ack_moved; /* ... which moved then, or it was all caught up */
    list *retired;            /* client ids of daemons forgotten whose links
                               * are not freed yet: still no replicas */
    list *links;              /* client ids of Nic-KV links refused the daemon role */
    long long idle_offset;     /* master_repl_offset when last seen moving */
    mstime_t idle_since;       /* ... and since when it stands still */
    time_t refused_logged;     /* rate limit for refused hellos */
    /* One Nic-KV (see nickvGrantorCheck). */
    uint64_t grantor_id;       /* the connection whose lease messages we take, 0: none */
    nickvIdent grantor;        /* ... its Nic-KV process (instance "" if none yet) */
    nickvIdent daemon;         /* the daemon's Nic-KV process */
    long long others_refused;  /* lease, health or hello of another Nic-KV or connection */
    time_t others_logged;
    /* The daemon's probes (NICKV_MSG_HEALTH), while it is alive and its
     * last report is recent: see nickvHealthActive(). */
    int health_known;          /* reported since the daemon joined */
    mstime_t health_at;        /* ... last */
    int min_slaves;            /* writes need this many valid replicas */
    int nvalid;                /* the replicas that answer probes: */
    nickvNamed valid[NICKV_HEALTH_MAX];
    int njoining;              /* replicas joining (NICKV_JOINING_MS): */
    nickvNamed joining[NICKV_HEALTH_MAX];
    mstime_t joining_until;    /* the last of their windows ends then */
    long long health_gen;      /* bumped by every report */
    long long health_reports;
    time_t health_bad_logged;
    /* nickvCountValidReplicas(), cached: recomputed when a report came,
     * the replica lists changed length, or NICKV_CRON_MS passed. */
    struct {
        long long gen;
        unsigned long slaves, nkreplicas;
        mstime_t at;
        int count;
    } vc;
    /* Replica side. */
    nickvPath path;           /* where the link goes: see "Replica side" */
    char redirect_from[NET_HOST_STR_LEN];   /* the master that redirected us */
    int redirect_from_port;
    mstime_t redirect_ms;     /* ... and when */
    char target_host[NET_HOST_STR_LEN];
    int target_port;
    time_t hold_until;        /* advertise nickv-hold until then */
    int streak;               /* redirects in a row that did not work out */
    long long redirects_followed, bounces, via_timeouts;
    long long via_read_off;    /* the link's read offset when last seen moving */
    int reconnect_now;         /* a redirect or a refusal ended the handshake */
    mstime_t via_heard;        /* ... when it moved, or the link started */
    /* A silent link through Nic-KV: the master asked whether it is silent
     * too (nickvAsk*). */
    connection *ask;           /* a connection to the master, PING sent */
    sds ask_out;               /* ... what is still to be sent of it */
    int ask_pending;           /* ... no answer nor error yet */
    int ask_lines;             /* ... lines it answered (AUTH's, then PING's) */
    char ask_line[16];         /* ... the start of the line read now */
    size_t ask_len, ask_got;   /* ... its length; bytes read in all */
    mstime_t ask_answered;     /* ... when it answered, not busy (0: not yet) */
    int ask_waiting;           /* this silence was logged */
    mstime_t ask_next;         /* no new connection before then ... */
    int ask_backoff;           /* ... ms after the last one (made then) */
    long long via_waits;       /* silences waited out: the master was silent too */
} NK;

static void nickvHeld(long long offset);
static int nickvIdentSame(const nickvIdent *a, const nickvIdent *b);
static int nickvUserOk(client *c);
static int nickvIsLink(client *c);

/* A Nic-KV link that is not the daemon's (its hello refused: nickv-offload
 * no, another Nic-KV's role) streams as an ordinary replica, but it is not
 * one: Nic-KV's backlog is no node a failover could promote. Its ACKs
 * count neither for WAIT nor for min-replicas-to-write (nickvReplicaInvalid).
 * Before, with nickv-offload no and min-slaves 0, WAIT 1 was answered by
 * Nic-KV's link alone once the lease answers confirmed the offset (two
 * probe intervals later, so rarely seen), and the write could be on no
 * replica at all. Remembered by client id while the client lives, for
 * hellos of the nickv-user only: others could not push a link out (a ring
 * of the last 16 ids let 16 hellos from anyone do it). */
static void nickvLinkSeen(client *c) {
    listIter li;
    listNode *ln;
    if (!nickvUserOk(c) || nickvIsLink(c)) return;
    if (!NK.links) NK.links = listCreate();
    listRewind(NK.links, &li);
    while ((ln = listNext(&li)))
        if (!lookupClientByID((uint64_t)(uintptr_t)listNodeValue(ln))) listDelNode(NK.links, ln);
    listAddNodeTail(NK.links, (void *)(uintptr_t)c->id);
}

static int nickvIsLink(client *c) {
    listIter li;
    listNode *ln;
    if (!NK.links) return 0;
    listRewind(NK.links, &li);
    while ((ln = listNext(&li)))
        if ((uint64_t)(uintptr_t)listNodeValue(ln) == c->id) return 1;
    return 0;
}

/* The daemon is the Nic-KV that grants our lease (or none grants yet): what
 * it says it holds bounds what that Nic-KV's failover counts. With many
 * Nic-KVs (a coordinator) the one that fans out may not be the one that
 * leads: then only the leader's confirmed lease answers count. */
static int nickvDaemonIsGrantor(void) {
    return !NK.grantor.instance[0] || nickvIdentSame(&NK.daemon, &NK.grantor);
}

int cancelReplicationHandshake(int reconnect);   /* replication.c */
int connectWithMaster(void);                      /* replication.c */

/* ------------------------------------------------------- Master side --- */

static void nickvDropReplicas(void) {
    if (!NK.replicas) return;
    while (listLength(NK.replicas)) {
        zfree(listNodeValue(listFirst(NK.replicas)));
        listDelNode(NK.replicas, listFirst(NK.replicas));
    }
}

/* The daemon's client, or NULL when its link is gone or going. A getter:
 * nickvCron() forgets a daemon that is gone. */
static client *nickvDaemon(void) {
    client *c;
    if (!NK.daemon_id) return NULL;
    c = lookupClientByID(NK.daemon_id);
    if (!c || (c->flags & CLIENT_CLOSE_ASAP)) return NULL;
    return c;
}

/* The daemon streams and reported recently: its replicas count. */
static int nickvDaemonAlive(void) {
    client *d = nickvDaemon();
    return d && (d->flags & CLIENT_SLAVE) && d->replstate == SLAVE_STATE_ONLINE &&
           mstime() - NK.daemon_heard <= NICKV_DAEMON_TIMEOUT_MS;
}

/* Its heartbeat shows its main loop runs, not that the stream flows: a
 * daemon whose ACK stands behind our offset for NICKV_DAEMON_TIMEOUT_MS
 * (its link paused, a fan-out stalled) gets no new replica meanwhile. */
static int nickvDaemonStalled(void) {
    return NK.daemon_ack < server.master_repl_offset &&
           mstime() - NK.daemon_ack_moved > NICKV_DAEMON_TIMEOUT_MS;
}

/* ... and we may send replicas to it. */
static int nickvDaemonHealthy(void) {
    return nickvOffload && nickvDaemonAlive() && !nickvDaemonStalled();
}

/* The daemon's verdicts lapse with its link, unless Nic-KV's probes
 * still grant us the lease: then they go on arriving on the probe
 * connection (nickvReplconf), and dropping them would let WAIT count a
 * replica Nic-KV holds invalid, which a failover does not wait for. */
static void nickvForgetHealth(void) {
    if (nickvLeaseActive()) return;
    NK.health_known = NK.nvalid = NK.njoining = NK.min_slaves = 0;
    NK.joining_until = 0;
    NK.health_gen++;
}

/* Forget the daemon and the replicas it reported; close its link if it is
 * still there (it reconnects, if alive, and reports them again). Until the
 * link is freed (freeClientAsync: after this event loop turn's WAIT and
 * INFO), it stays a daemon's link, never a replica: the ACKs on it only
 * say that the stream reached Nic-KV. */
static void nickvForgetDaemon(const char *why) {
    client *c = NK.daemon_id ? lookupClientByID(NK.daemon_id) : NULL;
    serverLog(LL_WARNING, "Nic-KV: the daemon at %s:%d %s; its %lu replicas are no longer "
              "counted", NK.daemon_host, NK.daemon_port, why,
              NK.replicas ? listLength(NK.replicas) : 0UL);
    if (c) {
        if (!NK.retired) NK.retired = listCreate();
        listAddNodeTail(NK.retired, (void *)(uintptr_t)c->id);
        if (!(c->flags & CLIENT_CLOSE_ASAP)) freeClientAsync(c);
    }
    NK.daemon_id = 0;
    nickvDropReplicas();
    nickvForgetHealth();
}

/* May this client speak for Nic-KV? Only the user named by nickv-user. */
static int nickvUserOk(client *c) {
    return nickvUser && c->user && c->authenticated && c->user->name &&
           !strcmp(c->user->name, nickvUser);
}

/* A nickv-user anybody could authenticate as (NULL if none such): the
 * default user, or one with nopass. Such a user may not grant leases: a
 * lease keeps a master writable, which is what fencing takes away. */
static const char *nickvUserUnsafe(void) {
    user *u;
    if (!nickvUser) return "no nickv-user is set";
    if (!strcmp(nickvUser, "default"))
        return "nickv-user is 'default', which every client can use: give Nic-KV an ACL user of its own";
    u = ACLGetUserByName(nickvUser, strlen(nickvUser));
    if (u && (u->flags & USER_FLAG_NOPASS))
        return "the nickv-user has nopass, so any client can use it: give it a password";
    if (u) {
        /* An empty password (">" or the hash of "") is no password. */
        robj *name = createStringObject(nickvUser, strlen(nickvUser)), *empty = createStringObject("", 0);
        int open = ACLCheckUserCredentials(name, empty) == C_OK;
        decrRefCount(name);
        decrRefCount(empty);
        if (open) return "the nickv-user's password is empty, so any client can use it: give it a real one";
    }
    return NULL;
}

/* Start-up and CONFIG SET (the nickv-lease and nickv-user rows): a lease
 * needs a user of Nic-KV's own. (Whether it has a password is checked at
 * each grant: ACL users change at run time.) And no lease in cluster mode:
 * the cluster elects a shard's master, and a node it promotes must serve
 * at once, not wait for a grant that no Nic-KV sends (Nic-KV never fails
 * a cluster's shard over, so it never needs to fence one). */
int nickvLeaseConfigApply(const char **err) {
    if (nickvLease && server.cluster_enabled) {
        *err = "nickv-lease yes cannot be used with cluster-enabled yes: the cluster fails its shards over, "
               "and a master it promotes would refuse writes until a lease came; Nic-KV follows the "
               "cluster's choice without one";
        return 0;
    }
    if (nickvLease && (!nickvUser || !strcmp(nickvUser, "default"))) {
        *err = "nickv-lease yes needs a dedicated nickv-user (not 'default', which every client can use "
               "to grant leases): create an ACL user for Nic-KV and name it in nickv-user";
        return 0;
    }
    return 1;
}

void nickvCheckConfig(void) {
    const char *err;
    if (!nickvLeaseConfigApply(&err)) {
        serverLog(LL_WARNING, "Fatal config error: %s", err);
        exit(1);
    }
}

/* ------------------------------------------------------------ One Nic-KV ---
 *
 * Every client authenticated as the nickv-user may speak Nic-KV's messages:
 * the daemon's link, its probe connection, but also a second Nic-KV set up
 * by mistake, or a process that holds the user's password. Two sources of
 * leases would undo fencing (one stops granting so that a replica can be
 * promoted, the other goes on), so the master takes them from one Nic-KV
 * at a time, known by what its messages carry: its random instance id,
 * which is public (Nic-KV's INFO shows it), and its key, which only that
 * process holds (nickvIdent). "The same Nic-KV" is the same pair; a
 * client that knows the id but not the key is another Nic-KV.
 *
 *   - lease: from one connection, the grantor, bound by its first lease
 *     message while this node is a master. Any other connection is refused
 *     while the grantor's is open, whoever it claims to be. Once it is
 *     gone, a connection of the same Nic-KV takes its place (the probe
 *     reconnected, or moved); another Nic-KV only once no lease runs (a
 *     restarted Nic-KV waits out what its previous run granted, at most
 *     lease-time). Each bind draws a new watch token (src/nickv_watch.c):
 *     a token seen by a connection that no longer grants opens nothing.
 *   - a replica binds nothing (it takes no lease; a claim made there would
 *     survive its promotion), and forgets the grantor it had as a master.
 *   - health, from any connection but the daemon's link: only the grantor.
 *   - hello: refused from another instance while the grantor's lease runs.
 *
 * Each refusal is an error to the sender, a log line (at most one a
 * second) and nickv_others_refused in INFO. */

/* An instance id or a key: NICKV_INSTANCE_LEN (= NICKV_KEY_LEN) hex digits. */
static int nickvValidInstance(const char *s, size_t len) {
    if (len != NICKV_INSTANCE_LEN) return 0;
    for (size_t i = 0; i < len; i++)
        if (!isxdigit((unsigned char)s[i])) return 0;
    return 1;
}

/* The identity a message's <instance> <key> give: 0 if either is malformed.
 * Only the key's hash is kept. */
static int nickvIdentFrom(nickvIdent *id, sds instance, sds key) {
    SHA256_CTX ctx;
    if (!nickvValidInstance(instance, sdslen(instance)) || !nickvValidInstance(key, sdslen(key))) return 0;
    memcpy(id->instance, instance, NICKV_INSTANCE_LEN + 1);
    sha256_init(&ctx);
    sha256_update(&ctx, (const BYTE *)key, sdslen(key));
    sha256_final(&ctx, id->key);
    return 1;
}

/* The same Nic-KV process: the same instance and the same key (compared in
 * a time that does not depend on where they differ). An empty one is no
 * process. */
static int nickvIdentSame(const nickvIdent *a, const nickvIdent *b) {
    unsigned char diff = 0;
    if (!a->instance[0] || !b->instance[0] || strcmp(a->instance, b->instance)) return 0;
    for (size_t i = 0; i < sizeof(a->key); i++) diff |= a->key[i] ^ b->key[i];
    return diff == 0;
}

static void nickvRefuseOther(client *c, const char *what, const char *why) {
    NK.others_refused++;
    if (server.unixtime != NK.others_logged) {
        sds peer = catClientInfoString(sdsempty(), c);
        serverLog(LL_WARNING, "Nic-KV: refused %s (%s): %s", what, peer, why);
        sdsfree(peer);
    }
    NK.others_logged = server.unixtime;
    addReplyErrorFormat(c, "-" NICKV_REPLY_REFUSED " %s", why);
}

/* May c send lease messages as the Nic-KV process id names? 0 if so, 1 if
 * so and c was bound as the grantor now; -1 if not (the reply is sent). */
static int nickvGrantorCheck(client *c, const nickvIdent *id) {
    client *g = NK.grantor_id ? lookupClientByID(NK.grantor_id) : NULL;
    char why[256];
    if (server.masterhost) return 0;   /* it answers the clock, nothing more */
    if (g && (g->flags & CLIENT_CLOSE_ASAP)) g = NULL;
    if (g == c && nickvIdentSame(id, &NK.grantor)) return 0;
    if (g) {
        /* (Nic-KV tells its own lingering connection, which it may wait
         * out, from another Nic-KV, which it must never fail over. Only
         * the key makes it its own.) */
        if (nickvIdentSame(id, &NK.grantor))
            snprintf(why, sizeof(why), NICKV_REFUSED_EARLIER "%llu) grants this master's lease",
                     (unsigned long long)g->id);
        else
            snprintf(why, sizeof(why), NICKV_REFUSED_OTHER "%llu) grants this master's lease",
                     (unsigned long long)g->id);
        nickvRefuseOther(c, "a lease", why);
        return -1;
    }
    if (NK.grantor.instance[0] && !nickvIdentSame(id, &NK.grantor)) {
        if (nickvLeaseActive()) {
            snprintf(why, sizeof(why), NICKV_REFUSED_RUNS "%lld" NICKV_REFUSED_RUNS_END,
                     nickvLeaseLeftMs());
            nickvRefuseOther(c, "a lease", why);
            return -1;
        }
        serverLog(LL_WARNING, "Nic-KV: another Nic-KV process now grants this master's lease "
                  "(the previous one's connection is gone and its lease has run out)");
    }
    NK.grantor_id = c->id;
    NK.held = 0;        /* what another Nic-KV said it holds: not this one's word */
    NK.grantor = *id;
    /* A daemon of another Nic-KV (one that said hello while none granted)
     * goes: its replicas' ACKs would count for WAIT under our grantor's
     * lease. */
    if (nickvLease && NK.daemon_id && !nickvIdentSame(&NK.daemon, &NK.grantor))
        nickvForgetDaemon("is not the Nic-KV that grants this master's lease");
    return 1;
}

/* A replica forgets the grantor it had as a master: promoted again, it
 * takes the first Nic-KV that grants after the promotion. (nickvCron) */
static void nickvGrantorForget(void) {
    if (!server.masterhost || (!NK.grantor_id && !NK.grantor.instance[0])) return;
    NK.grantor_id = 0;
    memset(&NK.grantor, 0, sizeof(NK.grantor));
}

int nickvIsDaemon(client *c) {
    listIter li;
    listNode *ln;
    if (NK.daemon_id && c->id == NK.daemon_id) return 1;
    if (!NK.retired || !listLength(NK.retired)) return 0;
    listRewind(NK.retired, &li);
    while ((ln = listNext(&li)))
        if ((uintptr_t)listNodeValue(ln) == c->id) return 1;
    return 0;
}

static nickvReplica *nickvFindReplica(long long id, listNode **node) {
    listIter li;
    listNode *ln;
    if (!NK.replicas) return NULL;
    listRewind(NK.replicas, &li);
    while ((ln = listNext(&li))) {
        nickvReplica *r = listNodeValue(ln);
        if (r->id == id) {
            if (node) *node = ln;
            return r;
        }
    }
    return NULL;
}

/* Read <n> <addr> <port>... at argv[i] (argc words in all) into out:
 * how many were kept, or -1 when the list is malformed. An entry we could
 * not hold is left out: that replica does not count, which errs on the
 * safe side. *next is the word after the list. */
static int nickvHealthList(int argc, sds *argv, int i, nickvNamed *out, int *next) {
    long long n, port;
    int kept = 0;
    if (i >= argc || !string2ll(argv[i], sdslen(argv[i]), &n) || n < 0 || n > NICKV_HEALTH_MAX ||
        n > (argc - i - 1) / 2)
        return -1;
    for (int j = 0; j < n; j++) {
        sds addr = argv[i + 1 + 2 * j];
        sds p = argv[i + 2 + 2 * j];
        if (sdslen(addr) == 0 || sdslen(addr) >= NET_HOST_STR_LEN ||
            !string2ll(p, sdslen(p), &port) || port < 0 || port > 65535) continue;
        memcpy(out[kept].addr, addr, sdslen(addr) + 1);
        out[kept].port = (int)port;
        kept++;
    }
    *next = i + 1 + 2 * (int)n;
    return kept;
}

/* Which of the n replicas named joining (NK.joining[]) count, and until
 * when: each is also named valid (NK.valid[]), once, and its window runs
 * from the first message that named it: naming it again, or after a
 * message that left it out, does not extend it, for as long as we
 * remember it (NICKV_JOINING_MEMORY_MS). Returns how many are kept. */
#define NICKV_JOINING_MEMORY_MS (10 * NICKV_JOINING_MS)
static int nickvNamedValid(const char *addr, int port);
static int nickvJoiningWindows(int n, mstime_t now) {
    static nickvNamed first[NICKV_HEALTH_MAX];   /* when each was first named */
    static int nfirst;
    int kept = 0;
    for (int i = 0; i < nfirst; i++)
        if (first[i].until + NICKV_JOINING_MEMORY_MS - NICKV_JOINING_MS <= now) first[i--] = first[--nfirst];
    NK.joining_until = 0;
    for (int i = 0; i < n; i++) {
        nickvNamed *e = &NK.joining[i];
        int ok = e->port > 0 && nickvNamedValid(e->addr, e->port);
        for (int j = 0; ok && j < kept; j++)
            if (NK.joining[j].port == e->port && !strcmp(NK.joining[j].addr, e->addr)) ok = 0;
        if (!ok) continue;
        e->until = now;                      /* no room to remember it: it does not count */
        int j;
        for (j = 0; j < nfirst; j++)
            if (first[j].port == e->port && !strcmp(first[j].addr, e->addr)) break;
        if (j < nfirst) {
            e->until = first[j].until;
        } else if (nfirst < NICKV_HEALTH_MAX) {
            first[nfirst] = *e;
            first[nfirst++].until = e->until = now + NICKV_JOINING_MS;
        }
        if (e->until <= now) continue;
        if (e->until > NK.joining_until) NK.joining_until = e->until;
        NK.joining[kept++] = *e;
    }
    return kept;
}

/* health <min-slaves> <n> [<addr> <port>]... [<k> [<addr> <port>]...]:
 * the replicas that answer Nic-KV's probes, by the address and listening
 * port we know them by, then those joining (NICKV_JOINING_MS). Replaces
 * what the daemon said before. */
static void nickvHealth(int argc, sds *argv) {
    long long min;
    int kept, joining = 0, next;
    mstime_t now = mstime();
    if (!string2ll(argv[1], sdslen(argv[1]), &min) || min < 0 || min > INT_MAX ||
        (kept = nickvHealthList(argc, argv, 2, NK.valid, &next)) < 0 ||
        (next < argc && (joining = nickvHealthList(argc, argv, next, NK.joining, &next)) < 0) ||
        next != argc) {
        /* Our own daemon's bug: count nobody valid rather than trust an
         * old list. */
        if (server.unixtime != NK.health_bad_logged)
            serverLog(LL_WARNING, "Nic-KV: a malformed health message from the daemon: "
                      "counting no replica as valid until the next one");
        NK.health_bad_logged = server.unixtime;
        kept = joining = 0;
        if (!string2ll(argv[1], sdslen(argv[1]), &min) || min < 0 || min > INT_MAX) min = NK.min_slaves;
    }
    if ((int)min != NK.min_slaves || !NK.health_known)
        serverLog(LL_NOTICE, "Nic-KV: min-slaves %lld%s", min,
                  min ? ": replicas that do not answer its probes no longer count" : "");
    NK.nvalid = kept;
    NK.njoining = nickvJoiningWindows(joining, now);
    NK.min_slaves = (int)min;
    NK.health_known = 1;
    NK.health_at = now;
    NK.health_gen++;
    NK.health_reports++;
    /* min-replicas-to-write counts with the new verdicts at once. */
    refreshGoodSlavesCount();
}

/* Do the daemon's verdicts count? Only with min-slaves set (the operator
 * asked Nic-KV to decide; otherwise WAIT and min-replicas-to-write keep
 * upstream's meaning), while the daemon reports and is alive: its link
 * online, or its probes granting us the lease (nickv-lease yes: they also
 * carry the verdicts while the link is down). A dead or silent Nic-KV's
 * verdicts lapse with its link, or with the lease, which stops writes. */
static int nickvHealthActive(void) {
    return NK.health_known && NK.min_slaves > 0 && (nickvDaemonAlive() || nickvLeaseActive()) &&
           mstime() - NK.health_at <= NICKV_HEALTH_TIMEOUT_MS;
}

/* Did the daemon's last report name this replica (address, listening
 * port) valid? */
static int nickvNamedValid(const char *addr, int port) {
    for (int i = 0; i < NK.nvalid; i++)
        if (NK.valid[i].port == port && !strcmp(NK.valid[i].addr, addr)) return 1;
    return 0;
}


/* A direct replica's address as INFO replication shows it, which is what
 * the daemon read: its announced address, else its peer's (from the
 * client's cached "ip:port" or "[ip]:port": no system call). */
static const char *nickvPeerIp(client *slave, char *buf, size_t len);
static const char *nickvSlaveAddr(client *slave, char *buf, size_t len) {
    return slave->slave_addr ? slave->slave_addr : nickvPeerIp(slave, buf, len);
}

/* The address its connection comes from. */
static const char *nickvPeerIp(client *slave, char *buf, size_t len) {
    const char *id, *colon;
    size_t n;
    id = getClientPeerId(slave);
    colon = strrchr(id, ':');
    if (!colon) return id;
    if (id[0] == '[' && colon > id && colon[-1] == ']') {
        n = (size_t)(colon - id - 2);
        id++;
    } else {
        n = (size_t)(colon - id);
    }
    if (n >= len) n = len - 1;
    memcpy(buf, id, n);
    buf[n] = '\0';
    return buf;
}

/* One replica named valid counts once, however many connections announce
 * its address: a process with the replicas' password can announce a
 * member's (REPLCONF ip-address and listening-port), and its ACKs would
 * count twice. The connection with the lowest ACK stands for the address
 * (the real replica's ACK is never above what it holds), ties to one
 * behind Nic-KV (kind 0), then to the earliest (id). Does (ack, kind, id)
 * stand for addr:port? */
static int nickvStandsFor(const char *addr, int port, long long ack, int kind, uint64_t id) {
    listIter li;
    listNode *ln;
    char buf[NET_HOST_STR_LEN];
#define NICKV_BEFORE(a2, k2, i2) ((a2) < ack || ((a2) == ack && ((k2) < kind || ((k2) == kind && (i2) < id))))
    listRewind(server.slaves, &li);
    while ((ln = listNext(&li))) {
        client *s = listNodeValue(ln);
        if (s->replstate != SLAVE_STATE_ONLINE || nickvIsDaemon(s) || s->slave_listening_port != port ||
            strcmp(nickvSlaveAddr(s, buf, sizeof(buf)), addr))
            continue;
        if (NICKV_BEFORE(s->repl_ack_off, 1, s->id)) return 0;
    }
    if (nickvDaemon() && NK.replicas) {
        listRewind(NK.replicas, &li);
        while ((ln = listNext(&li))) {
            nickvReplica *r = listNodeValue(ln);
            if (r->port == port && !strcmp(r->ip, addr) && NICKV_BEFORE(r->ack_off, 0, (uint64_t)r->id))
                return 0;
        }
    }
#undef NICKV_BEFORE
    return 1;
}

/* A direct replica the verdicts name valid: its address named, and it
 * stands for it (nickvStandsFor). One that announced an address (REPLCONF
 * ip-address: replica-announce-ip) other than the one its connection
 * comes from never is: anything with the replicas' password can announce a
 * member's address, and Nic-KV's probe of that address answers for the
 * member, not for this connection. */
static int nickvSlaveNamedValid(client *slave) {
    char buf[NET_HOST_STR_LEN];
    const char *addr = nickvSlaveAddr(slave, buf, sizeof(buf));
    if (slave->slave_addr) {
        char peer[NET_HOST_STR_LEN];
        if (strcmp(nickvPeerIp(slave, peer, sizeof(peer)), slave->slave_addr)) return 0;
    }
    return nickvNamedValid(addr, slave->slave_listening_port) &&
           nickvStandsFor(addr, slave->slave_listening_port, slave->repl_ack_off, 1, slave->id);
}

/* ... a replica behind Nic-KV. */
static int nickvReplicaNamedValid(nickvReplica *r) {
    return nickvNamedValid(r->ip, r->port) && nickvStandsFor(r->ip, r->port, r->ack_off, 0, (uint64_t)r->id);
}

/* nickv-lease yes and no lease: this master may have been replaced, by a
 * node that lacks what it wrote since. No replica's acknowledgement counts
 * then, so that a WAIT blocked while the lease was held cannot be answered
 * by acknowledgements that arrive after it ran out (the write may be on no
 * node the failover waited for). Writes are refused meanwhile anyway. */
static int nickvLeaseLapsed(void) {
    return nickvLease && !server.masterhost && !nickvLeaseActive();
}

int nickvReplicaInvalid(client *slave) {
    return nickvIsLink(slave) || nickvLeaseLapsed() || (nickvHealthActive() && !nickvSlaveNamedValid(slave));
}

/* Is addr:port an online replica of ours, direct or behind Nic-KV? */
static int nickvConnectedAs(const char *addr, int port, unsigned long nkreplicas) {
    listIter li;
    listNode *ln;
    char buf[NET_HOST_STR_LEN];
    listRewind(server.slaves, &li);
    while ((ln = listNext(&li))) {
        client *s = listNodeValue(ln);
        if (s->replstate == SLAVE_STATE_ONLINE && !nickvIsDaemon(s) && s->slave_listening_port == port &&
            !strcmp(nickvSlaveAddr(s, buf, sizeof(buf)), addr))
            return 1;
    }
    if (nkreplicas) {
        listRewind(NK.replicas, &li);
        while ((ln = listNext(&li))) {
            nickvReplica *r = listNodeValue(ln);
            if (r->port == port && !strcmp(r->ip, addr)) return 1;
        }
    }
    return 0;
}

/* Replicas joining (a failover's repoint) that count: each until it is
 * online here or behind Nic-KV, where nickvCountValidReplicas counts it
 * (or, named invalid, does not), or until the window ends. */
static int nickvJoiningCount(mstime_t now, unsigned long nkreplicas) {
    int n = 0;
    for (int i = 0; now < NK.joining_until && i < NK.njoining; i++)
        if (now < NK.joining[i].until && !nickvConnectedAs(NK.joining[i].addr, NK.joining[i].port, nkreplicas))
            n++;
    return n;
}

/* Online replicas the probes do not count out: direct ones and those
 * behind Nic-KV. Called (by nickvEnoughValidReplicas, for every write
 * command) only while the verdicts count: cached, see NK.vc. */
static int nickvCountValidReplicas(void) {
    listIter li;
    listNode *ln;
    int n = 0;
    unsigned long nkreplicas = (nickvDaemon() && NK.replicas) ? listLength(NK.replicas) : 0;
    mstime_t now = server.mstime;
    if (NK.vc.gen == NK.health_gen && NK.vc.slaves == listLength(server.slaves) &&
        NK.vc.nkreplicas == nkreplicas && now - NK.vc.at < NICKV_CRON_MS && now >= NK.vc.at &&
        (now < NK.joining_until || NK.vc.at >= NK.joining_until))
        return NK.vc.count;
    listRewind(server.slaves, &li);
    while ((ln = listNext(&li))) {
        client *s = listNodeValue(ln);
        if (s->replstate == SLAVE_STATE_ONLINE && !nickvIsDaemon(s) && nickvSlaveNamedValid(s)) n++;
    }
    if (nkreplicas) {
        listRewind(NK.replicas, &li);
        while ((ln = listNext(&li))) {
            nickvReplica *r = listNodeValue(ln);
            if (nickvReplicaNamedValid(r)) n++;
        }
    }
    n += nickvJoiningCount(now, nkreplicas);
    NK.vc.gen = NK.health_gen;
    NK.vc.slaves = listLength(server.slaves);
    NK.vc.nkreplicas = nkreplicas;
    NK.vc.at = now;
    NK.vc.count = n;
    return n;
}

/* min-slaves is the daemon's option, enforced while its verdicts count
 * (nickvHealthActive): a dead Nic-KV stops no write (the master's own
 * min-replicas-to-write still applies). */
int nickvEnoughValidReplicas(void) {
    if (!nickvHealthActive()) return 1;
    return nickvCountValidReplicas() >= NK.min_slaves;
}

/* ------------------------------------------- REPLCONF nickv, by message --- */

/* hello, refused: not a master that offloads, a malformed message, not the
 * nickv-user, or another Nic-KV holds the role. Replies the error and
 * returns 1; 0 lets the hello take the daemon role (id: who sent it). */
static int nickvHelloRefused(client *c, nickvMsg *m, nickvIdent *id) {
    if (!nickvOffload) {
        addReplyError(c, "nickv-offload is off on this master");
        return 1;
    }
    if (server.masterhost) {
        /* A daemon here would stream from a replica and serve nobody:
         * it follows the master instead (its probes read our INFO). */
        addReplyErrorFormat(c, "-" NICKV_REPLY_REFUSED " this node is a replica of %s:%d",
                            server.masterhost, server.masterport);
        return 1;
    }
    if (!m->ok || !nickvIdentFrom(id, m->argv[4], m->argv[5])) {
        addReplyError(c, "malformed hello: expected hello <host> <port> <rdma-port> <instance> <key> "
                      "<tls-port>");
        return 1;
    }
    if (!nickvUserOk(c)) {
        NK.daemons_refused++;
        if (server.unixtime != NK.refused_logged)
            serverLog(LL_WARNING, "Nic-KV: refused the daemon role to %s: it is not "
                      "authenticated as the nickv-user '%s'", replicationGetSlaveName(c),
                      nickvUser ? nickvUser : "");
        NK.refused_logged = server.unixtime;
        addReplyErrorFormat(c, "-" NICKV_REPLY_REFUSED " only the user named by nickv-user (%s) may "
                            "act as Nic-KV", nickvUser ? nickvUser : "none set");
        return 1;
    }
    if (nickvLease && nickvUserUnsafe()) {
        NK.daemons_refused++;
        addReplyErrorFormat(c, "-" NICKV_REPLY_REFUSED " %s", nickvUserUnsafe());
        return 1;
    }
    /* With nickv-lease yes the daemon is the Nic-KV that grants (its
     * replicas' ACKs count for WAIT): another is refused while one is
     * bound, lease running or not; and the grantor's own hello takes
     * the place of any other daemon, healthy or not. (Without the
     * lease, only while that lease runs, as before.) */
    int grantor_hello = nickvLease && NK.grantor.instance[0] && nickvIdentSame(id, &NK.grantor);
    if (NK.grantor.instance[0] && !nickvIdentSame(id, &NK.grantor) && (nickvLease || nickvLeaseActive())) {
        NK.daemons_refused++;
        nickvRefuseOther(c, "the daemon role", "another Nic-KV grants this master's lease");
        return 1;
    }
    if (NK.daemon_id && NK.daemon_id != c->id && nickvDaemonHealthy() &&
        !(grantor_hello && !nickvIdentSame(&NK.daemon, &NK.grantor))) {
        NK.daemons_refused++;
        if (server.unixtime != NK.refused_logged)
            serverLog(LL_WARNING, "Nic-KV: refused a second daemon (link from %s): the one "
                      "at %s:%d is healthy", replicationGetSlaveName(c),
                      NK.daemon_host, NK.daemon_port);
        NK.refused_logged = server.unixtime;
        addReplyErrorFormat(c, "-" NICKV_REPLY_REFUSED " another Nic-KV (%s:%d) serves this master",
                            NK.daemon_host, NK.daemon_port);
        return 1;
    }
    return 0;
}

/* hello <host|?> <port> <rdma-port> <instance> <key> <tls-port>: the
 * connection becomes the daemon's link, in the place of any earlier one.
 * Replies our replid and offset (where its PSYNC starts). */
static void nickvOnHello(client *c, nickvMsg *m) {
    nickvIdent id;
    if (nickvHelloRefused(c, m, &id)) {
        nickvLinkSeen(c);
        return;
    }
    if (NK.daemon_id && NK.daemon_id != c->id)
        nickvForgetDaemon("is replaced by a new daemon");
    nickvDropReplicas();
    NK.daemon_id = c->id;
    NK.daemon_heard = NK.daemon_hello = NK.daemon_ack_moved = mstime();
    NK.daemon_ack = server.master_repl_offset;
    if (!strcmp(m->argv[1], "?") || !strcmp(m->argv[1], "")) {
        if (connPeerToString(c->conn, NK.daemon_host, sizeof(NK.daemon_host), NULL) == -1)
            NK.daemon_host[0] = '\0';
    } else {
        snprintf(NK.daemon_host, sizeof(NK.daemon_host), "%s", m->argv[1]);
    }
    NK.daemon_port = m->port;
    NK.daemon_rdma_port = m->rdma_port;
    NK.daemon_tls_port = m->tls_port;
    NK.daemon = id;
    NK.backlog_first = NK.backlog_last = 0;
    NK.backlog_known = 0;
    NK.daemon_slots = -1;
    nickvForgetHealth();
    NK.daemon_joins++;
    if (!NK.replicas) NK.replicas = listCreate();
    /* The daemon PSYNCs from where we are now: make sure a backlog
     * exists, so that this is a partial resync, not a full one. */
    if (!server.repl_backlog) createReplicationBacklog();
    serverLog(LL_NOTICE, "Nic-KV: daemon joined (link from %s; replicas go to %s:%d, rdma %d, tls %d)",
              replicationGetSlaveName(c), NK.daemon_host, NK.daemon_port, NK.daemon_rdma_port,
              NK.daemon_tls_port);
    if (nickvUserUnsafe())
        serverLog(LL_WARNING, "Nic-KV: the daemon role is open to more clients than Nic-KV: %s "
                  "(NIC-KV.md, \"Security model\")", nickvUserUnsafe());
    addReplyStatusFormat(c, "%s %lld", server.replid, server.master_repl_offset);
}

/* lease <t> <ms> <instance> <key> [<offset>], from Nic-KV's probe
 * connection (not its link): replies. */
static void nickvOnLease(client *c, nickvMsg *m) {
    nickvIdent id;
    int bound;
    if (!nickvUserOk(c))
        addReplyErrorFormat(c, "-" NICKV_REPLY_REFUSED " only the user named by nickv-user "
                            "(%s) may grant a lease", nickvUser ? nickvUser : "none set");
    else if (nickvLease && nickvUserUnsafe())
        addReplyErrorFormat(c, "-" NICKV_REPLY_REFUSED " %s", nickvUserUnsafe());
    else if (!m->ok || !nickvIdentFrom(&id, m->argv[3], m->argv[4]))
        addReplyError(c, "malformed lease: expected lease <t> <ms> <instance> <key> [<offset>]");
    else if ((bound = nickvGrantorCheck(c, &id)) >= 0)
        nickvLeaseGrant(c, m->argc, m->argv, bound);
}

/* health, from the probe connection, while Nic-KV's link is down: replies. */
static void nickvOnProbeHealth(client *c, nickvMsg *m) {
    if (!nickvUserOk(c)) {
        addReplyErrorFormat(c, "-" NICKV_REPLY_REFUSED " only the user named by nickv-user "
                            "(%s) may report replicas' health", nickvUser ? nickvUser : "none set");
    } else if (!NK.grantor_id || c->id != NK.grantor_id) {
        nickvRefuseOther(c, "a health report", "only the connection that grants this master's lease "
                         "(or the daemon's link) may report replicas' health");
    } else if (!m->ok) {
        addReplyError(c, "malformed health message");
    } else {
        nickvHealth(m->argc, m->argv);
        addReply(c, shared.ok);
    }
}

/* add <id> <ip> <listening-port>: a replica Nic-KV now serves. */
static void nickvOnAdd(nickvMsg *m) {
    nickvReplica *r = nickvFindReplica(m->id, NULL);
    if (!r) {
        r = zcalloc(sizeof(*r));
        r->id = m->id;
        listAddNodeTail(NK.replicas, r);
    }
    snprintf(r->ip, sizeof(r->ip), "%s", m->argv[2]);
    r->port = m->port;
    r->ack_time = server.unixtime;
    serverLog(LL_NOTICE, "Nic-KV: replica %s:%d is now served by Nic-KV", r->ip, r->port);
}

/* del <id>: it left. */
static void nickvOnDel(nickvMsg *m) {
    listNode *ln;
    nickvReplica *r = nickvFindReplica(m->id, &ln);
    if (r) {
        serverLog(LL_NOTICE, "Nic-KV: replica %s:%d left Nic-KV", r->ip, r->port);
        zfree(r);
        listDelNode(NK.replicas, ln);
    }
}

/* ack <id> <offset>: what it holds. */
static void nickvOnAck(nickvMsg *m) {
    nickvReplica *r = nickvFindReplica(m->id, NULL);
    if (r) {
        long long b = m->offset;
        /* No replica holds more than we wrote. */
        if (b > server.master_repl_offset) b = server.master_repl_offset;
        if (b > r->ack_off) r->ack_off = b;
        r->ack_time = server.unixtime;
    }
}

/* backlog <first> <last> [<free-slots>]: also the daemon's heartbeat
 * (every NICKV_HEARTBEAT_MS), with the number of clients it can still
 * accept (maxclients). */
static void nickvOnBacklog(nickvMsg *m) {
    NK.backlog_first = m->first;
    NK.backlog_last = m->last;
    if (nickvDaemonIsGrantor()) nickvHeld(m->last);
    NK.backlog_known = 1;
    NK.daemon_slots = m->slots;
    NK.daemon_heard = mstime();
}

/* A message on the daemon's link, an online replica's: no replies (one
 * would end the link), a malformed one is logged. */
static void nickvOnDaemonMessage(nickvMsg *m) {
    if (!m->ok) {
        /* The verb only: a message may carry what is not for the log. */
        serverLog(LL_WARNING, "Nic-KV: unknown or malformed message from the daemon: '%.32s' with %d words",
                  m->argv[0], m->argc);
        return;
    }
    switch (m->type) {
    case NICKV_M_ADD: nickvOnAdd(m); break;
    case NICKV_M_DEL: nickvOnDel(m); break;
    case NICKV_M_ACK: nickvOnAck(m); break;
    case NICKV_M_BACKLOG: nickvOnBacklog(m); break;
    case NICKV_M_HEALTH:
        /* With nickv-lease yes, verdicts from the grantor's Nic-KV only. */
        if (!nickvLease || nickvDaemonIsGrantor()) nickvHealth(m->argc, m->argv);
        break;
    default:
        serverLog(LL_WARNING, "Nic-KV: unknown or malformed message from the daemon: '%.32s' with %d words",
                  m->argv[0], m->argc);
        break;
    }
}

/* REPLCONF nickv "<verb> <args>": see nic-kv/nickv.c for the messages, and
 * src/nickv_msg.c for how each is read. hello and lease may come from any
 * client (of the nickv-user), health from the grantor's probe connection
 * or the daemon, the others from the daemon's link only. */
void nickvReplconf(client *c, sds message) {
    nickvMsg m;
    if (nickvMsgParse(message, sdslen(message), &m) == -1) {
        /* A reply on the daemon's link would get it dropped (a replica
         * must not send replies): say it in the log instead. */
        if (nickvIsDaemon(c)) serverLog(LL_WARNING, "Nic-KV: an empty or unparsable message from the daemon");
        else addReplyError(c, "empty REPLCONF nickv message");
        return;
    }
    if (m.type == NICKV_M_HELLO) nickvOnHello(c, &m);
    else if (m.type == NICKV_M_LEASE) nickvOnLease(c, &m);
    else if (m.type == NICKV_M_HEALTH && !nickvIsDaemon(c)) nickvOnProbeHealth(c, &m);
    else if (!nickvIsDaemon(c)) addReplyError(c, "REPLCONF nickv messages come from the Nic-KV daemon only");
    else nickvOnDaemonMessage(&m);
    /* A hello or lease carries the Nic-KV's key: SLOWLOG shows it redacted,
     * as AUTH's password (MONITOR never shows REPLCONF, an admin command). */
    if (m.type == NICKV_M_HELLO || m.type == NICKV_M_LEASE)
        for (int j = 0; j < c->argc; j++)
            if (c->argv[j]->type == OBJ_STRING && sdsEncodedObject(c->argv[j]) && c->argv[j]->ptr == message)
                redactClientCommandArgument(c, j);
    nickvMsgFree(&m);
}

void nickvCapa(client *c, const char *value) {
    if (!strcasecmp(value, NICKV_CAPA)) c->slave_capa |= SLAVE_CAPA_NICKV;
    else if (!strcasecmp(value, NICKV_CAPA_HOLD)) c->slave_capa |= SLAVE_CAPA_NICKV | SLAVE_CAPA_NICKV_HOLD;
}

/* Where a replica goes at Nic-KV: the port of its own transport (RDMA,
 * TLS or TCP), 0 when Nic-KV does not listen there. */
static int nickvDaemonPortFor(client *c) {
    int type = connGetType(c->conn);
    if (type == CONN_TYPE_RDMA) return NK.daemon_rdma_port;
    if (type == CONN_TYPE_TLS) return NK.daemon_tls_port;
    return NK.daemon_port;
}

static int nickvTransportOk(client *c) {
    return nickvDaemonPortFor(c) != 0;
}

static int nickvHolds(client *c) {
    return (c->slave_capa & SLAVE_CAPA_NICKV_HOLD) && server.unixtime - c->ctime < NICKV_HOLD_SECONDS;
}

/* Can Nic-KV serve a replica that needs the stream from offset on? Its
 * backlog starts at the first offset it last reported (it only moves
 * forward: if it moved past offset since, Nic-KV answers -NICKV and the
 * replica comes back). Its end is wherever our stream to it has got: every
 * byte we produced is on its way to Nic-KV, and Nic-KV lets a PSYNC wait a
 * moment for bytes that are still in flight. Under a steady write load a
 * replica's offset is always ahead of the end Nic-KV last reported, so
 * using that end here would refuse every hand-over. */
static int nickvCanServe(long long offset) {
    /* A daemon at its maxclients would refuse the replica's connection. */
    if (NK.daemon_slots == 0) return 0;
    return NK.backlog_known && offset >= NK.backlog_first && offset <= server.master_repl_offset + 1;
}

/* May this replica stream from Nic-KV (as far as the replica goes)? */
static int nickvReplicaMayMove(client *c) {
    return (c->slave_capa & SLAVE_CAPA_NICKV) && !nickvHolds(c) && nickvTransportOk(c);
}

int nickvMaybeRedirect(client *c, long long psync_offset) {
    if (!nickvReplicaMayMove(c) || !nickvDaemonHealthy()) return 0;
    if (strcasecmp(c->argv[1]->ptr, server.replid) || !nickvCanServe(psync_offset)) return 0;
    serverLog(LL_NOTICE, "Nic-KV: redirecting replica %s to Nic-KV at %s:%d (offset %lld)",
              replicationGetSlaveName(c), NK.daemon_host, NK.daemon_port, psync_offset);
    /* A TLS replica connects with TLS wherever it goes: the port in the
     * place of the TCP one is Nic-KV's tls-port. */
    addReplyStatusFormat(c, "%s%s %d %d", NICKV_REPLY_REDIRECT + 1, NK.daemon_host,
                         connGetType(c->conn) == CONN_TYPE_TLS ? NK.daemon_tls_port : NK.daemon_port,
                         NK.daemon_rdma_port);
    c->flags |= CLIENT_CLOSE_AFTER_REPLY;
    NK.redirects++;
    if (NK.daemon_slots > 0) NK.daemon_slots--;   /* until its next report */
    return 1;
}

/* Nic-KV holds our stream up to offset (its backlog's end, its own ACK).
 * Kept per history: offsets of another one (a master demoted, resynced and
 * promoted again) say nothing of this one. */
static void nickvHeld(long long offset) {
    if (offset > server.master_repl_offset) offset = server.master_repl_offset;
    if (strcmp(NK.held_replid, server.replid)) {
        memcpy(NK.held_replid, server.replid, sizeof(NK.held_replid));
        NK.held = 0;
    }
    if (offset > NK.held) NK.held = offset;
}

/* Why a direct replica's ACK counts for WAIT only up to what Nic-KV
 * knows our stream holds. With nickv-lease yes, Nic-KV may fail this
 * master over, and its failover distrusts a replica that claims much more
 * of the stream than Nic-KV knows the master wrote (nic-kv/nickv_failover.c,
 * queryReply: such a claim is a lie, or bytes nobody may have
 * acknowledged). Nic-KV knows what its link received and what our lease
 * answers told it. A direct replica can get bytes Nic-KV learns of
 * neither way: Nic-KV stopped while we still hold a lease, then we are
 * killed with those bytes in our output buffer to it (and the reset
 * connection drops what it had not read). Before this rule WAIT
 * acknowledged writes only such a replica had; the failover distrusted it
 * and promoted another, and they were lost (nickv-failover-edges.tcl, "a
 * direct replica ahead of Nic-KV ..."). So an ACK counts once Nic-KV
 * said it holds the offset (its ACK or backlog report, every 200 ms) or
 * read a lease answer that said we reached it, or the same pushed early
 * through the watch thread (src/nickv_lease.c, nickvLeaseWant: a round
 * trip; without a watch, up to two probe intervals): what its failover's
 * ack bound holds (nkProbeAckBound, with the replicas' ACKs it relays,
 * which nickvCountAcksByOffset counts as they are). WAIT on direct
 * replicas waits that long. Only the daemon that
 * grants our lease is taken at its word (nickvDaemonIsGrantor). */
int nickvDirectAckCounts(long long offset) {
    client *d;
    if (!nickvLease) return 1;
    if ((d = nickvDaemon()) && nickvDaemonIsGrantor()) nickvHeld(d->repl_ack_off);
    if (!strcmp(NK.held_replid, server.replid) && NK.held >= offset) return 1;
    if (nickvLeaseConfirmedOffset() >= offset) return 1;
    /* Confirmed within a round trip, not two probe intervals. Also beside
     * the grantor's link: a replica is direct then only while it is being
     * handed over, or while the link itself starts (its PSYNC, the RDB),
     * when the link's ACK does not come (a handover paused WAIT for
     * 0.25 s when pushes waited for it). */
    nickvLeaseWant();
    return 0;
}

int nickvCountAcksByOffset(long long offset) {
    listIter li;
    listNode *ln;
    int count = 0, active;
    if (!nickvDaemon() || !NK.replicas || nickvLeaseLapsed()) return 0;
    /* With nickv-lease yes, only the replicas of the Nic-KV that grants. */
    if (nickvLease && !nickvDaemonIsGrantor()) return 0;
    active = nickvHealthActive();
    listRewind(NK.replicas, &li);
    while ((ln = listNext(&li))) {
        nickvReplica *r = listNodeValue(ln);
        if (r->ack_off >= offset && (!active || nickvReplicaNamedValid(r))) count++;
    }
    return count;
}

int nickvCountGoodReplicas(void) {
    listIter li;
    listNode *ln;
    int good = 0, active;
    if (!nickvDaemonAlive() || !NK.replicas) return 0;
    if (nickvLease && !nickvDaemonIsGrantor()) return 0;
    active = nickvHealthActive();
    listRewind(NK.replicas, &li);
    while ((ln = listNext(&li))) {
        nickvReplica *r = listNodeValue(ln);
        if (server.unixtime - r->ack_time <= server.repl_min_slaves_max_lag &&
            (!active || nickvReplicaNamedValid(r))) good++;
    }
    return good;
}

long nickvReplicaCount(void) {
    return (nickvDaemon() && NK.replicas) ? (long)listLength(NK.replicas) : 0;
}

/* Daemons' links in server.slaves (the current one, and forgotten ones
 * not freed yet): connected_slaves leaves them out. */
long nickvDaemonCount(void) {
    listIter li;
    listNode *ln;
    long n = 0;
    if (!NK.daemon_id && (!NK.retired || !listLength(NK.retired))) return 0;
    listRewind(server.slaves, &li);
    while ((ln = listNext(&li)))
        if (nickvIsDaemon(listNodeValue(ln))) n++;
    return n;
}

sds nickvInfoReplicas(sds info, int *slaveid) {
    listIter li;
    listNode *ln;
    client *d = nickvDaemon();
    if (!d) return info;
    if (NK.replicas) {
        listRewind(NK.replicas, &li);
        while ((ln = listNext(&li))) {
            nickvReplica *r = listNodeValue(ln);
            info = sdscatprintf(info,
                "slave%d:ip=%s,port=%d,state=online,offset=%lld,lag=%ld,via=nickv\r\n",
                (*slaveid)++, r->ip, r->port, r->ack_off, (long)(server.unixtime - r->ack_time));
        }
    }
    info = sdscatprintf(info,
        "nickv:ip=%s,port=%d,rdma_port=%d,state=%s,offset=%lld,lag=%ld,replicas=%lu\r\n",
        NK.daemon_host, NK.daemon_port, NK.daemon_rdma_port,
        d->replstate == SLAVE_STATE_ONLINE ? "online" : "syncing",
        d->repl_ack_off, (long)(server.unixtime - d->repl_ack_time),
        NK.replicas ? listLength(NK.replicas) : 0UL);
    return info;
}

/* Is the replica last handed over still on its way to Nic-KV? Done once
 * Nic-KV reports it (NK.replicas), or NICKV_HANDOFF_WAIT_MS after it left
 * (it may come back direct, or be known to Nic-KV by another address). */
static int nickvHandoffInTransit(void) {
    listIter li;
    listNode *ln;
    if (!NK.handoff_at) return 0;
    if (mstime() - NK.handoff_at > NICKV_HANDOFF_WAIT_MS) {
        NK.handoff_at = 0;
        return 0;
    }
    if (nickvDaemon() && NK.replicas) {
        listRewind(NK.replicas, &li);
        while ((ln = listNext(&li))) {
            nickvReplica *r = listNodeValue(ln);
            if (r->port == NK.handoff_port && !strcmp(r->ip, NK.handoff_addr)) {
                NK.handoff_at = 0;
                return 0;
            }
        }
    }
    return 1;
}

/* Hand direct replicas that can go through Nic-KV over to it, one at a
 * time: one in transit answers no WAIT until it streams behind Nic-KV,
 * and after a failover every replica is direct: handed over all at once
 * they left WAIT with none to answer for the hand-over's length (a client
 * writing with WAIT 1 saw a 200 ms pause after every failover). So the
 * next goes once the last is behind Nic-KV (nickvCron checks every cron):
 * with two replicas or more, one always answers. */
void nickvMasterCron(void) {
    listIter li;
    listNode *ln;
    char buf[NET_HOST_STR_LEN];
    if (!nickvDaemonHealthy() || nickvHandoffInTransit()) return;
    /* Nor while another replica is still syncing (a full sync, or one
     * whose RDB child the cron has not reaped yet): it answers no WAIT
     * either, and one handed over then left the others' count one short
     * (nickv-redirects saw one replica of three online). Not for an RDB
     * download (redis-cli --rdb: never online), and not for longer than
     * repl-timeout: a client that sent SYNC and reads nothing holds no
     * hand-over for ever. */
    listRewind(server.slaves, &li);
    while ((ln = listNext(&li))) {
        client *s = listNodeValue(ln);
        if (nickvIsDaemon(s) || (s->flags & (CLIENT_CLOSE_ASAP | CLIENT_REPL_RDBONLY))) continue;
        if (s->replstate != SLAVE_STATE_ONLINE && server.unixtime - s->ctime < server.repl_timeout) return;
    }
    listRewind(server.slaves, &li);
    while ((ln = listNext(&li))) {
        client *s = listNodeValue(ln);
        if (nickvIsDaemon(s) || !nickvReplicaMayMove(s)) continue;
        if (s->replstate != SLAVE_STATE_ONLINE || (s->flags & CLIENT_CLOSE_ASAP)) continue;
        if (!nickvCanServe(s->repl_ack_off + 1)) continue;   /* also: no free slot */
        serverLog(LL_NOTICE, "Nic-KV: handing replica %s over to Nic-KV at %s:%d",
                  replicationGetSlaveName(s), NK.daemon_host, NK.daemon_port);
        NK.handoffs++;
        if (NK.daemon_slots > 0) NK.daemon_slots--;   /* until its next report */
        snprintf(NK.handoff_addr, sizeof(NK.handoff_addr), "%s", nickvSlaveAddr(s, buf, sizeof(buf)));
        NK.handoff_port = s->slave_listening_port;
        NK.handoff_at = mstime();
        freeClientAsync(s);
        return;
    }
}

/* Every serverCron (master side): forget a daemon that is gone or silent;
 * PING into an idle stream while a healthy daemon carries it. */
static void nickvMasterWatch(mstime_t now) {
    if (NK.retired && listLength(NK.retired)) {
        listIter li;
        listNode *ln;
        listRewind(NK.retired, &li);
        while ((ln = listNext(&li)))
            if (!lookupClientByID((uintptr_t)listNodeValue(ln))) listDelNode(NK.retired, ln);
    }
    if (NK.daemon_id) {
        client *d = nickvDaemon();
        if (!d) {
            nickvForgetDaemon("is gone");
        } else if (!nickvUserOk(d)) {
            nickvForgetDaemon("is no longer authenticated as the nickv-user: closing its link");
        } else if ((d->flags & CLIENT_SLAVE) && d->replstate != SLAVE_STATE_ONLINE) {
            /* Its PSYNC became a full sync (our history is not the one
             * it streamed): a replica's full sync, which may wait for
             * repl-diskless-sync-delay and the RDB. The daemon gives up
             * on an RDB that stops moving for repl-timeout; upstream's
             * own timeouts for a replica in a full sync apply here. No
             * heartbeat meanwhile. */
            NK.daemon_heard = now;
        } else if (d->replstate != SLAVE_STATE_ONLINE) {
            /* Between its hello and its PSYNC: no heartbeat yet. */
            if (now - NK.daemon_hello > NICKV_DAEMON_JOIN_MS)
                nickvForgetDaemon("said hello but did not start streaming in time: closing its link");
            else
                NK.daemon_heard = now;
        } else if (now - NK.daemon_heard <= NICKV_DAEMON_TIMEOUT_MS) {
            if (d->repl_ack_off != NK.daemon_ack || d->repl_ack_off >= server.master_repl_offset) {
                NK.daemon_ack = d->repl_ack_off;
                NK.daemon_ack_moved = now;
            }
        } else {
            NK.daemon_timeouts++;
            nickvForgetDaemon("sent no heartbeat for over a second (stopped or hung?): "
                              "closing its link");
        }
    }
    if (server.masterhost || server.master_repl_offset != NK.idle_offset) {
        NK.idle_offset = server.master_repl_offset;
        NK.idle_since = now;
        return;
    }
    if (now - NK.idle_since < NICKV_PING_MS || !nickvDaemonHealthy()) return;
    /* As replicationCron's PING, and not during a manual failover, whose
     * offsets must stand still. */
    int failover = ((server.cluster_enabled && server.cluster->mf_end) || server.failover_end_time) &&
                   checkClientPauseTimeoutAndReturnIfPaused();
    if (failover) return;
    robj *argv[1] = {shared.ping};
    replicationFeedSlaves(server.slaves, server.slaveseldb, argv, 1);
    NK.idle_offset = server.master_repl_offset;
    NK.idle_since = now;
}

/* Before a replica leaves a silent Nic-KV it asks the master, on a
 * connection of its own, whether it is silent too: it sends PING (after
 * AUTH with its masterauth, which a busy master serves) and reads the
 * answers. Any answer (+PONG, -NOAUTH, -DENIED) is written by
 * the master's main thread, so the master runs and would have PINGed
 * through Nic-KV: Nic-KV's path is what is broken, and the replica leaves.
 * No answer means the master is busy (a slow command, a fork) or gone, and
 * so does -BUSY or -LOADING: a script past busy-reply-threshold, a module
 * command that yields or a load serve clients, but run no cron, so they
 * send nothing through Nic-KV either. Leaving would only queue the replica
 * at a master that cannot serve it, and cost it its place behind Nic-KV
 * when the master wakes (WAIT and min-replicas-to-write count it out until
 * its partial resync is done). A dead master is Nic-KV's to fail over,
 * which repoints the replica; upstream's repl-timeout still bounds the
 * wait. A master that just woke answers at once but PINGs through Nic-KV
 * only at its next cron: the replica leaves if the stream stays silent a
 * PING period and two crons after the answer. A connection that ends
 * unanswered is made again after 500 ms, doubling up to 4 s, and so is one
 * still unanswered after 4 s (a connect that never completes, e.g. a lost
 * RDMA CM event, must not keep the replica from ever asking). Connection
 * handlers only record what happened; the cron closes (the read handler is
 * removed first, so that an EOF does not call it again meanwhile). */
#define NICKV_ASK_RETRY_MS 500
#define NICKV_ASK_RETRY_MAX_MS 4000

static void nickvAskClose(void) {
    if (NK.ask) connClose(NK.ask);
    NK.ask = NULL;
    sdsfree(NK.ask_out);
    NK.ask_out = NULL;
    NK.ask_pending = 0;
    NK.ask_lines = 0;
    NK.ask_len = NK.ask_got = 0;
}

static void nickvAskEnd(void) {
    nickvAskClose();
    NK.ask_answered = NK.ask_waiting = NK.ask_next = NK.ask_backoff = 0;
}

static int nickvAskBusyReply(const char *r, size_t len) {
    return (len >= 5 && !memcmp(r, "-BUSY", 5)) || (len >= 8 && !memcmp(r, "-LOADING", 8));
}

static void nickvAskRead(connection *conn) {
    char buf[256];
    int want = server.masterauth ? 2 : 1;   /* PING's answer is the last */
    int n = connRead(conn, buf, sizeof(buf));
    if (n < 0 && connGetState(conn) == CONN_STATE_CONNECTED) return;   /* EAGAIN */
    for (int i = 0; i < n && NK.ask_lines < want; i++) {
        if (buf[i] == '\n') {
            if (++NK.ask_lines < want) NK.ask_len = 0;
        } else if (NK.ask_len < sizeof(NK.ask_line)) {
            NK.ask_line[NK.ask_len++] = buf[i];
        }
    }
    if (n > 0) NK.ask_got += n;
    if (n > 0 && NK.ask_lines < want) return;
    /* PING's answer, EOF or an error: an answer if anything came (an error
     * before PING's, -DENIED, says the main thread runs too), unless PING's
     * says busy. */
    if (NK.ask_got && !nickvAskBusyReply(NK.ask_line, NK.ask_len)) NK.ask_answered = mstime();
    connSetReadHandler(conn, NULL);
    connSetWriteHandler(conn, NULL);
    NK.ask_pending = 0;
}

static void nickvAskFailed(connection *conn, const char *what) {
    serverLog(LL_VERBOSE, "Nic-KV: cannot ask the master %s:%d: %s", server.masterhost,
              server.masterport, connGetLastError(conn) ? connGetLastError(conn) : what);
}

/* Sends what is left of the request; the rest when the connection is
 * writable again. An RDMA connection is connected before the master has
 * told it where to write (its receive buffer), so a first write may send
 * nothing: that is no failure (it was taken for one, and the ask made again
 * after 500 ms, 1 s, ..., so that replicas left a silent Nic-KV seconds
 * late, or in a slow VM not at all). */
static void nickvAskFlush(connection *conn) {
    if (connGetState(conn) == CONN_STATE_CONNECTED) {   /* else keep the connect's error */
        int n = connWrite(conn, NK.ask_out, sdslen(NK.ask_out));
        if (n > 0) sdsrange(NK.ask_out, n, -1);
    }
    if (connGetState(conn) != CONN_STATE_CONNECTED) {
        nickvAskFailed(conn, "not connected");
        connSetReadHandler(conn, NULL);
        connSetWriteHandler(conn, NULL);
        NK.ask_pending = 0;
        return;
    }
    connSetWriteHandler(conn, sdslen(NK.ask_out) ? nickvAskFlush : NULL);
}

static void nickvAskConnected(connection *conn) {
    sds req = sdsempty();
    if (server.masterauth) {
        const char *user = server.masteruser;
        req = sdscatprintf(req, "*%d\r\n$4\r\nAUTH\r\n", user ? 3 : 2);
        if (user) req = sdscatprintf(req, "$%zu\r\n%s\r\n", strlen(user), user);
        req = sdscatprintf(req, "$%zu\r\n", sdslen(server.masterauth));
        req = sdscatsds(req, server.masterauth);
        req = sdscatlen(req, "\r\n", 2);
    }
    req = sdscat(req, "PING\r\n");
    sdsfree(NK.ask_out);
    NK.ask_out = req;
    if (connGetState(conn) == CONN_STATE_CONNECTED) connSetReadHandler(conn, nickvAskRead);
    nickvAskFlush(conn);
}

/* Asks (again, when the last connection ended unanswered). */
static void nickvAskMaster(mstime_t now) {
    if (NK.ask && NK.ask_pending) {
        mstime_t asked = NK.ask_next - NK.ask_backoff;
        if (now - asked < NICKV_ASK_RETRY_MAX_MS) return;
        serverLog(LL_VERBOSE, "Nic-KV: no answer from the master %s:%d in %lld ms: asking again",
                  server.masterhost, server.masterport, (long long)(now - asked));
    }
    nickvAskClose();
    if (now < NK.ask_next) return;
    NK.ask_backoff = NK.ask_backoff ? NK.ask_backoff * 2 : NICKV_ASK_RETRY_MS;
    if (NK.ask_backoff > NICKV_ASK_RETRY_MAX_MS) NK.ask_backoff = NICKV_ASK_RETRY_MAX_MS;
    NK.ask_next = now + NK.ask_backoff;
    NK.ask = rdmaConf.replication ? connCreateRdma() :
             server.tls_replication ? connCreateTLS() : connCreateSocket();
    NK.ask_pending = 1;
    if (connConnect(NK.ask, server.masterhost, server.masterport, server.bind_source_addr,
                    nickvAskConnected) == C_ERR) {
        nickvAskFailed(NK.ask, "connect failed");
        nickvAskClose();
    }
}

/* Every serverCron (replica side): a link through Nic-KV that stays silent
 * for NICKV_VIA_TIMEOUT_MS (the master PINGs through Nic-KV twice as often)
 * goes back to the master, once the master answers (above). A handshake
 * through it gets a little longer. */
static void nickvReplicaWatch(mstime_t now) {
    /* A redirect (or Nic-KV's refusal) ended the handshake: upstream would
     * connect again at its next replicationCron, up to a second later, while
     * WAIT counts this replica out; the next connect goes where the path
     * says, now. (Bounded: the path's streak and hold stop a bounce.) */
    if (NK.reconnect_now && server.masterhost && server.repl_state == REPL_STATE_CONNECT) {
        NK.reconnect_now = 0;
        connectWithMaster();
    }
    if (!server.masterhost || NK.path != NICKV_PATH_VIA) {
        nickvAskEnd();
        return;
    }
    if (server.repl_state == REPL_STATE_CONNECTED && server.master) {
        NK.streak = 0;                     /* a link through Nic-KV: redirects work */
        if (server.master->read_reploff != NK.via_read_off) {
            NK.via_read_off = server.master->read_reploff;
            NK.via_heard = now;
            if (NK.ask_waiting) {
                NK.via_waits++;
                serverLog(LL_NOTICE, "Nic-KV: the stream through Nic-KV at %s:%d moves again",
                          NK.target_host, NK.target_port);
            }
            nickvAskEnd();
            return;
        }
        if (now - NK.via_heard <= NICKV_VIA_TIMEOUT_MS) return;
        if (NK.ask_answered) nickvAskClose();   /* what it said is kept */
        if (!NK.ask_answered ||
            now - NK.ask_answered <= NICKV_PING_MS + 2 * (1000 / server.hz)) {
            if (!NK.ask_waiting) {
                NK.ask_waiting = 1;
                serverLog(LL_NOTICE, "Nic-KV: nothing from Nic-KV at %s:%d for %lld ms: asking "
                          "the master whether it is silent too before leaving Nic-KV",
                          NK.target_host, NK.target_port, (long long)(now - NK.via_heard));
            }
            if (!NK.ask_answered) nickvAskMaster(now);
            return;
        }
        nickvAskEnd();
        NK.via_timeouts++;
        serverLog(LL_WARNING, "Nic-KV: nothing from Nic-KV at %s:%d for %lld ms (the master "
                  "pings through it every %d ms) while the master answers: back to the master",
                  NK.target_host, NK.target_port, (long long)(now - NK.via_heard), NICKV_PING_MS);
        freeClient(server.master);
        if (server.repl_state == REPL_STATE_CONNECT) connectWithMaster();
    } else {
        nickvAskEnd();     /* the link is gone: what was asked was about it */
        if (now - NK.via_heard <= NICKV_VIA_HANDSHAKE_MS) return;
        NK.via_timeouts++;
        serverLog(LL_WARNING, "Nic-KV: no link through Nic-KV at %s:%d after %lld ms: back to "
                  "the master", NK.target_host, NK.target_port, (long long)(now - NK.via_heard));
        cancelReplicationHandshake(1);     /* connects to the master at once */
    }
}

void nickvCron(void) {
    static mstime_t last;
    mstime_t now = mstime();
    /* Blocked for a while ourselves (a slow command, a script, loading):
     * what our peers sent meanwhile is still unread, so their silence
     * means nothing yet. */
    if (last && now - last > 1000 / server.hz + NICKV_PING_MS) {
        NK.daemon_heard = NK.daemon_ack_moved = NK.via_heard = now;
        nickvAskEnd();      /* an answer from before is no news */
    }
    last = now;
    /* A hand-over in transit: once it is done, the next one now, not at
     * the next replicationCron (nickvMasterCron checks which). */
    if (NK.handoff_at) nickvMasterCron();
    nickvMasterWatch(now);
    nickvReplicaWatch(now);
    nickvLeaseHeld();       /* logs a lease that lapsed; forgets one as a replica */
    nickvWatchAllow(nickvLease && !server.masterhost && !nickvUserUnsafe());
    nickvGrantorForget();   /* ... and who granted it */
}

void nickvCountReplicaWrite(void) {
    NK.stream_writes++;
}

/* ------------------------------------------------------ Replica side --- */

/* Where a replica's link goes, and why (NK.path). Only nickvPathSet()
 * changes it, checking the move against this diagram:
 *
 *   MASTER --+NICKV in the master's PSYNC reply--> REDIRECTED
 *             (streak++: redirects in a row that gave no link)
 *   REDIRECTED --next connect (nickvReplicaTarget)--> VIA: to Nic-KV,
 *             advertising capa nickv-via
 *   REDIRECTED --next connect, but another master configured since, or
 *             NICKV_REDIRECT_TTL_MS passed--> MASTER
 *   VIA --its link came up (nickvCron)--> VIA, streak = 0
 *   VIA --"-NICKV" from Nic-KV--> HELD (it cannot serve us)
 *   VIA --the link ends, silent for NICKV_VIA_TIMEOUT_MS, handshake
 *             longer than NICKV_VIA_HANDSHAKE_MS--> MASTER at the next
 *             connect (which the master may redirect again)
 *   MASTER --at a connect, 3 redirects in a row gave no link--> HELD
 *   HELD --at a connect, NICKV_HOLD_SECONDS passed--> MASTER
 *
 * With the master (MASTER, HELD) the replica advertises capa nickv or
 * nickv-hold (the master keeps a holding replica). server.masterhost never
 * changes: ROLE and INFO keep naming the real master. A replica whose
 * configured master is Nic-KV itself never leaves MASTER: "back to the
 * master" would mean back to Nic-KV, so it says nothing of nickv-via and
 * gets what an upstream replica gets there. */
static const char *pathNames[] = {"master", "held", "redirected", "via"};
static const unsigned pathMoves[] = {
    [NICKV_PATH_MASTER]     = 1u << NICKV_PATH_REDIRECTED | 1u << NICKV_PATH_HELD,
    [NICKV_PATH_HELD]       = 1u << NICKV_PATH_MASTER,
    [NICKV_PATH_REDIRECTED] = 1u << NICKV_PATH_VIA | 1u << NICKV_PATH_MASTER,
    [NICKV_PATH_VIA]        = 1u << NICKV_PATH_MASTER | 1u << NICKV_PATH_HELD,
};

static void nickvPathSet(nickvPath to) {
    nickvPath from = NK.path;
    if (from == to) return;
    /* A move not in the diagram is our bug, never a peer's doing: say so
     * (the tests look for it) and make the move, which every state allows
     * the replication code to recover from. */
    if (!(pathMoves[from] & (1u << to)))
        serverLog(LL_WARNING, "BUG: Nic-KV: no replica path move from %s to %s",
                  pathNames[from], pathNames[to]);
    if (to == NICKV_PATH_HELD) NK.hold_until = server.unixtime + NICKV_HOLD_SECONDS;
    if (to == NICKV_PATH_VIA) {
        NK.via_heard = mstime();
        NK.via_read_off = -1;
    }
    serverLog(LL_VERBOSE, "Nic-KV: replica path %s -> %s", pathNames[from], pathNames[to]);
    NK.path = to;
}

/* A getter: what the replica advertises to whom it connects to. */
const char *nickvReplicaCapa(void) {
    if (!nickvOffload) return "none";
    if (NK.path == NICKV_PATH_VIA) return NICKV_CAPA_VIA;
    return NK.path == NICKV_PATH_HELD ? NICKV_CAPA_HOLD : NICKV_CAPA;
}

int nickvReplicaPsyncReply(const char *reply) {
    if (!strncmp(reply, NICKV_REPLY_REDIRECT, strlen(NICKV_REPLY_REDIRECT))) {
        int argc = 0;
        long tcp, rdma;
        sds *argv = sdssplitargs(reply + strlen(NICKV_REPLY_REDIRECT), &argc);
        /* (A TLS link is sent Nic-KV's tls-port in tcp's place; an RDMA one
         * may get tcp 0, from a Nic-KV that listens on no TCP port.) */
        if (!argv || argc != 3 || NK.path != NICKV_PATH_MASTER ||
            !string2l(argv[1], sdslen(argv[1]), &tcp) || tcp < 0 || tcp > 65535 ||
            !string2l(argv[2], sdslen(argv[2]), &rdma) || rdma < 0 || rdma > 65535 ||
            ((server.masterhost && rdmaConf.replication && rdma) ? rdma : tcp) == 0 ||
            sdslen(argv[0]) == 0 || sdslen(argv[0]) >= sizeof(NK.target_host)) {
            if (argv) sdsfreesplitres(argv, argc);
            serverLog(LL_WARNING, "Nic-KV: ignoring a malformed or unexpected redirect: %s", reply);
            return 1;
        }
        snprintf(NK.target_host, sizeof(NK.target_host), "%s", argv[0]);
        NK.target_port = (server.masterhost && rdmaConf.replication && rdma) ? (int)rdma : (int)tcp;
        snprintf(NK.redirect_from, sizeof(NK.redirect_from), "%s",
                 server.masterhost ? server.masterhost : "");
        NK.redirect_from_port = server.masterport;
        NK.redirect_ms = mstime();
        sdsfreesplitres(argv, argc);
        NK.redirects_followed++;
        NK.streak++;
        NK.reconnect_now = 1;
        nickvPathSet(NICKV_PATH_REDIRECTED);
        serverLog(LL_NOTICE, "Nic-KV: the master redirects us to Nic-KV at %s:%d",
                  NK.target_host, NK.target_port);
        return 1;
    }
    if (!strncmp(reply, NICKV_REPLY_BACK, strlen(NICKV_REPLY_BACK))) {
        if (NK.path != NICKV_PATH_VIA) {
            /* Not from a Nic-KV we were sent to: try again later. */
            serverLog(LL_WARNING, "Nic-KV: unexpected reply to PSYNC: %s", reply);
            return 1;
        }
        NK.bounces++;
        NK.reconnect_now = 1;
        nickvPathSet(NICKV_PATH_HELD);
        serverLog(LL_NOTICE, "Nic-KV cannot serve us (%s): back to the master for %d seconds",
                  reply, NICKV_HOLD_SECONDS);
        return 1;
    }
    return 0;
}

/* Where connectWithMaster() connects: the moves made at a connect. */
void nickvReplicaTarget(const char **host, int *port) {
    /* A redirect from another master than ours now (REPLICAOF since), or
     * too old, is not followed. */
    if (NK.path == NICKV_PATH_REDIRECTED &&
        (!server.masterhost || strcmp(server.masterhost, NK.redirect_from) ||
         server.masterport != NK.redirect_from_port ||
         mstime() - NK.redirect_ms > NICKV_REDIRECT_TTL_MS)) {
        serverLog(LL_NOTICE, "Nic-KV: dropping the redirect to %s:%d that %s:%d gave us: "
                  "our master is now %s:%d", NK.target_host, NK.target_port, NK.redirect_from,
                  NK.redirect_from_port, server.masterhost ? server.masterhost : "none",
                  server.masterport);
        nickvPathSet(NICKV_PATH_MASTER);
    }
    if (NK.path == NICKV_PATH_REDIRECTED) {
        nickvPathSet(NICKV_PATH_VIA);
        *host = NK.target_host;
        *port = NK.target_port;
        return;
    }
    if (NK.path == NICKV_PATH_VIA) nickvPathSet(NICKV_PATH_MASTER);
    if (NK.path == NICKV_PATH_HELD && server.unixtime >= NK.hold_until) nickvPathSet(NICKV_PATH_MASTER);
    if (NK.path == NICKV_PATH_MASTER && NK.streak >= 3) {
        /* Nic-KV is unreachable from here: stay with the master for a
         * while instead of bouncing between the two. */
        serverLog(LL_WARNING, "Nic-KV: three redirects to %s:%d did not give us a link: "
                  "staying with the master for %d seconds", NK.target_host, NK.target_port,
                  NICKV_HOLD_SECONDS);
        NK.streak = 0;
        nickvPathSet(NICKV_PATH_HELD);
    }
    *host = server.masterhost;
    *port = server.masterport;
}

/* ---------------------------------------------------------------- INFO --- */

sds nickvInfoString(sds info) {
    client *d = nickvDaemon();
    int online = 0, valid = 0, joining = 0;
    if (!server.masterhost) {
        listIter li;
        listNode *ln;
        listRewind(server.slaves, &li);
        while ((ln = listNext(&li))) {
            client *s = listNodeValue(ln);
            if (s->replstate == SLAVE_STATE_ONLINE && !nickvIsDaemon(s)) online++;
        }
        online += (int)nickvReplicaCount();
        valid = nickvHealthActive() ? nickvCountValidReplicas() : online;
        joining = nickvHealthActive() ? nickvJoiningCount(mstime(), nickvDaemon() && NK.replicas ?
                                                          listLength(NK.replicas) : 0) : 0;
    }
    info = sdscatprintf(info,
        "# Nic-KV\r\n"
        "nickv_offload:%d\r\n"
        "nickv_daemon:%s\r\n"
        "nickv_daemon_addr:%s:%d\r\n"
        "nickv_daemon_rdma_port:%d\r\n"
        "nickv_daemon_free_slots:%lld\r\n"
        "nickv_backlog_first_byte_offset:%lld\r\n"
        "nickv_backlog_last_byte_offset:%lld\r\n"
        "nickv_replicas:%ld\r\n"
        "nickv_daemon_joins:%lld\r\n"
        "nickv_redirects:%lld\r\n"
        "nickv_handoffs:%lld\r\n"
        "repl_stream_writes:%lld\r\n"
        "nickv_link_via:%s\r\n"
        "nickv_replica_path:%s\r\n"
        "nickv_redirects_followed:%lld\r\n"
        "nickv_bounces:%lld\r\n"
        "nickv_daemon_timeouts:%lld\r\n"
        "nickv_daemons_refused:%lld\r\n"
        "nickv_via_timeouts:%lld\r\n"
        "nickv_via_waits:%lld\r\n"
        "nickv_min_slaves:%d\r\n"
        "nickv_valid_replicas:%d\r\n"
        "nickv_invalid_replicas:%d\r\n"
        "nickv_joining_replicas:%d\r\n"
        "nickv_health_reports:%lld\r\n"
        "nickv_others_refused:%lld\r\n",
        nickvOffload,
        d ? (nickvDaemonHealthy() ? "healthy" : "lagging") : "none",
        d ? NK.daemon_host : "", d ? NK.daemon_port : 0, d ? NK.daemon_rdma_port : 0,
        d ? NK.daemon_slots : -1,
        NK.backlog_first, NK.backlog_last, nickvReplicaCount(),
        NK.daemon_joins, NK.redirects, NK.handoffs, NK.stream_writes,
        (server.masterhost && NK.path == NICKV_PATH_VIA) ? NK.target_host : "",
        server.masterhost ? pathNames[NK.path] : "",
        NK.redirects_followed, NK.bounces, NK.daemon_timeouts, NK.daemons_refused,
        NK.via_timeouts, NK.via_waits,
        nickvHealthActive() ? NK.min_slaves : 0,
        valid,
        nickvHealthActive() ? online - (valid - joining) : 0,
        joining,
        NK.health_reports, NK.others_refused);
    return nickvLeaseInfo(info);
}

void nickvResetStats(void) {
    NK.redirects = NK.handoffs = NK.daemon_joins = NK.stream_writes = 0;
    NK.redirects_followed = NK.bounces = 0;
    NK.daemon_timeouts = NK.daemons_refused = NK.via_timeouts = NK.via_waits = 0;
    NK.health_reports = NK.others_refused = 0;
    nickvLeaseResetStats();
}
