/* nickv_busy.c -- the master's watch: busy is not dead.
 *
 * Copyright (c) 2026, the SKV authors. BSD 3-Clause licence (see LICENSE).
 *
 * A master with nickv-lease yes runs a thread of its own beside its main
 * thread (src/nickv_watch.c, which has the protocol and what the thread
 * may do with the lease). Its lease answers to us, the grantor, name the
 * thread's port and a token. We keep one connection there, the watch,
 * and every probe-interval send WATCH <t> <ms> <instance>: a grant of the
 * lease like the probe's, from the clock the thread last sent, or a
 * query (t 0) while we may not grant. The thread answers with the main
 * thread's state: how long it has been busy (0: waiting for events) and
 * in which command.
 *
 * The probes use it when the master's own connection goes silent for
 * waiting-time (nickv_probe.c, nodeTick): if the watch answered within
 * waiting-time that the main thread is busy, and for less than busy-limit,
 * the master is busy, not dead, and stays valid; busy longer, it is
 * invalid ("busy for ... ms in ...: more than busy-limit"), and failed
 * over as a dead one is. A silent watch (SIGSTOP, a crash, a dead host or
 * link) changes nothing: the verdict is the probe's, within waiting-time,
 * as without a watch. The watch's grants keep a busy master's lease
 * running, so that it serves again as soon as it is done; they stop with
 * the probe's (hooks.granting: a failover began).
 */

#include "nickv.h"
#include "nickv_conn.h"
#include "nickv_busy.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "util.h"

#define WATCH_REPLY_MAX 256            /* a longer line is not the thread's */
/* A busy spell longer than a year is not one: the answer is refused (and
 * the sums of nkWatchBusy cannot overflow). */
#define NK_WATCH_BUSY_MAX (366LL * 24 * 3600 * 1000)

static struct {
    char reach[256];                   /* the master's address (a name or an IP) ... */
    int port;                          /* ... and its thread's port (0: none) */
    char token[NICKV_INSTANCE_LEN + 1];
    nkConn *conn;
    int connected, authed;
    sds in, out;
    int pending;                       /* WATCHes not answered */
    long long sent_us;                 /* the last WATCH went then */
    long long clock;                   /* the thread's last <now> (0: none) */
    long long answered_us;             /* its last answer came then (0: none) */
    long long busy_ms;                 /* ... the main thread busy for so long */
    char what[64];                     /* ... in this command ("-": none) */
    long long grants, answers, busy_verdicts;
    long long wants;                   /* "+WANT" pushes read */
    nkWatchWantFn want_fn;             /* ... and who takes them */
    char err[128];                     /* why the last connection ended */
} WT;

/* A lease grant's <ms>, the probe's and the watch's alike.
 *
 * The master read its clock t (at s, real time) before we read t (at r),
 * and a grant sent at g gives it the lease until t + ms on its clock. With
 * ms = lease_ms + k (g - r), the lease ends at s + 1.1 (lease_ms + k (g -
 * r)) at the latest, on our clock (a master's millisecond lasts at most
 * 1.1 of ours), which for k <= 1 / 1.1 is before g + 1.1 lease_ms: the
 * bound the grantor counts from g (leaseGranted in nickv_failover.c; the
 * chain of deadlines of nickv_coord.c). k is 0.8, not 0.9: the rest of
 * the clock's age stays slack for clocks that drift apart a little more
 * than assumed (DESIGN.md, "Fencing"). So a grant built on a clock read
 * one probe interval ago is worth nearly a whole lease-time to the master,
 * not one probe interval less. The time since is capped at lease_ms, and
 * the sum at the most a master takes. */
long long nkLeaseGrantMs(long long lease_ms, long long read_us, long long now_us) {
    long long since_ms = (now_us - read_us) / 1000, ms;
    if (lease_ms <= 0) return 0;
    if (since_ms < 0) since_ms = 0;
    if (since_ms > lease_ms) since_ms = lease_ms;
    ms = lease_ms + since_ms * 8 / 10;
    return ms > NICKV_LEASE_MAX_MS ? NICKV_LEASE_MAX_MS : ms;
}

static void watchClose(const char *why) {
    if (WT.conn) nkConnClose(WT.conn);
    WT.conn = NULL;
    WT.connected = WT.authed = 0;
    WT.pending = 0;
    WT.clock = 0;
    if (WT.in) sdsclear(WT.in);
    if (WT.out) sdsclear(WT.out);
    if (why) snprintf(WT.err, sizeof(WT.err), "%s", why);
}

void nkWatchForget(void) {
    watchClose(NULL);
    WT.port = 0;
    WT.reach[0] = WT.token[0] = '\0';
    WT.answered_us = 0;
    WT.busy_ms = 0;
}

