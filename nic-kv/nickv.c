/* nickv.c -- Nic-KV: the replication fan-out daemon of SKV.
 *
 * Copyright (c) 2026, the SKV authors. BSD 3-Clause licence (see LICENSE).
 *
 * Nic-KV runs on the DPU (BlueField ARM cores) in the master's server. The
 * master sends its replication stream once, to Nic-KV; Nic-KV keeps a
 * backlog of it and sends it on to every replica. The master's CPU per
 * write then no longer grows with the number of replicas.
 *
 * ========================================================================
 * The protocol: master, Nic-KV, replicas
 * ========================================================================
 *
 * Everything is Redis's own replication protocol (RESP commands, PSYNC,
 * REPLCONF, the byte stream with the master's offsets), plus REPLCONF
 * extensions that a plain Redis ignores or refuses harmlessly.
 *
 * 1. Nic-KV joins the master (nickv_upstream.c), as a replica would:
 *
 *      Nic-KV -> master   AUTH [masteruser] masterauth           (if set)
 *                         REPLCONF listening-port <our port>
 *                         REPLCONF capa eof capa psync2
 *                         REPLCONF nickv "hello <announce-ip|?> <port> <rdma-port>"
 *      master -> Nic-KV   +<replid> <master_repl_offset>
 *                         (or -NICKV refused: <why>: we are not its
 *                         nickv-user, another daemon is healthy, or it is
 *                         a replica now; Nic-KV closes and retries a
 *                         second later, and its probes follow a master
 *                         that moved: nickv_probe.c)
 *      Nic-KV -> master   PSYNC <replid> <offset+1>
 *      master -> Nic-KV   +CONTINUE <replid>, then the stream
 *
 *    Nic-KV holds no data, so it joins at the master's current offset with
 *    a partial resync: no BGSAVE for it. (After a short disconnection it
 *    PSYNCs from where its own backlog ends instead.) A master that is not
 *    SKV answers "hello" with an error: Nic-KV then PSYNCs "? -1", drops
 *    the RDB, and still serves replicas pointed at it, without the
 *    master knowing about them.
 *
 *    While streaming, Nic-KV sends every NICKV_HEARTBEAT_MS (200 ms)
 *      REPLCONF ACK <last offset>                   (keeps its link alive)
 *      REPLCONF nickv "backlog <first> <last> <free-client-slots>"
 *                              (what it can serve; also its heartbeat)
 *    and, for the replicas it serves,
 *      REPLCONF nickv "add <id> <ip> <listening-port>"   when one starts
 *      REPLCONF nickv "ack <id> <offset>"                each ACK it sends us
 *      REPLCONF nickv "del <id>"                         when one goes
 *    so that WAIT, min-replicas-to-write and INFO on the master count real
 *    replicas with their real acknowledgements; and what its probes find
 *      REPLCONF nickv "health <min-slaves> <n> <addr> <port>..."
 *                              (the valid replicas: nickv_probe.c)
 *    The master never answers these (a reply on a replica's link gets it
 *    dropped). The daemon's own link
 *    counts as no replica. Every word, reply prefix and timer of this
 *    protocol is defined once, in src/nickv_proto.h, for both sides.
 *
 * 2. A replica finds Nic-KV through the master. An SKV replica configured
 *    with "replicaof <master>" advertises REPLCONF capa nickv. When the
 *    master has a healthy Nic-KV whose backlog holds the offset the
 *    replica's PSYNC asks for, it answers the PSYNC with
 *
 *      +NICKV <host> <port> <rdma-port>
 *
 *    and closes; the replica's next connect goes to Nic-KV with the same
 *    PSYNC. A direct replica with that capa is handed over the same way:
 *    once it is online and within Nic-KV's backlog, the master closes its
 *    link; it reconnects and is redirected. The hand-off point is exact:
 *    the replica's own offset, which Nic-KV continues from.
 *
 * 3. A replica at Nic-KV (redirected, or configured "replicaof <nickv>",
 *    even an upstream Redis):
 *
 *      replica -> Nic-KV  [AUTH ...] REPLCONF ... PSYNC <replid> <offset>
 *      Nic-KV -> replica  +CONTINUE <replid>, then the stream from <offset>
 *                         (if <replid> is the master's and <offset> is in
 *                         the backlog, or just past its end; an offset
 *                         further ahead, which the master produced but
 *                         whose bytes are still on their way to us, waits
 *                         up to NICKV_PSYNC_WAIT_MS for the stream)
 *                         -NICKV <why>     (a redirected SKV replica, which
 *                         says "REPLCONF capa nickv-via", that it cannot
 *                         serve: it goes back to the master, which serves
 *                         it directly, with a full sync if need be)
 *                         +FULLRESYNC ... RDB ...   (any other replica it
 *                         cannot serve, upstream Redis or an SKV replica
 *                         whose configured master is Nic-KV itself: sending
 *                         that one "back" would bring it straight back
 *                         here. Nic-KV opens a connection of its
 *                         own to the master, asks for a full sync, passes
 *                         the reply and the RDB through unchanged, then
 *                         goes on from its backlog at the RDB's offset)
 *      replica -> Nic-KV  REPLCONF ACK <offset>   (relayed to the master)
 *
 *    Full syncs of SKV replicas come straight from the master's host: the
 *    RDB's bulk never crosses the DPU's cores (the SKV paper's choice; see
 *    NIC-KV.md for the numbers). Only replicas that cannot be redirected
 *    get theirs through Nic-KV.
 *
 * 4. Transports. Every link above is TCP or RDMA (SKV's RDMA transport,
 *    src/rdma_chan.c: the same RESP bytes carried by RDMA WRITE_WITH_IMM).
 *    With master-rdma-port set, Nic-KV's link to the master is an RDMA
 *    connection to the master's rdma-port: the master posts one
 *    WRITE_WITH_IMM per flush of its replication buffer to us, whatever the
 *    number of replicas. With rdma-port set, Nic-KV announces it in its
 *    hello; the master redirects replicas that replicate over RDMA
 *    (rdma-replication yes) there, and TCP replicas to the TCP port. An
 *    RDMA replica's stream is sent without any copy: its channel registers
 *    the backlog ring, and each wakeup posts what it is due as 64 KB work
 *    requests pointing into the ring, linked into one ibv_post_send (one
 *    doorbell). The ring is never overwritten where a replica's NIC may
 *    still read (nickv_backlog.c). Proxied full syncs always read the RDB
 *    from the master over TCP (master-port); the replica may be on either.
 *
 * 5. Failure. If Nic-KV dies, its replicas lose their link and reconnect
 *    to their configured master, which no longer redirects them (Nic-KV is
 *    not healthy): a partial resync from the master's backlog. If it hangs
 *    (SIGSTOP), its heartbeat stops: after NICKV_DAEMON_TIMEOUT_MS the
 *    master closes its link and forgets its replicas; the master PINGs an
 *    idle stream every NICKV_PING_MS while a healthy daemon carries it, so
 *    an SKV replica behind Nic-KV that hears nothing for
 *    NICKV_VIA_TIMEOUT_MS knows Nic-KV is hung (not idle) and goes back to
 *    the master, which by then serves it directly (src/nickv_server.c).
 *    When Nic-KV returns, the master hands them over again. If Nic-KV
 *    loses the master for longer than a few seconds it closes its
 *    replicas' links, so that they fall back too.
 *
 * A replica's state in Nic-KV, from its connection to its last byte, is
 * drawn at the top of nickv_replica.c, which makes every move of it. The
 * master link's states are in nickv_upstream.c.
 */

#include "nickv.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/time.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "anet.h"
#include "monotonic.h"
#include "util.h"
#include "sha256.h"
#include "zmalloc.h"
#include "skv_version.h"

void getRandomHexChars(char *p, size_t len);   /* util.c (declared in server.h) */

nkServer nk;

/* The stats this file counts (the replicas', the link's and the RDMA
 * transport's are their files'). */
static struct {
    long long connections;
    long long auth_failures;
    long long protocol_errors;
    long long rejected_conn;            /* refused: maxclients reached */
    long long obuf_drops;               /* dropped: output buffer limits */
    long long auth_timeouts;            /* closed: did not authenticate */
} stats;

/* ------------------------------------------------------------ Logging --- */

static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;

void nkLog(int level, const char *fmt, ...) {
    static const char marks[] = ".-*#";
    char msg[1024], ts[64];
    struct timeval tv;
    struct tm tm;
    va_list ap;
    FILE *fp;

    if (level < nk.cfg.verbosity) return;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    gettimeofday(&tv, NULL);
    localtime_r(&tv.tv_sec, &tm);
    strftime(ts, sizeof(ts), "%d %b %Y %H:%M:%S", &tm);
    pthread_mutex_lock(&log_lock);
    fp = (nk.cfg.logfile && *nk.cfg.logfile) ? fopen(nk.cfg.logfile, "a") : stdout;
    if (fp) {
        fprintf(fp, "%d:K %s.%03d %c %s\n", (int)getpid(), ts, (int)(tv.tv_usec / 1000),
                marks[level], msg);
        fflush(fp);
        if (fp != stdout) fclose(fp);
    }
    pthread_mutex_unlock(&log_lock);
}

/* The lines nkLogRepeat is counting: a slot per key (its hash), with the
 * last text, when its window began, and how many were not logged. A slot
 * whose window ended with nothing counted is free again. */
#define NK_LOG_REPEAT_SLOTS 32

static struct nkLogRepeatSlot {
    uint64_t key;               /* 0: free */
    int level;
    long long since_ms;         /* the window began (the line was logged) */
    long long count;            /* lines like it since then, not logged */
    char last[1024];            /* the last of them */
} nkRepeats[NK_LOG_REPEAT_SLOTS];

static uint64_t nkLogRepeatHash(const char *s) {
    uint64_t h = 1469598103934665603ULL;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ULL;
    return h ? h : 1;
}

static long long nkLogRepeatNow(void) {
    return (long long)getMonotonicUs() / 1000;
}

/* The slot's count, logged, and a new window begun. */
static void nkLogRepeatFlush(struct nkLogRepeatSlot *r, long long now) {
    nkLog(r->level, "%s (%lld more in the last %lld s)", r->last, r->count,
          (now - r->since_ms + 999) / 1000);
    r->count = 0;
    r->since_ms = now;
}

void nkLogRepeat(int level, const char *key, const char *fmt, ...) {
    char msg[1024];
    va_list ap;
    long long now = nkLogRepeatNow();
    struct nkLogRepeatSlot *r = NULL, *unused = NULL, *oldest = &nkRepeats[0];

    if (level < nk.cfg.verbosity) return;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    uint64_t h = nkLogRepeatHash(key ? key : msg);
    for (int i = 0; i < NK_LOG_REPEAT_SLOTS; i++) {
        struct nkLogRepeatSlot *s = &nkRepeats[i];
        if (s->key == h) {
            r = s;
            break;
        }
        if (!s->key && !unused) unused = s;
        if (s->key && s->since_ms < oldest->since_ms) oldest = s;
    }
    if (r && now - r->since_ms < NK_LOG_REPEAT_MS) {
        r->count++;
        memcpy(r->last, msg, sizeof(r->last));
        r->level = level;
        return;
    }
    if (r && r->count) {
        /* Its window ended before the cron saw it: this line says the count. */
        memcpy(r->last, msg, sizeof(r->last));
        r->level = level;
        nkLogRepeatFlush(r, now);
        return;
    }
    if (!r) r = unused;
    if (!r) {
        /* Every slot in use: the oldest window ends early. */
        r = oldest;
        if (r->count) nkLogRepeatFlush(r, now);
    }
    nkLog(level, "%s", msg);
    r->key = h;
    r->level = level;
    r->since_ms = now;
    r->count = 0;
    memcpy(r->last, msg, sizeof(r->last));
}

