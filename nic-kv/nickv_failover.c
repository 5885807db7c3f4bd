/* nickv_failover.c -- Nic-KV promotes a replica when the master fails.
 *
 * Copyright (c) 2026, the SKV authors. BSD 3-Clause licence (see LICENSE).
 *
 * ========================================================================
 * The failover state machine
 * ========================================================================
 *
 *   WATCHING --the master is invalid (nickv_probe.c), failover yes, its
 *              INFO said nickv-lease yes, a candidate exists (foStart)--> FENCING
 *   WATCHING --an admin FAILOVER, or failback (nkFailoverPlanned): no
 *              more grants; the master is healthy--> FENCING
 *   FENCING  --the master answers again, unless planned (foAbort)--> WATCHING
 *   FENCING  --no lease we granted can still run (foQuery): INFO
 *              replication of every candidate--> QUERYING
 *   QUERYING --the master answers again (foAbort)--> WATCHING
 *   QUERYING --every candidate answered or is invalid (foChoose): the
 *              best one, and with a fence-command (fenceStart)--> FENCE_CMD
 *   QUERYING --... without one (foPromote): the state file names it;
 *              REPLICAOF NO ONE--> PROMOTING
 *   QUERYING --no candidate can be promoted (foAbort)--> WATCHING
 *   QUERYING --planned: the target has every byte of the master's
 *              (plannedTick, foChoose)--> PROMOTING; not in 5 s--> WATCHING
 *   FENCE_CMD --it exited 0 (fenceCheck, foPromote)--> PROMOTING
 *   FENCE_CMD --it failed, or ran NK_FENCE_TIMEOUT_MS (foAbort: tried
 *              again NK_FENCE_RETRY_MS later)--> WATCHING
 *   PROMOTING --+OK (foPromoted): the probes and the link go to it, the
 *              other replicas and the old master are repointed--> WATCHING
 *   PROMOTING --an error, or no answer in 2 x waiting-time (promoteUndo:
 *              the state file names the old master again, under a new
 *              epoch; foAbort)--> WATCHING
 *
 * (foSetState makes the moves and checks them against this diagram; each
 * state has its tick, tickWatching ... tickPromoting, run by foTick on the
 * failover's own timer, when the probes report a change, when the
 * coordinator's thread brings news from etcd, and when the lease's bound
 * passes.)
 *
 * One owner of where the master is. F.master is it, for the whole daemon,
 * and foMasterSet is its one writer (fields and epoch, state file, then
 * +switch-master: recorded before anyone is told). The failover starts
 * the coordinator and the probes (nkFailoverStart) and hears from them
 * through hooks; it alone moves the probes
 * (nkProbeRetargetMaster, nkProbeFollowMaster), the link (nkLinkFollow,
 * from foMasterServes) and what SENTINEL answers (nkFailoverMaster). What
 * it hears:
 *   - the probes: the master they read says it replicates from another
 *     node (master_follows: the probe goes there; nothing else moves), or
 *     the node they read answers as a master, holding our lease if it
 *     needs one (master_serves: the link follows; F.master too when we
 *     lead and no failover is under way);
 *   - the coordinator: the leader's record names another master (follow:
 *     a standby takes it from there, never from its own probes);
 *   - its own promotions (foPromote, foPromoted).
 * The probes' master and F.master differ while the probes follow a chain
 * of REPLICAOF ahead of F.master (on a standby, until the record names
 * the chain's end), and from foPromote until foPromoted (F.master is the
 * winner, the probes still read the old master). SENTINEL names
 * nkFailoverMaster's node, flagged down unless the probes read it.
 *
 * Fencing. The master's probe grants the master a lease with every probe
 * (src/nickv_lease.c says how a grant is anchored on the master's clock).
 * From FENCING on no grant is sent; leaseGranted() has kept the time
 * by which every lease granted has run out on our clock, lease-time after
 * the last grant, plus NK_LEASE_DRIFT_PPM of it and NK_LEASE_MARGIN_US.
 * A master with nickv-lease yes serves no data command without a lease, so
 * from then on the old master takes no write even if it is only stopped and
 * resumes later: a replica promoted after that moment is the only master
 * that takes writes. A Nic-KV that (re)starts assumes a lease granted by
 * its previous run may still hold: it promotes nobody for a lease-time
 * (the largest the state file recorded) after its start.
 *
 * The candidate. A listed valid replica whose INFO says it replicates our
 * master's history (its replication id is our stream's), with a
 * replica-priority above 0 and nickv-lease on. The highest offset wins:
 * with min-slaves >= 1 a write WAIT acknowledged is on a replica we named
 * valid to the master lately, and the one with the highest offset has
 * every byte any replica has (they share one history). So every replica
 * named in the last NICKV_HEALTH_TIMEOUT_MS + 2 x lease-time + 1 s is
 * heard from before a promotion, valid now or not, unless its port
 * refuses (its process, and the write, are gone): one that is only
 * unreachable blocks the failover; and if one that cannot be promoted
 * holds more than every candidate, the failover is called off. Ties go to
 * one not invalid lately, then one we did not demote within
 * NK_FAILOVER_COOLDOWN_MS (no ping-pong), then replica-priority, then the
 * address.
 *
 * After the promotion every other replica, and the old master once it
 * answers, are made replicas of the new master: nickv_repoint.c.
 *
 * The state file (state-file) keeps the failover across restarts, and
 * stops Nic-KV at start when it cannot be trusted: nickv_state.c.
 */

#include "nickv_failover_int.h"
#include "nickv_info.h"
#include "nickv_resolve.h"
#include "nickv_backlog.h"
#include "nickv_upstream.h"
#include "nickv_coord.h"
#include "nickv_member.h"
#include "nickv_probe.h"
#include "nickv_cluster.h"
#include "nickv_failover.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <signal.h>
#include <sys/wait.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "monotonic.h"
#include "sha256.h"
#include "skv_version.h"
#include "util.h"
#include "zmalloc.h"

#define NK_FENCE_TIMEOUT_MS 5000          /* a fence-command must finish by then */
#define NK_FENCE_RETRY_MS 1000            /* ... and after a failure, a pause */
#define NK_PLANNED_CATCHUP_MS 5000        /* a planned handover's target, to catch up */
#define NK_PLANNED_REQUERY_MS 50          /* ... asked again at most this often */
#define NK_FAILBACK_STABLE_MS 5000        /* the original master valid this long first */
#define NK_FAILBACK_RETRY_MS 10000        /* failback attempts, at most this often */
#define NK_STREAM_SLACK (1024 * 1024)     /* a candidate may be this far past the
                                           * stream we know of, and more (queryReply) */

static const char *foStateNames[] = {"watching", "fencing", "querying", "fence-command", "promoting"};
static const unsigned foMoves[] = {
    [FO_WATCHING]  = 1u << FO_FENCING,
    [FO_FENCING]   = 1u << FO_WATCHING | 1u << FO_QUERYING,
    [FO_QUERYING]  = 1u << FO_WATCHING | 1u << FO_PROMOTING | 1u << FO_FENCE_CMD,
    [FO_FENCE_CMD] = 1u << FO_WATCHING | 1u << FO_PROMOTING,
    [FO_PROMOTING] = 1u << FO_WATCHING,
};

/* The failover's state (nickv_failover_int.h): here, and in nickv_state.c
 * and nickv_repoint.c. */
struct foFailover F;

static int foSameNode(const foNode *a, const foNode *b) {
    return a->port == b->port && !strcmp(a->reach, b->reach);
}

/* What must hold of F in each state, in the manner of SQLite's
 * assert_pager_state(): checked at every move (foSetState) and after every
 * change of the master (foMasterSet), in the debug build only (NK_DEBUG:
 * make nic-kv-debug; nkBug aborts there). Our own state, never a peer's.
 *   every state: the master is known (nkFailoverInit sets it before any
 *       tick) at a valid port, the epoch is not negative; a fence-command
 *       runs only in FENCE_CMD (fenceReap before any move out of it);
 *   FENCING .. PROMOTING: an attempt is under way: its tag is set and the
 *       master being replaced (F.old) is known;
 *   FENCE_CMD, PROMOTING: a winner is chosen, and it is not the old master;
 *   PROMOTING: F.master is the winner (foPromote), or the old master again
 *       once promoteUndo put it back, on its way to WATCHING; a reply to
 *       REPLICAOF NO ONE only once it went.
 * (Not checked: that F.master is F.old while FENCING or QUERYING. F.old is
 * the probes' master, which may run ahead of F.master along a REPLICAOF
 * chain.) */
#ifdef NK_DEBUG
static int foNodeValid(const foNode *n) {
    return n->reach[0] && n->port > 0 && n->port < 65536;
}

static void foCheckState(void) {
    const char *st = F.state < FO_STATES ? foStateNames[F.state] : "?";
    if (F.state >= FO_STATES) nkBug("failover: state %d out of range", (int)F.state);
    if (!F.have_master || !foNodeValid(&F.master))
        nkBug("failover (%s): no valid master recorded (%s:%d)", st, F.master.reach, F.master.port);
    if (F.epoch < 0) nkBug("failover (%s): epoch %lld", st, F.epoch);
    if (F.fence_pid && F.state != FO_FENCE_CMD)
        nkBug("failover (%s): fence-command process %d left running", st, (int)F.fence_pid);
    if (F.state == FO_WATCHING) return;
    if (F.tag <= 0 || !foNodeValid(&F.old))
        nkBug("failover (%s): attempt %lld, old master %s:%d", st, F.tag, F.old.reach, F.old.port);
    if (F.state < FO_FENCE_CMD) return;
    if (!foNodeValid(&F.winner) || foSameNode(&F.winner, &F.old))
        nkBug("failover (%s): the winner %s:%d, the old master %s:%d", st, F.winner.reach, F.winner.port,
              F.old.reach, F.old.port);
    if (F.state != FO_PROMOTING) return;
    if (!foSameNode(&F.master, &F.winner) && !foSameNode(&F.master, &F.old))
        nkBug("failover (%s): the master %s:%d is neither the winner %s:%d nor the old master %s:%d", st,
              F.master.reach, F.master.port, F.winner.reach, F.winner.port, F.old.reach, F.old.port);
    if (F.promote_reply < -1 || F.promote_reply > 1 || (!F.promote_sent && F.promote_reply))
        nkBug("failover (%s): reply %d, REPLICAOF NO ONE sent %d", st, F.promote_reply, F.promote_sent);
}
#else
#define foCheckState() ((void)0)
#endif