void nkWatchTarget(const char *reach, int port, const char *token) {
    if (WT.port == port && !strcmp(WT.reach, reach) && !strcmp(WT.token, token)) return;
    nkWatchForget();
    if (!port) return;
    snprintf(WT.reach, sizeof(WT.reach), "%s", reach);
    WT.port = port;
    snprintf(WT.token, sizeof(WT.token), "%s", token);
}

static void watchFlush(void) {
    while (WT.conn && WT.connected && sdslen(WT.out)) {
        ssize_t w = nkConnWrite(WT.conn, WT.out, sdslen(WT.out));
        if (w <= 0) break;
        sdsrange(WT.out, w, -1);
    }
    if (WT.conn) nkConnSetWriteHandler(WT.conn, NULL);
}

/* "+WATCH <now> <busy-ms> <what> <lease-left-ms>": 1 with them, or 0. */
static int watchParse(const char *line, long long *clock, long long *busy, char *what, size_t wlen) {
    int argc = 0;
    sds *argv = sdssplitlen(line, (ssize_t)strlen(line), " ", 1, &argc);
    long long left;
    int ok = argv && argc == 5 && !strcmp(argv[0], "+WATCH") &&
             string2ll(argv[1], sdslen(argv[1]), clock) && *clock > 0 &&
             string2ll(argv[2], sdslen(argv[2]), busy) && *busy >= 0 && *busy <= NK_WATCH_BUSY_MAX &&
             string2ll(argv[4], sdslen(argv[4]), &left) && left >= 0 &&
             sdslen(argv[3]) > 0 && sdslen(argv[3]) < wlen;
    if (ok) {
        for (size_t i = 0; i < sdslen(argv[3]); i++)
            if (!isgraph((unsigned char)argv[3][i])) ok = 0;
        if (ok) memcpy(what, argv[3], sdslen(argv[3]) + 1);
    }
    if (argv) sdsfreesplitres(argv, argc);
    return ok;
}

void nkWatchOnWant(nkWatchWantFn fn) {
    WT.want_fn = fn;
}

/* "+WANT <now> <offset>": the master's lease answer, pushed early because
 * a WAIT waits for us to confirm <offset> (src/nickv_lease.c on the
 * master's side, nickvLeaseWant). 1 when it is one (taken, or the
 * connection closed when it cannot be read), 0 for any other line. */
static int watchWant(const char *line) {
    long long clock, offset;
    const char *p = line + 6, *sp;
    if (strncmp(line, "+WANT ", 6)) return 0;
    if (!(sp = strchr(p, ' ')) || !string2ll(p, (size_t)(sp - p), &clock) || clock <= 0 ||
        !string2ll(sp + 1, strlen(sp + 1), &offset) || offset < 0) {
        char why[sizeof(WT.err)];
        snprintf(why, sizeof(why), "a push we cannot read: %.60s", line);
        nkLog(LL_WARNING, "Watch: %s", why);
        watchClose(why);
        return 1;
    }
    WT.wants++;
    if (WT.want_fn) WT.want_fn(clock, offset);
    return 1;
}

static void watchLine(const char *line) {
    long long clock, busy;
    char what[sizeof(WT.what)];
    if (!WT.authed) {
        if (strcmp(line, "+OK")) {
            char why[sizeof(WT.err)];
            snprintf(why, sizeof(why), "refused: %.100s", line);
            nkLog(LL_WARNING, "Watch: the master's watch thread %s", why);
            watchClose(why);
            return;
        }
        WT.authed = 1;
        WT.err[0] = '\0';
        return;
    }
    if (watchWant(line)) return;    /* a push, not an answer */
    if (WT.pending > 0) WT.pending--;
    if (!watchParse(line, &clock, &busy, what, sizeof(what))) {
        char why[sizeof(WT.err)];
        snprintf(why, sizeof(why), "an answer we cannot read: %.60s", line);
        if (strcmp(why, WT.err)) nkLog(LL_WARNING, "Watch: %s", why);
        watchClose(why);
        return;
    }
    WT.clock = clock;
    WT.answered_us = getMonotonicUs();
    WT.busy_ms = busy;
    memcpy(WT.what, what, sizeof(WT.what));
    WT.answers++;
}

static void watchReadable(nkConn *conn, void *data) {
    char buf[512];
    (void)data;
    ssize_t n = nkConnRead(conn, buf, sizeof(buf));
    if (n <= 0) {
        if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK)) watchClose(n == 0 ? "closed by the master" : strerror(errno));
        return;
    }
    WT.in = sdscatlen(WT.in, buf, (size_t)n);
    char *nl;
    while (WT.conn && (nl = memchr(WT.in, '\n', sdslen(WT.in)))) {
        size_t len = (size_t)(nl - WT.in);
        if (len && WT.in[len - 1] == '\r') WT.in[len - 1] = '\0';
        else *nl = '\0';
        watchLine(WT.in);
        if (!WT.conn) return;
        sdsrange(WT.in, (ssize_t)len + 1, -1);
    }
    if (WT.conn && sdslen(WT.in) > WATCH_REPLY_MAX) watchClose("an answer too long");
}