/* Windows that ended: their counts logged (a new window begins, so a line
 * that keeps coming is summed up once per window), or their slot freed. */
void nkLogRepeatCron(void) {
    long long now = nkLogRepeatNow();
    for (int i = 0; i < NK_LOG_REPEAT_SLOTS; i++) {
        struct nkLogRepeatSlot *r = &nkRepeats[i];
        if (!r->key || now - r->since_ms < NK_LOG_REPEAT_MS) continue;
        if (r->count) nkLogRepeatFlush(r, now);
        else r->key = 0;
    }
}

long long nkUnixTime(void) {
    return (long long)time(NULL);
}

/* ------------------------------------------------------- Configuration --- */

/* Raise the open files limit to maxclients + NK_RESERVED_FDS if it is
 * lower, as upstream's adjustOpenFilesLimit(); where the system refuses,
 * lower maxclients to what the limit allows, and say so. Returns -1 when
 * the limit leaves no room for a single client. */
static int nkAdjustOpenFilesLimit(void) {
    rlim_t want = (rlim_t)nk.cfg.maxclients + NK_RESERVED_FDS, best;
    struct rlimit lim;
    int setrlimit_error = 0;

    if (getrlimit(RLIMIT_NOFILE, &lim) == -1) {
        nkLog(LL_WARNING, "Unable to obtain the current NOFILE limit (%s), assuming 1024 and "
              "setting maxclients accordingly", strerror(errno));
        if (nk.cfg.maxclients > 1024 - NK_RESERVED_FDS) nk.cfg.maxclients = 1024 - NK_RESERVED_FDS;
        return 0;
    }
    if (lim.rlim_cur >= want) return 0;
    /* What we want, raising the hard limit if need be; else the hard
     * limit; else what we have. */
    struct rlimit l = { want, want > lim.rlim_max ? want : lim.rlim_max };
    best = want;
    if (setrlimit(RLIMIT_NOFILE, &l) == -1) {
        setrlimit_error = errno;
        best = lim.rlim_cur;
        if (lim.rlim_max > lim.rlim_cur) {
            l.rlim_cur = l.rlim_max = lim.rlim_max;
            if (setrlimit(RLIMIT_NOFILE, &l) != -1) best = lim.rlim_max;
        }
    }
    if (best >= want) {
        nkLog(LL_NOTICE, "Increased maximum number of open files to %llu (it was originally "
              "set to %llu)", (unsigned long long)want, (unsigned long long)lim.rlim_cur);
        return 0;
    }
    if (best <= NK_RESERVED_FDS) {
        nkLog(LL_WARNING, "The open files limit of %llu is not enough for Nic-KV to start: "
              "raise it to at least %llu", (unsigned long long)best, (unsigned long long)want);
        return -1;
    }
    nkLog(LL_WARNING, "maxclients %d needs %llu open files, which the system refuses (%s): "
          "the limit is %llu, so maxclients is now %d. Raise 'ulimit -n' for more clients.",
          nk.cfg.maxclients, (unsigned long long)want, strerror(setrlimit_error),
          (unsigned long long)best, (int)(best - NK_RESERVED_FDS));
    nk.cfg.maxclients = (int)(best - NK_RESERVED_FDS);
    return 0;
}

/* CONFIG SET maxclients: only as many as the open files limit allows (it
 * is raised if it can be). */
static int applyMaxclients(const char **err) {
    static char msg[160];
    int asked = nk.cfg.maxclients;
    if (nkAdjustOpenFilesLimit() == -1 || nk.cfg.maxclients < asked) {
        snprintf(msg, sizeof(msg), "The operating system is not able to handle the specified "
                 "number of clients, try with %d", nk.cfg.maxclients);
        *err = msg;
        return 0;
    }
    return 1;
}

/* Every option is one row of nkConfigs[] below, in the manner of upstream's
 * static_configs[]: its name, its type, its bounds, its default, whether it
 * may change at run time, and what applies a change. The config file, the
 * --name value options, --help, CONFIG GET and CONFIG SET all read that one
 * table. Numbers are parsed with upstream's string2ll() and memtoull(), and
 * errors are worded as redis-server words them. */

typedef enum {
    NK_CFG_BOOL,        /* int, yes|no */
    NK_CFG_INT,         /* int, within min..max */
    NK_CFG_SIZE,        /* long long, bytes ("64mb"), within min..max */
    NK_CFG_STRING,      /* char *, NULL when empty */
    NK_CFG_ENUM,        /* int, one of enums[] */
    NK_CFG_SPECIAL      /* set()/get() of its own */
} nkConfigType;

#define NK_CFG_IMMUTABLE (1<<0)   /* startup only (config file, --name) */
#define NK_CFG_MULTI_ARG (1<<1)   /* takes several words */
#define NK_CFG_PROTECTED (1<<2)   /* names a program or a file: CONFIG SET only
                                   * as enable-protected-configs allows */
#define NK_CFG_NONEMPTY (1<<3)    /* STRING: "" is refused (it would be NULL,
                                   * and the option has no "none") */

typedef struct nkConfigEnum {
    const char *name;
    int val;
} nkConfigEnum;

typedef struct nkConfigOption {
    const char *name;
    nkConfigType type;
    int flags;
    void *data;                 /* int *, long long *, char ** (not SPECIAL) */
    long long min, max;         /* INT, SIZE */
    long long def;              /* BOOL, INT, SIZE, ENUM */
    const char *def_str;        /* STRING, SPECIAL (parsed by set()) */
    const nkConfigEnum *enums;  /* ENUM */
    /* SPECIAL: parse argv into the option (1), or say why not (0, *err). */
    int (*set)(int argc, sds *argv, const char **err);
    sds (*get)(void);           /* SPECIAL: the value, as CONFIG GET shows it */
    /* A change at run time takes effect: 1, or 0 and *err. */
    int (*apply)(const char **err);
    const char *args, *help;    /* for --help */
} nkConfigOption;

static char cfgErr[256];        /* an error message built for the caller */

/* Bytes from "<digits>[b|k|kb|m|mb|g|gb]" (upstream's memtoull()), refusing
 * what does not fit a long long, which memtoull() lets wrap around. */
static int nkParseSize(const char *s, long long *out) {
    static const struct { const char *unit; long long mul; } units[] = {
        {"", 1}, {"b", 1}, {"k", 1000}, {"kb", 1024}, {"m", 1000*1000},
        {"mb", 1024*1024}, {"g", 1000LL*1000*1000}, {"gb", 1024LL*1024*1024}
    };
    size_t digits = strspn(s, "0123456789");
    long long n, mul = 0;
    int err;
    unsigned long long v = memtoull(s, &err);
    if (err || digits == 0 || !string2ll(s, digits, &n)) return 0;
    for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++)
        if (!strcasecmp(s + digits, units[i].unit)) mul = units[i].mul;
    if (mul == 0 || n > LLONG_MAX / mul || v != (unsigned long long)n * mul) return 0;
    *out = (long long)v;
    return 1;
}

/* client-output-buffer-limit replica <hard> <soft> <soft-seconds>: what a
 * proxied full sync may queue for a replica (see nkClientsCron()). */
static int cfgSetObufLimit(int argc, sds *argv, const char **err) {
    long long hard, soft, secs;
    if (argc != 4) {
        *err = "Wrong number of arguments in buffer limit configuration.";
        return 0;
    }
    if (strcasecmp(argv[0], "replica") && strcasecmp(argv[0], "slave")) {
        *err = "Invalid client class specified in buffer limit configuration.";
        return 0;
    }
    if (!nkParseSize(argv[1], &hard) || !nkParseSize(argv[2], &soft) ||
        !string2ll(argv[3], sdslen(argv[3]), &secs) || secs < 0 || secs > INT_MAX) {
        *err = "Error in hard, soft or soft_seconds setting in buffer limit configuration.";
        return 0;
    }
    nk.cfg.obuf_hard = hard;
    nk.cfg.obuf_soft = soft;
    nk.cfg.obuf_soft_seconds = (int)secs;
    return 1;
}

static sds cfgGetObufLimit(void) {
    return sdscatprintf(sdsempty(), "replica %lld %lld %d", nk.cfg.obuf_hard, nk.cfg.obuf_soft,
                        nk.cfg.obuf_soft_seconds);
}

/* A list of addresses (bind, rdma-bind). */
static int cfgSetAddrs(char **addrs, int *count, int argc, sds *argv, const char **err) {
    int n = 0;
    if (argc > NK_MAX_BIND) {
        snprintf(cfgErr, sizeof(cfgErr), "at most %d addresses", NK_MAX_BIND);
        *err = cfgErr;
        return 0;
    }
    for (int i = 0; i < *count; i++) zfree(addrs[i]);
    for (int i = 0; i < argc; i++)
        if (*argv[i]) addrs[n++] = zstrdup(argv[i]);
    *count = n;
    return 1;
}

static sds cfgGetAddrs(char **addrs, int count) {
    sds s = sdsempty();
    for (int i = 0; i < count; i++) s = sdscatfmt(s, "%s%s", i ? " " : "", addrs[i]);
    return s;
}

static int cfgSetBind(int argc, sds *argv, const char **err) {
    if (argc == 0 || (argc == 1 && !*argv[0])) {
        *err = "bind needs at least one address";
        return 0;
    }
    return cfgSetAddrs(nk.cfg.bind, &nk.cfg.bindcount, argc, argv, err);
}
static sds cfgGetBind(void) { return cfgGetAddrs(nk.cfg.bind, nk.cfg.bindcount); }
static int cfgSetRdmaBind(int argc, sds *argv, const char **err) {
    return cfgSetAddrs(nk.cfg.rdma_bind, &nk.cfg.rdma_bindcount, argc, argv, err);
}
static sds cfgGetRdmaBind(void) { return cfgGetAddrs(nk.cfg.rdma_bind, nk.cfg.rdma_bindcount); }

/* Takes effect for the next registration; what is pinned stays pinned. */
static int applyRdmaMaxPinned(const char **err) {
    (void)err;
    rdmaSetPinnedLimit((size_t)nk.cfg.rdma_max_pinned);
    return 1;
}

static int applyRdmaMaxUnauth(const char **err) {
    (void)err;
    rdmaSetUnauthLimit(nk.cfg.rdma_max_unauth);
    return 1;
}

static int applyBacklogSize(const char **err) {
    if (nk.cfg.backlog_size == nkBacklogSize()) return 1;
    if (nkBacklogResize(nk.cfg.backlog_size) == -1) {
        *err = "cannot allocate the new backlog";
        return 0;
    }
    return 1;
}

/* With a coordinator a grant must end well within the leader's etcd lease
 * (nickv_coord.c): a lease-time that does not fit is refused, not left to
 * hold every grant back. */
static int applyLeaseTime(const char **err) {
    static char buf[256];
    if (nkCoordCheckLeaseTime(nk.cfg.lease_time, buf, sizeof(buf)) == -1) {
        *err = buf;
        return 0;
    }
    return 1;
}

/* enable-protected-configs, as upstream's PROTECTED_ACTION_ALLOWED_*. */
#define NK_PROTECTED_NO 0
#define NK_PROTECTED_YES 1
#define NK_PROTECTED_LOCAL 2
static const nkConfigEnum protectedEnum[] = {
    {"no", NK_PROTECTED_NO}, {"yes", NK_PROTECTED_YES}, {"local", NK_PROTECTED_LOCAL}, {NULL, 0}
};

static const char *requiredPassword(void);

/* The admin password must not be the replicas' one (requirepass, else
 * masterauth): every replica holds that, and would be an admin. Checked at
 * start and by CONFIG SET of any of the three. */
