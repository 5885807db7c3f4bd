/* nickv_lease.c -- a master serves only while Nic-KV grants it a lease.
 *
 * Copyright (c) 2026, the SKV authors. BSD 3-Clause licence (see LICENSE).
 *
 * With nickv-lease yes, a master runs a data command (anything a stale
 * replica with replica-serve-stale-data no would refuse: reads, writes,
 * PSYNC) only while it holds a lease that its Nic-KV renews. Nic-KV stops
 * renewing when it begins a failover and promotes a replica only once the
 * lease has run out: so two masters never both take a write, even when the
 * old one was stopped (SIGSTOP, swap, a hung disk) and resumes with clients'
 * commands queued. The argument, and what it assumes, is NIC-KV.md's
 * "Fencing"; Nic-KV's side is nic-kv/nickv_failover.c.
 *
 * The protocol, on Nic-KV's probe connection (an ordinary client of the
 * nickv-user, not the daemon's replication link):
 *
 *   Nic-KV:  REPLCONF nickv "lease <t> <ms> <instance> <key> [<offset>]"
 *   master:  +LEASE <now> <run-id> <offset> [<watch-port> <token>]

 * (<instance> <key>: which Nic-KV process grants, src/nickv_server.c,
 * "One Nic-KV"; the watch's port and token go to that process alone,
 * src/nickv_watch.c.)
 *
 * <now> is the master's CLOCK_BOOTTIME, in milliseconds, when it ran the
 * command; <run-id> its run id, which tells Nic-KV a restarted process
 * (another run id) from the one it granted to: a master that restarted
 * is vetted before it gets a grant (nic-kv/nickv_probe.c); <offset> its
 * master_repl_offset, the most any replica can hold of its stream, which
 * bounds what a failover candidate may claim to hold. <t> is a <now> the master sent earlier (0: none yet, a query).
 * The master then holds the lease until t + ms on its own clock. Since t
 * was read before Nic-KV received it, and so before Nic-KV sent the grant,
 * the lease ends no later, in real time, than ms after Nic-KV sent it (up
 * to the clocks' rate difference): a grant delayed anywhere, or read late
 * by a master that was stopped, only shortens the lease. A t ahead of the
 * master's clock (a grant computed before a reboot, a confused peer) is
 * refused.
 *
 * Replicas need no lease: the check applies only while this node is a
 * master. A promoted replica (REPLICAOF NO ONE, FAILOVER) and a restarted
 * master start with none: they serve once Nic-KV, which follows the
 * master's moves, grants one.
 */

#include "server.h"
#include <stdatomic.h>
#include <time.h>
#include "nickv_server.h"
#include "nickv_proto.h"

int nickvLease = 0;

#define NICKV_LEASE_SENT 64        /* answers remembered (the probe's pace: ~6 s) */
#define NICKV_WANT_RETRY_MS 50     /* a push not confirmed by then is sent again */

static struct {
    long long grants;          /* grants taken */
    long long refused;         /* commands refused for want of a lease */
    long long bad;             /* grants refused: malformed, from the future */
    int held;                  /* at the last check, for the log */
    time_t bad_logged;
    /* Our recent answers' <now> and <offset>: a grant's <t> names the one
     * Nic-KV read, so Nic-KV knows our stream reached that offset. */
    struct { long long now, offset; int pushed; char replid[CONFIG_RUN_ID_SIZE + 1]; } sent[NICKV_LEASE_SENT];
    int sent_next;
    long long confirmed;       /* the most Nic-KV was told and read ... */
    char confirmed_replid[CONFIG_RUN_ID_SIZE + 1];   /* ... in this history */
    long long want_clock;      /* the <now> of the push not confirmed yet (0: none) ... */
    long long want_offset;     /* ... and its offset */
    long long wants, want_confirms;   /* pushes sent, and confirmed */
} LE;

/* Held until then (our monotonic clock). Atomic: the watch thread
 * prolongs it (nickvLeaseProlong, src/nickv_watch.c). */
static _Atomic long long until_ms;
static _Atomic long long prolonged;        /* by the watch thread */

/* CLOCK_BOOTTIME: monotonic, and it goes on while the machine is
 * suspended, so that a master resumed from a suspend (or a VM restored)
 * finds its lease run out, as a stopped process does. */