static void foSetState(foState to) {
    if (!(foMoves[F.state] & (1u << to)))
        nkBug("failover: no move from %s to %s", foStateNames[F.state], foStateNames[to]);
    nkLog(LL_VERBOSE, "Failover: %s -> %s", foStateNames[F.state], foStateNames[to]);
    F.state = to;
    F.step_us = foNowUs();
    foCheckState();
}

/* --------------------------------------------------------- The master --- */

/* The one writer of F.master (and of what goes with it: have_master, the
 * master's process and RDMA port, the epoch). In one order, every time:
 *   1. the fields, and the epoch (which only grows: the larger of F.epoch
 *      and epoch);
 *   2. with FO_MS_SAVE, the state file: recorded before anyone is told;
 *   3. with FO_MS_ANNOUNCE, +switch-master to SENTINEL's subscribers, when
 *      the master moved and one was known before.
 * runid (NULL: not known, the probes ask) and rdma_port replace what was
 * known of the master's process when the master moves or runid is given.
 * A promotion is announced later, by foPromoted, once the winner serves;
 * its rollback (promoteUndo) announces nothing: nothing was announced.
 * Returns stateSave's answer (0 when not saved). */
int foMasterSet(const foNode *n, const char *runid, int rdma_port, long long epoch, int how) {
    foNode was = F.master, to = *n;     /* n may be a part of F */
    int had = F.have_master, moved = !had || !foSameNode(&was, &to);
    int r = 0;
    F.master = to;
    F.have_master = 1;
    if (moved || runid) {
        snprintf(F.master_runid, sizeof(F.master_runid), "%s", runid ? runid : "");
        F.master_rdma_port = rdma_port;
    }
    if (epoch > F.epoch) F.epoch = epoch;
    if (how & FO_MS_SAVE) r = stateSave();
    if ((how & FO_MS_ANNOUNCE) && had && moved) foSwitchMaster(was.reach, was.port, to.reach, to.port);
    foCheckState();
    return r;
}

/* A node named by one address (the probes', the record's): ip is reach. */
static foNode foNodeAt(const char *ip, int port) {
    foNode n;
    snprintf(n.ip, sizeof(n.ip), "%s", ip);
    snprintf(n.reach, sizeof(n.reach), "%s", ip);
    n.port = port;
    return n;
}

/* The probes' news: ip:port answers as the master (the link follows it;
 * F.master moves when we lead and no failover is under way). */
static void foMasterServes(const char *ip, int port, int rdma_port) {
    foNode n = foNodeAt(ip, port);
    nkLinkFollow(ip, port, rdma_port);
    if (F.have_master && foSameNode(&F.master, &n)) return;
    /* With a coordinator a standby takes the master from the leader's
     * record (foFollow), not from its own probes: one owner. */
    if (nkCoordOn() && !nkCoordLeader()) return;
    /* Our own failover owns the master meanwhile: from foPromote on,
     * F.master is the winner, while the probes still read the old master
     * (a planned handover's answers "role:master") until foPromoted moves
     * them. Taken as a change, that INFO made the old master the master
     * again, and dropped it from the nodes to repoint. */
    if (F.state != FO_WATCHING) return;
    nkLog(LL_NOTICE, "Failover: the master is now %s:%d (epoch %lld)", ip, port, F.epoch + 1);
    /* The probes read its process and RDMA port from its INFO. */
    foMasterSet(&n, NULL, 0, F.epoch + 1, FO_MS_SAVE | FO_MS_ANNOUNCE);
}

/* Another Nic-KV (the leader, through the coordinator's record) moved the
 * master: follow it, as the probes do when they see a master move. */
static void foFollow(const char *ip, int port, long long epoch) {
    foNode n = foNodeAt(ip, port);
    if (F.state != FO_WATCHING) return;
    int moved = !F.have_master || !foSameNode(&F.master, &n);
    if (moved)
        nkLog(LL_NOTICE, "Failover: the record in etcd names the master %s:%d (epoch %lld)", ip, port, epoch);
    foMasterSet(&n, NULL, 0, epoch, FO_MS_SAVE | FO_MS_ANNOUNCE);
    if (moved) nkProbeRetargetMaster(ip, port);
}

/* ------------------------------------------------------------- Lease --- */

static int leaseGranting(void) {
    long long ms = nk.cfg.lease_time > F.lease_max_ms ? nk.cfg.lease_time : F.lease_max_ms;
    return F.state == FO_WATCHING && nkCoordMayGrant(ms);
}

/* The lease a grant gives: lease-time, once the state file records it as
 * the largest ever granted (a restart waits that long); while it cannot
 * (no state file, a write error), no more than the largest recorded. */
static long long leaseTime(void) {
    if (nk.cfg.lease_time > F.lease_max_ms) {
        long long old = F.lease_max_ms;
        F.lease_max_ms = nk.cfg.lease_time;
        if (!nk.cfg.state_file || stateSave() == -1) {
            F.lease_max_ms = old;
            return old;
        }
    }
    return nk.cfg.lease_time;
}

static long long leaseBoundUs(void) {
    return F.lease_bound_us;
}

static long long leaseMaxMs(void) {
    return nk.cfg.lease_time > F.lease_max_ms ? nk.cfg.lease_time : F.lease_max_ms;
}

static void leaseGranted(long long ms) {
    long long bound = foNowUs() + ms * 1000 + ms * NK_LEASE_DRIFT_PPM / 1000 + NK_LEASE_MARGIN_US;
    if (bound > F.lease_bound_us) F.lease_bound_us = bound;
}

/* ---------------------------------------------------------- Failover --- */

static int inCooldown(const char *ip, int port) {
    long long now = foNowMs();
    for (int i = 0; i < F.ncooldown; i++) {
        if (F.cooldown[i].until_ms <= now) {
            F.cooldown[i--] = F.cooldown[--F.ncooldown];
            continue;
        }
        if (F.cooldown[i].port == port && !strcmp(F.cooldown[i].ip, ip)) return 1;
    }
    return 0;
}

/* Why the invalid master is not replaced; logged when it changes, as
 * one line of its kind (nkLogRepeat: the reason may change on every tick,
 * "last answer N ms ago"). */
static void setBlocked(const char *why) {
    if (!strcmp(why, F.blocked)) return;
    if (why[0])
        nkLogRepeat(LL_WARNING, "Failover: not replaced", "Failover: the master %s:%d is invalid, but it "
                    "is not replaced: %s", F.master.reach, F.master.port, why);
    snprintf(F.blocked, sizeof(F.blocked), "%s", why);
}

/* The candidates now (see the top), into F.cand; why the others are not,
 * into F.excluded. With min-slaves > 0 the replicas named valid to the
 * master lately (the master counted their acknowledgements for WAIT) are
 * in F.cand too, as witnesses when they are no candidates: a promotion
 * waits to hear their offset, unless their process is gone. Returns how
 * many candidates. */
static int collectCandidates(void) {
    nkProbeView v[NK_FO_CANDIDATES + 1];
    int n = nkProbeNodes(v, NK_FO_CANDIDATES + 1), ncand = 0;
    /* Named within the window before the master's last lease ran out, not
     * before now: a master dead for longer than the window (no replica to
     * promote meanwhile) counted, until it died, the replicas named just
     * before. */
    long long window = NICKV_HEALTH_TIMEOUT_MS + 2LL * nk.cfg.lease_time + 1000;
    long long since_lease_ms = (foNowUs() - F.lease_bound_us) / 1000;
    if (since_lease_ms > 0) window += since_lease_ms;
    F.ncand = 0;
    F.excluded[0] = '\0';
    for (int i = 0; i < n && F.ncand < NK_FO_CANDIDATES; i++) {
        const char *why = NULL;
        char buf[64];
        int named = nk.cfg.min_slaves > 0 && ((v[i].named_ms_ago >= 0 && v[i].named_ms_ago <= window) ||
                                              nkCoordNamed(v[i].addr, v[i].port) ||
                                              nkCoordNamed(v[i].reach, v[i].port));
        /* A replica that stopped being listed since the master last
         * answered is still one: a busy master's replicas behind us leave
         * after 2 s of silence (NICKV_VIA_TIMEOUT_MS) and wait on it,
         * unlisted, while busy-limit runs longer. (foQuery vets it as
         * every candidate.) */
        int recent = n && v[0].is_master && !v[i].listed && v[i].unlisted_ms_ago >= 0 &&
                     v[0].answered_ms_ago >= 0 && v[i].unlisted_ms_ago <= v[0].answered_ms_ago + 1000;
        if (v[i].is_master || (!v[i].listed && !named && !recent)) continue;

        /* The master itself, as the replica it was before a promotion. */
        if (n && v[0].is_master && v[i].port == v[0].port &&
            (!strcmp(v[i].addr, v[0].addr) || !strcmp(v[i].reach, v[0].reach)))
            continue;
        if (!v[i].valid) why = "invalid";
        else if (v[i].answered_ms_ago < 0 || v[i].answered_ms_ago > nk.cfg.waiting_time) {
            snprintf(buf, sizeof(buf), "last answer %lld ms ago", v[i].answered_ms_ago);
            why = buf;
        }
        /* Never a candidate, nor asked anything (nickv_member.c). One
         * never named valid holds no write the master counted; one named
         * while it was a member (its node line removed since, its Nic-KV's
         * registration in etcd gone) may: a witness, which is never asked
         * (no credentials go to it) and so blocks until another holds all
         * it may have acknowledged (tickQuerying). */
        if (!nkMember(v[i].reach, v[i].port)) why = "not a member";
        if (why) {
            size_t len = strlen(F.excluded);
            snprintf(F.excluded + len, sizeof(F.excluded) - len, "%s%s:%d %s", len ? ", " : "",
                     v[i].addr, v[i].port, why);
            if (!named) continue;
        }
        foCandidate *c = &F.cand[F.ncand++];
        memset(c, 0, sizeof(*c));
        snprintf(c->node.ip, sizeof(c->node.ip), "%s", v[i].addr);
        snprintf(c->node.reach, sizeof(c->node.reach), "%s", v[i].reach);
        c->node.port = v[i].port;
        c->witness = why != NULL;
        c->named = named;
        c->unstable = v[i].invalid_ms_ago >= 0 && v[i].invalid_ms_ago < 2LL * nk.cfg.waiting_time;
        c->demoted = inCooldown(v[i].reach, v[i].port);
        if (!c->witness) ncand++;
    }
    return ncand;
}