static int applyPasswords(const char **err) {
    const char *pass = requiredPassword();
    if (nk.cfg.adminpass && pass && !strcmp(nk.cfg.adminpass, pass)) {
        *err = "adminpass must differ from the replicas' password (requirepass, else masterauth without masteruser)";
        return 0;
    }
    /* With a masteruser, masterauth is the nickv-user's: it grants the
     * master its lease, and no replica or admin may hold it. */
    if (nk.cfg.masteruser && nk.cfg.masterauth &&
        ((nk.cfg.requirepass && !strcmp(nk.cfg.requirepass, nk.cfg.masterauth)) ||
         (nk.cfg.adminpass && !strcmp(nk.cfg.adminpass, nk.cfg.masterauth)))) {
        *err = "with a masteruser, masterauth (the nickv-user's password, which grants the master its lease) "
               "must differ from requirepass and adminpass";
        return 0;
    }
    return 1;
}

static const nkConfigEnum loglevelEnum[] = {
    {"debug", LL_DEBUG}, {"verbose", LL_VERBOSE}, {"notice", LL_NOTICE},
    {"warning", LL_WARNING}, {NULL, 0}
};

#define IMM NK_CFG_IMMUTABLE
#define MULTI NK_CFG_MULTI_ARG
#define PROT NK_CFG_PROTECTED
#define NONEMPTY NK_CFG_NONEMPTY
static nkConfigOption nkConfigs[] = {
    {"port", NK_CFG_INT, IMM, &nk.cfg.port, 1, 65535, 7380, NULL, NULL, NULL, NULL, NULL,
     "<n>", "TCP port for replicas and admin clients"},
    {"bind", NK_CFG_SPECIAL, IMM|MULTI, NULL, 0, 0, 0, "127.0.0.1", NULL, cfgSetBind, cfgGetBind, NULL,
     "<addr...>", "addresses to listen on"},
    {"protected-mode", NK_CFG_BOOL, 0, &nk.cfg.protected_mode, 0, 1, 1, NULL, NULL, NULL, NULL, NULL,
     "yes|no", "without a password, refuse non-loopback clients"},
    {"maxclients", NK_CFG_INT, 0, &nk.cfg.maxclients, 1, INT_MAX, 10000, NULL, NULL, NULL, NULL,
     applyMaxclients, "<n>", "clients at once, replicas included; lowered to what the\n"
     "                        open files limit allows"},
    {"master-host", NK_CFG_STRING, IMM|NONEMPTY, &nk.cfg.master_host, 0, 0, 0, "127.0.0.1", NULL, NULL, NULL,
     NULL, "<addr>", "the SKV master"},
    {"master-port", NK_CFG_INT, IMM, &nk.cfg.master_port, 1, 65535, 6379, NULL, NULL, NULL, NULL, NULL,
     "<n>", "its port"},
    {"master-rdma-port", NK_CFG_INT, IMM, &nk.cfg.master_rdma_port, 0, 65535, 0, NULL, NULL, NULL, NULL,
     NULL, "<n>", "stream from the master over RDMA, to its rdma-port (0: TCP)"},
    {"rdma-port", NK_CFG_INT, IMM, &nk.cfg.rdma_port, 0, 65535, 0, NULL, NULL, NULL, NULL, NULL,
     "<n>", "RDMA port for replicas (0: no RDMA listener)"},
    {"rdma-bind", NK_CFG_SPECIAL, IMM|MULTI, NULL, 0, 0, 0, "", NULL, cfgSetRdmaBind, cfgGetRdmaBind,
     NULL, "<addr...>", "RDMA addresses to listen on (default: all)"},
    {"rdma-rx-size", NK_CFG_SIZE, IMM, &nk.cfg.rdma_rx_size, RDMA_RX_SIZE_MIN, RDMA_RX_SIZE_MAX,
     RDMA_RX_SIZE_DEFAULT, NULL, NULL, NULL, NULL, NULL,
     "<size>", "receive buffer of an RDMA connection, 64kb-16mb"},
    {"rdma-max-pinned-memory", NK_CFG_SIZE, 0, &nk.cfg.rdma_max_pinned, 0, LLONG_MAX,
     4096LL*1024*1024, NULL, NULL, NULL, NULL, applyRdmaMaxPinned,
     "<size>", "the most memory all RDMA connections together may\n"
     "                        register (pin), each RDMA replica's registration of\n"
     "                        the backlog included (0: only RLIMIT_MEMLOCK limits)"},
    {"rdma-max-unauthenticated", NK_CFG_INT, 0, &nk.cfg.rdma_max_unauth, 0, INT_MAX,
     RDMA_UNAUTH_LIMIT_DEFAULT, NULL, NULL, NULL, NULL, applyRdmaMaxUnauth,
     "<n>", "RDMA connections that have not authenticated yet, at\n"
     "                        most (more are refused at connect time; 0: no cap)"},
    {"masteruser", NK_CFG_STRING, 0, &nk.cfg.masteruser, 0, 0, 0, NULL, NULL, NULL, NULL,
     applyPasswords, "<user>", "authenticate to the master as this user (its nickv-user)"},
    {"masterauth", NK_CFG_STRING, 0, &nk.cfg.masterauth, 0, 0, 0, NULL, NULL, NULL, NULL,
     applyPasswords, "<pass>", "... with this password"},
    {"requirepass", NK_CFG_STRING, 0, &nk.cfg.requirepass, 0, 0, 0, NULL, NULL, NULL, NULL,
     applyPasswords, "<pass>", "password every client must give (default: masterauth\n"
     "                        without masteruser, which replicas already use for\n"
     "                        the master); it grants replication and discovery,\n"
     "                        not admin commands"},
    {"adminpass", NK_CFG_STRING, 0, &nk.cfg.adminpass, 0, 0, 0, NULL, NULL, NULL, NULL,
     applyPasswords, "<pass>", "password for admin commands (CONFIG, FAILOVER,\n"
     "                        SHUTDOWN); unset: loopback clients only"},
    {"enable-protected-configs", NK_CFG_ENUM, IMM, &nk.cfg.enable_protected_configs, 0, 0,
     NK_PROTECTED_NO, NULL, protectedEnum, NULL, NULL, NULL, "no|yes|local",
     "\n"
     "                        CONFIG SET of options that name a program or a\n"
     "                        file (fence-command): never, by an admin, or by a\n"
     "                        loopback admin only"},
    {"auth-timeout", NK_CFG_INT, 0, &nk.cfg.auth_timeout, 0, INT_MAX, 10, NULL, NULL, NULL, NULL, NULL,
     "<secs>", "close a client that has not authenticated by then,\n"
     "                        when a password is required (0: never)"},
    {"announce-ip", NK_CFG_STRING, IMM, &nk.cfg.announce_ip, 0, 0, 0, NULL, NULL, NULL, NULL, NULL,
     "<addr>", "address the master gives replicas for Nic-KV\n"
     "                        (default: the one the master sees)"},
    {"backlog-size", NK_CFG_SIZE, 0, &nk.cfg.backlog_size, 1024*1024, LLONG_MAX, 128LL*1024*1024,
     NULL, NULL, NULL, NULL, applyBacklogSize,
     "<size>", "backlog of the stream kept for partial resyncs"},
    {"client-output-buffer-limit", NK_CFG_SPECIAL, MULTI, NULL, 0, 0, 0, "replica 256mb 4mb 60", NULL,
     cfgSetObufLimit, cfgGetObufLimit, NULL,
     "replica <hard> <soft> <secs>", "\n"
     "                        a proxied full sync's queued RDB: over <hard>, or\n"
     "                        over <soft> for <secs>, the replica is dropped (0: none)"},
    {"thread-num", NK_CFG_INT, IMM, &nk.cfg.thread_num, 1, 64, 1, NULL, NULL, NULL, NULL, NULL,
     "<n>", "fan-out threads, never more than min(cores, replicas)"},
    {"repl-timeout", NK_CFG_INT, 0, &nk.cfg.repl_timeout, 1, INT_MAX, 60, NULL, NULL, NULL, NULL, NULL,
     "<secs>", "silence from the master before reconnecting; from a replica that loads a proxied RDB before closing it"},
    {"probe-interval", NK_CFG_INT, 0, &nk.cfg.probe_interval, 10, 60000, 100, NULL, NULL, NULL, NULL,
     NULL, "<ms>", "probe the master and every replica this often"},
    {"waiting-time", NK_CFG_INT, 0, &nk.cfg.waiting_time, 10, 3600000, 500, NULL, NULL, NULL, NULL,
     NULL, "<ms>", "a node that leaves a probe unanswered this long is\n"
     "                        invalid (a refused connection: at once)"},
    {"min-slaves", NK_CFG_INT, 0, &nk.cfg.min_slaves, 0, 1000000, 0, NULL, NULL, NULL, NULL, NULL,
     "<n>", "the master refuses writes (-NOREPLICAS) while fewer\n"
     "                        replicas answer probes, and WAIT counts only those\n"
     "                        (0: the probes change nothing)"},
    {"master-name", NK_CFG_STRING, NONEMPTY, &nk.cfg.master_name, 0, 0, 0, "mymaster", NULL, NULL, NULL,
     NULL, "<name>", "what clients asking SENTINEL call the master"},
    {"failover", NK_CFG_BOOL, 0, &nk.cfg.failover, 0, 1, 0, NULL, NULL, NULL, NULL, NULL,
     "yes|no", "promote the best replica when the master fails (the\n"
     "                        master needs nickv-lease yes); no: detect only"},
    {"lease-time", NK_CFG_INT, 0, &nk.cfg.lease_time, 50, NICKV_LEASE_MAX_MS, 500, NULL, NULL, NULL,
     NULL, applyLeaseTime, "<ms>", "the master's write lease: a promotion waits this long\n"
     "                        after the last grant"},
    {"failback", NK_CFG_BOOL, 0, &nk.cfg.failback, 0, 1, 0, NULL, NULL, NULL, NULL, NULL,
     "yes|no", "the configured master, back and caught up as a\n"
     "                        replica, takes over again (a planned handover)"},
    {"fence-command", NK_CFG_STRING, PROT, &nk.cfg.fence_command, 0, 0, 0, NULL, NULL, NULL, NULL,
     NULL, "<cmd>", "run before a promotion with <old-ip> <old-port>\n"
     "                        <new-ip> <new-port> <epoch>; must exit 0 within 5 s\n"
     "                        (CONFIG SET: see enable-protected-configs)"},
    {"state-file", NK_CFG_STRING, IMM|PROT, &nk.cfg.state_file, 0, 0, 0, "nic-kv.state", NULL, NULL, NULL,
     NULL, "<path>", "the failover's view (epoch, master, demoted), kept\n"
     "                        across restarts (\"\": not kept)"},
    {"coordinator", NK_CFG_STRING, IMM, &nk.cfg.coordinator, 0, 0, 0, NULL, NULL, NULL, NULL, NULL,
     "<urls>", "etcd://h1:2379,h2:2379,...: one Nic-KV per server, the\n"
     "                        leader elected in etcd (see NIC-KV.md, \"Many\n"
     "                        Nic-KVs\"); unset: this Nic-KV is the only authority"},
    {"local-node", NK_CFG_STRING, IMM, &nk.cfg.local_node, 0, 0, 0, NULL, NULL, NULL, NULL, NULL,
     "<ip:port>", "with coordinator: the SKV node on this Nic-KV's own\n"
     "                        server (numeric address); this Nic-KV fans out\n"
     "                        while it is the master"},
    {"leader-ttl", NK_CFG_INT, IMM, &nk.cfg.leader_ttl, 1, 60, 2, NULL, NULL, NULL, NULL, NULL,
     "<secs>", "with coordinator: the etcd lease of the leader key; a\n"
     "                        dead leader's server is replaced after about this"},
    {"coordinator-user", NK_CFG_STRING, IMM, &nk.cfg.coordinator_user, 0, 0, 0, NULL, NULL, NULL, NULL,
     NULL, "<user>", "with coordinator: the etcd user (readwrite on\n"
     "                        /skv/<master-name>/ is all it needs)"},
    {"coordinator-password", NK_CFG_STRING, IMM, &nk.cfg.coordinator_password, 0, 0, 0, NULL, NULL, NULL,
     NULL, NULL, "<pass>", "... and its password"},
    {"coordinator-insecure", NK_CFG_BOOL, IMM, &nk.cfg.coordinator_insecure, 0, 1, 0, NULL, NULL, NULL,
     NULL, NULL, "yes|no", "with coordinator: yes lets Nic-KV use an etcd without\n"
     "                        authentication (anyone who reaches it could name\n"
     "                        the leader and the master): for tests only"},
    {"coordinator-tls-ca-cert-file", NK_CFG_STRING, IMM|PROT, &nk.cfg.coordinator_tls_ca, 0, 0, 0, NULL,
     NULL, NULL, NULL, NULL, "<path>", "with etcds:// endpoints: the CA that signed etcd's\n"
     "                        certificates (default: the system's)"},
    {"coordinator-tls-cert-file", NK_CFG_STRING, IMM|PROT, &nk.cfg.coordinator_tls_cert, 0, 0, 0, NULL,
     NULL, NULL, NULL, NULL, "<path>", "... our client certificate, when etcd asks for one"},
    {"coordinator-tls-key-file", NK_CFG_STRING, IMM|PROT, &nk.cfg.coordinator_tls_key, 0, 0, 0, NULL,
     NULL, NULL, NULL, NULL, "<path>", "... and its key"},
    {"daemonize", NK_CFG_BOOL, IMM, &nk.cfg.daemonize, 0, 1, 0, NULL, NULL, NULL, NULL, NULL,
     "yes|no", "run in the background"},
    {"logfile", NK_CFG_STRING, IMM|PROT, &nk.cfg.logfile, 0, 0, 0, NULL, NULL, NULL, NULL, NULL,
     "<path>", "log file (default: stdout)"},
    {"loglevel", NK_CFG_ENUM, 0, &nk.cfg.verbosity, 0, 0, LL_NOTICE, NULL, loglevelEnum, NULL, NULL,
     NULL, "<level>", "debug, verbose, notice, warning"},
    {"pidfile", NK_CFG_STRING, IMM|PROT, &nk.cfg.pidfile, 0, 0, 0, NULL, NULL, NULL, NULL, NULL,
     "<path>", "write the pid here"},
    {NULL, 0, 0, NULL, 0, 0, 0, NULL, NULL, NULL, NULL, NULL, NULL, NULL}
};
#undef IMM
#undef MULTI
#undef PROT
#undef NONEMPTY

