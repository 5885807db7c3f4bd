/* nickv.h -- Nic-KV: shared declarations of the daemon's parts.
 *
 * Copyright (c) 2026, the SKV authors. BSD 3-Clause licence (see LICENSE).
 *
 * nickv.c          main, clients (reading requests, accepting), the RDMA
 *                  listener
 * nickv_cmd.c      commands: who may run what, AUTH, INFO, ROLE, admin
 * nickv_config.c   options: the table, the config file, CONFIG GET/SET
 * nickv_log.c      nkLog, nkLogRepeat, the clocks
 *                  (nickv.c, nickv_cmd.c, nickv_config.c share nickv_int.h)
 * nickv_replica.c  a replica's lifecycle: PSYNC, waiters, hand-over, the
 *                  replicas' list and their main-thread side
 * nickv_fullsync.c proxied full syncs (a client's RDB through us)
 * nickv_upstream.c the link to the master
 * nickv_probe.c    failure detection: probes of the master and replicas,
 *                  what the master learns of them (min-slaves)
 * nickv_sentinel.c SENTINEL: clients find the master through Nic-KV
 * nickv_resp.c     RESP: argv commands, requests, the RDB reader
 * nickv_fanout.c   the fan-out threads (sending, ACKs, RDMA registration)
 * nickv_backlog.c  the backlog: the ring, its lock, the RDMA pins
 * nickv_conn.c     connections: TCP sockets (TLS among them) and RDMA
 *                  channels alike
 * nickv_tls.c      TLS: the OpenSSL contexts from the tls-* options
 * nickv_member.c   members: the nodes Nic-KV trusts with its credentials
 *
 * Layers, each calling only those below it by name (what a lower one must
 * tell a higher one goes through a callback the higher one sets):
 * log < conn < backlog < fanout < link (upstream) < server, whose parts
 * are grouped and ordered too (the probes below the failover, main and
 * the commands on top). nic-kv/LAYERS says which part may call which;
 * `make check-layers` checks the objects against it. Each file keeps its
 * state static and offers functions, its INFO fields among them.
 *
 * The protocol is described at the top of nickv.c, a replica's states at the
 * top of nickv_replica.c, the master link's at the top of nickv_upstream.c.
 */
#ifndef NICKV_H
#define NICKV_H

#include "fmacros.h"     /* upstream's feature macros, before any system header */
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdlib.h>     /* abort(), for nkBug() in a debug build */
#include <limits.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

#include "ae.h"
#include "adlist.h"
#include "sds.h"
#include "rdma_chan.h"

#define NICKV_VERSION "0.1.0"

#define LL_DEBUG 0
#define LL_VERBOSE 1
#define LL_NOTICE 2
#define LL_WARNING 3

#define NK_MAX_BIND 16
#define NK_MAX_NODES 64           /* node lines (members), at most */
#define NK_RUNID_SIZE 40
#define NK_QUERYBUF_MAX (1024*1024)   /* a command to Nic-KV is small */
#define NK_MULTIBULK_MAX (1024*1024)  /* arguments of one command, at most */
#define NK_BULK_MAX (64*1024)         /* bytes of one argument, at most */
#define NK_OUTBUF_MAX (8*1024*1024)    /* replies and proxied RDB not yet sent */
/* The protocol's words and timers, shared with the master's side:
 * NICKV_PSYNC_WAIT_MS (see psyncCommand()), NICKV_HEARTBEAT_MS, ... */
#include "nickv_proto.h"

/* Largest RDMA work request the fan-out posts: a replica's share of the
 * stream goes out in pieces of this size, all in one doorbell, so that the
 * replica starts on the first piece while the rest is on the wire. */
#define NK_RDMA_CHUNK (64*1024)
/* The upstream link may wait this long for the NIC to finish reading a
 * part of the backlog it would overwrite, before the replica whose sends
 * hold that part is dropped (see nkBacklogAppend()). */
#define NK_PIN_TIMEOUT_MS 2000
#define NK_NO_PIN LLONG_MAX

/* ------------------------------------------------------ Connections --- */

/* An event loop (the main thread's, or a fan-out thread's) with what its
 * RDMA connections need: nickv_conn.c. */
typedef struct nkLoop {
    aeEventLoop *el;
    struct rdmaAe *rdma;        /* drives its RDMA connections (rdma_ae.h) */
    list *garbage;              /* closed connections, freed by nkLoopCollect */
    list *tls_pending;          /* TLS connections whose session holds read bytes */
    void (*wake)(void *data);   /* wakes its thread (from any thread) */
    void *wake_data;
} nkLoop;

typedef struct nkConn nkConn;
typedef void (*nkConnHandler)(nkConn *conn, void *data);

nkLoop *nkLoopCreate(aeEventLoop *el);
void nkLoopBeforeSleep(nkLoop *l);
void nkLoopCron(nkLoop *l);
void nkLoopCollect(nkLoop *l);
nkConn *nkConnFromFd(nkLoop *l, int fd);
/* An accepted socket that speaks TLS (tls-port): the handshake runs
 * first; the handlers see only what follows it. NULL without a context. */
nkConn *nkConnFromFdTls(nkLoop *l, int fd);
int nkConnIsTls(nkConn *c);
nkConn *nkConnFromChan(nkLoop *l, rdmaChan *ch);
/* Start connecting; the write handler is called once it is done, and
 * nkConnError() then says whether it failed. A host name is resolved off
 * the loop (nkResolve): until it is, NULL with errno EAGAIN and
 * "resolving ..." in err, and the caller tries again later (a name that
 * cannot be resolved: ENOENT). Main thread. */
nkConn *nkConnConnect(nkLoop *l, const char *host, int port, int rdma, const char *src,
                      size_t rx_size, char *err, size_t errlen);