static void foAbort(const char *why) {
    char last[sizeof(F.last_why)];
    F.aborted++;
    snprintf(last, sizeof(last), "called off: %s", why);
    /* An attempt called off is tried again, maybe on the next tick. */
    nkLogRepeat(LL_WARNING, NULL, "Failover: called off (%s): the master stays %s:%d", why,
                F.master.reach, F.master.port);
    memcpy(F.last_why, last, sizeof(F.last_why));
    if (!F.planned) F.aborted_us = foNowUs();
    if (F.planned && !strcmp(F.planned_why, "failback"))
        snprintf(F.failback, sizeof(F.failback), "called off, tried again in %d s: %.200s",
                 NK_FAILBACK_RETRY_MS / 1000, why);
    foSetState(FO_WATCHING);
}

static void foQuery(void);
static void foChoose(void);
static void foTick(void);

/* The replicas the coordinator's record names may hold acknowledged
 * writes (a previous leader named them): probed, even with the master
 * gone and never having listed them to us. */
static void coordRecordWatch(void) {
    char ip[NK_FO_CANDIDATES][NK_COORD_ADDR];
    int ports[NK_FO_CANDIDATES];
    int n = nkCoordRecordNamed(ip, ports, NK_FO_CANDIDATES);
    for (int i = 0; i < n; i++) {
        nkProbeView v;
        if (!nkProbeFind(ip[i], ports[i], &v)) nkProbeWatch(ip[i], ports[i], 1);
    }
}

static int fenceTimer(aeEventLoop *el, long long id, void *data) {
    (void)el; (void)id; (void)data;
    foTick();
    return AE_NOMORE;
}

/* +try-failover, once per epoch (an attempt called off is tried again). */
static long long try_event_epoch = -1;
static void foTryEvent(void) {
    if (try_event_epoch == F.epoch) return;
    try_event_epoch = F.epoch;
    foEvent("+try-failover", 1, F.old.reach, F.old.port, F.old.reach, F.old.port, NULL);
}

static void foStart(nkProbeView *m) {
    long long left = (F.lease_bound_us - foNowUs()) / 1000;
    F.planned = 0;
    F.refusing = 0;
    F.tag++;
    F.started_us = foNowUs();
    snprintf(F.old.ip, sizeof(F.old.ip), "%s", m->addr);
    snprintf(F.old.reach, sizeof(F.old.reach), "%s", m->reach);
    F.old.port = m->port;
    F.blocked[0] = '\0';
    /* Said once for attempts that follow each other (one called off is
     * tried again: nkLogRepeat). */
    char key[64];
    snprintf(key, sizeof(key), "Failover: attempt, epoch %lld", F.epoch);
    nkLogRepeat(LL_WARNING, key, "Failover: the master %s:%d is invalid (%s): no more "
                "leases; %d candidate(s); promoting in %lld ms, once every lease granted has run out",
                m->addr, m->port, m->why, F.ncand, left > 0 ? left : 0);
    foTryEvent();
    foSetState(FO_FENCING);
    /* On time, not at the next probe tick. */
    if (left <= 0) foQuery();
    else aeCreateTimeEvent(nk.el, left + 1, fenceTimer, NULL, NULL);
}

/* What c says cannot be true (an offset beyond the master's stream, a
 * field that does not parse, another process than the one listed): it is
 * neither a candidate nor a witness whose offset could call the failover
 * off. Said once per node and reason, not at every attempt. */
static void foDistrust(foCandidate *c) {
    static struct { char ip[NK_ADDR_LEN]; int port; char why[sizeof(c->why)]; } said[8];
    static int next;
    c->usable = c->eligible = 0;
    for (int i = 0; i < 8; i++)
        if (said[i].port == c->node.port && !strcmp(said[i].ip, c->node.ip) && !strcmp(said[i].why, c->why))
            return;
    nkLog(LL_WARNING, "Failover: %s:%d is not trusted: %s", c->node.reach, c->node.port, c->why);
    snprintf(said[next].ip, sizeof(said[next].ip), "%s", c->node.ip);
    said[next].port = c->node.port;
    memcpy(said[next].why, c->why, sizeof(said[next].why));
    next = (next + 1) % 8;
    F.distrusted++;
}

/* A candidate's INFO replication. */
/* A candidate's INFO (queryReply): is it of our history? 1 with c->offset
 * set, or 0 with c->why saying why not. */
static int candidateHistory(foCandidate *c, const nkInfo *in) {
    const char *ours = nkLinkReplid()[0] ? nkLinkReplid() : F.known_replid;
    /* A Nic-KV that did not fan out lately (a standby that took over)
     * knows the master's history from its INFO: its link's is another
     * master's, from when it last fanned out. */
    if (nkCoordOn() && !nkLinkStreamedLately() && nkProbeMasterReplid()[0]) ours = nkProbeMasterReplid();
    const char *role = in->role, *replid = in->replid, *replid2 = in->replid2;
    long long offset = in->slave_repl_offset, moffset = in->master_repl_offset;
    /* A replica of our history; or one our earlier attempt promoted whose
     * reply we never saw (a master now, our history as its replid2). */
    /* (A replica's replid2 is ours after it was promoted and made a
     * replica again: a late REPLICAOF NO ONE, then a repoint.) */
    if (!ours[0] && nkCoordOn()) {
        /* A Nic-KV of many that never learnt the master's history (a
         * standby restarted while the master was dead, with a state file
         * from before the history was recorded): a replica restarted empty
         * would pass as one of ours. */
        snprintf(c->why, sizeof(c->why), "its history cannot be checked: this Nic-KV never read the master's");
        return 0;
    }
    if (!strcmp(role, "slave") && offset >= 0 && (!ours[0] || !strcmp(replid, ours) || !strcmp(replid2, ours))) {
        c->offset = offset;
    } else if (!strcmp(role, "master") && moffset >= 0 && ours[0] &&
               (!strcmp(replid2, ours) || !strcmp(replid, ours))) {
        c->offset = moffset;
    } else {
        snprintf(c->why, sizeof(c->why), "not a replica of our history (role %s, replid %s)", role, replid);
        return 0;
    }
    return 1;
}

/* A candidate's claim (queryReply) against the master's stream: 1 if it
 * may be a candidate (*unchecked: past the bound, so it cannot be checked;
 * *bound: that bound), or 0 when it is a lie (c->why says so). */
static int candidateWithinBound(foCandidate *c, long long *bound_out, int *unchecked_out) {
    /* No replica can hold more than the master's stream. What we know of
     * it, the bound, may be a little old: the master could write until its
     * lease ran out (F.lease_bound_us), a direct replica get those bytes
     * and acknowledge them, and our link not (it was down, or behind). So
     * a claim past the bound is plausible up to twice the fastest rate the
     * stream grew at lately over that window, and NK_STREAM_SLACK more: it
     * cannot be checked, so it is no candidate, but its offset counts (one
     * that holds more than every candidate calls the failover off: it may
     * hold acknowledged writes). Beyond that it is a lie, and neither a
     * candidate nor a reason to call the failover off. */
    long long at_us, rate, bound = nkProbeStreamBound(&at_us, &rate);
    int unchecked = 0;
    *bound_out = bound;
    if (bound > 0 && c->offset > bound) {
        double window = (double)(F.lease_bound_us > at_us ? F.lease_bound_us - at_us : 0) / 1e6;
        double plausible = (double)bound + NK_STREAM_SLACK + 2.0 * (double)rate * window;
        if ((double)c->offset > plausible) {
            snprintf(c->why, sizeof(c->why), "it claims offset %lld, beyond the %lld bytes the master's "
                     "stream is known to hold (at most %.0f are plausible)", c->offset, bound, plausible);
            foDistrust(c);
            c->beyond = 1;
            return 0;
        }
        /* A leader that did not fan out (a standby that took over, with a
         * coordinator) knows the master's stream only from its INFO, once a
         * second: every replica is past that bound under writes, and
         * "cannot be checked" would call every such failover off. It
         * takes a plausible claim as it is (NIC-KV.md, "Many Nic-KVs":
         * what a standby cannot check). */
        unchecked = !(nkCoordOn() && !nkLinkStreamedLately());
    }
    *unchecked_out = unchecked;
    return 1;
}