static nkConfigOption *configLookup(const char *name) {
    for (nkConfigOption *o = nkConfigs; o->name; o++)
        if (!strcasecmp(o->name, name)) return o;
    return NULL;
}

/* Set an option from its words (one, or several for MULTI_ARG). Returns 1,
 * or 0 with *err saying why, the option unchanged. Applies nothing. */
/* Options are C strings: a value with a NUL in it (sent to CONFIG SET, or
 * "\x00" in a quoted word of the config file) would be cut short there, a
 * password silently becoming another one. Refused, with this error. */
#define NK_CFG_NUL_ERR "the value contains a NUL byte"
static int argsHaveNul(int argc, sds *argv) {
    for (int i = 0; i < argc; i++)
        if (strlen(argv[i]) != sdslen(argv[i])) return 1;
    return 0;
}

static int configSetArgs(nkConfigOption *o, int argc, sds *argv, const char **err) {
    long long ll;
    if (o->type == NK_CFG_SPECIAL) return o->set(argc, argv, err);
    if (argc != 1) {
        *err = "wrong number of arguments";
        return 0;
    }
    const char *v = argv[0];
    switch (o->type) {
    case NK_CFG_BOOL:
        if (!strcasecmp(v, "yes")) *(int *)o->data = 1;
        else if (!strcasecmp(v, "no")) *(int *)o->data = 0;
        else { *err = "argument must be 'yes' or 'no'"; return 0; }
        return 1;
    case NK_CFG_INT:
    case NK_CFG_SIZE:
        if (o->type == NK_CFG_INT && !string2ll(v, strlen(v), &ll)) {
            *err = "argument couldn't be parsed into an integer";
            return 0;
        }
        if (o->type == NK_CFG_SIZE && !nkParseSize(v, &ll)) {
            *err = "argument must be a memory value";
            return 0;
        }
        if (ll < o->min || ll > o->max) {
            snprintf(cfgErr, sizeof(cfgErr), "argument must be between %lld and %lld inclusive",
                     o->min, o->max);
            *err = cfgErr;
            return 0;
        }
        if (o->type == NK_CFG_INT) *(int *)o->data = (int)ll;
        else *(long long *)o->data = ll;
        return 1;
    case NK_CFG_STRING: {
        char **dst = o->data;
        if (!*v && (o->flags & NK_CFG_NONEMPTY)) {
            *err = "the value must not be empty";
            return 0;
        }
        zfree(*dst);
        *dst = *v ? zstrdup(v) : NULL;
        return 1;
    }
    case NK_CFG_ENUM:
        for (const nkConfigEnum *e = o->enums; e->name; e++) {
            if (!strcasecmp(e->name, v)) {
                *(int *)o->data = e->val;
                return 1;
            }
        }
        snprintf(cfgErr, sizeof(cfgErr), "argument(s) must be one of the following: ");
        for (const nkConfigEnum *e = o->enums; e->name; e++)
            snprintf(cfgErr + strlen(cfgErr), sizeof(cfgErr) - strlen(cfgErr), "%s%s",
                     e != o->enums ? ", " : "", e->name);
        *err = cfgErr;
        return 0;
    default:
        *err = "unknown option type";
        return 0;
    }
}

/* Set an option from one string, as CONFIG SET gives it (a MULTI_ARG
 * option's words separated by spaces, quotes as in the config file). */
static int configSetString(nkConfigOption *o, const char *value, const char **err) {
    int argc = 0, ok;
    sds *argv;
    if (o->flags & NK_CFG_MULTI_ARG) {
        if (!(argv = sdssplitargs(value, &argc))) {
            *err = "unbalanced quotes";
            return 0;
        }
    } else {
        argv = zmalloc(sizeof(sds));
        argv[0] = sdsnew(value);
        argc = 1;
    }
    ok = configSetArgs(o, argc, argv, err);
    sdsfreesplitres(argv, argc);
    return ok;
}

/* An option's value, as CONFIG GET shows it and configSetString() takes it
 * back. */
static sds configGetValue(nkConfigOption *o) {
    switch (o->type) {
    case NK_CFG_BOOL: return sdsnew(*(int *)o->data ? "yes" : "no");
    case NK_CFG_INT: return sdsfromlonglong(*(int *)o->data);
    case NK_CFG_SIZE: return sdsfromlonglong(*(long long *)o->data);
    case NK_CFG_STRING: {
        char *s = *(char **)o->data;
        return sdsnew(s ? s : "");
    }
    case NK_CFG_ENUM:
        for (const nkConfigEnum *e = o->enums; e->name; e++)
            if (e->val == *(int *)o->data) return sdsnew(e->name);
        return sdsempty();
    default: return o->get();
    }
}

static void configDefaults(void) {
    const char *err;
    memset(&nk.cfg, 0, sizeof(nk.cfg));
    for (nkConfigOption *o = nkConfigs; o->name; o++) {
        switch (o->type) {
        case NK_CFG_BOOL: case NK_CFG_INT: case NK_CFG_ENUM: *(int *)o->data = (int)o->def; break;
        case NK_CFG_SIZE: *(long long *)o->data = o->def; break;
        default:
            if (o->def_str && !configSetString(o, o->def_str, &err)) {
                fprintf(stderr, "nic-kv: bad default for %s: %s\n", o->name, err);
                exit(1);
            }
        }
    }
}

/* Load "name value..." lines (# comments, quotes as in redis.conf): the
 * config file, then the command line's options. Any error stops Nic-KV.
 * The text is all of it, NUL bytes included: a line is parsed as a C
 * string, so one with a NUL byte in it is refused, not cut short there. */
static void configLoad(sds text, const char *origin) {
    int nlines = 0;
    sds *lines = sdssplitlen(text, sdslen(text), "\n", 1, &nlines);
    for (int i = 0; i < nlines; i++) {
        int argc = 0;
        sds *argv;
        const char *err = NULL;
        nkConfigOption *o;
        lines[i] = sdstrim(lines[i], " \t\r\n");
        if (strlen(lines[i]) != sdslen(lines[i])) {
            fprintf(stderr, "nic-kv: %s, line %d: '%s...': %s\n", origin, i + 1, lines[i],
                    NK_CFG_NUL_ERR);
            exit(1);
        }
        if (lines[i][0] == '#' || lines[i][0] == '\0') continue;
        argv = sdssplitargs(lines[i], &argc);
        if (!argv) err = "Unbalanced quotes in configuration line";
        else if (argc == 0) { sdsfreesplitres(argv, argc); continue; }
        else if (!(o = configLookup(argv[0])) ||
                 (!(o->flags & NK_CFG_MULTI_ARG) && argc != 2))
            err = "Bad directive or wrong number of arguments";
        else if (argsHaveNul(argc - 1, argv + 1)) err = NK_CFG_NUL_ERR;
        else if (argc == 2) configSetString(o, argv[1], &err);   /* "a b c" as a b c */
        else configSetArgs(o, argc - 1, argv + 1, &err);
        if (err) {
            fprintf(stderr, "nic-kv: %s, line %d: '%s': %s\n", origin, i + 1, lines[i], err);
            exit(1);
        }
        sdsfreesplitres(argv, argc);
    }
    sdsfreesplitres(lines, nlines);
}

static void usage(FILE *fp) {
    fprintf(fp,
"Usage: nic-kv [/path/to/nic-kv.conf] [--option value ...]\n"
"       nic-kv --help | --version\n"
"\n"
"Nic-KV takes the replication fan-out off an SKV master: the master streams\n"
"once to Nic-KV, Nic-KV streams to every replica. See NIC-KV.md.\n"
"\n"
"Options (in the file as 'name value', on the command line as '--name value';\n"
"* = CONFIG SET changes it at run time):\n");
    for (nkConfigOption *o = nkConfigs; o->name; o++) {
        char head[64];
        sds def = configGetValue(o);
        snprintf(head, sizeof(head), "%s %s", o->name, o->args);
        fprintf(fp, "%c %-21s %s", (o->flags & NK_CFG_IMMUTABLE) ? ' ' : '*', head, o->help);
        if (sdslen(def)) fprintf(fp, " (%s)", def);
        fprintf(fp, "\n");
        sdsfree(def);
    }
    fprintf(fp,
"\n"
"Clients: redis-cli -p <port> [-a <pass>] PING | INFO [section...] | ROLE |\n"
"       SENTINEL ... | SUBSCRIBE ...\n"
"Admin (adminpass, or from loopback while it is unset):\n"
"       CONFIG GET <pattern...> | CONFIG SET <name> <value> [<name> <value> ...] |\n"
"       CONFIG RESETSTAT | FAILOVER [TO <host> <port>] | SHUTDOWN\n");
}

/* ------------------------------------------------------------- Clients --- */

static void nkClientWritable(nkConn *conn, void *data);
static void nkClientReadable(nkConn *conn, void *data);

size_t nkClientPending(nkClient *c) { return sdslen(c->outbuf); }

void nkClientFree(nkClient *c) {
    listNode *ln = listSearchKey(nk.clients, c);
    nkClientLeaving(c);
    if (ln) listDelNode(nk.clients, ln);
    if (c->conn) {
        nkConnClose(c->conn);
        c->conn = NULL;
    }
    if (c->fs) nkProxyFullSync(c);   /* with no conn: tears the sync down */
    nkPubsubClientFree(c);
    sdsfree(c->querybuf);
    sdsfree(c->outbuf);
    zfree(c);
}