/* -1 when the loop cannot watch its RDMA channel: it is closed then. */
int nkConnAttach(nkConn *c, nkLoop *l);
void nkConnDetach(nkConn *c);
void nkConnSetData(nkConn *c, void *data);
void nkConnSetReadHandler(nkConn *c, nkConnHandler h);
void nkConnSetWriteHandler(nkConn *c, nkConnHandler h);
int nkConnHasWriteHandler(nkConn *c);
ssize_t nkConnRead(nkConn *c, void *buf, size_t len);
ssize_t nkConnWrite(nkConn *c, const void *buf, size_t len);
const char *nkConnError(nkConn *c);
int nkConnIsRdma(nkConn *c);
int nkConnFd(nkConn *c);
rdmaChan *nkConnChan(nkConn *c);
void nkConnClose(nkConn *c);

/* ----------------------------------------------------------- Config --- */

/* A member named by a node line: a numeric address and a port. */
typedef struct nkNodeAddr {
    char ip[64];
    int port;
} nkNodeAddr;

typedef struct nkConfig {
    char *config_file;
    int port;
    char *bind[NK_MAX_BIND];
    int bindcount;
    int protected_mode;
    char *master_host;
    int master_port;
    char *masteruser;
    char *masterauth;
    char *requirepass;        /* NULL: the same as masterauth */
    char *replica_user;       /* the replicas' masteruser: AUTH <it> <requirepass> */
    char *adminpass;          /* admin commands; NULL: loopback clients only */
    int enable_protected_configs; /* NK_PROTECTED_*: CONFIG SET of fence-command... */
    char *announce_ip;        /* what the master tells replicas; NULL: "?" */
    int rdma_port;            /* RDMA listener for replicas; 0 = none */
    char *rdma_bind[NK_MAX_BIND];
    int rdma_bindcount;
    long long rdma_rx_size;   /* receive buffer of an RDMA connection */
    long long rdma_max_pinned; /* all RDMA registrations together; 0 = memlock only */
    int rdma_max_unauth;       /* RDMA connections not authenticated yet; 0 = no cap */
    int master_rdma_port;     /* > 0: the link to the master over RDMA */
    long long backlog_size;
    int thread_num;
    int repl_timeout;
    int daemonize;
    char *logfile;
    int verbosity;
    char *pidfile;
    int maxclients;           /* clients at once, replicas included */
    int auth_timeout;         /* secs to authenticate, when required; 0: none */
    long long obuf_hard;      /* a proxied full sync's queued bytes: at once */
    long long obuf_soft;      /* ... or over this for obuf_soft_seconds */
    int obuf_soft_seconds;
    int probe_interval;       /* ms between probes of a node */
    int waiting_time;         /* ms unanswered: the node is invalid */
    int busy_limit;           /* ms a master may be busy (its watch says so) */
    int min_slaves;           /* writes need this many valid replicas */
    char *master_name;        /* what SENTINEL clients call the master */
    int failover;             /* promote a replica when the master fails */
    int lease_time;           /* ms of write lease each probe of the master grants */
    char *state_file;         /* where the failover's view is kept ("": nowhere) */
    char *fence_command;      /* run before a promotion; must exit 0 */
    int failback;             /* the configured master takes over again */
    int confirm_claims;       /* claims past the stream bound confirmed at another address */
    char *coordinator;        /* etcd endpoints ("" or NULL: none, see nickv_coord.c) */
    char *local_node;         /* ip:port of the node on our own server */
    int leader_ttl;           /* secs: the leader key's etcd lease */
    char *coordinator_user;   /* etcd authentication ... */
    char *coordinator_password;
    int coordinator_insecure; /* ... or, explicitly, none */
    char *coordinator_tls_ca, *coordinator_tls_cert, *coordinator_tls_key;
    nkNodeAddr nodes[NK_MAX_NODES];   /* node lines: the members (nickv_member.c) */
    int nodecount;
    int tls_port;             /* TLS listener (nickv_tls.c); 0: none */
    char *tls_cert_file, *tls_key_file, *tls_client_cert_file, *tls_client_key_file;
    char *tls_ca_cert_file, *tls_ca_cert_dir;
    int tls_auth_clients;     /* NK_TLS_AUTH_* */
    int tls_replication;      /* connections to nodes are TLS */
} nkConfig;

#define NK_TLS_AUTH_NO 0
#define NK_TLS_AUTH_YES 1
#define NK_TLS_AUTH_OPTIONAL 2

/* File descriptors kept for what is not a client (listeners, the master
 * link, a proxied sync's link, the log), as upstream's
 * CONFIG_MIN_RESERVED_FDS. */
#define NK_RESERVED_FDS 32

/* ---------------------------------------------------------- Backlog --- */

/* The stream from the master, as a ring (nickv_backlog.c). Offsets are the
 * master's: the ring holds bytes first..last (empty when last < first). */
typedef struct nkRing {
    char *buf;
    long long size;
    long long first, last;
    long long gen;               /* bumped when a new history restarts it */
} nkRing;

/* Where offset's byte lives in a ring of size bytes. */
static inline long long nkRingIndex(long long offset, long long size) { return offset % size; }

/* An RDMA replica's hold on the ring: its NIC may still read offsets from
 * off on, or nothing (NK_NO_PIN). off is set to a posted offset only under
 * the backlog's read lock, before the post, and raised (to NK_NO_PIN or a
 * later offset) without it once the writes complete: raising only frees
 * room. The upstream link never overwrites a pinned byte
 * (nkBacklogAppend). Registered with nkBacklogPinAdd by the main thread.
 * Memory ordering: nickv_fanout.c, at the top. */
typedef struct nkBacklogPin {
    _Atomic long long off;              /* [thread], read by main */
    long long gen;                      /* [thread] the ring's gen when pinned:
                                         * written under the backlog's read lock
                                         * (pushRdma), read by main under its
                                         * write lock, which orders the two */
    char *region;                       /* [main] the ring its channel registers */
    long long region_size;              /* [main] its size */
    void *owner;                        /* [main] what nkPinDropFn drops */
} nkBacklogPin;

