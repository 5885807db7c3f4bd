/* nickv_failover_int.h -- private to the failover's files: nickv_failover.c
 * (the state machine, the lease, planned handovers, INFO), nickv_state.c
 * (the state file) and nickv_repoint.c (repointing the other nodes).
 *
 * Copyright (c) 2026, the SKV authors. BSD 3-Clause licence (see LICENSE).
 *
 * These were one file, nickv_failover.c, around one static struct, F: the
 * failover's state. F is defined in nickv_failover.c and declared here with
 * its types; the functions listed below are those one of the three files
 * calls in another (each is static otherwise). Nothing else includes this
 * header: the rest of the daemon sees the nkFailover* calls in
 * nickv_failover.h.
 */
#ifndef NICKV_FAILOVER_INT_H
#define NICKV_FAILOVER_INT_H

#include "nickv.h"     /* first: upstream's feature macros (fmacros.h) */

#include "monotonic.h"

#define NK_LEASE_DRIFT_PPM 100000         /* clocks' rates differ by less (10 %:
                                           * chrony slews by up to 8.3 %) */
#define NK_LEASE_MARGIN_US 10000          /* ms clock reads, a scheduling delay */
#define NK_FAILOVER_COOLDOWN_MS 60000     /* a demoted node is no candidate */
#define NK_FO_CANDIDATES 64               /* considered at most */
#define NK_FO_REPOINT 64                  /* nodes to repoint, at most */
#define NK_REPOINT_HOLD_MS 500            /* repointing waits for the new master's lease */
/* A failover called off shows as blocked (INFO sentinel) this long. */
#define NK_BLOCKED_AFTER_ABORT_MS 5000
#define NK_ADDR_LEN 256

typedef enum {
    FO_WATCHING = 0, FO_FENCING, FO_QUERYING, FO_FENCE_CMD, FO_PROMOTING, FO_STATES
} foState;

typedef struct foNode {
    char ip[NK_ADDR_LEN];       /* as the probes name it */
    char reach[NK_ADDR_LEN];    /* where it is reached */
    int port;
} foNode;

typedef struct foCandidate {
    foNode node;
    int answered;               /* its INFO came (or we stopped waiting for it) */
    int usable;                 /* ... it holds our history: offset is known */
    int eligible;               /* ... and it may be promoted (see queryReply) */
    int witness;                /* not a candidate (invalid), but named: */
    int named;                  /* named valid to the master lately: it may hold
                                 * acknowledged writes, so it is heard from (or its
                                 * process is gone) before a promotion */
    int unstable;               /* invalid within 2 x waiting-time: ranks later */
    int demoted;                /* we demoted it recently: ranks later */
    int rdma;                   /* it replicates over RDMA (rdma-replication yes) */
    int rdma_port;              /* its RDMA listener's port (0: none), for the
                                 * RDMA replicas that follow it if promoted */
    long long offset;
    int priority;
    char runid[NK_RUNID_SIZE + 1];  /* its process (INFO server), "" if not known */
    int vetted;                 /* runid is the one the probes learnt there while the
                                 * master lived (not merely: none was learnt) */
    int unchecked;              /* eligible but for its offset, past the stream bound
                                 * and plausible: promoted only if corroborated */
    int corroborated;           /* ... and another replica confirmed it: ranks after
                                 * one as far that needed no confirmation */
    int beyond;                 /* distrusted for an offset past what is plausible:
                                 * it may still hold acknowledged writes up to
                                 * nkProbeAckBound (foChoose) */
    char why[256];              /* why it cannot */
} foCandidate;

typedef struct foRepoint {
    foNode node;
    int old_master;             /* demoted by us: its clients are killed too */
    int pending;                /* commands in flight */
    int rdma;                   /* rdma-replication (its INFO rdma): -1 not known
                                 * yet; 1: REPLICAOF names the RDMA port */
    int is_master;              /* its INFO server says it is the master's process,
                                 * at another address: not repointed */
    int cluster;                /* its INFO says it is a cluster node: not repointed */
    long long retry_after_us;   /* after an error, not before then */
    char last_err[128];         /* ... which is logged once */
    long long since_ms;         /* on the list since */
} foRepoint;