/* Send what is queued. Returns -1 when the client was freed. */
static int nkClientFlush(nkClient *c) {
    while (sdslen(c->outbuf)) {
        ssize_t n = nkConnWrite(c->conn, c->outbuf, sdslen(c->outbuf));
        if (n <= 0) {
            if (n < 0 && errno == EAGAIN) break;
            nkClientFree(c);
            return -1;
        }
        sdsrange(c->outbuf, n, -1);
    }
    if (c->obuf_soft_since && (long long)sdslen(c->outbuf) <= nk.cfg.obuf_soft) c->obuf_soft_since = 0;
    if (c->fs) nkProxyFullSync(c);   /* read more of the RDB if it keeps up */
    if (sdslen(c->outbuf) && !nkConnHasWriteHandler(c->conn))
        nkConnSetWriteHandler(c->conn, nkClientWritable);
    else if (!sdslen(c->outbuf) && nkConnHasWriteHandler(c->conn))
        nkConnSetWriteHandler(c->conn, NULL);
    if (!sdslen(c->outbuf)) {
        if (c->state == NK_CLIENT_CLOSING) {
            nkClientFree(c);
            return -1;
        }
        if (c->state == NK_CLIENT_HANDOVER && !c->stream_on_ack) {
            /* The +CONTINUE (or the RDB) is out: the stream starts. */
            nkClientHandOver(c);
            return -1;
        }
    }
    return 0;
}

void nkClientFlushSoon(nkClient *c) {
    nkClientFlush(c);
}

void nkClientWriteRaw(nkClient *c, const char *buf, size_t len) {
    c->outbuf = sdscatlen(c->outbuf, buf, len);
}

void nkClientReply(nkClient *c, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    c->outbuf = sdscatvprintf(c->outbuf, fmt, ap);
    va_end(ap);
}

static void replyBulk(nkClient *c, const char *s, size_t len) {
    nkClientReply(c, "$%zu\r\n", len);
    nkClientWriteRaw(c, s, len);
    nkClientWriteRaw(c, "\r\n", 2);
}

static void nkClientWritable(nkConn *conn, void *data) {
    (void)conn;
    nkClientFlush(data);
}

static void protocolError(nkClient *c, const char *what) {
    stats.protocol_errors++;
    nkLog(LL_VERBOSE, "Protocol error (%s) from client %s:%d: closing it", what, c->ip, c->port);
    nkClientReply(c, "-ERR Protocol error: %s\r\n", what);
    nkClientSetState(c, NK_CLIENT_CLOSING);
}

/* ------------------------------------------------------------- Commands --- */

/* The replicas' password: requirepass, else masterauth when that is the
 * master's default user's password (replicas hold it already). With a
 * masteruser, masterauth is Nic-KV's own credential (the nickv-user's,
 * which grants the master its lease): it is never its clients'. */
static const char *requiredPassword(void) {
    if (nk.cfg.requirepass) return nk.cfg.requirepass;
    return nk.cfg.masteruser ? NULL : nk.cfg.masterauth;
}

static int isLoopback(const char *ip) {
    return !strcmp(ip, "127.0.0.1") || !strcmp(ip, "::1") || !strncmp(ip, "127.", 4);
}

/* ---------------------------------------------------- Who may run what --- */

/* Two roles (NIC-KV.md, "Who may run what"):
 *
 *   replication and discovery   any client that passed requirepass (else
 *                               masterauth), or every client when neither
 *                               is set: AUTH, PING, REPLCONF, PSYNC, SYNC,
 *                               INFO, ROLE, SENTINEL (read only), the
 *                               SUBSCRIBE family, QUIT
 *   admin                       what changes Nic-KV or the nodes, or reads
 *                               its secrets: CONFIG (GET, SET, RESETSTAT),
 *                               FAILOVER, SHUTDOWN. A client that gave
 *                               adminpass (AUTH <adminpass>, or AUTH admin
 *                               <adminpass>); with no adminpass set, a
 *                               loopback client, as upstream's protected
 *                               mode trusts the machine's own users. Never
 *                               a remote client by the replicas' password.
 *
 * And CONFIG SET of an option that names a program or a file (PROTECTED:
 * fence-command) also needs enable-protected-configs yes, or local and a
 * loopback client, as upstream 7.0's. */

static const char *adminCommands[] = {"config", "failover", "shutdown", NULL};

/* The command's name as adminCommands[] spells it, if it is one. */
static const char *nkAdminCommand(const char *cmd) {
    for (int i = 0; adminCommands[i]; i++)
        if (!strcasecmp(cmd, adminCommands[i])) return adminCommands[i];
    return NULL;
}

static int nkClientIsAdmin(nkClient *c) {
    if (nk.cfg.adminpass) return c->admin;
    return isLoopback(c->ip);
}

/* May c change a PROTECTED option? (It is an admin already.) */
static int nkAllowProtected(nkClient *c) {
    return nk.cfg.enable_protected_configs == NK_PROTECTED_YES ||
           (nk.cfg.enable_protected_configs == NK_PROTECTED_LOCAL && isLoopback(c->ip));
}

/* The refusal of an admin command, saying what would be needed. */
static void nkReplyNoPerm(nkClient *c, const char *name) {
    if (nk.cfg.adminpass)
        nkClientReply(c, "-NOPERM '%s' needs the admin password (AUTH <adminpass>); the replicas' "
                      "password grants replication and discovery only\r\n", name);
    else
        nkClientReply(c, "-NOPERM '%s' is served to loopback clients only while no adminpass is "
                      "set; the replicas' password grants replication and discovery only\r\n", name);
}

/* Whether INFO with these section names shows section "name" (or its
 * alias, or NULL). No names, "all", "everything" or "default": every one. */
static int infoWants(int nsec, sds *secs, const char *name, const char *alias) {
    if (nsec == 0) return 1;
    for (int i = 0; i < nsec; i++) {
        if (!strcasecmp(secs[i], "all") || !strcasecmp(secs[i], "everything") ||
            !strcasecmp(secs[i], "default") || !strcasecmp(secs[i], name) ||
            (alias && !strcasecmp(secs[i], alias)))
            return 1;
    }
    return 0;
}

/* INFO [section ...]: the sections asked for, as upstream 7.0 takes them. */
static sds genInfo(int nsec, sds *secs) {
    sds s = sdsempty();
    long long first, last;
    struct rusage ru;

    nkBacklogRange(&first, &last);
    if (infoWants(nsec, secs, "server", NULL)) {
        /* os: as upstream's; on the DPU, its Arm kernel (the tests check
         * the machine of the aarch64 build they run under qemu-user). */
        struct utsname un;
        if (uname(&un) == -1) memset(&un, 0, sizeof(un));
        s = sdscatprintf(s,
            "# Server\r\n"
            "nickv_version:%s\r\n"
            "skv_version:%s\r\n"
            "os:%s %s %s\r\n"
            "arch_bits:%d\r\n"
            "process_id:%d\r\n"
            "run_id:%s\r\n"
            "tcp_port:%d\r\n"
            "rdma_port:%d\r\n"
            "uptime_in_seconds:%lld\r\n"
            "thread_num:%d\r\n"
            "fanout_threads:%d\r\n"
            "config_file:%s\r\n\r\n",
            NICKV_VERSION, SKV_VERSION, un.sysname, un.release, un.machine, (int)(sizeof(void *) * 8),
            (int)getpid(), nk.instance, nk.cfg.port, nkRdmaPort(),
            nkUnixTime() - (long long)nk.start_time, nk.cfg.thread_num, nkFanoutThreads(),
            nk.cfg.config_file ? nk.cfg.config_file : "");
    }
    if (infoWants(nsec, secs, "upstream", "replication")) {
        s = nkLinkInfo(s, last);
    }
    if (infoWants(nsec, secs, "backlog", NULL)) {
        s = nkBacklogInfo(s);
    }
    if (infoWants(nsec, secs, "replicas", "replication")) {
        s = nkReplicasInfo(s);
    }
    if (infoWants(nsec, secs, "stats", NULL)) {
        s = sdscatprintf(s, "# Stats\r\ntotal_connections_received:%lld\r\n", stats.connections);
        s = nkReplicaStatsInfo(s);
        s = sdscatprintf(s,
            "auth_failures:%lld\r\n"
            "protocol_errors:%lld\r\n", stats.auth_failures, stats.protocol_errors);
        s = nkLinkStatsInfo(s);
        s = nkResolveInfo(s);
        s = sdscatprintf(s,
            "rejected_connections:%lld\r\n"
            "client_output_buffer_limit_disconnections:%lld\r\n"
            "auth_timeouts:%lld\r\n\r\n",
            stats.rejected_conn, stats.obuf_drops, stats.auth_timeouts);
    }
    if (infoWants(nsec, secs, "failover", NULL)) {
        s = nkProbeInfo(s);
        s = nkFailoverInfo(s);
    }
    if (infoWants(nsec, secs, "coordinator", NULL)) {
        s = nkCoordInfo(s);
    }
    if (infoWants(nsec, secs, "rdma", NULL)) {
        rdmaStats st;
        rdmaGetStats(&st);
        s = sdscatprintf(s,
            "# RDMA\r\n"
            "rdma_listener:%s\r\n"
            "rdma_connections:%d\r\n"
            "rdma_connections_unauthenticated:%d\r\n"
            "rdma_connections_watchdog:%d\r\n"
            "rdma_pinned_bytes:%zu\r\n"
            "rdma_pinned_limit:%zu\r\n",
            nk.rdma_status, rdmaChanCount(), rdmaUnauthCount(), rdmaWatchdogCount(), rdmaPinnedBytes(),
            strcmp(nk.rdma_status, "off") ? rdmaEffectivePinnedLimit() : (size_t)nk.cfg.rdma_max_pinned);
        for (const rdmaStatField *f = rdmaStatFields; f->name; f++)
            s = sdscatprintf(s, "rdma_%s:%llu\r\n", f->name, rdmaStatValue(&st, f));
        s = sdscat(s, "\r\n");
    }
    if (infoWants(nsec, secs, "clients", NULL)) {
        s = sdscatprintf(s,
            "# Clients\r\n"
            "connected_clients:%lu\r\n"
            "maxclients:%d\r\n"
            "client_slots_free:%d\r\n\r\n",
            listLength(nk.clients), nk.cfg.maxclients, nkClientSlotsFree());
    }
    if (infoWants(nsec, secs, "memory", NULL)) {
        s = sdscatprintf(s,
            "# Memory\r\n"
            "used_memory:%zu\r\n"
            "backlog_allocated:%lld\r\n\r\n",
            zmalloc_used_memory(), nkBacklogSize());
    }
    if (infoWants(nsec, secs, "cpu", NULL)) {
        getrusage(RUSAGE_SELF, &ru);
        s = sdscatprintf(s,
            "# CPU\r\n"
            "used_cpu_sys:%ld.%06ld\r\n"
            "used_cpu_user:%ld.%06ld\r\n\r\n",
            (long)ru.ru_stime.tv_sec, (long)ru.ru_stime.tv_usec,
            (long)ru.ru_utime.tv_sec, (long)ru.ru_utime.tv_usec);
    }
    if (sdslen(s) >= 2) sdsrange(s, 0, -3);   /* no blank line at the end */
    return s;
}

long long nkMstime(void) {
    struct timeval tv;
    gettimeofday(&tv, NULL);
    return (long long)tv.tv_sec * 1000 + tv.tv_usec / 1000;
}

/* CONFIG SET name value [name value ...], as upstream's: every name is
 * checked first, then every value set; one that does not parse restores the
 * ones set before it. Then the changes are applied; if one cannot be, every
 * option gets its previous value back, applied again. */