/* Drop a pin's owner (set kill, with why; log it if asked). Returns 1 if it
 * was not being dropped already. Main thread. */
typedef int (*nkPinDropFn)(void *owner, const char *why, int log);

/* --------------------------------------------------------- Replicas --- */

/* A replica once it streams: changed only by nkReplicaSetState()
 * (nickv_replica.c), which checks the move. */
typedef enum {
    NK_REPLICA_ONLINE,        /* streaming from the backlog */
    NK_REPLICA_GONE,          /* closed by its thread; main frees it */
    NK_REPLICA_STATES
} nkReplicaState;

/* A replica being streamed to. Made by the main thread when a PSYNC (or a
 * proxied full sync) succeeds, then owned by one fan-out thread until it
 * is gone. Fields marked [main] are the main thread's, [thread] its fan-out
 * thread's; the atomics are read by both. */
typedef struct nkReplica {
    long long id;                       /* [main] also the master's key */
    char ip[64];                        /* [main] */
    int port;                           /* [main] its listening port */
    nkConn *conn;                       /* [thread] */
    int rdma;                           /* [main] sent to with zero copy */
    int tls;                            /* [main] over TLS */
    int registered;                     /* [thread] region registered: the
                                         * thread does it (replicaRegister) */
    /* RDMA: the ring its channel registers, and the oldest offset of it
     * the NIC may still be reading (registered with the backlog). */
    nkBacklogPin pin;
    int thread;                         /* [main] index of its thread */
    long long pos;                      /* [thread] next offset to send */
    sds inbuf;                          /* [thread] REPLCONF ACKs */
    int wait_writable;                  /* [thread] */
    char why[128];                      /* [thread] why it is gone */
    _Atomic long long ack_off;
    _Atomic long long ack_time;         /* unix seconds */
    _Atomic int ack_dirty;              /* an ACK to relay to the master */
    _Atomic long long sent_off;         /* last offset written to it */
    _Atomic unsigned long long bytes_sent;
    _Atomic unsigned long long sends;   /* write() calls, or doorbells (RDMA) */
    _Atomic int state;                  /* nkReplicaState: nkReplicaSetState() */
    _Atomic int kill;                   /* the main thread wants it dropped */
    char kill_why[128];                 /* [main], before kill is set */
    time_t ctime;                       /* [main] */
} nkReplica;

/* ----------------------------------------------------------- Server --- */


typedef struct nkServer {
    nkConfig cfg;
    aeEventLoop *el;
    nkLoop *loop;
    rdmaListener *rdma_listeners[NK_MAX_BIND];
    int rdma_count;
    char rdma_status[300];              /* "off", "on", or "error: why" */
    int ipfd[NK_MAX_BIND];
    int ipcount;
    int tlsfd[NK_MAX_BIND];             /* tls-port's listeners */
    int tlscount;
    list *clients;
    long long next_client_id;
    time_t start_time;
    int shutdown_asap;
    /* This process's random id (NICKV_INSTANCE_LEN hex digits), in our
     * hello and lease messages: the master takes them from one Nic-KV.
     * Public (INFO's run_id). */
    char instance[NICKV_INSTANCE_LEN + 1];
    /* ... and the key that proves the id ours (nickv_proto.h, hello): sent
     * in those messages only, to the masters we serve; never in INFO, a
     * reply or the log. */
    char key[NICKV_KEY_LEN + 1];

    /* The link to the master (nickv_upstream.c), the backlog
     * (nickv_backlog.c), the fan-out (nickv_fanout.c) and the replicas
     * (nickv_replica.c) keep their state, stats included, in their files. */

    /* Accepting clients. */
    long long accept_paused_until;      /* ms: out of descriptors, retry then */
    long long accept_err_logged;        /* ms, of the last accept error logged */
    long long accept_err_unlogged;      /* ... and the errors since */
    long long auth_fail_logged;         /* ms, of the last failed AUTH logged */
    long long auth_fail_unlogged;       /* ... and the failures since */
    char auth_fail_last[80];            /* ... the last one's peer */
} nkServer;

extern nkServer nk;

/* ---------------------------------------------------------- Clients --- */

/* A connection to Nic-KV on its port, in the main thread: an admin
 * (redis-cli), or a replica until its PSYNC succeeds, when its socket goes
 * to a fan-out thread and the client is freed. Its state is one of these,
 * changed only by nkClientSetState(), which checks every move against the
 * diagram at the top of nickv_replica.c ("A replica's state in Nic-KV"). */
typedef enum {
    NK_CLIENT_CONNECTED = 0,  /* reading commands (AUTH, REPLCONF, PSYNC, admin) */
    NK_CLIENT_WAITING,        /* PSYNC ahead of the backlog: waits for the stream */
    NK_CLIENT_FULLSYNC,       /* a proxied full sync: the RDB passes through (fs) */
    NK_CLIENT_HANDOVER,       /* +CONTINUE or the RDB queued: to a fan-out thread
                               * at stream_from once it is sent */
    NK_CLIENT_CLOSING,        /* a last reply queued, then closed */
    NK_CLIENT_STATES
} nkClientState;

/* A broken invariant of our own (never something a peer sent): abort in a
 * debug build (-DNK_DEBUG: make nic-kv-debug), else log "BUG: ..." and go on;
 * the tests fail on any such line in a Nic-KV log. */
#ifdef NK_DEBUG
#define nkBug(...) do { nkLog(LL_WARNING, "BUG: " __VA_ARGS__); abort(); } while (0)
#else
#define nkBug(...) nkLog(LL_WARNING, "BUG: " __VA_ARGS__)
#endif