static void queryReply(long long tag, const char *ip, int port, const char *reply, size_t len,
                       int is_error) {
    foCandidate *c = NULL;
    if (tag != F.tag || F.state != FO_QUERYING) return;
    if (F.planned && port == F.old.port && !strcmp(ip, F.old.ip) && !F.master_answered) {
        F.master_answered = 1;
        if (!is_error) {
            nkInfo in;
            nkInfoParse(reply, len, &in);
            F.master_offset = in.master_repl_offset;
        }
        return;
    }
    for (int i = 0; i < F.ncand; i++)
        if (F.cand[i].node.port == port && !strcmp(F.cand[i].node.ip, ip)) c = &F.cand[i];
    if (!c || c->answered) return;
    if (is_error && c->named) return;  /* it may hold acknowledged writes: ask again */
    c->answered = 1;
    if (is_error) {
        snprintf(c->why, sizeof(c->why), "INFO: %.*s", (int)(len > 100 ? 100 : len), reply);
        return;
    }
    nkInfo in;
    nkInfoParse(reply, len, &in);
    if (in.cluster == 1) {
        /* The master was never read (a Nic-KV started while it was down,
         * with no word of cluster mode in its state file): the cluster
         * fails its shard over, and refuses REPLICAOF anyway. */
        nkClusterMode(1, "a candidate's INFO");
        snprintf(c->why, sizeof(c->why), "a cluster node: the cluster fails its shard over");
        return;
    }
    memcpy(c->runid, in.runid, sizeof(c->runid));
    c->rdma = in.rdma_replication;
    /* The node's word: a port REPLICAOF could use, or none. */
    c->rdma_port = in.rdma_listener && in.rdma_port > 0 ? in.rdma_port : 0;
    if (in.bad[0]) {
        snprintf(c->why, sizeof(c->why), "its INFO field %s does not parse", in.bad);
        foDistrust(c);
        return;
    }
    /* The process the probes knew at that address while the master lived,
     * if they learnt it: another one there now is not the replica the
     * master listed. It may be that replica restarted (holding acknowledged
     * writes in its AOF), or anything: its offset still counts (more than
     * every candidate calls the failover off), but it is no candidate. */
    const char *known = nkProbeRunid(c->node.ip, c->node.port);
    int other_process = known[0] && strcmp(known, in.runid);
    int priority = in.priority >= 0 ? in.priority : 100, lease_off = in.lease == 0;
    if (!candidateHistory(c, &in)) return;
    long long bound;
    int unchecked;
    if (!candidateWithinBound(c, &bound, &unchecked)) return;
    c->priority = priority;
    c->usable = 1;
    c->vetted = known[0] && !other_process;
    if (other_process)
        snprintf(c->why, sizeof(c->why), "another process (run id %s) than the replica the master listed "
                 "there: its data cannot be checked", in.runid[0] ? in.runid : "none");
    else if (c->witness) snprintf(c->why, sizeof(c->why), "not valid now (a witness)");
    else if (priority <= 0) snprintf(c->why, sizeof(c->why), "replica-priority 0");
    else if (lease_off) snprintf(c->why, sizeof(c->why), "it runs nickv-lease no: it could not be fenced");
    else if (unchecked) {
        /* foCorroborate may still accept it. */
        c->unchecked = 1;
        snprintf(c->why, sizeof(c->why), "it claims offset %lld, past the %lld bytes the master's stream "
                 "is known to hold: it cannot be checked", c->offset, bound);
    } else c->eligible = 1;
}

/* One address, however written (10.0.0.7 and ::ffff:10.0.0.7; fd00::7 and
 * FD00:0::7); not numeric: taken as the same. */
static int sameAddr(const char *a, const char *b) {
    unsigned char x[16], y[16];
    int lx = nkAddrBytes(a, x), ly = nkAddrBytes(b, y);
    return !lx || !ly || (lx == ly && !memcmp(x, y, lx));
}

/* With confirm-claims yes, a claim past the stream bound (plausible, but
 * not checkable against what Nic-KV knows of the master's stream) is taken
 * when another replica at another address claims at least as much. The
 * stream only grows past the bound when the master wrote after Nic-KV last
 * saw its offset (its periodic PING to direct replicas, a write while the
 * link was down), and then every direct replica that got those bytes says
 * so. Both must be vetted: the process the probes learnt at that address
 * while the master lived (a run id is the replica's own word, so it only
 * tells two processes apart; a replica whose run id the probes could not
 * learn, one behind requirepass, neither confirms nor is confirmed). Two
 * addresses are not two hosts: a replica names its address (REPLCONF
 * ip-address), and one host may own several. So this holds only where
 * the replicas' password is held by the replicas alone, one per host: a
 * process with that password reachable at two addresses would confirm its
 * own claim. Off by default (DESIGN.md, "Fencing"). On equal offsets a
 * confirmed claim ranks after one that needed no confirmation (better()). */
static void foCorroborate(void) {
    if (!nk.cfg.confirm_claims) return;
    for (int i = 0; i < F.ncand; i++) {
        foCandidate *c = &F.cand[i];
        if (!c->unchecked || !c->vetted) continue;
        for (int j = 0; j < F.ncand; j++) {
            const foCandidate *o = &F.cand[j];
            if (o == c || !o->usable || !o->vetted || o->offset < c->offset ||
                !strcmp(o->runid, c->runid) || sameAddr(o->node.ip, c->node.ip))
                continue;
            nkLogRepeat(LL_NOTICE, NULL, "Failover: %s:%d claims offset %lld, past the %lld bytes the "
                        "master's stream is known to hold; %s:%d (another address) claims %lld: taken",
                        c->node.reach, c->node.port, c->offset, nkProbeStreamBound(NULL, NULL),
                        o->node.reach, o->node.port, o->offset);
            c->unchecked = 0;
            c->corroborated = 1;
            c->eligible = 1;
            c->why[0] = '\0';
            break;
        }
    }
}

static void foQuery(void) {
    F.query_us = foNowUs();
    if (F.planned) {
        /* The master is alive: where its stream ends, to wait for the
         * target to have it all. */
        F.master_offset = -1;
        F.master_answered = 0;
        if (nkProbeCommand(F.old.ip, F.old.port, queryReply, F.tag, "INFO", "replication", NULL) == -1)
            F.master_answered = 1;
    }
    for (int i = 0; i < F.ncand; i++) {
        foCandidate *c = &F.cand[i];
        /* A witness whose connection is down is asked again each tick. */
        if (nkProbeCommand(c->node.ip, c->node.port, queryReply, F.tag, "INFO", "server", "replication",
                           "rdma", "nickv", "cluster", NULL) == -1 && !c->named) {
            c->answered = 1;
            snprintf(c->why, sizeof(c->why), "its probe connection is down");
        }
    }
    if (F.state != FO_QUERYING) foSetState(FO_QUERYING);   /* a planned one asks again */
}

static void promoteReply(long long tag, const char *ip, int port, const char *reply, size_t len,
                         int is_error) {
    (void)ip; (void)port;
    if (tag != F.tag || F.state != FO_PROMOTING || F.promote_reply) return;
    F.promote_reply = is_error ? -1 : 1;
    snprintf(F.promote_err, sizeof(F.promote_err), "%.*s", (int)(len > 100 ? 100 : len), reply);
}

/* Every candidate has answered (or cannot): the best one is promoted. */
static void fenceStart(void);
static void foPromote(void);

/* The promotion could not be made: the old master stays, recorded again
 * under a new epoch, and the attempt is called off. The one rollback, from
 * wherever a promotion fails: the state file could not name the winner
 * (foPromote), the record could not (tickPromoting), the winner's probe
 * connection was down (promoteSend), or REPLICAOF NO ONE failed or went
 * unanswered (tickPromoting: winner_may_serve, it may still run it late;
 * as a master it would hold no lease, and repointing makes it a replica of
 * the old master again).
 *
 * The epoch rule: the promotion used E (F.epoch, from foPromote); the old
 * master is recorded under E + 1, and the next promotion takes E + 2. An
 * epoch once used by a promotion is never reused, by a later promotion or
 * by the rollback: forward, never back. Why it is safe: E may already be
 * out of this process when the promotion fails (the coordinator's record
 * naming the winner, written before REPLICAOF NO ONE; the state file
 * naming it, written by foPromote; the fence-command's argument), and each
 * reader takes the higher epoch as the newer word: a standby follows a
 * record whose epoch is above its own (nkCoordTick), the record is never
 * written back to a lower epoch (nickv_coord.c), a restart takes the state
 * file's. Moved back to E - 1, the old master would lose to the stale
 * record naming the winner at E, and the next promotion would reuse E for
 * another node; at E + 1 it outranks every word of the failed promotion.
 * An epoch that goes up is therefore a master recorded, not always a
 * master changed (the tests count failovers by address). */
static void promoteUndo(const char *why, int winner_may_serve) {
    repointRemove(F.old.reach, F.old.port);
    if (winner_may_serve) repointAdd(F.winner.reach, F.winner.port, 0);
    foMasterSet(&F.old, NULL, 0, F.epoch + 1, FO_MS_SAVE);
    foAbort(why);
}

static int promoteSend(void) {
    if (nkProbeCommand(F.winner.ip, F.winner.port, promoteReply, F.tag, "REPLICAOF", "NO", "ONE", NULL) == -1) {
        promoteUndo("the candidate's probe connection is down", 0);
        return -1;
    }
    F.promote_sent = 1;
    F.step_us = foNowUs();      /* the reply's time starts now, not at the record's write */
    return 0;
}

/* ------------------------------------------------------ fence-command --- */

/* fence-command, when set, runs once the lease has run out and the winner
 * is chosen, before REPLICAOF NO ONE: "<command> <old-ip> <old-port>
 * <new-ip> <new-port> <epoch>" through /bin/sh, with no descriptor of
 * ours, in a process group of its own. Exit 0 within NK_FENCE_TIMEOUT_MS:
 * the promotion goes on; else it is called off and tried again
 * NK_FENCE_RETRY_MS later (the old master has no lease meanwhile: nobody
 * takes writes). Whatever it started is killed with it (fenceReap). */
static void fenceStart(void) {
    char oport[16], nport[16], epoch[32];
    sds script = sdscatfmt(sdsempty(), "exec %s \"$@\"", nk.cfg.fence_command);
    snprintf(oport, sizeof(oport), "%d", F.old.port);
    snprintf(nport, sizeof(nport), "%d", F.winner.port);
    snprintf(epoch, sizeof(epoch), "%lld", F.epoch + 1);
    pid_t pid = fork();
    if (pid == 0) {
        int null;
        setpgid(0, 0);
        null = open("/dev/null", O_RDWR);
        if (null != -1) {
            dup2(null, 0);
            if (!nk.cfg.logfile) { dup2(null, 1); dup2(null, 2); }
        }
        if (nk.cfg.logfile) {
            int fd = open(nk.cfg.logfile, O_WRONLY | O_APPEND);
            if (fd != -1) { dup2(fd, 1); dup2(fd, 2); }
        }
        closefrom(3);
        execl("/bin/sh", "sh", "-c", script, "nic-kv-fence", F.old.reach, oport, F.winner.reach,
              nport, epoch, (char *)NULL);
        _exit(127);
    }
    sdsfree(script);
    if (pid == -1) {
        char why[128];
        snprintf(why, sizeof(why), "fence-command: fork: %s", strerror(errno));
        F.retry_after_us = foNowUs() + NK_FENCE_RETRY_MS * 1000LL;
        foAbort(why);
        return;
    }
    /* Here too: a kill of the group before the child's setpgid reaches it. */
    setpgid(pid, pid);
    F.fence_pid = pid;
    char key[64];
    snprintf(key, sizeof(key), "Failover: fencing, epoch %lld", F.epoch + 1);
    nkLogRepeat(LL_WARNING, key, "Failover: fencing %s:%d off before promoting %s:%d: fence-command "
                "(process group %d)", F.old.reach, F.old.port, F.winner.reach, F.winner.port, (int)pid);
    foSetState(FO_FENCE_CMD);
}