static long long leaseNow(void) {
    struct timespec ts;
    clock_gettime(CLOCK_BOOTTIME, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* The lease to run until end, if that is later than now; with
 * only_running, only a lease that still runs (the watch thread prolongs,
 * never starts one). 1 if it was extended. */
static int leaseExtend(long long end, int only_running) {
    long long cur = atomic_load(&until_ms);
    do {
        if (end <= cur || (only_running && cur <= leaseNow())) return 0;
    } while (!atomic_compare_exchange_weak(&until_ms, &cur, end));
    return 1;
}

/* The watch thread's grant (src/nickv_watch.c says when it may): t is a
 * clock that thread sent. */
void nickvLeaseProlong(long long t, long long ms) {
    if (leaseExtend(t + ms, 1)) atomic_fetch_add(&prolonged, 1);
}

/* What is left of the lease at now (the watch thread's answer). */
long long nickvLeaseLeftMsAt(long long now) {
    long long left = atomic_load(&until_ms) - now;
    return left > 0 ? left : 0;
}

/* 1 while this node may serve data as a master. A fresh clock read: a
 * master that was stopped sees its lease expired before it runs anything
 * that was queued meanwhile. */
int nickvLeaseHeld(void) {
    int held;
    if (!nickvLease) return 1;
    if (server.masterhost) {
        /* A replica holds none: promoted again, it waits for a grant. */
        atomic_store(&until_ms, 0);
        LE.held = 0;
        return 1;
    }
    held = leaseNow() < atomic_load(&until_ms);
    if (held != LE.held) {
        if (held)
            serverLog(LL_NOTICE, "Nic-KV lease: granted, this master serves again");
        else
            serverLog(LL_WARNING, "Nic-KV lease: expired, this master refuses data commands "
                      "until Nic-KV grants a new one (nickv-lease yes)");
        LE.held = held;
    }
    return held;
}

/* 1 while this master holds a lease: Nic-KV's probes reach it and its
 * process runs (no log, no side effect; nickvLeaseHeld is the check). */
int nickvLeaseActive(void) {
    return nickvLease && !server.masterhost && leaseNow() < atomic_load(&until_ms);
}

long long nickvLeaseLeftMs(void) {
    long long left = atomic_load(&until_ms) - leaseNow();
    return nickvLeaseActive() && left > 0 ? left : 0;
}

static int isScript(struct redisCommand *cmd) {
    void (*p)(client *) = cmd ? cmd->proc : NULL;
    return p == evalCommand || p == evalRoCommand || p == evalShaCommand ||
           p == evalShaRoCommand || p == fcallCommand || p == fcallroCommand;
}

/* A script, or a transaction holding one. EVAL without flags is flagged
 * CMD_STALE (a stale replica runs it, and its commands are checked one by
 * one), but inside a script a master checks no staleness: a leaseless
 * master would serve stale reads through it. */
static int hasScript(client *c) {
    if (isScript(c->cmd)) return 1;
    if (c->cmd->proc != execCommand || !(c->flags & CLIENT_MULTI)) return 0;
    for (int j = 0; j < c->mstate.count; j++)
        if (isScript(c->mstate.commands[j].cmd)) return 1;
    return 0;
}

/* processCommand(): 1 if the command was refused (the reply is sent).
 * What a stale replica refuses (denystale: not flagged CMD_STALE), and
 * scripts, need the lease; INFO, ROLE, HELLO, REPLICAOF, CONFIG, AUTH,
 * CLIENT and the like never do, and PING does not either: liveness probes
 * (a load balancer's, Kubernetes') ask PING, and a master that only lost
 * its lease is alive. PING carries no data, but it lets a replica's
 * handshake go on to PSYNC, which therefore gets -NOMASTERLINK, not
 * -MASTERDOWN: a Redis replica takes -NOMASTERLINK (or -LOADING) for "try
 * again later" and keeps its cached master, where any other error means
 * "PSYNC not supported" to it: it drops its replication history and falls
 * back to SYNC, so its offset no longer says what it holds and the
 * failover cannot check it (nickv-failover-edges.tcl failed five ways
 * when PING answered with PSYNC refused as MASTERDOWN). */
/* PING, or a transaction of PINGs and commands a stale replica serves,
 * scripts aside (hasScript): EXEC is judged by what it queued
 * (is_denystale), and PING is not flagged CMD_STALE. */
static int onlyPings(client *c) {
    if (c->cmd->proc == pingCommand) return 1;
    if (c->cmd->proc != execCommand || !(c->flags & CLIENT_MULTI)) return 0;
    for (int j = 0; j < c->mstate.count; j++) {
        struct redisCommand *q = c->mstate.commands[j].cmd;
        if (isScript(q) || (q->proc != pingCommand && !(q->flags & CMD_STALE))) return 0;
    }
    return 1;
}

int nickvLeaseRefuses(client *c, int is_write, int is_denystale) {
    nickvWatchCommand(c);
    if (!nickvLease || mustObeyClient(c) || (!is_denystale && !hasScript(c)) || onlyPings(c) || nickvLeaseHeld())
        return 0;
    LE.refused++;
    if (c->cmd->proc == syncCommand)
        rejectCommandFormat(c, "-NOMASTERLINK This master holds no lease from Nic-KV (nickv-lease yes): "
                            "try again later");
    else if (is_write)
        rejectCommandFormat(c, "-READONLY You can't write against a master that holds no lease "
                            "from Nic-KV (nickv-lease yes): it may have been replaced");
    else
        rejectCommandFormat(c, "-MASTERDOWN This master holds no lease from Nic-KV (nickv-lease "
                            "yes): it may have been replaced");
    return 1;
}

/* A grant echoes t, the <now> of an answer Nic-KV read: that answer's
 * offset is confirmed. Answers within one millisecond share a <now>: the
 * least of their offsets is the one surely read. */
static void leaseConfirmed(long long t, long long echoed) {
    long long offset = -1;
    int pushed = 0;
    for (int i = 0; i < NICKV_LEASE_SENT; i++)
        if (LE.sent[i].now == t && !strcmp(LE.sent[i].replid, server.replid) &&
            (echoed < 0 || LE.sent[i].offset == echoed)) {
            if (offset == -1 || LE.sent[i].offset < offset) offset = LE.sent[i].offset;
            pushed |= LE.sent[i].pushed;
        }
    if (offset == -1) return;
    if (pushed) LE.want_confirms++;
    if (offset > server.master_repl_offset) offset = server.master_repl_offset;
    if (strcmp(LE.confirmed_replid, server.replid)) {
        memcpy(LE.confirmed_replid, server.replid, sizeof(LE.confirmed_replid));
        LE.confirmed = 0;
    }
    if (offset > LE.confirmed) LE.confirmed = offset;
    /* The push is answered, by its own echo or a later answer's: the next
     * may go (nickvLeaseWant). */
    if (LE.want_clock && (pushed || LE.confirmed >= LE.want_offset)) LE.want_clock = 0;
}

/* Remember that we told Nic-KV our stream reached where it is now, with
 * this <now>: a grant that echoes it confirms that offset. */
static void leaseSent(long long now, int pushed) {
    LE.sent[LE.sent_next].now = now;
    LE.sent[LE.sent_next].pushed = pushed;
    LE.sent[LE.sent_next].offset = server.master_repl_offset;
    memcpy(LE.sent[LE.sent_next].replid, server.replid, sizeof(LE.sent[0].replid));
    LE.sent_next = (LE.sent_next + 1) % NICKV_LEASE_SENT;
}

/* A WAIT that a direct replica's ACK would satisfy, were it confirmed
 * (src/nickv_server.c, nickvDirectAckCounts). A lease answer would tell
 * the grantor where our stream is at its next probe, and its grant after
 * that would confirm it: two probe intervals, 200 ms at the defaults,
 * for every such WAIT. Instead the watch thread pushes "+WANT <now>
 * <offset>" to the grantor's watch connection at once (src/nickv_watch.c);
 * the grantor takes it as it takes a lease answer, and grants at once,
 * echoing <now> (nic-kv/nickv_probe.c, probeWant): the offset is
 * confirmed within a round trip, by the same rule as before (a grant from
 * our grantor, on its probe connection, echoing a <now> we sent with that
 * offset). Nothing else changes: the push is only a lease answer sent
 * early, and it confirms nothing by itself. One push at a time: the next
 * once this one is confirmed (a WAIT still waiting then asks again), or
 * after NICKV_WANT_RETRY_MS (no watch connection, a lost push).
 *
 * Several answers and pushes may go in one millisecond, with one <now>
 * and several offsets: a grant that echoes only <now> confirms the lowest
 * of them (Nic-KV may have read only that one). The grant that answers a
 * push also echoes the offset it read ("lease <t> <ms> <instance> <key>
 * <offset>", sent only to a master that pushes, so that an older one
 * never sees six words): that offset is confirmed when it is one we sent
 * with <t>, and no other. */
void nickvLeaseWant(void) {
    long long now;
    if (!nickvLeaseActive()) return;
    now = leaseNow();
    if (LE.want_clock && now - LE.want_clock < NICKV_WANT_RETRY_MS) return;
    if (!nickvWatchWant(now, server.master_repl_offset)) return;
    leaseSent(now, 1);          /* before the main thread can read the grant */
    LE.want_clock = now;
    LE.want_offset = server.master_repl_offset;
    LE.wants++;
}

/* What the watch thread does to the lease: it calls back, as it knows
 * nothing of this file. */
static const nickvWatchLeaseOps watch_lease = {
    .prolong = nickvLeaseProlong,
    .left_ms_at = nickvLeaseLeftMsAt,
};

/* REPLCONF nickv "lease <t> <ms> <instance> <key>" (argv[0] is "lease"),
 * from the grantor (bound: it became the grantor with this message). */
void nickvLeaseGrant(client *c, int argc, sds *argv, int bound) {
    long long t, ms, echoed = -1, now = leaseNow();
    if ((argc != NICKV_MSG_LEASE_ARGC && argc != NICKV_MSG_LEASE_AT_ARGC) ||
        !string2ll(argv[1], sdslen(argv[1]), &t) || t < 0 ||
        !string2ll(argv[2], sdslen(argv[2]), &ms) || ms < 0 || ms > NICKV_LEASE_MAX_MS ||
        (argc == NICKV_MSG_LEASE_AT_ARGC && (!string2ll(argv[5], sdslen(argv[5]), &echoed) || echoed < 0))) {
        LE.bad++;
        addReplyError(c, "malformed lease: expected lease <t> <ms> <instance> <key> [<offset>]");
        return;
    }
    if (t > now) {
        LE.bad++;
        if (server.unixtime != LE.bad_logged)
            serverLog(LL_WARNING, "Nic-KV lease: refused a grant from %lld ms in the future "
                      "(our clock is %lld): not a time we sent", t - now, now);
        LE.bad_logged = server.unixtime;
        addReplyErrorFormat(c, "lease time %lld is ahead of this clock (%lld)", t, now);
        return;
    }
    /* The watch thread learns the grantor first: a watch of another one,
     * or of an earlier bind, prolongs nothing from here on, and no watch
     * grant goes past this one's ms (nickvWatchGrantor). */
    const char *token = "";
    if (nickvLease && !server.masterhost) {
        nickvWatchStart(&watch_lease);
        char ip[NET_IP_STR_LEN] = "";
        if (connPeerToString(c->conn, ip, sizeof(ip), NULL) == -1) ip[0] = '\0';
        token = nickvWatchGrantor(argv[3], ip, bound, t > 0 ? ms : 0);
    }
    /* A replica takes none (nickvLeaseHeld): it answers the clock. A
     * grant taken counts, whether or not it ends later than one the watch
     * thread prolonged. */
    if (t > 0 && !server.masterhost) {
        leaseExtend(t + ms, 0);
        LE.grants++;
        nickvLeaseHeld();       /* "granted" in the log now, not at the next command */
    }
    if (t > 0) leaseConfirmed(t, echoed);
    leaseSent(now, 0);
    /* A master's grantor (nickvGrantorCheck bound it) also learns where
     * the watch thread listens, and the token it asks for. */
    if (token[0]) {
        addReplyStatusFormat(c, "LEASE %lld %s %lld %d %s", now, server.runid, server.master_repl_offset,
                             nickvWatchListeningPort(), token);
        return;
    }
    addReplyStatusFormat(c, "LEASE %lld %s %lld", now, server.runid, server.master_repl_offset);
}

/* How far Nic-KV has read that our stream goes, in this history: the
 * offset of an answer whose <now> a later grant echoed (0: none). Nic-KV's
 * failover bounds what a replica may claim by what it heard this way
 * (nickvDirectAckCounts, src/nickv_server.c, says why that matters). */
long long nickvLeaseConfirmedOffset(void) {
    if (!nickvLease || strcmp(LE.confirmed_replid, server.replid)) return 0;
    return LE.confirmed;
}

sds nickvLeaseInfo(sds info) {
    long long left = atomic_load(&until_ms) - leaseNow();
    const char *state = !nickvLease ? "off" : (server.masterhost ? "replica" :
                        (left > 0 ? "held" : "expired"));
    return sdscatprintf(info,
        "nickv_lease:%s\r\n"
        "nickv_lease_left_ms:%lld\r\n"
        "nickv_lease_grants:%lld\r\n"
        "nickv_lease_refused_commands:%lld\r\n"
        "nickv_lease_bad_grants:%lld\r\n"
        "nickv_lease_watch_grants:%lld\r\n"
        "nickv_watch_port:%d\r\n"
        "nickv_wait_pushes:%lld\r\n"
        "nickv_wait_pushes_confirmed:%lld\r\n",
        state, left > 0 ? left : 0, LE.grants, LE.refused, LE.bad, (long long)atomic_load(&prolonged),
        nickvWatchListeningPort(), LE.wants, LE.want_confirms);
}

void nickvLeaseResetStats(void) {
    LE.grants = LE.refused = LE.bad = LE.wants = LE.want_confirms = 0;
    atomic_store(&prolonged, 0);
}