typedef struct nkFullSync nkFullSync;
typedef struct nkClient {
    long long id;
    nkConn *conn;             /* NULL once freed or handed over */
    char ip[64];
    int port;                 /* peer's port */
    sds querybuf;
    sds outbuf;
    int authenticated;
    int admin;                /* AUTH gave adminpass (nkClientIsAdmin) */
    nkClientState state;
    int rx_granted;           /* RDMA: full receive buffer granted */
    int listening_port;       /* REPLCONF listening-port */
    int capa_eof, capa_psync2, capa_nickv;
    long long stream_from;    /* HANDOVER: the offset the stream starts at */
    int stream_on_ack;        /* HANDOVER: ... once the replica's first REPLCONF ACK
                               * says it found the end of an EOF-marked RDB */
    long long stream_history; /* ... in this history (nkLinkHistory) */
    long long ack_wait_io;    /* ... the last time (ms) it sent anything */
    long long psync_wait;     /* WAITING: the offset the PSYNC waits for */
    long long psync_deadline; /* ... until this time (ms) */
    char psync_replid[NK_RUNID_SIZE+1]; /* ... in this history */
    nkFullSync *fs;           /* a proxied full sync in progress */
    list *channels, *patterns; /* SUBSCRIBE / PSUBSCRIBE (sds): nickv_sentinel.c */
    long long obuf_soft_since; /* ms: its queue went over the soft limit; 0: not over */
    time_t ctime;
    long long ctime_ms;
    int resp;                 /* 2 or 3: the protocol HELLO chose (nickv_cmd.c) */
    sds name;                 /* CLIENT SETNAME, HELLO SETNAME; NULL: none */
    sds user;                 /* the user AUTH named; NULL: default */
    long long last_cmd_ms;    /* when its last command ran (CLIENT LIST idle) */
    char last_cmd[24];        /* ... and its name, lower case (CLIENT LIST cmd) */
    int monitor;              /* MONITOR: it is sent the commands others run */
} nkClient;