static void watchWritable(nkConn *conn, void *data) {
    (void)conn;
    (void)data;
    watchFlush();
}

static void watchConnected(nkConn *conn, void *data) {
    (void)data;
    if (nkConnError(conn)) {
        watchClose(nkConnError(conn));
        return;
    }
    WT.connected = 1;
    nkConnSetWriteHandler(conn, NULL);
    nkConnSetReadHandler(conn, watchReadable);
    WT.out = sdscatfmt(WT.out, "AUTH %s\r\n", WT.token);
    watchFlush();
}

/* A connection to the watch, at most one attempt per probe interval: 1
 * when none is open (one may be on its way). */
static int watchConnect(long long now_us) {
    char err[256];
    if (WT.conn) return 0;
    if (now_us - WT.sent_us < nk.cfg.probe_interval * 1000LL) return 1;
    WT.sent_us = now_us;
    WT.conn = nkConnConnect(nk.loop, WT.reach, WT.port, 0, NULL, 0, err, sizeof(err));
    if (!WT.conn) {
        snprintf(WT.err, sizeof(WT.err), "%.120s", err);
        return 1;
    }
    nkConnSetData(WT.conn, NULL);
    nkConnSetWriteHandler(WT.conn, watchConnected);
    return 1;
}

void nkWatchConnectNow(long long now_us) {
    if (!WT.port) return;
    if (!WT.in) WT.in = sdsempty();
    if (!WT.out) WT.out = sdsempty();
    watchConnect(now_us);
}

int nkWatchTick(long long now_us, int may_grant, long long lease_ms) {
    int grant = 0;
    if (!WT.port) return 0;
    if (!WT.in) WT.in = sdsempty();
    if (!WT.out) WT.out = sdsempty();
    if (watchConnect(now_us)) return 0;
    if (!WT.connected || !WT.authed) {
        /* A peer that accepts and then says nothing (no handshake, no
         * answer to AUTH) does not hold the watch for ever. */
        if (now_us - WT.sent_us > 4LL * nk.cfg.waiting_time * 1000) watchClose("no answer to the connect or AUTH");
        return 0;
    }
    if (now_us - WT.sent_us < nk.cfg.probe_interval * 1000LL) return 0;
    if (WT.pending >= 4) {
        /* The thread answers at once: one that does not is stopped with
         * its process, or the link is gone. A new connection, later. */
        if (now_us - WT.sent_us > 4LL * nk.cfg.waiting_time * 1000) watchClose("no answer");
        return 0;
    }
    grant = may_grant && WT.clock > 0 && lease_ms > 0;
    WT.out = sdscatfmt(WT.out, "WATCH %I %I %s\r\n", grant ? WT.clock : 0LL,
                       grant ? nkLeaseGrantMs(lease_ms, WT.answered_us, now_us) : 0LL,
                       nk.instance);
    WT.pending++;
    WT.sent_us = now_us;
    if (grant) WT.grants++;
    watchFlush();
    if (WT.conn && sdslen(WT.out)) nkConnSetWriteHandler(WT.conn, watchWritable);
    return grant;
}

int nkWatchBusy(long long now_us, long long max_age_us, long long *busy_ms, const char **what) {
    if (!WT.answered_us || now_us - WT.answered_us > max_age_us) return 0;
    /* Busy then, and (the thread would say so) still, since. */
    *busy_ms = WT.busy_ms ? WT.busy_ms + (now_us - WT.answered_us) / 1000 : 0;
    *what = WT.what;
    return 1;
}

void nkWatchCountBusy(void) {
    WT.busy_verdicts++;
}

sds nkWatchInfo(sds s) {
    long long now = getMonotonicUs();
    const char *state = !WT.port ? "none" : (WT.authed ? "connected" : (WT.conn ? "connecting" : "down"));
    return sdscatprintf(s,
        "watch:%s\r\n"
        "watch_port:%d\r\n"
        "watch_answered_ms_ago:%lld\r\n"
        "watch_busy_ms:%lld\r\n"
        "watch_busy_in:%s\r\n"
        "watch_grants:%lld\r\n"
        "watch_answers:%lld\r\n"
        "watch_wait_pushes:%lld\r\n"
        "busy_verdicts:%lld\r\n"
        "busy_limit:%d\r\n"
        "watch_error:%s\r\n",
        state, WT.port, WT.answered_us ? (now - WT.answered_us) / 1000 : -1,
        WT.answered_us ? WT.busy_ms : 0, WT.answered_us && WT.busy_ms ? WT.what : "",
        WT.grants, WT.answers, WT.wants, WT.busy_verdicts, nk.cfg.busy_limit, WT.err);
}

void nkWatchResetStats(void) {
    WT.grants = WT.answers = WT.busy_verdicts = WT.wants = 0;
}