/* The fence-command's process group is killed: whatever it left running
 * (a "sleep 300 &", a hung ssh) ends with it. When the command itself
 * has not exited (a timeout, Nic-KV shutting down), it is killed and
 * reaped too. */
static void fenceReap(int running) {
    int status;
    if (!F.fence_pid) return;
    kill(-F.fence_pid, SIGKILL);
    if (running) waitpid(F.fence_pid, &status, 0);
    F.fence_pid = 0;
}

void nkFailoverShutdown(void) {
    if (F.fence_pid) nkLog(LL_WARNING, "Failover: killing the fence-command (process group %d): "
                           "Nic-KV is shutting down", (int)F.fence_pid);
    fenceReap(1);
}

/* Has the fence-command finished? */
static void fenceCheck(long long now) {
    int status;
    pid_t r = waitpid(F.fence_pid, &status, WNOHANG);
    char why[160];
    if (r == 0) {
        if (now - F.step_us < NK_FENCE_TIMEOUT_MS * 1000LL) return;
        fenceReap(1);
        snprintf(why, sizeof(why), "fence-command did not finish in %d ms (killed)", NK_FENCE_TIMEOUT_MS);
    } else if (r == F.fence_pid && WIFEXITED(status) && WEXITSTATUS(status) == 0) {
        fenceReap(0);
        nkLog(LL_NOTICE, "Failover: fence-command succeeded");
        foPromote();
        return;
    } else if (r == F.fence_pid && WIFEXITED(status)) {
        snprintf(why, sizeof(why), "fence-command exited with %d", WEXITSTATUS(status));
    } else if (r == F.fence_pid && WIFSIGNALED(status)) {
        snprintf(why, sizeof(why), "fence-command killed by signal %d", WTERMSIG(status));
    } else {
        snprintf(why, sizeof(why), "fence-command: waitpid: %s", strerror(errno));
    }
    fenceReap(0);
    F.retry_after_us = now + NK_FENCE_RETRY_MS * 1000LL;
    foAbort(why);
}


/* Is c a better choice than best? The offset first: the replica with the
 * most of the stream has every acknowledged write; then stable over
 * recently invalid, not demoted by us lately over demoted (no ping-pong),
 * replica-priority, the address. */
static int better(const foCandidate *c, const foCandidate *best) {
    if (!best) return 1;
    if (c->offset != best->offset) return c->offset > best->offset;
    if (c->corroborated != best->corroborated) return !c->corroborated;
    if (c->unstable != best->unstable) return !c->unstable;
    if (c->demoted != best->demoted) return !c->demoted;
    if (c->priority != best->priority) return c->priority < best->priority;
    /* With a coordinator, the node on our own server: we then fan out
     * for it and lead it without handing leadership over. */
    int cl = nkCoordLocal(c->node.reach, c->node.port), bl = nkCoordLocal(best->node.reach, best->node.port);
    if (cl != bl) return cl;
    int cmp = strcmp(c->node.reach, best->node.reach);
    return cmp ? cmp < 0 : c->node.port < best->node.port;
}

/* How much of c's claim may be acknowledged writes, for the check that no
 * replica left out holds any the winner lacks: the whole claim of a
 * candidate; of any other, at most nkProbeAckBound. An SKV master with
 * nickv-lease yes counts a direct replica's ACK for WAIT only that far
 * (src/nickv_server.c, nickvDirectAckCounts): bytes past it were never
 * acknowledged, so a replica past the stream bound (unchecked, or
 * distrusted for an implausible claim) calls the failover off only when
 * the candidates lack some of what it may hold below the ack bound. A
 * standby that took over (a coordinator) granted no lease on what the
 * fan-out Nic-KV reported: it counts the claim as it is. -1: nothing. */
static long long foHeld(const foCandidate *c) {
    if (!c->usable && !c->beyond) return -1;
    if (c->eligible || (nkCoordOn() && !nkLinkStreamedLately())) return c->usable ? c->offset : -1;
    long long ack = nkProbeAckBound();
    return ack > 0 && c->offset > ack ? ack : c->offset;
}

static void foChoose(void) {
    foCandidate *best = NULL;
    long long most = -1;
    const foCandidate *ahead = NULL;
    foCorroborate();
    for (int i = 0; i < F.ncand; i++) {
        foCandidate *c = &F.cand[i];
        long long held = foHeld(c);
        if (held > most) {
            most = held;
            ahead = c;
        }
        if (!c->eligible) {
            nkLogRepeat(LL_NOTICE, NULL, "Failover: %s:%d is no candidate: %s", c->node.reach,
                        c->node.port, c->why[0] ? c->why : "no answer");
            continue;
        }
        if (better(c, best)) best = c;
    }
    if (!best) {
        foAbort("no replica can be promoted");
        return;
    }
    if (best->offset < most) {
        /* A replica that cannot be promoted has bytes no candidate has:
         * they may be acknowledged writes. Better no master than losing
         * them: an operator decides (DESIGN.md, "The state machine"). */
        char why[500];
        snprintf(why, sizeof(why), "%.64s:%d (%.200s) is at offset %lld, the best candidate %.64s:%d at "
                 "%lld: promoting it could lose acknowledged writes", ahead->node.reach,
                 ahead->node.port, ahead->why, most, best->node.reach, best->node.port, best->offset);
        F.retry_after_us = foNowUs() + NK_FENCE_RETRY_MS * 1000LL;
        foAbort(why);
        return;
    }
    F.winner = best->node;
    memcpy(F.winner_runid, best->runid, sizeof(F.winner_runid));
    F.winner_rdma_port = best->rdma_port;
    F.winner_offset = best->offset;
    F.winner_priority = best->priority;
    F.winner_corroborated = best->corroborated;
    if (nk.cfg.fence_command && !F.planned) fenceStart();
    else foPromote();
}

/* The winner is chosen (and fenced, with a fence-command): promote it. */
static void foPromote(void) {
    /* The state file names the new master before it is one: a restart
     * in between follows it (REPLICAOF NO ONE is idempotent), never the
     * old master back. */
    repointAdd(F.old.reach, F.old.port, 1);
    if (foMasterSet(&F.winner, F.winner_runid, F.winner_rdma_port, F.epoch + 1, FO_MS_SAVE) == -1) {
        promoteUndo("the state file cannot be written", 0);
        return;
    }
    F.promote_reply = 0;
    F.promote_sent = 0;
    /* With a coordinator the record names the winner first (guarded by
     * our leadership): REPLICAOF NO ONE goes once it does (promoteSend). */
    nkCoordPublish(F.epoch, F.winner.reach, F.winner.port);
    if (nkCoordPublished(F.epoch) == 1 && promoteSend() == -1) return;
    /* Once per epoch: a promotion that fails is tried again at once. */
    char key[64];
    snprintf(key, sizeof(key), "Failover: promoting, epoch %lld", F.epoch);
    nkLogRepeat(LL_WARNING, key, "Failover: promoting %s:%d (offset %lld, replica-priority %d), epoch %lld",
                F.winner.reach, F.winner.port, F.winner_offset, F.winner_priority, F.epoch);
    foSetState(FO_PROMOTING);
    F.step_us = foNowUs();
}

/* The winner is a master: everything follows it. */
static void foPromoted(void) {
    char port[16];
    nkProbeView v[NK_FO_CANDIDATES + 1];
    int n = nkProbeNodes(v, NK_FO_CANDIDATES + 1);
    long long took = (foNowUs() - F.started_us) / 1000;
    F.promoted_us = foNowUs();
    snprintf(port, sizeof(port), "%d", F.winner.port);
    nkProbeCommand(F.winner.ip, F.winner.port, logReply, 0, "CONFIG", "REWRITE", NULL);
    /* Every other replica we know of follows it (those listed now, and
     * those that were: a replica away for a moment comes back to the new
     * master, not the old one). */
    F.njoining = 0;
    for (int i = 0; i < n; i++) {
        if (v[i].is_master || (v[i].port == F.winner.port && !strcmp(v[i].reach, F.winner.reach)))
            continue;
        repointAdd(v[i].reach, v[i].port, 0);
        /* Valid now, it counts for the winner's min-slaves before its
         * PSYNC is done: the winner takes writes from its first one. */
        if (v[i].valid && F.njoining < NK_FO_REPOINT) {
            snprintf(F.joining[F.njoining].ip, sizeof(F.joining[0].ip), "%s", v[i].reach);
            F.joining[F.njoining].port = v[i].port;
            F.joining[F.njoining].until_ms = foNowMs() + NICKV_JOINING_MS;
            F.njoining++;
        }
    }
    /* Those whose INFO server and rdma we just read need not be asked
     * again: their mode, and whether they are the winner's process known
     * at another address (rdmaModeReply). */
    for (int i = 0; i < F.ncand; i++) {
        if (!F.cand[i].usable) continue;
        for (int j = 0; j < F.nrepoint; j++)
            if (F.repoint[j].node.port == F.cand[i].node.port &&
                !strcmp(F.repoint[j].node.reach, F.cand[i].node.reach) && F.repoint[j].rdma < 0) {
                F.repoint[j].rdma = F.cand[i].rdma;
                F.repoint[j].is_master = isMasterProcess(F.cand[i].runid);
            }
    }
    /* The link follows once the probes granted it a lease (it serves no
     * PSYNC before): probeReadView. */
    nkProbeRetargetMaster(F.winner.reach, F.winner.port);
    stateSave();
    foEvent("+failover-end", 1, F.old.reach, F.old.port, F.old.reach, F.old.port, NULL);
    foSwitchMaster(F.old.reach, F.old.port, F.winner.reach, F.winner.port);
    F.failovers++;
    F.last_ms = took;
    snprintf(F.last_why, sizeof(F.last_why), "promoted %.60s:%d in place of %.60s:%d%s%.63s", F.winner.reach,
             F.winner.port, F.old.reach, F.old.port, F.planned ? " by " : "", F.planned ? F.planned_why : "");
    if (F.planned) F.planned_done++;
    if (F.winner_corroborated) F.corroborated++;
    nkLog(LL_WARNING, "Failover: %s:%d is the master (epoch %lld), %lld ms after %s %s:%d", F.winner.reach,
          F.winner.port, F.epoch, took, F.planned ? "the handover of" : "Nic-KV found invalid",
          F.old.reach, F.old.port);
    foSetState(FO_WATCHING);
    repointTick();
}