static void configSetCommand(nkClient *c, int argc, sds *argv) {
    int n = (argc - 2) / 2, i, j;
    nkConfigOption **opts;
    sds *old;
    const char *err = NULL, *err_name = NULL;

    if (argc < 4 || (argc & 1)) {
        nkClientReply(c, "-ERR %s\r\n", argc < 4 ?
                      "wrong number of arguments for 'config|set' command" : "syntax error");
        return;
    }
    opts = zcalloc(sizeof(*opts) * n);
    old = zcalloc(sizeof(*old) * n);
    for (i = 0; i < n; i++) {
        sds name = argv[2 + i * 2];
        if (argsHaveNul(1, &name) || !(opts[i] = configLookup(name))) {
            sds a = sdscatrepr(sdsempty(), name, sdslen(name) > 64 ? 64 : sdslen(name));
            nkClientReply(c, "-ERR Unknown option or number of arguments for CONFIG SET - '%.*s'\r\n",
                          (int)sdslen(a) - 2, a + 1);
            sdsfree(a);
            goto end;
        }
    }
    for (i = 0; i < n && !err; i++) {
        if (opts[i]->flags & NK_CFG_IMMUTABLE) err = "can't set immutable config";
        else if ((opts[i]->flags & NK_CFG_PROTECTED) && !nkAllowProtected(c))
            err = "can't set protected config";
        else if (argsHaveNul(1, &argv[3 + i * 2])) err = NK_CFG_NUL_ERR;
        for (j = 0; j < i && !err; j++)
            if (opts[j] == opts[i]) err = "duplicate parameter";
        if (err) err_name = argv[2 + i * 2];
    }
    if (err) goto fail;
    for (i = 0; i < n; i++) old[i] = configGetValue(opts[i]);
    for (i = 0; i < n; i++) {
        if (!configSetString(opts[i], argv[3 + i * 2], &err)) {
            err_name = opts[i]->name;
            for (j = 0; j < i; j++) configSetString(opts[j], old[j], &(const char *){NULL});
            goto fail;
        }
    }
    for (i = 0; i < n; i++) {
        if (opts[i]->apply && !opts[i]->apply(&err)) {
            err_name = opts[i]->name;
            nkLog(LL_WARNING, "Failed applying new configuration (%s: %s): restoring the previous "
                  "settings", err_name, err);
            for (j = 0; j < n; j++) {
                const char *e2 = NULL;
                if (!configSetString(opts[j], old[j], &e2) ||
                    (opts[j]->apply && !opts[j]->apply(&e2)))
                    nkLog(LL_WARNING, "Failed restoring %s to '%s': %s", opts[j]->name, old[j], e2);
            }
            goto fail;
        }
    }
    for (i = 0; i < n; i++)
        nkLog(LL_NOTICE, "CONFIG SET %s by %s:%d", opts[i]->name, c->ip, c->port);
    nkClientReply(c, "+OK\r\n");
    goto end;
fail:
    nkClientReply(c, "-ERR CONFIG SET failed (possibly related to argument '%s') - %s\r\n",
                  err_name, err);
end:
    for (i = 0; i < n; i++) sdsfree(old[i]);
    zfree(old);
    zfree(opts);
}

static void configCommand(nkClient *c, int argc, sds *argv) {
    if (argc >= 3 && !strcasecmp(argv[1], "get")) {
        sds out = sdsempty();
        int n = 0;
        for (nkConfigOption *o = nkConfigs; o->name; o++) {
            for (int j = 2; j < argc; j++) {
                if (fnmatch(argv[j], o->name, FNM_CASEFOLD) == 0) {
                    sds v = configGetValue(o);
                    out = sdscatprintf(out, "$%zu\r\n%s\r\n$%zu\r\n", strlen(o->name),
                                       o->name, sdslen(v));
                    out = sdscatsds(out, v);
                    out = sdscat(out, "\r\n");
                    sdsfree(v);
                    n += 2;
                    break;
                }
            }
        }
        nkClientReply(c, "*%d\r\n", n);
        nkClientWriteRaw(c, out, sdslen(out));
        sdsfree(out);
    } else if (argc >= 2 && !strcasecmp(argv[1], "set")) {
        configSetCommand(c, argc, argv);
    } else if (argc == 2 && !strcasecmp(argv[1], "resetstat")) {
        memset(&stats, 0, sizeof(stats));
        nkReplicaResetStats();
        nkLinkResetStats();
        nkResolveResetStats();
        nkProbeResetStats();
        nkFailoverResetStats();
        rdmaResetStats();
        nkClientReply(c, "+OK\r\n");
    } else {
        nkClientReply(c, "-ERR CONFIG takes GET <pattern>..., SET <name> <value> or RESETSTAT\r\n");
    }
}

static void roleCommand(nkClient *c) {
    nkReplicaIter it;
    nkReplica *r;
    long long first, last;
    nkBacklogRange(&first, &last);
    const char *mhost;
    int mport;
    nkLinkMaster(&mhost, &mport);
    nkClientReply(c, "*6\r\n$5\r\nnickv\r\n");
    replyBulk(c, mhost, strlen(mhost));
    nkClientReply(c, ":%d\r\n", mport);
    const char *st = nkLinkStreaming() ? "connected" : "connecting";
    replyBulk(c, st, strlen(st));
    nkClientReply(c, ":%lld\r\n*%lu\r\n", last, nkReplicaCount());
    nkReplicaIterInit(&it);
    while ((r = nkReplicaIterNext(&it))) {
        char port[16], off[32];
        snprintf(port, sizeof(port), "%d", r->port);
        snprintf(off, sizeof(off), "%lld", (long long)r->ack_off);
        nkClientReply(c, "*3\r\n");
        replyBulk(c, r->ip, strlen(r->ip));
        replyBulk(c, port, strlen(port));
        replyBulk(c, off, strlen(off));
    }
}

/* Count a failed AUTH, and log it: the first at once, then at most one line
 * a second (nkAuthFailuresCron), with how many there were. A client
 * guessing passwords does not fill the log. */
static void nkAuthFailed(nkClient *c) {
    long long now = nkMstime();
    stats.auth_failures++;
    snprintf(nk.auth_fail_last, sizeof(nk.auth_fail_last), "%s:%d", c->ip, c->port);
    if (now - nk.auth_fail_logged < 1000) {
        nk.auth_fail_unlogged++;
        return;
    }
    nkLog(LL_NOTICE, "Failed AUTH from %s", nk.auth_fail_last);
    nk.auth_fail_logged = now;
}

static void nkAuthFailuresCron(void) {
    long long now = nkMstime();
    if (nk.auth_fail_unlogged == 0 || now - nk.auth_fail_logged < 1000) return;
    nkLog(LL_NOTICE, "Failed AUTH: %lld more in the last %lld ms, the last from %s",
          nk.auth_fail_unlogged, now - nk.auth_fail_logged, nk.auth_fail_last);
    nk.auth_fail_unlogged = 0;
    nk.auth_fail_logged = now;
}

/* A password compared in a time that does not depend on where it differs
 * from the one given (as upstream's ACL check): both hashed, the digests
 * compared whole. */
static int secretEqual(const char *given, const char *pass) {
    BYTE hg[SHA256_BLOCK_SIZE], hp[SHA256_BLOCK_SIZE];
    SHA256_CTX ctx;
    unsigned diff = 0;
    sha256_init(&ctx);
    sha256_update(&ctx, (const BYTE *)given, strlen(given));
    sha256_final(&ctx, hg);
    sha256_init(&ctx);
    sha256_update(&ctx, (const BYTE *)pass, strlen(pass));
    sha256_final(&ctx, hp);
    for (int i = 0; i < SHA256_BLOCK_SIZE; i++) diff |= hg[i] ^ hp[i];
    return diff == 0;
}

static void execCommand(nkClient *c, int argc, sds *argv) {
    const char *cmd = argv[0];
    const char *pass = requiredPassword();

    if (!strcasecmp(cmd, "quit")) {
        nkClientReply(c, "+OK\r\n");
        nkClientSetState(c, NK_CLIENT_CLOSING);
        return;
    }
    if (!strcasecmp(cmd, "auth")) {
        const char *user = argc == 3 ? argv[1] : "default";
        const char *given = argc == 3 ? argv[2] : (argc == 2 ? argv[1] : NULL);
        const char *admin = nk.cfg.adminpass;
        /* A NUL in the user or password would end the comparison early:
         * "pass\0anything" is not "pass". */
        int nul = argsHaveNul(argc - 1, argv + 1);
        int user_ok = !nul &&
                      (!strcmp(user, "default") ||
                       (nk.cfg.masteruser && !strcmp(user, nk.cfg.masteruser)));
        int admin_ok = !nul && (!strcmp(user, "default") || !strcmp(user, "admin"));
        if (!given) {
            nkClientReply(c, "-ERR wrong number of arguments for 'auth' command\r\n");
        } else if (!pass && !admin) {
            nkClientReply(c, "-ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?\r\n");
        } else if (admin && secretEqual(given, admin) && admin_ok) {
            c->authenticated = 1;
            c->admin = 1;
            nkClientReply(c, "+OK\r\n");
        } else if (pass && secretEqual(given, pass) && user_ok) {
            c->authenticated = 1;
            c->admin = 0;
            nkClientReply(c, "+OK\r\n");
        } else {
            nkAuthFailed(c);
            nkClientReply(c, "-WRONGPASS invalid username-password pair or user is disabled.\r\n");
        }
        return;
    }
    if (pass && !c->authenticated) {
        nkClientReply(c, "-NOAUTH Authentication required.\r\n");
        return;
    }
    if (nkAdminCommand(cmd) && !nkClientIsAdmin(c)) {
        nkReplyNoPerm(c, nkAdminCommand(cmd));
        return;
    }
    if (!strcasecmp(cmd, "ping") && nkPubsubSubscribed(c)) {
        /* As in subscribed mode: ["pong", <the argument or "">]. */
        sds out = sdscatfmt(sdsempty(), "*2\r\n$4\r\npong\r\n$%u\r\n", argc > 1 ? (unsigned)sdslen(argv[1]) : 0U);
        if (argc > 1) out = sdscatsds(out, argv[1]);
        out = sdscat(out, "\r\n");
        nkClientWriteRaw(c, out, sdslen(out));
        sdsfree(out);
    } else if (!strcasecmp(cmd, "ping")) {
        if (argc > 1) replyBulk(c, argv[1], sdslen(argv[1]));
        else nkClientReply(c, "+PONG\r\n");
    } else if (!strcasecmp(cmd, "replconf")) {
        for (int i = 1; i + 1 < argc; i += 2) {
            if (!strcasecmp(argv[i], "listening-port")) c->listening_port = atoi(argv[i + 1]);
            else if (!strcasecmp(argv[i], "capa")) {
                if (!strcasecmp(argv[i + 1], "eof")) c->capa_eof = 1;
                else if (!strcasecmp(argv[i + 1], "psync2")) c->capa_psync2 = 1;
                else if (!strcasecmp(argv[i + 1], NICKV_CAPA_VIA)) c->capa_nickv = 1;
            }
        }
        nkClientReply(c, "+OK\r\n");
    } else if (!strcasecmp(cmd, "psync")) {
        nkPsyncCommand(c, argc, argv);
    } else if (!strcasecmp(cmd, "sync")) {
        nkClientReply(c, "-ERR Nic-KV serves PSYNC only (replicas of Redis 2.8 and later)\r\n");
    } else if (!strcasecmp(cmd, "info")) {
        sds info = genInfo(argc - 1, argv + 1);
        if (sdslen(info) == 0) {
            /* Not a section we have: say so rather than answer nothing. */
            nkClientReply(c, "-ERR no such INFO section (Nic-KV has server, upstream, backlog, "
                          "replicas, stats, failover, rdma, clients, memory, cpu)\r\n");
        } else {
            replyBulk(c, info, sdslen(info));
        }
        sdsfree(info);
    } else if (!strcasecmp(cmd, "role")) {
        roleCommand(c);
    } else if (!strcasecmp(cmd, "sentinel")) {
        nkSentinelCommand(c, argc, argv);
    } else if (!strcasecmp(cmd, "subscribe") || !strcasecmp(cmd, "psubscribe") ||
               !strcasecmp(cmd, "unsubscribe") || !strcasecmp(cmd, "punsubscribe")) {
        nkPubsubCommand(c, argc, argv);
    } else if (!strcasecmp(cmd, "config")) {
        configCommand(c, argc, argv);
    } else if (!strcasecmp(cmd, "failover")) {
        /* FAILOVER [TO <host> <port>]: a planned handover (nickv_failover.c). */
        char err[512];
        long long port = 0;
        if (argc != 1 && (argc != 4 || strcasecmp(argv[1], "to") ||
                          !string2ll(argv[3], sdslen(argv[3]), &port) || port < 1 || port > 65535)) {
            nkClientReply(c, "-ERR syntax: FAILOVER [TO <host> <port>]\r\n");
        } else if (nkFailoverPlanned(argc == 4 ? argv[2] : NULL, (int)port, "FAILOVER", err, sizeof(err)) == -1) {
            nkClientReply(c, "-ERR FAILOVER: %s\r\n", err);
        } else {
            nkClientReply(c, "+OK\r\n");
        }
    } else if (!strcasecmp(cmd, "shutdown")) {
        nkLog(LL_WARNING, "SHUTDOWN by %s:%d", c->ip, c->port);
        nk.shutdown_asap = 1;
        nkClientReply(c, "+OK\r\n");
    } else {
        sds a = sdscatrepr(sdsempty(), cmd, strlen(cmd) > 64 ? 64 : strlen(cmd));
        nkClientReply(c, "-ERR unknown command %s (Nic-KV serves replication and PING, INFO, "
                      "ROLE, CONFIG, SENTINEL, SUBSCRIBE, FAILOVER, SHUTDOWN)\r\n", a);
        sdsfree(a);
    }
}