struct foFailover {
    foState state;
    long long epoch;
    foNode master;              /* the master as we last recorded it */
    int have_master;
    char configured[NK_ADDR_LEN];   /* master-host when the state was written */
    int configured_port;
    long long lease_bound_us;   /* no lease we granted outlives this */
    long long lease_max_ms;     /* the largest lease-time ever granted */
    long long tag;              /* the current attempt: replies carry it */
    long long started_us;       /* the attempt began */
    long long promoted_us;      /* the winner became the master (0: not by us, in this run) */
    long long step_us;          /* the current state began */
    foNode old;                 /* the master being replaced */
    foCandidate cand[NK_FO_CANDIDATES];
    int ncand;
    foNode winner;
    char winner_runid[NK_RUNID_SIZE + 1];
    char master_runid[NK_RUNID_SIZE + 1];   /* the master's process when we promoted
                                             * it ("": ask the probes) */
    int winner_rdma_port;
    int master_rdma_port;       /* the master's RDMA port, as its INFO said when
                                 * we promoted it (0: none, or not known) */
    long long winner_offset;
    int winner_priority;
    int winner_corroborated;    /* its claim needed another replica's (confirm-claims) */
    pid_t fence_pid;            /* the fence-command running, 0: none */
    /* A planned handover (nkFailoverPlanned: an admin FAILOVER, failback):
     * the master is healthy; its lease runs out, the target catches up
     * with it, and is promoted. */
    int planned;
    char planned_why[64];       /* "FAILOVER", "failback" */
    long long master_offset;    /* the old master's, -1: not read yet */
    int master_answered;
    long long failback_after_us; /* no failback attempt before then */
    long long query_us;         /* the candidates' INFO was last asked for */
    /* What the state file remembers of the master's replicas and its
     * nickv-lease, for a Nic-KV that starts while the master is dead:
     * read at start, handed to the probes at the first tick. */
    struct { char ip[NK_ADDR_LEN]; int port; } known[NK_FO_CANDIDATES];
    int nknown, known_lease, known_applied;
    char known_runid[NK_RUNID_SIZE + 1];    /* the master's process */
    char known_replid[NK_RUNID_SIZE + 1];   /* our stream's history ... */
    long long known_offset;                 /* ... and how far it went */
    unsigned long long known_sig; /* of what was last saved */
    long long known_saved_us;
    long long retry_after_us;   /* a failed fence-command: not before then */
    int promote_reply;          /* 0: none yet, 1: +OK, -1: an error */
    int promote_sent;           /* REPLICAOF NO ONE went (with a coordinator,
                                 * once the record names the winner) */
    int refusing;               /* the attempt replaces a master that answers but
                                 * refuses our lease (a previous leader holds it) */
    long long foreign_since_us; /* ... since then (0: it takes our lease) */
    char promote_err[128];
    foRepoint repoint[NK_FO_REPOINT];
    int nrepoint;
    struct { char ip[NK_ADDR_LEN]; int port; long long until_ms; } cooldown[NK_FO_REPOINT];
    int ncooldown;
    long long aborted_us;       /* an unplanned attempt was last called off then */
    /* Replicas repointed to the master we promoted, valid when we did:
     * named joining to it until then (healthSend, NICKV_JOINING_MS). */
    struct { char ip[NK_ADDR_LEN]; int port; long long until_ms; } joining[NK_FO_REPOINT];
    int njoining;
    char blocked[400];          /* why the master is not replaced now */
    char failback[300];         /* where failback stands (failbackTick) */
    char excluded[300];         /* the replicas that are no candidates, and why */
    char state_err[200];        /* why the state file could not be written */
    long long failovers, aborted, last_ms, planned_done;
    long long distrusted;       /* candidates whose word could not be true */
    long long corroborated;     /* promotions of a claim past the stream bound that
                                 * another replica confirmed */
    char last_why[512];         /* why the last attempt ended */
};
extern struct foFailover F;

static inline long long foNowUs(void) { return (long long)getMonotonicUs(); }
static inline long long foNowMs(void) { return foNowUs() / 1000; }

/* nickv_state.c: write the state file (nk.cfg.state_file) now. 0, or -1
 * (F.state_err says why, and it is logged). For the lease (the largest
 * lease-time granted), a promotion, and the nodes to repoint. */
int stateSave(void);

/* nickv_failover.c: the one writer of F.master (see foMasterSet there). */
#define FO_MS_QUIET 0       /* set only: the state file is written after (start) */
#define FO_MS_SAVE 1        /* ... and the state file written */
#define FO_MS_ANNOUNCE 2    /* ... then +switch-master, if it moved */
int foMasterSet(const foNode *n, const char *runid, int rdma_port, long long epoch, int how);

/* nickv_failover.c: Sentinel's events and +switch-master, to the sinks
 * main gave (nkFailoverOnEvents): SENTINEL's subscribers. */
void foEvent(const char *event, int is_master, const char *ip, int port, const char *master_ip, int master_port,
             const char *extra);
void foSwitchMaster(const char *old_ip, int old_port, const char *new_ip, int new_port);

/* nickv_repoint.c: the nodes that are made replicas of the master after a
 * promotion (F.repoint[]). Add one (read from the state file, or named by
 * the failover), take one off, and send them what they still need (every
 * tick, from the failover's tick). */
void repointAdd(const char *ip, int port, int old_master);
void repointRemove(const char *ip, int port);
void repointTick(void);
/* ... and members that follow no master or another node (strays): on the
 * list too (the leader's, every tick). */
void strayTick(int leading);
/* ... a fire-and-forget command's reply: errors are logged (the failover
 * sends the winner CONFIG REWRITE with it too). */
void logReply(long long tag, const char *ip, int port, const char *reply, size_t len,
              int is_error);
/* ... is runid the master's process? (after a promotion the failover fills
 * in, from the candidates' INFO, what repointTick would otherwise ask) */
int isMasterProcess(const char *runid);

#endif