void nkClientReply(nkClient *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void nkClientWriteRaw(nkClient *c, const char *buf, size_t len);
void nkClientFree(nkClient *c);
void nkClientSetState(nkClient *c, nkClientState to);
/* Send what is queued (may free c: do not touch it afterwards). */
void nkClientFlushSoon(nkClient *c);
size_t nkClientPending(nkClient *c);
/* How many more clients Nic-KV can take now (maxclients, less the clients
 * and replicas it has; 0 while it is out of file descriptors). The master
 * redirects replicas here only while this is above zero. */
int nkClientSlotsFree(void);

/* ------------------------------------------------------------ Calls --- */

void nkLog(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* A line that may come again on every tick (a failover that is blocked or
 * called off, a state file on a full disk): the first is logged at once;
 * the same line again within NK_LOG_REPEAT_MS is only counted, and the
 * count logged when that window ends, as "<the last of them> (N more in
 * the last M s)" (nkLogRepeatCron, every second). Lines are the same when
 * their key is: the text itself when key is NULL, else key (for a line
 * whose numbers change each time). Main thread only. */
#define NK_LOG_REPEAT_MS 10000
void nkLogRepeat(int level, const char *key, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
void nkLogRepeatCron(void);
long long nkUnixTime(void);

/* nickv_upstream.c: the link to the master, which owns its state. */
void nkLinkInit(void);
/* The master the link follows (master-host/port at start). */
void nkLinkMaster(const char **host, int *port);
/* The master moved there (the probes saw it: nickv_probe.c): the link
 * goes to it at once, continuing the stream if it continues the history
 * (a promoted replica does). rdma_port: its RDMA port, 0 if none (used
 * only if master-rdma-port is set). */
void nkLinkFollow(const char *host, int port, int rdma_port);
/* Streaming from the master (PSYNCs can be served). */
int nkLinkStreaming(void);
int nkLinkDaemon(void);
/* The master's replication id, as our stream carries it. */
const char *nkLinkReplid(void);
long long nkLinkHistory(void);
/* Is (replid, offset) our stream's history: the master's id, or the one
 * before it up to where it changed (as a Redis master's replid2)? */
int nkLinkSameHistory(const char *replid, long long offset);
/* The most of the stream our reports to the master said we hold. */
long long nkLinkReportedOffset(void);
/* nic-kv --selftest-getack: the GETACK scan over every split (0: passed). */
int nkLinkSelftestGetack(void);
void nkLinkNoteReported(long long offset);
/* INFO's "Replication" section (alias "upstream"): the link's fields, no
 * closing blank line; last is the backlog's last offset. */
sds nkLinkInfo(sds s, long long last);
/* Called whenever the stream grew (main wires nkPsyncWaitersCheck in). */
void nkLinkOnStream(void (*fn)(void));
void nkLinkCron(void);
/* Leave the master for good (shutdown): close the link, never reconnect.
 * Called before the replicas are dropped, so that the master forgets us
 * before any of them comes back to it and cannot redirect one to us. */
void nkLinkShutdown(void);
/* Our ACK and backlog report to the master, every NICKV_HEARTBEAT_MS. */
void nkLinkHeartbeat(void);
/* nickv.c: the RDMA port the master may send replicas to (0: none). */
int nkRdmaPort(void);
/* Retry what the backlog could not take (called before sleeping). */
void nkLinkResume(void);
/* What the link needs of the layers above it (main wires nickv_replica.c,
 * nickv.c, nickv_coord.c and nickv_member.c in): how many replicas there
 * are, drop them all, tell the master about them; what the hello and the
 * heartbeat announce: our RDMA port, our free client slots; and whether
 * it may link to the master at host:port: this Nic-KV is the one that
 * fans out from it (nkCoordFanout), and it is a member, which may be sent
 * our credentials (nkMember). */
typedef struct nkLinkReplicaOps {
    unsigned long (*count)(void);
    void (*drop_all)(const char *why);
    void (*announce)(void);
    int (*rdma_port)(void);
    int (*slots_free)(void);
    int (*fanout)(const char *host, int port);
    int (*member)(const char *host, int port);
} nkLinkReplicaOps;
void nkLinkOnReplicas(const nkLinkReplicaOps *ops);
/* The link's stats (INFO "Stats" fields link_pin_*), and CONFIG RESETSTAT. */
sds nkLinkStatsInfo(sds s);
void nkLinkResetStats(void);
/* REPLCONF nickv <message> to an SKV master, the message formatted from fmt
 * and sent as one argument; dropped unless streaming. */
void nkLinkMessage(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
struct nkClient;
int nkProxyFullSync(struct nkClient *c);

/* nickv_info.c: the INFO replies of probed nodes, read strictly (a number
 * is the whole value, in range; an id is 40 hex digits). What is absent,
 * or malformed, keeps its "absent" value: "" or -1 (priority, offsets,
 * lease, cluster), 0 (ports, flags); bad names the first malformed field. */
typedef struct nkInfo {
    char role[8];                       /* "master", "slave" */
    char runid[NK_RUNID_SIZE + 1];
    char replid[NK_RUNID_SIZE + 1], replid2[NK_RUNID_SIZE + 1];
    long long master_repl_offset, slave_repl_offset;
    char master_host[256];
    int master_port;
    int priority;                       /* replica_priority (or slave_) */
    int rdma_port, rdma_listener, rdma_replication;
    int lease;                          /* nickv_lease: 1 any but off, 0 off */
    int cluster;                        /* cluster_enabled */
    long long lease_left_ms;            /* nickv_lease_left_ms, -1: not said */
    char bad[64];
} nkInfo;
void nkInfoParse(const char *reply, size_t len, nkInfo *in);
int nkReplyIdOffset(const char *s, char *id, long long *offset);
int nkReplyId(const char *s, char *id);
/* A master's "slaveN:ip=,port=,state=[,via=nickv]" line: 1 with them. */
typedef struct nkInfoReplica {
    char ip[256];
    char state[32];
    int port;
    int via_nickv;
} nkInfoReplica;
int nkInfoReplicaLine(const char *line, nkInfoReplica *r);

/* nickv_probe.c: failure detection (probes of every node), min-slaves.
 * A lower layer: what it must tell the one above (the failover, which
 * owns where the master is) goes through these hooks, given at start. */
struct nkReplicaIter;                   /* nickv_replica.c */
typedef struct nkProbeHooks {
    /* The master's probe node answers as a master at ip:port (its RDMA
     * listener at rdma_port, 0: none), holding our lease if it needs one. */
    void (*master_serves)(const char *ip, int port, int rdma_port);
    /* The master ip:port says it is a replica of to_ip:to_port (no loop):
     * the owner moves the probe there (nkProbeFollowMaster: 1), or not (0). */
    int (*master_follows)(const char *ip, int port, const char *to_ip, int to_port);
    /* May the master's probe grant a lease now? For how long (ms), and
     * one of ms was sent now. */
    int (*granting)(void);
    long long (*lease_time)(void);
    void (*granted)(long long ms);
    /* A verdict changed or a reply came: decide now, not at the next tick. */
    void (*changed)(void);
    /* The coordinator's word (nickv_coord.c): this Nic-KV leads (its
     * probes grant the lease and tell the master the replicas' health);
     * there is a coordinator; ip:port may be named valid to the master. */
    int (*leader)(void);
    int (*coordinated)(void);
    int (*may_name)(const char *ip, int port);
    /* reach:port is a replica our last promotion repointed, named joining
     * to the master (nkFailoverJoining). */
    int (*joining)(const char *reach, int port);
    /* Sentinel's events about a node (+sdown, +odown, +slave ...), in
     * nkSentinelEvent's words. */
    void (*event)(const char *event, int is_master, const char *ip, int port, const char *master_ip,
                  int master_port, const char *extra);
    /* The replicas streaming from us (nkReplicaIterInit, nkReplicaIterNext). */
    void (*replicas_init)(struct nkReplicaIter *it);
    struct nkReplica *(*replicas_next)(struct nkReplicaIter *it);
} nkProbeHooks;
void nkProbeStart(const char *host, int port, const nkProbeHooks *hooks);

/* nickv_busy.c: the master's watch thread tells a busy master from a dead
 * one. The lease answers name where it listens (port 0: no thread). */
/* The <ms> of a grant of lease_ms built on a master's clock that we read
 * at read_us: lease_ms, plus 8/10 of the time since (see NIC-KV.md,
 * "Fencing"): the lease still ends within lease_ms and its drift margin
 * of now, as the grantor counts it (hooks.granted(lease_ms)). */
long long nkLeaseGrantMs(long long lease_ms, long long read_us, long long now_us);
void nkWatchTarget(const char *reach, int port, const char *token);
void nkWatchForget(void);
/* Every probe tick for the master (the leader's): connect, WATCH every
 * probe-interval, with a grant of lease_ms when may_grant: 1 if one went. */
int nkWatchTick(long long now_us, int may_grant, long long lease_ms);
/* The watch answered within max_age_us: 1, with how long the main thread
 * has been busy by now (0: it waits for events) and in what. */
int nkWatchBusy(long long now_us, long long max_age_us, long long *busy_ms, const char **what);
void nkWatchCountBusy(void);
sds nkWatchInfo(sds s);
void nkWatchResetStats(void);
/* A verdict changed in an event handler: tell the master before sleeping. */
void nkProbeAfterEvents(void);
sds nkProbeInfo(sds s);
void nkProbeResetStats(void);
/* The nodes as the probes see them, the master first (at most max). The
 * strings stay valid until the event loop runs again. */
typedef struct nkProbeView {
    const char *addr;
    const char *reach;           /* where Nic-KV connects to it */
    int port;
    int is_master, listed, valid, behind, connected;
    const char *why;             /* why it is invalid */
    long long since_ms;          /* in its state (valid or not) */
    long long invalid_ms_ago;    /* last invalid (until then), -1: never */
    long long unlisted_ms_ago;   /* no longer listed since, -1: listed (or never) */
    long long named_ms_ago;      /* last named valid to the master, -1: never */
    int refused;                 /* invalid because its port refuses: no process */
    long long answered_ms_ago;   /* -1: never answered */
    long long rtt_us;
} nkProbeView;
int nkProbeNodes(nkProbeView *v, int max);
/* nickv_resolve.c: name (or a numeric address) -> up to NK_RESOLVE_ADDRS
 * numeric addresses in ip, to try in turn; returns how many. 0 while it is
 * being looked up (by a thread of its own: ask again later), -1 if it
 * cannot be; err says why. Main thread. */
#define NK_RESOLVE_ADDRS 4
#define NK_RESOLVE_IP 64                /* an IPv6 address, with a zone */
int nkResolve(const char *name, char ip[][NK_RESOLVE_IP], char *err, size_t errlen);
sds nkResolveInfo(sds s);
void nkResolveResetStats(void);
/* ... and numeric addresses, for every layer: a numeric IPv4 or IPv6
 * address (a name would need DNS to probe); an address's bytes (4 or 16;
 * 0: not numeric); the same address, numerically (or the same name);
 * "<ip>:<port>" (or "[<ipv6>]:<port>"), numeric, a member's (node lines):
 * 1, or 0 with err. */
int nkAddrNumeric(const char *a);
int nkAddrBytes(const char *a, unsigned char *out);
int nkSameAddr(const char *a, const char *b);
int nkMemberParse(const char *word, nkNodeAddr *out, const char **err);
/* The node at ip:port (a replica's, else the master's): 0 if none. */
int nkProbeFind(const char *ip, int port, nkProbeView *v);
/* Send a command (first, then arguments up to a NULL) on the node's probe
 * connection, authenticating first: fn gets its reply (a status, error,
 * integer or bulk string; no arrays), or "connection lost". -1: no such
 * node, not connected, or too much in flight: try again later. */
typedef void (*nkProbeReplyFn)(long long tag, const char *ip, int port, const char *reply,
                               size_t len, int is_error);
int nkProbeCommand(const char *ip, int port, nkProbeReplyFn fn, long long tag,
                   const char *first, ...) __attribute__((sentinel));
/* Keep probing ip:port while it is listed by no master (a demoted one). */
void nkProbeWatch(const char *ip, int port, int on);
/* The master is now ip:port (our failover, the coordinator's record):
 * probe it, read its INFO, grant at once. */
void nkProbeRetargetMaster(const char *ip, int port);
/* The master's probe follows where the master said it replicates from
 * (master_follows); a loop the probe saw stays held. */
void nkProbeFollowMaster(const char *ip, int port);
/* The master's nickv-lease, from its INFO: 1, 0, -1 unknown. */
int nkProbeMasterLease(void);
int nkProbeMasterServes(void);
/* What the state file remembers: the master's nickv-lease (-1: not
 * known), and a replica (ip NULL: none), until the master says itself. */
void nkProbeRemember(int lease, const char *ip, int port);
/* ... and the master's process (run id) and our stream (replid, offset):
 * another process answering at start is vetted against them. */
void nkProbeRememberMaster(const char *runid, const char *replid, long long offset);
const char *nkProbeMasterRunid(void);
/* The most the master's stream is known to hold (its INFO and lease
 * answers, our own stream's end; 0 if nothing was seen since we started),
 * when that last grew, and the fastest it grew lately (bytes/s). */
long long nkProbeStreamBound(long long *at_us, long long *rate);
long long nkProbeAckBound(void);
/* A replica's process as the probes learnt it while it was listed ("" if
 * not known: it requires a password, or never answered). */
const char *nkProbeRunid(const char *ip, int port);
/* The master's cluster mode as its INFO cluster says: 1, 0, -1 unknown. */
int nkProbeMasterCluster(void);

/* nickv_cluster.c: in cluster mode the cluster's view (CLUSTER NODES,
 * read with the probes) says where the shard's master is. */
/* Cluster mode is mode (1, 0), as from says ("the master", "a replica",
 * "the state file"): the master's word overrides the others. */
void nkClusterMode(int mode, const char *from);
/* The shard runs in cluster mode: the cluster fails over, Nic-KV follows. */
int nkClusterOn(void);
/* Ask the nodes the probes watch for their views (every failover tick). */
void nkClusterTick(void);
/* A view named a successor to the master at master_ip:master_port: 1, with
 * where it is; 0: none. nkClusterFollowed once the probe goes there. */
int nkClusterSuccessor(const char *master_ip, int master_port, const char **ip, int *port);
void nkClusterFollowed(void);
/* The master says it replicates from ip:port: may the probe follow it
 * there (1), or is that no node of the shard (0: held, INFO says why)? */
int nkClusterMayFollow(const char *ip, int port);
/* The state file's cluster lines (appended to s; none outside cluster
 * mode); reading one back (argv[0] starts with "cluster"): 0, or -1 if
 * malformed; then applied (found: the file is for this master and had
 * them) once the whole file is read. */
sds nkClusterStateLines(sds s);
int nkClusterStateRead(int argc, sds *argv);
void nkClusterStateApply(int found);
/* The shard changed since this was last asked: the state file is due. */
int nkClusterDirty(void);
sds nkClusterInfo(sds s);
void nkClusterResetStats(void);
/* The master's RDMA port, as its last INFO rdma said (0: no listener). */
int nkProbeMasterRdmaPort(void);
/* Why the master refused our last lease ("" if it did not). */
const char *nkProbeLeaseError(void);
/* ... because another Nic-KV may hold its lease: never fail it over. */
int nkProbeLeaseForeign(void);
/* ... that refusal was "another Nic-KV (client id N) grants", and an INFO
 * of the master read since says its lease has run out (nickv_lease_left_ms
 * 0): whoever holds its grantor's place no longer grants. */
int nkProbeLeaseHeldByIdle(void);
/* The master's replication id as its INFO last said ("" if never read). */
const char *nkProbeMasterReplid(void);

/* nickv_failover.c: promotion when the master fails, fenced by the lease
 * the master's probe grants (the state machine is drawn at its top). It
 * owns where the master is: it starts the coordinator and the probes,
 * hears from them through their hooks, and moves the probes, the link and
 * SENTINEL's answers. nkFailoverInit is in nickv_state.c, with the state
 * file it reads. */
/* Load the state file (the master it names is followed); 0, or -1 when it
 * cannot be read (the reason is logged). */
int nkFailoverInit(void);
/* Start the coordinator (-1 if it cannot), the probes, and the failover's
 * own timer. */
int nkFailoverStart(void);
/* Where the master is, as clients are told (SENTINEL). */
void nkFailoverMaster(const char **ip, int *port);
/* A planned handover to ip:port (NULL: the best replica), why says who
 * asked ("FAILOVER", "failback"): 0, or -1 with err saying why not. */
int nkFailoverPlanned(const char *ip, int port, const char *why, char *err, size_t errlen);
sds nkFailoverInfo(sds s);
/* Why an invalid master is not replaced, or why the last attempt was
 * called off (in the last NK_BLOCKED_AFTER_ABORT_MS); "" when nothing
 * stops it (INFO sentinel's status). */
const char *nkFailoverBlocked(void);
/* Is reach:port a replica our last promotion repointed, and valid then,
 * less than NICKV_JOINING_MS ago? (health: joining) */
int nkFailoverJoining(const char *reach, int port);
/* What the failover, and the probes through it, tell the layers above
 * (main wires nickv_sentinel.c and nickv_replica.c in, before
 * nkFailoverInit): Sentinel's events and +switch-master, to SENTINEL's
 * subscribers; and the replicas streaming from us, which the probes
 * watch. */
typedef struct nkFailoverSinks {
    void (*event)(const char *event, int is_master, const char *ip, int port, const char *master_ip,
                  int master_port, const char *extra);
    void (*switch_master)(const char *old_ip, int old_port, const char *new_ip, int new_port);
    void (*replicas_init)(struct nkReplicaIter *it);
    struct nkReplica *(*replicas_next)(struct nkReplicaIter *it);
} nkFailoverSinks;
void nkFailoverOnEvents(const nkFailoverSinks *sinks);
void nkFailoverResetStats(void);
/* Nic-KV exits: a fence-command still running is killed, with its group. */
void nkFailoverShutdown(void);

/* nickv_coord.c: a Nic-KV on every server, one leader, through etcd (the
 * roles and the chain of deadlines are at its top). Without a coordinator
 * every answer is the only Nic-KV's: it leads, grants, fans out. */
#define NK_COORD_ADDR 64
/* What the coordinator tells the layers above it (the failover sets them). */
typedef struct nkCoordHooks {
    /* The leader's record moved the master (a standby follows it). */
    void (*follow)(const char *ip, int port, long long epoch);
    /* A lease of ms may have been granted now (a previous leader's). */
    void (*granted)(long long ms);
    /* No lease we granted outlives this (monotonic us); the longest ever
     * granted (ms). */
    long long (*lease_bound_us)(void);
    long long (*lease_max_ms)(void);
    /* The master's nickv-lease as its INFO says (1, 0, -1: unknown). */
    int (*master_lease)(void);
    /* Close the master's probe connection (it may hold the grantor's place). */
    void (*drop_master_conn)(void);
    /* Who fans out may have changed: the link opens or closes. */
    void (*fanout_changed)(void);
    /* etcd answered with news (leadership won or lost, a record written):
     * decide now (nkCoordTick reads them). */
    void (*changed)(void);
} nkCoordHooks;
int nkCoordInit(const nkCoordHooks *hooks);
void nkCoordShutdown(void);
int nkCoordOn(void);
int nkCoordLeader(void);
int nkCoordMayGrant(long long ms);
int nkCoordLocal(const char *ip, int port);
int nkCoordFanout(const char *ip, int port);
int nkCoordMayName(const char *ip, int port);
int nkCoordNamed(const char *ip, int port);
/* A node a Nic-KV of the deployment registered in etcd (with etcd's
 * authentication): a member (nickv_member.c). */
int nkCoordMember(const char *ip, int port);
int nkCoordRecordNamed(char ip[][NK_COORD_ADDR], int *ports, int max);
void nkCoordPublish(long long epoch, const char *ip, int port);
int nkCoordPublished(long long epoch);
void nkCoordTick(const char *master_ip, int master_port, int master_valid, int watching, long long epoch,
                 long long lease_bound_us);
sds nkCoordInfo(sds s);
/* nickv_probe.c: close the master's probe connection (it may hold the
 * master's grantor place: another leader's turn). */
void nkProbeDropMasterConn(void);
/* nickv_upstream.c: open or close the link as nkCoordFanout says. */
void nkLinkFanoutCheck(void);
int nkLinkStreamedLately(void);
/* nickv_coord.c: may lease-time ms be granted under leader-ttl? err says why not. */
int nkCoordCheckLeaseTime(long long ms, char *err, size_t errlen);

/* nickv_tls.c: TLS contexts from the tls-* options (see its top). */
int nkTlsInit(char *err, size_t errlen);
/* Connections to nodes are TLS (tls-replication yes). */
int nkTlsOutgoing(void);
/* A new session (an SSL *) for an accepted (server 1) or a made
 * connection; NULL when that side has no context. */
void *nkTlsSession(int server);
/* OpenSSL's reason for the last failure on this thread, or fallback. */
const char *nkTlsError(const char *fallback);
/* The port replicas reach us on: port, or tls-port when port is 0. */
int nkListeningPort(void);

/* nickv_member.c: the members, the nodes Nic-KV trusts with its
 * credentials, names valid, promotes and repoints (see its top). */
int nkMember(const char *ip, int port);
/* failover and min-slaves need members: 1, or 0 with err. */
int nkMembersCheck(const char **err);

/* nickv_sentinel.c: SENTINEL, the part of its API clients use to find the
 * master (master-name). */
void nkSentinelCommand(nkClient *c, int argc, sds *argv);
/* INFO's "# Sentinel" section, as redis-sentinel's (its master0 line). */
sds nkSentinelInfo(sds s);
/* SUBSCRIBE, PSUBSCRIBE, UNSUBSCRIBE, PUNSUBSCRIBE; a client's
 * subscriptions, freed with it; +switch-master to the subscribers. */
void nkPubsubCommand(nkClient *c, int argc, sds *argv);
int nkPubsubSubscribed(nkClient *c);
void nkPubsubClientFree(nkClient *c);
void nkSentinelSwitchMaster(const char *old_ip, int old_port, const char *new_ip, int new_port);
/* Sentinel's instance events (+sdown, -sdown, +odown, -odown, +slave,
 * +try-failover, +failover-end) in its format; extra may be NULL. */
void nkSentinelEvent(const char *event, int is_master, const char *ip, int port, const char *master_ip,
                     int master_port, const char *extra);

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

/* nickv_backlog.c: the ring, which it owns; fan-out threads read it in
 * place between nkBacklogReadBegin() and nkBacklogReadEnd() (its read lock:
 * what it returns stays put until then). */
int nkBacklogInit(long long size);
void nkBacklogReset(long long next_offset);
size_t nkBacklogAppend(const char *data, size_t len);
int nkBacklogResize(long long size);
void nkBacklogRange(long long *first, long long *last);
const nkRing *nkBacklogReadBegin(void);
void nkBacklogReadEnd(void);
/* The last offset held, without the lock. */
long long nkBacklogLastPub(void);
/* The last append was cut short by a pin (the link waits for one to move). */
int nkBacklogPinnedOut(void);
/* The ring an RDMA replica's channel registers, and its size [main]. */
char *nkBacklogBuf(long long *size);
long long nkBacklogSize(void);
/* ... and the bytes mapped for rings, old ones pins hold included [main]. */
long long nkBacklogMapped(void);
void nkBacklogPinAdd(nkBacklogPin *p);
/* Forget a pin (its owner is freed); frees the old rings no pin holds. */
void nkBacklogPinRemove(nkBacklogPin *p);
/* Who drops a pin's owner (main wires the replicas in). */
void nkBacklogSetDropper(nkPinDropFn fn);
/* Drop the owners of the pins that keep the backlog from taking the next
 * byte; returns how many. */
int nkBacklogDropPinners(const char *why);
sds nkBacklogInfo(sds s);
/* repl_backlog_* fields of INFO's "Replication" section. */
sds nkBacklogReplicationInfo(sds s);

/* nickv_fanout.c: the fan-out threads. */
int nkFanoutStart(aeEventLoop *main_el, int thread_num);
void nkFanoutStop(void);
int nkFanoutThreads(void);
/* Give a new replica (its connection detached) to the least loaded thread:
 * sets r->thread; the hand-over happens in nkFanoutFlushHandovers. */
void nkFanoutAdd(nkReplica *r);
/* Hand-overs queued by nkFanoutAdd go to their threads (main, before
 * sleeping: nothing in the main thread's stack refers to them then). */
void nkFanoutFlushHandovers(void);
void nkFanoutWake(void);
/* The threads' events for the main thread (an ACK to relay, a replica
 * gone): fn runs on the main pipe's wakeups; it calls nkFanoutEventsTaken
 * first. */
void nkFanoutOnEvents(void (*fn)(void));
void nkFanoutEventsTaken(void);
/* How a fan-out thread marks its replica GONE (main wires in the lifecycle's
 * checked setter, nkReplicaSetState); the thread then wakes the main thread. */
void nkFanoutOnState(void (*fn)(nkReplica *r, nkReplicaState to));
long long nkMstime(void);

/* nickv_replica.c: a replica's lifecycle (see the diagram at its top), the
 * replicas' list, which it owns, and their stats. */
void nkReplicaInit(void);
void nkReplicaSetState(nkReplica *r, nkReplicaState to);
nkReplica *nkReplicaStart(nkConn *conn, const char *ip, int port, long long pos);
void nkReplicasDropAll(const char *why);
int nkReplicaDrop(void *replica, const char *why, int log);
void nkReplicasMainEvents(void);
void nkReplicasAnnounce(void);
unsigned long nkReplicaCount(void);
long long nkReplicaAcked(const char *ip, int port);
typedef struct nkReplicaIter { listIter li; } nkReplicaIter;
void nkReplicaIterInit(nkReplicaIter *it);
nkReplica *nkReplicaIterNext(nkReplicaIter *it);
sds nkReplicasInfo(sds s);
/* connected_slaves and slaveN lines of INFO's "Replication" section. */
sds nkReplicasReplicationInfo(sds s);
sds nkReplicaStatsInfo(sds s);
void nkReplicaResetStats(void);
struct nkClient;
void nkPsyncCommand(struct nkClient *c, int argc, sds *argv);
/* Answer the PSYNCs waiting for the stream that can be answered now (the
 * stream reached them, the link went down, or they waited too long). */
void nkPsyncWaitersCheck(void);
/* A client's queue is sent and it is HANDOVER: it is freed, its connection
 * streams as a replica. */
void nkClientHandOver(struct nkClient *c);
/* A client is freed, in whatever state. */
void nkClientLeaving(struct nkClient *c);

/* nickv_resp.c: RESP requests (multibulk or inline), for clients and replicas.
 * 1 = a command in argc/argv (free with nkFreeArgv), 0 = need more input,
 * -1 = protocol error (*err says which). */
int nkParseCommand(sds *buf, int *argc, sds **argv, const char **err);
void nkFreeArgv(int argc, sds *argv);

#endif