/* An authenticated RDMA client gets its full receive buffer (and a staging
 * ring to match, for a proxied RDB) from its next buffer turn on. */
static void nkClientMaybeGrant(nkClient *c) {
    if (c->rx_granted || !c->conn || !nkConnIsRdma(c->conn)) return;
    if (requiredPassword() && !c->authenticated) return;
    rdmaChanSetRxSize(nkConnChan(c->conn), (size_t)nk.cfg.rdma_rx_size);
    c->rx_granted = 1;
}

/* HANDOVER after an EOF-marked RDB (nickv_fullsync.c, fsDone): the
 * replica's first REPLCONF ACK starts the stream; anything else it sends
 * before is dropped, as a master drops a loading replica's input. */
static void handoverAwaitAck(nkClient *c, const char *buf, size_t len) {
    c->ack_wait_io = nkMstime();    /* a loading replica sends "\n" each second */
    c->querybuf = sdscatlen(c->querybuf, buf, len);
    for (;;) {
        int argc, ack;
        sds *argv;
        const char *err = NULL;
        int r = nkParseCommand(&c->querybuf, &argc, &argv, &err);
        if (r < 0) {
            /* HANDOVER goes to no other state: the replica is closed. */
            stats.protocol_errors++;
            nkLog(LL_NOTICE, "Replica %s:%d: protocol error (%s) while it loads its RDB: closing it", c->ip,
                  c->listening_port, err);
            nkClientFree(c);
            return;
        }
        if (r == 0) return;
        ack = argc >= 2 && !strcasecmp(argv[0], "replconf") && !strcasecmp(argv[1], "ack");
        nkFreeArgv(argc, argv);
        if (ack) break;
    }
    c->stream_on_ack = 0;
    sdsclear(c->querybuf);
    nkClientFlush(c);    /* hands over once the output is out */
}

static void nkClientReadable(nkConn *conn, void *data) {
    nkClient *c = data;
    char buf[16 * 1024];
    ssize_t n = nkConnRead(conn, buf, sizeof(buf));
    if (n == 0 || (n < 0 && errno != EAGAIN)) {
        nkClientFree(c);
        return;
    }
    if (n < 0) return;
    if (c->state == NK_CLIENT_HANDOVER && c->stream_on_ack) {
        handoverAwaitAck(c, buf, n);
        return;
    }
    /* Not listening any more (or, waiting for the stream, not yet). */
    if (c->state != NK_CLIENT_CONNECTED) return;
    c->querybuf = sdscatlen(c->querybuf, buf, n);
    for (;;) {
        int argc, r;
        sds *argv;
        if (c->state != NK_CLIENT_CONNECTED) break;
        if (sdslen(c->outbuf) > NK_OUTBUF_MAX) {
            nkLog(LL_NOTICE, "Client %s:%d does not read its replies: closing it", c->ip, c->port);
            nkClientFree(c);
            return;
        }
        const char *err = NULL;
        r = nkParseCommand(&c->querybuf, &argc, &argv, &err);
        if (r < 0) protocolError(c, err);
        if (r <= 0) break;
        if (argc > 0) execCommand(c, argc, argv);
        nkFreeArgv(argc, argv);
    }
    nkClientMaybeGrant(c);
    nkClientFlush(c);
}

/* A new client, on TCP or RDMA. */
static void nkClientCreate(nkConn *conn, const char *ip, int port) {
    nkClient *c = zcalloc(sizeof(*c));
    int full = nkClientSlotsFree() == 0;
    stats.connections++;
    c->id = ++nk.next_client_id;
    c->conn = conn;
    snprintf(c->ip, sizeof(c->ip), "%s", ip);
    c->port = port;
    c->querybuf = sdsempty();
    c->outbuf = sdsempty();
    c->ctime = time(NULL);
    c->ctime_ms = nkMstime();
    listAddNodeTail(nk.clients, c);
    nkConnSetData(conn, c);
    if (full) {
        /* As redis-server: told why, and closed. */
        stats.rejected_conn++;
        nkLog(LL_VERBOSE, "Refusing %s:%d: max number of clients reached", ip, port);
        nkClientReply(c, "-ERR max number of clients reached\r\n");
        nkClientSetState(c, NK_CLIENT_CLOSING);
        nkClientFlush(c);
        return;
    }
    if (nk.cfg.protected_mode && !requiredPassword() && !isLoopback(ip)) {
        nkLog(LL_NOTICE, "Refusing %s:%d: protected mode, no password set", ip, port);
        nkClientReply(c, "-DENIED Nic-KV is running in protected mode: no password is set "
                      "(requirepass or masterauth), so only loopback clients are served.\r\n");
        nkClientSetState(c, NK_CLIENT_CLOSING);
        nkClientFlush(c);
        return;
    }
    nkConnSetReadHandler(conn, nkClientReadable);
    nkClientMaybeGrant(c);
}

/* Clients and replicas Nic-KV holds: each is a connection. */
static long nkClientsConnected(void) {
    return (long)listLength(nk.clients) + (long)nkReplicaCount();
}

int nkClientSlotsFree(void) {
    long n = nk.cfg.maxclients - nkClientsConnected();
    if (nk.accept_paused_until) return 0;
    return n > 0 ? (int)n : 0;
}

/* Log an accept error, at most once a second (with how many were not). */
static void nkAcceptError(const char *err) {
    long long now = nkMstime();
    if (now - nk.accept_err_logged < 1000) {
        nk.accept_err_unlogged++;
        return;
    }
    if (nk.accept_err_unlogged)
        nkLog(LL_WARNING, "Accepting a client: %s (and %lld more errors since the last report)",
              err, nk.accept_err_unlogged);
    else
        nkLog(LL_WARNING, "Accepting a client: %s", err);
    nk.accept_err_logged = now;
    nk.accept_err_unlogged = 0;
}

static void nkAcceptHandler(aeEventLoop *el, int lfd, void *data, int mask);

/* Out of file descriptors: the connection waiting on a listener cannot be
 * taken, and the listener stays readable. Stop polling the listeners for a
 * while (nkAcceptResumeCron resumes) rather than spin. */
static void nkAcceptPause(void) {
    for (int i = 0; i < nk.ipcount; i++) aeDeleteFileEvent(nk.el, nk.ipfd[i], AE_READABLE);
    nk.accept_paused_until = nkMstime() + 100;
}

static void nkAcceptResumeCron(void) {
    if (!nk.accept_paused_until || nkMstime() < nk.accept_paused_until) return;
    nk.accept_paused_until = 0;
    for (int i = 0; i < nk.ipcount; i++)
        aeCreateFileEvent(nk.el, nk.ipfd[i], AE_READABLE, nkAcceptHandler, NULL);
}

static void nkAcceptHandler(aeEventLoop *el, int lfd, void *data, int mask) {
    (void)el; (void)data; (void)mask;
    char ip[64], err[ANET_ERR_LEN];
    int port, fd, max = 100;
    while (max--) {
        fd = anetTcpAccept(err, lfd, ip, sizeof(ip), &port);
        if (fd == ANET_ERR) {
            int e = errno;
            if (e == EAGAIN || e == EWOULDBLOCK) return;
            nkAcceptError(err);
            if (e == EMFILE || e == ENFILE || e == ENOBUFS || e == ENOMEM) {
                nkAcceptPause();
                return;
            }
            continue;
        }
        anetNonBlock(NULL, fd);
        anetEnableTcpNoDelay(NULL, fd);
        anetKeepAlive(NULL, fd, 300);
        nkClientCreate(nkConnFromFd(nk.loop, fd), ip, port);
    }
}

/* ------------------------------------------------------------------ RDMA --- */

static void nkRdmaLog(int level, const char *msg) {
    nkLog(level, "%s", msg);
}

static void nkRdmaAccept(rdmaChan *ch, void *data) {
    char ip[64];
    int port = 0;
    (void)data;
    nkConn *conn;
    if (rdmaChanPeerAddr(ch, ip, sizeof(ip), &port) == -1) snprintf(ip, sizeof(ip), "?");
    if (!(conn = nkConnFromChan(nk.loop, ch))) return;   /* closed, logged */
    nkClientCreate(conn, ip, port);
}

static void nkRdmaListenerEvent(aeEventLoop *el, int fd, void *data, int mask) {
    (void)el; (void)fd; (void)mask;
    rdmaListenerHandleEvents(data, nkRdmaAccept, NULL);
}

static void nkRdmaAsyncEvent(aeEventLoop *el, int fd, void *data, int mask) {
    (void)el; (void)fd; (void)data; (void)mask;
    rdmaHandleAsyncEvents();
}

/* RDMA, when rdma-port or master-rdma-port asks for it: the library, the
 * listeners (one per rdma-bind address), the device events. A machine
 * without an RDMA device keeps serving TCP, and INFO says why not RDMA. */