/* ------------------------------------------------- Planned handovers --- */

/* The target of a planned handover has caught up with the old master,
 * whose lease has run out (it takes no write): promote it. Re-read both
 * until then, for NK_PLANNED_CATCHUP_MS at most. */
static void plannedTick(long long now) {
    foCandidate *best = NULL;
    int waiting = !F.master_answered;
    for (int i = 0; i < F.ncand; i++) {
        foCandidate *c = &F.cand[i];
        if (!c->answered) waiting = 1;
        else if (c->usable && (!best || c->offset > best->offset ||
                               (c->offset == best->offset && c->priority < best->priority)))
            best = c;
    }
    if (waiting) {
        if (now - F.step_us > 2000LL * nk.cfg.waiting_time) foAbort("no answer to INFO");
        return;
    }
    if (!best) {
        char why[320];
        snprintf(why, sizeof(why), "no replica can be promoted%s%s", F.ncand == 1 ? ": " : "",
                 F.ncand == 1 ? F.cand[0].why : "");
        foAbort(why);
        return;
    }
    if (F.master_offset >= 0 && best->offset >= F.master_offset) {
        nkLog(LL_NOTICE, "Failover: %s:%d has every byte of the master's (offset %lld)",
              best->node.reach, best->node.port, best->offset);
        for (int i = 0; i < F.ncand; i++)
            if (&F.cand[i] != best && F.cand[i].usable) {
                F.cand[i].usable = 0;
                snprintf(F.cand[i].why, sizeof(F.cand[i].why), "not the handover's target");
            }
        foChoose();
        return;
    }
    if (now - F.step_us > NK_PLANNED_CATCHUP_MS * 1000LL) {
        char why[200];
        snprintf(why, sizeof(why), "the target is at offset %lld, the master at %lld, after %d ms",
                 best->offset, F.master_offset, NK_PLANNED_CATCHUP_MS);
        foAbort(why);
        return;
    }
    /* The stream is still on its way: read them all again, at most every
     * NK_PLANNED_REQUERY_MS (replies also tick us). */
    if (now - F.query_us < NK_PLANNED_REQUERY_MS * 1000LL) return;
    for (int i = 0; i < F.ncand; i++) F.cand[i].answered = F.cand[i].usable = 0;
    F.tag++;
    foQuery();
}

int nkFailoverPlanned(const char *ip, int port, const char *why, char *err, size_t errlen) {
    nkProbeView v[NK_FO_CANDIDATES + 1], m;
    int n, found = -1;
    if (!nkCoordLeader()) {
        snprintf(err, errlen, "this Nic-KV is a standby: ask the leader (INFO coordinator: leader)");
        return -1;
    }
    if (F.state != FO_WATCHING) {
        snprintf(err, errlen, "a failover is already in progress (%s)", foStateNames[F.state]);
        return -1;
    }
    n = nkProbeNodes(v, NK_FO_CANDIDATES + 1);
    if (n < 1 || !v[0].is_master || !v[0].valid) {
        snprintf(err, errlen, "the master does not answer: Nic-KV fails it over by itself%s",
                 nk.cfg.failover ? "" : " with failover yes");
        return -1;
    }
    m = v[0];
    if (nkProbeMasterLease() != 1 || nkClusterOn()) {
        snprintf(err, errlen, "the master must run with nickv-lease yes, not in cluster mode");
        return -1;
    }
    collectCandidates();
    /* The master is alive and the target catches up with it: witnesses
     * have nothing to tell (and an invalid replica is no target). */
    int kept = 0;
    for (int i = 0; i < F.ncand; i++)
        if (!F.cand[i].witness) F.cand[kept++] = F.cand[i];
    F.ncand = kept;
    for (int i = 0; i < F.ncand; i++) {
        if (ip && (F.cand[i].node.port != port || (strcmp(F.cand[i].node.ip, ip) &&
                                                     strcmp(F.cand[i].node.reach, ip))))
            continue;
        found = i;
        break;
    }
    if (ip && found < 0) {
        snprintf(err, errlen, "%s:%d is not a valid replica of the master%s%s", ip, port,
                 F.excluded[0] ? ": " : "", F.excluded);
        return -1;
    }
    if (!ip && !F.ncand) {
        snprintf(err, errlen, "no replica to promote%s%s", F.excluded[0] ? ": " : "", F.excluded);
        return -1;
    }
    if (ip) {
        F.cand[0] = F.cand[found];
        F.ncand = 1;
    }
    F.planned = 1;
    snprintf(F.planned_why, sizeof(F.planned_why), "%s", why);
    F.tag++;
    F.started_us = foNowUs();
    F.old.port = m.port;
    snprintf(F.old.ip, sizeof(F.old.ip), "%s", m.addr);
    snprintf(F.old.reach, sizeof(F.old.reach), "%s", m.reach);
    long long left = (F.lease_bound_us - foNowUs()) / 1000;
    nkLog(LL_WARNING, "Failover: %s: handing the master %s:%d over to %s; no more leases, the "
          "master takes no write from %lld ms on", why, m.addr, m.port,
          ip ? F.cand[0].node.reach : "the best replica", left > 0 ? left : 0);
    foTryEvent();
    foSetState(FO_FENCING);
    if (left <= 0) foQuery();
    else aeCreateTimeEvent(nk.el, left + 1, fenceTimer, NULL, NULL);
    return 0;
}

/* failback yes: the configured master, a caught-up replica again, takes
 * over by a planned handover; tried at most every NK_FAILBACK_RETRY_MS,
 * and only once it would be a candidate (an attempt refused for a passing
 * reason, a late probe, would cost the whole pause). F.failback says where
 * it stands (INFO failover: failback_status). */
static void failbackTick(long long now) {
    nkProbeView v;
    char err[300];
    const char *cm = nk.cfg.master_host;
    int cp = nk.cfg.master_port;
    if (!nk.cfg.failback) {
        F.failback[0] = '\0';
        return;
    }
    if (F.master.port == cp && !strcmp(F.master.reach, cm)) {
        snprintf(F.failback, sizeof(F.failback), "the configured master is the master");
        return;
    }
    if (!nkProbeFind(cm, cp, &v) || !v.listed) {
        snprintf(F.failback, sizeof(F.failback), "waiting: %.64s:%d is not a replica of the master", cm, cp);
        return;
    }
    if (v.is_master || !v.valid || v.answered_ms_ago < 0 || v.answered_ms_ago > nk.cfg.waiting_time) {
        snprintf(F.failback, sizeof(F.failback), "waiting: %.64s:%d is not valid", cm, cp);
        return;
    }
    if (v.invalid_ms_ago >= 0 && v.invalid_ms_ago < NK_FAILBACK_STABLE_MS) {
        snprintf(F.failback, sizeof(F.failback), "waiting: %.64s:%d was invalid %lld ms ago (%d ms needed)",
                 cm, cp, v.invalid_ms_ago, NK_FAILBACK_STABLE_MS);
        return;
    }
    for (int i = 0; i < F.nrepoint; i++)
        if (F.repoint[i].node.port == v.port && !strcmp(F.repoint[i].node.reach, v.reach)) {
            snprintf(F.failback, sizeof(F.failback), "waiting: %.64s:%d is still to repoint", cm, cp);
            return;
        }
    if (now < F.failback_after_us) return;
    F.failback_after_us = now + NK_FAILBACK_RETRY_MS * 1000LL;
    if (nkFailoverPlanned(cm, cp, "failback", err, sizeof(err)) == -1) {
        nkLog(LL_NOTICE, "Failover: no failback to %s:%d now: %s", cm, cp, err);
        snprintf(F.failback, sizeof(F.failback), "refused, tried again in %d s: %.200s",
                 NK_FAILBACK_RETRY_MS / 1000, err);
    } else {
        snprintf(F.failback, sizeof(F.failback), "handing over to %.64s:%d", cm, cp);
    }
}

/* In WATCHING: should a failover begin? "" if so, else why not. */
static const char *foBlocker(void) {
    if (!nk.cfg.failover) return "failover is off";
    if (nkClusterOn()) return "the shard is in cluster mode: the cluster fails over, Nic-KV follows";
    if (nkProbeMasterLease() == 0)
        return "the master runs with nickv-lease no: a promotion could leave two masters";
    if (nkProbeMasterLease() != 1) return "the master's nickv-lease is not known yet";
    if (nkProbeLeaseForeign() && !(nkCoordOn() && nkProbeLeaseHeldByIdle())) {
        /* Another Nic-KV (or who holds our user's password) may grant it a
         * lease we cannot see run out: not ours to replace. */
        static char why[300];
        snprintf(why, sizeof(why), "the master refused our lease (%.200s): not ours to fail over",
                 nkProbeLeaseError());
        return why;
    }
    if (!collectCandidates()) {
        static char why[400];
        snprintf(why, sizeof(why), "no replica to promote%s%s", F.excluded[0] ? ": " : "", F.excluded);
        return why;
    }
    return "";
}

/* The master's replicas and nickv-lease, as the probes see them, into the
 * state file when they change (at most once a second); and, at the first
 * tick, what the file remembered, to the probes. */
