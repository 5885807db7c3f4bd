/* nickv.h -- Nic-KV: the types its parts share, the configuration, the log.
 *
 * Copyright (c) 2026, the SKV authors. BSD 3-Clause licence (see LICENSE).
 *
 * Every file of the daemon includes this first: the limits, the types more
 * than one part uses (a connection, a replica and its pin on the backlog),
 * the server nk with its configuration nk.cfg (read anywhere, written only
 * through nickv_config.c's table), and the log. Each part declares its
 * calls in a header of its own, and a file includes the headers of only
 * those parts nic-kv/LAYERS lets it call. The parts, by layer:
 *
 * log      nickv_log.c      nkLog, nkLogRepeat, the clocks (declared here)
 *          nickv_resp.h     RESP: argv commands, requests, replies, the
 *                           replica handshake, the RDB reader
 *          nickv_info.h     the INFO replies of probed nodes, read strictly
 * conn     nickv_conn.h     connections: TCP sockets (TLS among them) and
 *                           RDMA channels alike
 *          nickv_tls.h      TLS: the OpenSSL contexts from the tls-* options
 *          nickv_resolve.h  addresses: names resolved off the loop, numeric
 *                           ones compared and parsed
 * backlog  nickv_backlog.h  the backlog: the ring, its lock, the RDMA pins
 * fanout   nickv_fanout.h   the fan-out threads (sending, ACKs, RDMA
 *                           registration)
 * link     nickv_upstream.h the link to the master
 * server   nickv_etcd.h     etcd's client, for the coordinator's thread
 *          nickv_coord.h    the coordinator: one leader, through etcd
 *          nickv_member.h   members: the nodes Nic-KV trusts with its
 *                           credentials
 *          nickv_busy.h     the master's watch: a busy master or a dead one
 *          nickv_probe.h    failure detection: probes of the master and
 *                           replicas, what the master learns of them
 *                           (min-slaves)
 *          nickv_cluster.h  cluster mode: the cluster's view
 *          nickv_failover.h the failover: nickv_failover.c, nickv_state.c
 *                           (the state file), nickv_repoint.c (repointing);
 *                           their shared state is nickv_failover_int.h
 *          and at the top, main's group:
 *          nickv_client.h   nickv.c: main, clients (reading requests,
 *                           accepting), the RDMA listener
 *          nickv_int.h      nickv.c, nickv_cmd.c (commands: who may run
 *                           what, AUTH, INFO, ROLE, admin) and
 *                           nickv_config.c (options: the table, the config
 *                           file, CONFIG GET/SET): what they share
 *          nickv_replica.h  a replica's lifecycle: PSYNC, waiters,
 *                           hand-over, the replicas' list and their
 *                           main-thread side
 *          nickv_fullsync.h proxied full syncs (a client's RDB through us)
 *          nickv_sentinel.h SENTINEL: clients find the master through Nic-KV
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

/* ----------------------------------------------------- Shared types --- */

/* A connection, and the event loop it is attached to: nickv_conn.h. */
typedef struct nkLoop nkLoop;
typedef struct nkConn nkConn;

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

/* --------------------------------------------------------- Replicas --- */

/* An RDMA replica's hold on the ring: its NIC may still read offsets from
 * off on, or nothing (NK_NO_PIN). off is set to a posted offset only under
 * the backlog's read lock, before the post, and raised (to NK_NO_PIN or a
 * later offset) without it once the writes complete: raising only frees
 * room. The upstream link never overwrites a pinned byte
 * (nkBacklogAppend). Registered with nkBacklogPinAdd by the main thread.
 * Memory ordering: nickv_fanout.c, at the top. */
#define NK_NO_PIN LLONG_MAX
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

/* The replicas streaming from us, in turn (nickv_replica.c:
 * nkReplicaIterInit, nkReplicaIterNext). */
typedef struct nkReplicaIter { listIter li; } nkReplicaIter;

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

/* -------------------------------------------------------------- Log --- */

/* A broken invariant of our own (never something a peer sent): abort in a
 * debug build (-DNK_DEBUG: make nic-kv-debug), else log "BUG: ..." and go on;
 * the tests fail on any such line in a Nic-KV log. */
#ifdef NK_DEBUG
#define nkBug(...) do { nkLog(LL_WARNING, "BUG: " __VA_ARGS__); abort(); } while (0)
#else
#define nkBug(...) nkLog(LL_WARNING, "BUG: " __VA_ARGS__)
#endif

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
long long nkMstime(void);

#endif