static void nkRdmaStart(void) {
    char err[256];
    int fd;
    snprintf(nk.rdma_status, sizeof(nk.rdma_status), "off");
    if (!nk.cfg.rdma_port && !nk.cfg.master_rdma_port) return;
    if (rdmaInit(nkRdmaLog, err, sizeof(err)) == -1) {
        snprintf(nk.rdma_status, sizeof(nk.rdma_status), "error: %s", err);
        nkLog(LL_WARNING, "RDMA: %s", err);
        return;
    }
    rdmaSetPinnedLimit((size_t)nk.cfg.rdma_max_pinned);
    rdmaSetUnauthLimit(nk.cfg.rdma_max_unauth);
    if ((fd = rdmaAsyncFd()) != -1) aeCreateFileEvent(nk.el, fd, AE_READABLE, nkRdmaAsyncEvent, NULL);
    if (!nk.cfg.rdma_port) return;
    for (int i = 0; i < (nk.cfg.rdma_bindcount ? nk.cfg.rdma_bindcount : 1); i++) {
        const char *addr = nk.cfg.rdma_bindcount ? nk.cfg.rdma_bind[i] : NULL;
        rdmaListener *l = rdmaListen(addr, nk.cfg.rdma_port, (size_t)nk.cfg.rdma_rx_size, -1,
                                     err, sizeof(err));
        if (!l) {
            snprintf(nk.rdma_status, sizeof(nk.rdma_status), "error: %s", err);
            nkLog(LL_WARNING, "RDMA: not listening on port %d: %s. TCP keeps serving.",
                  nk.cfg.rdma_port, err);
            continue;
        }
        nk.rdma_listeners[nk.rdma_count++] = l;
        aeCreateFileEvent(nk.el, rdmaListenerFd(l), AE_READABLE, nkRdmaListenerEvent, l);
        nkLog(LL_NOTICE, "RDMA: listening on %s", rdmaListenerAddr(l));
    }
    if (nk.rdma_count) snprintf(nk.rdma_status, sizeof(nk.rdma_status), "on");
}

/* The RDMA port the master may send replicas to: ours, if we listen. */
int nkRdmaPort(void) {
    return nk.rdma_count ? nk.cfg.rdma_port : 0;
}

/* -------------------------------------------------------------- Main --- */

/* Close the clients that hold too much or stay too long without a
 * password: a proxied full sync whose queued RDB is over the hard limit, or
 * over the soft limit for soft-seconds (the replica does not read it: the
 * sync stops reading the master above 4 MB, so the queue stays there); a
 * client that has not authenticated within auth-timeout seconds. */
static void nkClientsCron(void) {
    listIter li;
    listNode *ln;
    long long now = nkMstime();
    int need_auth = requiredPassword() != NULL;
    listRewind(nk.clients, &li);
    while ((ln = listNext(&li))) {
        nkClient *c = listNodeValue(ln);
        long long pending = (long long)nkClientPending(c);
        const char *why = NULL;
        if (c->state == NK_CLIENT_FULLSYNC) {
            if (nk.cfg.obuf_hard && pending > nk.cfg.obuf_hard) {
                why = "hard";
            } else if (nk.cfg.obuf_soft && pending > nk.cfg.obuf_soft) {
                if (!c->obuf_soft_since) c->obuf_soft_since = now;
                else if (now - c->obuf_soft_since >= nk.cfg.obuf_soft_seconds * 1000LL) why = "soft";
            } else {
                c->obuf_soft_since = 0;
            }
            if (why) {
                stats.obuf_drops++;
                nkLog(LL_WARNING, "Replica %s:%d (proxied full sync) closed for overcoming of "
                      "output buffer limits (%s limit, %lld bytes queued)",
                      c->ip, c->listening_port ? c->listening_port : c->port, why, pending);
                nkClientFree(c);
                continue;
            }
        }
        if (c->state == NK_CLIENT_HANDOVER && c->stream_on_ack &&
            now - c->ack_wait_io > nk.cfg.repl_timeout * 1000LL) {
            /* As a master times out a replica that loads in silence. */
            nkLog(LL_WARNING, "Replica %s:%d: silent for repl-timeout (%d s) after its RDB, without the "
                  "REPLCONF ACK that starts its stream: closing it", c->ip, c->listening_port,
                  nk.cfg.repl_timeout);
            nkClientFree(c);
            continue;
        }
        if (need_auth && !c->authenticated && nk.cfg.auth_timeout &&
            now - c->ctime_ms >= nk.cfg.auth_timeout * 1000LL) {
            stats.auth_timeouts++;
            nkLog(LL_VERBOSE, "Client %s:%d did not authenticate in %d seconds: closing it",
                  c->ip, c->port, nk.cfg.auth_timeout);
            nkClientFree(c);
        }
    }
}

/* Every 100 ms: PSYNCs waiting for the stream, clients' limits, accepting
 * again; every NICKV_HEARTBEAT_MS: the heartbeat to the master; every second:
 * the link, the failed AUTH summary. */
static int nkCron(aeEventLoop *el, long long id, void *data) {
    static int ticks = 0;
    (void)id; (void)data;
    if (nk.shutdown_asap) {
        nkLog(LL_WARNING, "Nic-KV is shutting down");
        /* The master first: it must forget us before a replica we drop
         * reaches it, or it would send that replica back to our port, to
         * the Nic-KV started after us, which cannot serve it yet (its
         * backlog starts where the master is then) and sends it back to
         * the master for NICKV_HOLD_SECONDS. */
        nkLinkShutdown();
        nkReplicasDropAll("Nic-KV is shutting down");
        nkFailoverShutdown();
        nkCoordShutdown();
        if (nk.cfg.pidfile) unlink(nk.cfg.pidfile);
        aeStop(el);
        return AE_NOMORE;
    }
    nkAcceptResumeCron();
    nkClientsCron();
    if (ticks++ % 10 == 0) {
        nkAuthFailuresCron();
        nkLogRepeatCron();
        nkLinkCron();
        nkLoopCron(nk.loop);
        for (int i = 0; i < nk.rdma_count; i++) rdmaListenerCron(nk.rdma_listeners[i]);
        if (nk.rdma_count || nk.cfg.master_rdma_port) rdmaCron();
    }
    if (ticks % (NICKV_HEARTBEAT_MS / 100) == 0) nkLinkHeartbeat();
    nkPsyncWaitersCheck();
    nkLinkResume();
    return 100;
}

static void sigShutdown(int sig) {
    (void)sig;
    nk.shutdown_asap = 1;
}

static void beforeSleep(aeEventLoop *el) {
    (void)el;
    nkReplicasMainEvents();
    nkLinkResume();               /* before the pass: it may re-arm the link */
    nkLoopBeforeSleep(nk.loop);
    nkFanoutFlushHandovers();
    nkProbeAfterEvents();
    if (nk.shutdown_asap) aeSetDontWait(nk.el, 1);
}

int main(int argc, char **argv) {
    sds options = sdsempty();
    int j = 1;

    configDefaults();
    if (argc >= 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
        usage(stdout);
        return 0;
    }
    if (argc >= 2 && (!strcmp(argv[1], "--version") || !strcmp(argv[1], "-v"))) {
        printf("Nic-KV v=%s skv=%s\n", NICKV_VERSION, SKV_VERSION);
        return 0;
    }
    if (argc >= 2 && argv[1][0] != '-') {
        FILE *fp = fopen(argv[1], "r");
        char buf[4096];
        sds text = sdsempty();
        size_t n;
        if (!fp) {
            fprintf(stderr, "nic-kv: cannot open the config file %s: %s\n", argv[1], strerror(errno));
            return 1;
        }
        while ((n = fread(buf, 1, sizeof(buf), fp)) > 0) text = sdscatlen(text, buf, n);
        fclose(fp);
        nk.cfg.config_file = zstrdup(argv[1]);
        configLoad(text, argv[1]);
        sdsfree(text);
        j = 2;
    }
    /* --name value ... as lines of a config file, after the file. */
    for (; j < argc; j++) {
        if (!strncmp(argv[j], "--", 2)) {
            if (sdslen(options)) options = sdscat(options, "\n");
            options = sdscat(options, argv[j] + 2);
        } else {
            options = sdscat(options, " ");
            options = sdscatrepr(options, argv[j], strlen(argv[j]));
        }
    }
    configLoad(options, "the command line");
    sdsfree(options);
    {
        const char *err;
        if (!applyPasswords(&err)) {
            fprintf(stderr, "nic-kv: %s\n", err);
            return 1;
        }
    }
    if (nk.cfg.logfile) {
        /* As redis-server: a log that cannot be written stops us here. */
        FILE *fp = fopen(nk.cfg.logfile, "a");
        if (!fp) {
            fprintf(stderr, "nic-kv: Can't open the log file %s: %s\n", nk.cfg.logfile,
                    strerror(errno));
            return 1;
        }
        fclose(fp);
    }
    if (nkAdjustOpenFilesLimit() == -1) return 1;

    if (nk.cfg.daemonize) {
        if (daemon(1, 0) == -1) {
            perror("nic-kv: daemon");
            return 1;
        }
    }
    if (nk.cfg.pidfile) {
        FILE *fp = fopen(nk.cfg.pidfile, "w");
        if (fp) { fprintf(fp, "%d\n", (int)getpid()); fclose(fp); }
    }
    signal(SIGPIPE, SIG_IGN);
    signal(SIGTERM, sigShutdown);
    signal(SIGINT, sigShutdown);

    nk.start_time = time(NULL);
    getRandomHexChars(nk.instance, NICKV_INSTANCE_LEN);
    nk.instance[NICKV_INSTANCE_LEN] = '\0';
    nk.clients = listCreate();
    nkReplicaInit();
    nkLinkInit();
    /* The layers know only those below them. What a lower one tells a
     * higher one is wired here: the backlog asks the replicas to drop the
     * owner of a pin, the fan-out threads post their events (a replica
     * gone, an ACK to relay) to the replicas' main-thread side, and the
     * link tells the PSYNCs waiting for the stream and drops or announces
     * the replicas. */
    static const nkLinkReplicaOps link_replicas = {
        nkReplicaCount, nkReplicasDropAll, nkReplicasAnnounce, nkRdmaPort, nkClientSlotsFree
    };
    nkBacklogSetDropper(nkReplicaDrop);
    nkFanoutOnState(nkReplicaSetState);
    nkFanoutOnEvents(nkReplicasMainEvents);
    nkLinkOnStream(nkPsyncWaitersCheck);
    nkLinkOnReplicas(&link_replicas);
    nk.el = aeCreateEventLoop(65536);
    nk.loop = nkLoopCreate(nk.el);
    if (nkBacklogInit(nk.cfg.backlog_size) == -1) {
        nkLog(LL_WARNING, "Cannot allocate a %lld byte backlog", nk.cfg.backlog_size);
        return 1;
    }
    if (nkFanoutStart(nk.el, nk.cfg.thread_num) == -1) return 1;
    for (int i = 0; i < nk.cfg.bindcount; i++) {
        char err[ANET_ERR_LEN];
        int fd = strchr(nk.cfg.bind[i], ':') ?
            anetTcp6Server(err, nk.cfg.port, nk.cfg.bind[i], 511) :
            anetTcpServer(err, nk.cfg.port, nk.cfg.bind[i], 511);
        if (fd == ANET_ERR) {
            nkLog(LL_WARNING, "Cannot listen on %s:%d: %s", nk.cfg.bind[i], nk.cfg.port, err);
            return 1;
        }
        anetNonBlock(NULL, fd);
        nk.ipfd[nk.ipcount++] = fd;
        aeCreateFileEvent(nk.el, fd, AE_READABLE, nkAcceptHandler, NULL);
    }
    nkRdmaStart();
    if (nkFailoverInit() == -1) return 1;
    if (nkCoordInit() == -1) return 1;
    nkProbeStart();
    aeCreateTimeEvent(nk.el, 1, nkCron, NULL, NULL);
    aeSetBeforeSleepProc(nk.el, beforeSleep);
    nkLog(LL_NOTICE, "Nic-KV %s (SKV %s) listening on port %d, master %s:%d, backlog %lld bytes, "
          "thread-num %d", NICKV_VERSION, SKV_VERSION, nk.cfg.port, nk.cfg.master_host,
          nk.cfg.master_port, nk.cfg.backlog_size, nk.cfg.thread_num);
#ifdef NK_DEBUG
    nkLog(LL_NOTICE, "Debug build: invariants are checked, and a broken one aborts (nkBug)");
#endif
    nkLinkCron();
    aeMain(nk.el);
    nkFanoutStop();
    nkLog(LL_NOTICE, "Nic-KV is now ready to exit, bye bye...");
    return 0;
}