static void knownTick(long long now) {
    nkProbeView v[NK_FO_CANDIDATES + 1];
    int n, lease = nkProbeMasterLease();
    unsigned long long sig = 1469598103934665603ULL;
    if (!F.known_applied) {
        F.known_applied = 1;
        nkProbeRemember(F.known_lease, NULL, 0);
        nkProbeRememberMaster(F.known_runid, F.known_replid, F.known_offset);
        for (int i = 0; i < F.nknown; i++) nkProbeRemember(-1, F.known[i].ip, F.known[i].port);
        return;
    }
    if (now - F.known_saved_us < 1000000LL) return;
    n = nkProbeNodes(v, NK_FO_CANDIDATES + 1);
    if (n < 1 || !v[0].is_master || lease < 0) return;
    const char *runid = nkProbeMasterRunid(), *replid = nkLinkReplid();
    long long offset = nkBacklogLastPub();
    /* A standby holds no link: the master's history as its INFO says, so
     * that a restart while the master is dead still knows it. */
    if (!replid[0] && nkCoordOn()) {
        replid = nkProbeMasterReplid();
        offset = nkProbeStreamBound(NULL, NULL);
    }
    sig = (sig ^ (unsigned)lease) * 1099511628211ULL;
    for (const char *p = runid; *p; p++) sig = (sig ^ (unsigned char)*p) * 1099511628211ULL;
    for (const char *p = replid; *p; p++) sig = (sig ^ (unsigned char)*p) * 1099511628211ULL;
    /* The offset every 10 s: enough to tell an empty restart from ours. */
    if (now - F.known_saved_us >= 10000000LL && offset != F.known_offset) sig ^= (unsigned long long)offset;
    for (int i = 1; i < n; i++) {
        if (!v[i].listed || !nkAddrNumeric(v[i].reach)) continue;
        for (const char *p = v[i].reach; *p; p++) sig = (sig ^ (unsigned char)*p) * 1099511628211ULL;
        sig = (sig ^ (unsigned)v[i].port) * 1099511628211ULL;
    }
    if (sig == F.known_sig) return;
    F.known_sig = sig;
    F.known_saved_us = now;
    F.known_lease = lease;
    if (runid[0]) memcpy(F.known_runid, runid, sizeof(F.known_runid));
    if (replid[0]) {
        snprintf(F.known_replid, sizeof(F.known_replid), "%s", replid);
        F.known_offset = offset;
    }
    F.nknown = 0;
    for (int i = 1; i < n && F.nknown < NK_FO_CANDIDATES; i++) {
        /* Numeric addresses only: the others cannot be probed anyway. */
        if (!v[i].listed || !nkAddrNumeric(v[i].reach)) continue;
        snprintf(F.known[F.nknown].ip, NK_ADDR_LEN, "%s", v[i].reach);
        F.known[F.nknown].port = v[i].port;
        F.nknown++;
    }
    stateSave();
}

/* --------------------------------------------------------------- Tick --- */

/* What every state's tick sees: the probes' master (their first node, the
 * one the failover last moved them to) and the clock. */
typedef struct foSight {
    nkProbeView m;
    int have_m;                 /* the probes' first node is the master */
    long long now;
} foSight;

static void tickWatching(foSight *s) {
    nkProbeView *m = &s->m;
    const char *why;
    if (!nkCoordLeader()) {
        /* A standby: the leader decides (and the master's probe is only a
         * PING here: it answers once connected). */
        strayTick(0);
        setBlocked(!s->have_m || m->valid || m->answered_ms_ago < 0 ? "" :
                   "this Nic-KV is a standby: the leader decides (INFO coordinator)");
        return;
    }
    repointTick();
    /* With a coordinator only: a single Nic-KV's list survives it (the
     * state file), a leader's does not reach the next leader. Not with
     * failover no: an operator's hands are on the nodes. */
    strayTick(nkCoordOn() && nk.cfg.failover && s->have_m && m->valid);
    const char *cip;
    int cport;
    if (nkClusterOn() && s->have_m && nkClusterSuccessor(m->reach, m->port, &cip, &cport)) {
        /* The cluster promoted another node of the shard: the probe goes
         * there, the link and F.master follow once it answers as a master
         * (foMasterServes), as after any master that moved; if it is a
         * member (nickv_member.c). */
        if (!nkMember(cip, cport)) {
            char why[200];
            snprintf(why, sizeof(why), "the cluster promoted %s:%d, which is not a member (no node line names "
                     "it): not followed", cip, cport);
            setBlocked(why);
            return;
        }
        nkClusterFollowed();
        nkProbeRetargetMaster(cip, cport);
        setBlocked(foBlocker());
        return;
    }
    if (s->have_m && m->valid && F.foreign_since_us && s->now - F.foreign_since_us > 2000LL * nk.cfg.waiting_time) {
        why = foBlocker();
        setBlocked(why);
        if (!why[0] && s->now >= F.retry_after_us) {
            m->why = "it refuses our lease: another Nic-KV's connection holds it";
            foStart(m);
            F.refusing = 1;
        }
        return;
    }
    if (s->have_m && m->valid) failbackTick(s->now);
    if (!s->have_m || m->valid) {
        setBlocked("");
        return;
    }
    why = foBlocker();
    setBlocked(why);
    if (!why[0] && s->now >= F.retry_after_us) foStart(m);
}

static void tickFencing(foSight *s) {
    int answers = s->have_m && s->m.valid;
    if (F.refusing && answers && !nkProbeLeaseHeldByIdle())
        foAbort("the master no longer refuses our lease as an idle grantor's");
    else if (!nk.cfg.failover && !F.planned) foAbort("failover was turned off");
    else if (answers && !F.planned && !F.refusing) foAbort("the master answers again");
    else if (s->now >= F.lease_bound_us) foQuery();
}

/* A candidate that answered, can be promoted and holds all that the
 * silent witness w may have acknowledged: then w, silent with its port
 * open (a hung process, a fake), has nothing to tell, and whatever it
 * holds past that was never acknowledged. What the master counted of w is
 * at most the ack bound (nkProbeAckBound): a direct replica's ACK counts
 * no further (src/nickv_server.c, nickvDirectAckCounts), and one behind us
 * as far as the ACKs we relayed, which the bound includes. (Not the ACKs
 * we relayed for w alone: w may have left us for the master since, its
 * entry here not closed yet, and acknowledged more there.) Not for a
 * leader that did not fan out lately (a coordinator's standby that took
 * over): the bound it knows is another Nic-KV's. */
static const foCandidate *witnessCovered(const foCandidate *w) {
    long long acked = nkProbeAckBound();
    (void)w;
    if (acked <= 0 || (nkCoordOn() && !nkLinkStreamedLately())) return NULL;
    for (int i = 0; i < F.ncand; i++)
        if (F.cand[i].answered && F.cand[i].eligible && F.cand[i].offset >= acked) return &F.cand[i];
    return NULL;
}

static void tickQuerying(foSight *s) {
    long long now = s->now;
    int waiting = 0, witnesses = 0;
    const foCandidate *cover = NULL;
    if (F.planned) {
        plannedTick(now);
        return;
    }
    if (s->have_m && s->m.valid && (!F.refusing || !nkProbeLeaseHeldByIdle())) {
        foAbort(F.refusing ? "the master no longer refuses our lease as an idle grantor's" :
                "the master answers again");
        return;
    }
    if (!nk.cfg.failover) {
        foAbort("failover was turned off");
        return;
    }
    for (int i = 0; i < F.ncand; i++) {
        nkProbeView v;
        foCandidate *c = &F.cand[i];
        if (c->answered) continue;
        int known = nkProbeFind(c->node.ip, c->node.port, &v);
        /* (One that is no member is never asked: as good as silent.) */
        if (known && v.valid && nkMember(c->node.reach, c->node.port)) {
            waiting++;
            /* Asked again (its connection was down, or it answered an
             * error): every 100 ms at most. */
            if (c->named) witnesses++;
            if (v.connected && now - F.query_us >= 100000LL)
                nkProbeCommand(c->node.ip, c->node.port, queryReply, F.tag, "INFO", "replication",
                               "rdma", "nickv", NULL);
        } else if (c->named && known && !v.refused && (cover = witnessCovered(c))) {
            /* Silent, and another holds all it may have acknowledged. */
            nkLogRepeat(LL_NOTICE, NULL, "Failover: not waiting for %s:%d, which does not answer: %s:%d holds "
                        "offset %lld, all it may have acknowledged", c->node.reach, c->node.port,
                        cover->node.reach, cover->node.port, cover->offset);
            c->answered = 1;
            snprintf(c->why, sizeof(c->why), "silent, and %.64s:%d holds all that was acknowledged",
                     cover->node.reach, cover->node.port);
        } else if (c->named && known && !v.refused) {
            /* It may hold acknowledged writes, and its process may still
             * run (a partition): wait for it. */
            witnesses++;
            if (v.connected && now - F.query_us >= 100000LL)
                nkProbeCommand(c->node.ip, c->node.port, queryReply, F.tag, "INFO", "replication",
                               "rdma", "nickv", NULL);
        } else {
            c->answered = 1;
            snprintf(c->why, sizeof(c->why), "%s", known && v.refused ? "its process is gone" : "invalid now");
        }
    }
    if (now - F.query_us >= 100000LL) F.query_us = now;    /* asked again above */
    if (witnesses) {
        char why[300] = "";
        for (int i = 0; i < F.ncand; i++)
            if (F.cand[i].named && !F.cand[i].answered) {
                snprintf(why, sizeof(why), "waiting to hear from %.64s:%d, which acknowledged writes "
                         "lately (min-slaves %d): CONFIG SET min-slaves 0 gives that up",
                         F.cand[i].node.reach, F.cand[i].node.port, nk.cfg.min_slaves);
                break;
            }
        setBlocked(why);
        if (nk.cfg.min_slaves > 0) return;
    }
    /* Every valid candidate's answer is waited for (see the top). */
    if (!waiting || now - F.step_us >= 2000LL * nk.cfg.waiting_time) foChoose();
}

static void tickFenceCmd(foSight *s) {
    fenceCheck(s->now);
}

static void tickPromoting(foSight *s) {
    if (!F.promote_sent) {
        int r = nkCoordPublished(F.epoch);
        if (r == 1) promoteSend();
        else if (r == -1) promoteUndo("this Nic-KV no longer leads: the record was not written", 0);
        else if (s->now - F.step_us > 2000LL * nk.cfg.waiting_time) promoteUndo("etcd did not take the record in time", 0);
        return;
    }
    if (F.promote_reply == 1) {
        foPromoted();
    } else if (F.promote_reply == -1 || s->now - F.step_us > 2000LL * nk.cfg.waiting_time) {
        char reason[200];
        snprintf(reason, sizeof(reason), "REPLICAOF NO ONE on %.60s:%d: %.100s", F.winner.reach,
                 F.winner.port, F.promote_reply == -1 ? F.promote_err : "no answer");
        promoteUndo(reason, 1);
    }
}

/* One function per state; each moves only along foMoves. */
static void (*const foTicks[FO_STATES])(foSight *) = {
    [FO_WATCHING] = tickWatching,
    [FO_FENCING] = tickFencing,
    [FO_QUERYING] = tickQuerying,
    [FO_FENCE_CMD] = tickFenceCmd,
    [FO_PROMOTING] = tickPromoting,
};

/* The failover decides: at every tick of its own timer (foTimer), when the
 * probes or the coordinator report news (probeChanged), and when the
 * lease's bound passes (fenceTimer). First what the coordinator says (with one, a Nic-KV that
 * no longer leads drops what it was doing), then the state's own tick. */
static void foTick(void) {
    foSight s;
    s.now = foNowUs();
    knownTick(s.now);
    s.have_m = nkProbeNodes(&s.m, 1) == 1 && s.m.is_master;
    if (nkProbeMasterCluster() >= 0) nkClusterMode(nkProbeMasterCluster(), "the master");
    nkClusterTick();
    if (nkClusterDirty()) stateSave();

    if (nkCoordOn()) {
        nkCoordTick(F.master.reach, F.have_master ? F.master.port : 0, s.have_m && s.m.valid,
                    F.state == FO_WATCHING, F.epoch, F.lease_bound_us);
        s.have_m = nkProbeNodes(&s.m, 1) == 1 && s.m.is_master;
        coordRecordWatch();
        if (F.state != FO_WATCHING && !nkCoordLeader()) {
            /* Whatever we were doing is the new leader's to decide: it
             * follows the record, where a promotion we sent is written. */
            if (F.state == FO_PROMOTING) promoteUndo("this Nic-KV no longer leads (coordinator)", 0);
            else foAbort("this Nic-KV no longer leads (coordinator)");
            return;
        }
        /* A master that answers but refuses our lease because another
         * Nic-KV's connection holds its grantor's place (a previous
         * leader, stopped or cut off from etcd): its lease ran out before
         * we led, nobody can renew it, so it takes no writes: replace it. */
        if (nkCoordLeader() && s.have_m && s.m.valid && nkProbeLeaseHeldByIdle()) {
            if (!F.foreign_since_us) F.foreign_since_us = s.now;
        } else F.foreign_since_us = 0;
    }
    if (F.state < 0 || F.state >= FO_STATES) nkBug("failover: state %d", F.state);
    foTicks[F.state](&s);
}

static int foTimer(aeEventLoop *el, long long id, void *data) {
    (void)el; (void)id; (void)data;
    if (nk.shutdown_asap) return AE_NOMORE;
    foTick();
    /* As often as the probes look (nickv_probe.c's probeTick): CONFIG SET
     * probe-interval takes effect at the next tick. */
    return nk.cfg.probe_interval < NICKV_CRON_MS ? nk.cfg.probe_interval : NICKV_CRON_MS;
}

/* ------------------------------------------------------------- Start --- */

/* The probes' news: the master they read says it replicates from to_ip:to_port (an
 * operator's REPLICAOF or FAILOVER, a cluster failover): the probe follows
 * it there; the link and F.master follow once that one answers as the
 * master (foMasterServes). */
static int probeMasterFollows(const char *ip, int port, const char *to_ip, int to_port) {
    (void)ip;
    (void)port;
    /* In cluster mode, only to a node of the shard (nickv_cluster.c): the
     * master's mode as the INFO that says so has it. */
    if (nkProbeMasterCluster() >= 0) nkClusterMode(nkProbeMasterCluster(), "the master");
    if (!nkClusterMayFollow(to_ip, to_port)) return 0;
    if (!nkMember(to_ip, to_port)) {
        nkLogRepeat(LL_WARNING, NULL, "Failover: the master %s:%d replicates from %s:%d, which is not a member "
                    "(no node line names it): not followed", ip, port, to_ip, to_port);
        return 0;
    }
    nkProbeFollowMaster(to_ip, to_port);
    return 1;
}

/* The probes' or the coordinator's news: decide now. */
static void probeChanged(void) {
    foTick();
}

static const nkProbeHooks probe_hooks = {
    .master_serves = foMasterServes,
    .master_follows = probeMasterFollows,
    .granting = leaseGranting,
    .confirming = nkCoordResigning,
    .lease_time = leaseTime,
    .granted = leaseGranted,
    .changed = probeChanged,
    .leader = nkCoordLeader,
    .coordinated = nkCoordOn,
    .may_name = nkCoordMayName,
    .joining = nkFailoverJoining,
    /* event, replicas_init, replicas_next: the sinks main gives us
     * (nkFailoverOnEvents), at nkFailoverStart. */
};

/* Leadership won or lost: the fan-out follows it, and a new leader's
 * first lease goes at once. */
static void coordLeaderChanged(void) {
    nkLinkFanoutCheck();
    nkProbeLeaseNow();
}

static const nkCoordHooks coord_hooks = {
    .follow = foFollow,
    .granted = leaseGranted,
    .lease_bound_us = leaseBoundUs,
    .lease_max_ms = leaseMaxMs,
    .master_lease = nkProbeMasterLease,
    .drop_master_conn = nkProbeDropMasterConn,
    .fanout_changed = coordLeaderChanged,
    .changed = probeChanged,
};

/* The layers above, which main wires in before nkFailoverInit: SENTINEL's
 * events, and the replicas the probes watch. */
static const nkFailoverSinks *sinks;

void nkFailoverOnEvents(const nkFailoverSinks *s) {
    sinks = s;
}

void foEvent(const char *event, int is_master, const char *ip, int port, const char *master_ip, int master_port,
             const char *extra) {
    if (sinks) sinks->event(event, is_master, ip, port, master_ip, master_port, extra);
}

void foSwitchMaster(const char *old_ip, int old_port, const char *new_ip, int new_port) {
    if (sinks) sinks->switch_master(old_ip, old_port, new_ip, new_port);
    nkProbeAnnounceReplicas(new_ip, new_port);
}

int nkFailoverStart(void) {
    nkProbeHooks hooks = probe_hooks;
    if (!sinks) {
        nkBug("Failover: started before main gave it its sinks (nkFailoverOnEvents)");
        return -1;
    }
    hooks.event = sinks->event;
    hooks.replicas_init = sinks->replicas_init;
    hooks.replicas_next = sinks->replicas_next;
    if (nkCoordInit(&coord_hooks) == -1) return -1;
    /* Created before the probes' timer: ae runs the newest first, so a
     * tick due with a probe round runs after it, on its verdicts. */
    aeCreateTimeEvent(nk.el, 1, foTimer, NULL, NULL);
    nkProbeStart(F.master.reach, F.master.port, &hooks);
    return 0;
}

void nkFailoverMaster(const char **ip, int *port) {
    /* From the promotion on F.master is the winner; clients are sent there
     * once it answers +OK (foPromoted), as the probes are. */
    const foNode *n = F.state == FO_PROMOTING ? &F.old : &F.master;
    *ip = n->reach;             /* where it is reached, as +switch-master says */
    *port = n->port;
}

/* ---------------------------------------------------------------- INFO --- */

int nkFailoverJoining(const char *reach, int port) {
    long long now = foNowMs();
    for (int i = 0; i < F.njoining; i++)
        if (F.joining[i].port == port && now < F.joining[i].until_ms && !strcmp(F.joining[i].ip, reach))
            return 1;
    return 0;
}

const char *nkFailoverBlocked(void) {
    /* An attempt called off (its reason is not F.blocked: the next one,
     * tried again soon, clears that) counts for a while: a failover that
     * keeps being called off is blocked too. */
    if (!F.blocked[0] && F.aborted_us && foNowUs() - F.aborted_us < NK_BLOCKED_AFTER_ABORT_MS * 1000LL)
        return F.last_why;
    return F.blocked;
}

sds nkFailoverInfo(sds s) {
    long long left = (F.lease_bound_us - foNowUs()) / 1000;
    s = sdscatprintf(s,
        "# Failover state\r\n"
        "failover:%s\r\n"
        "failover_state:%s\r\n"
        "epoch:%lld\r\n"
        "master:%s:%d\r\n"
        "master_lease:%s\r\n"
        "lease_time:%d\r\n"
        "lease_bound_left_ms:%lld\r\n"
        "failover_blocked:%s\r\n"
        "failovers:%lld\r\n"
        "failovers_aborted:%lld\r\n"
        "planned_handovers:%lld\r\n"
        "failback:%s\r\n"
        "failback_status:%s\r\n"
        "last_failover_ms:%lld\r\n"
        "last_failover:%s\r\n"
        "state_file:%s\r\n"
        "state_file_error:%s\r\n"
        "repoint_pending:%d\r\n"
        "candidates_distrusted:%lld\r\n"
        "candidates_corroborated:%lld\r\n"
        "stream_bound:%lld\r\n",
        nk.cfg.failover ? "yes" : "no", foStateNames[F.state], F.epoch,
        F.master.reach, F.master.port,
        nkProbeMasterLease() == 1 ? (nkProbeLeaseError()[0] ? "refused" : "on") :
        (nkProbeMasterLease() == 0 ? "off" : "unknown"),
        nk.cfg.lease_time, left > 0 ? left : 0, F.blocked, F.failovers, F.aborted, F.planned_done,
        nk.cfg.failback ? "yes" : "no", nk.cfg.failback ? F.failback : "",
        F.last_ms, F.last_why, nk.cfg.state_file ? nk.cfg.state_file : "",
        F.state_err, F.nrepoint, F.distrusted, F.corroborated, nkProbeStreamBound(NULL, NULL));
    for (int i = 0; i < F.nrepoint; i++)
        s = sdscatprintf(s, "repoint%d:addr=%s:%d,old_master=%d,since_ms=%lld,transport=%s,error=%s\r\n", i,
                         F.repoint[i].node.reach, F.repoint[i].node.port, F.repoint[i].old_master,
                         foNowMs() - F.repoint[i].since_ms,
                         F.repoint[i].rdma < 0 ? "unknown" : (F.repoint[i].rdma ? "rdma" : "tcp"),
                         F.repoint[i].last_err);
    return sdscat(s, "\r\n");
}

void nkFailoverResetStats(void) {
    F.failovers = F.aborted = F.planned_done = F.distrusted = F.corroborated = 0;
}
