/* nickv_config.c -- Nic-KV's options: the table, the config file and the
 * command line, --help, and CONFIG GET / SET / RESETSTAT.
 *
 * Copyright (c) 2026, the SKV authors. BSD 3-Clause licence (see LICENSE).
 *
 * Every option is one row of nkConfigs[] (below), read by everything that
 * names options: the config file and --name arguments (configLoad, from
 * main()), --help (usage), CONFIG GET and CONFIG SET (configCommand, from
 * execCommand in nickv_cmd.c). The table and its types stay private to
 * this file; nickv_int.h has the few entry points the rest of the server
 * calls. Who may run CONFIG, and CONFIG SET of a protected option, is
 * decided in nickv_cmd.c ("Who may run what").
 */

#include "nickv_int.h"
#include "nickv_resp.h"
#include "nickv_resolve.h"
#include "nickv_backlog.h"
#include "nickv_upstream.h"
#include "nickv_coord.h"
#include "nickv_member.h"
#include "nickv_probe.h"
#include "nickv_cluster.h"
#include "nickv_failover.h"
#include "nickv_client.h"
#include "nickv_replica.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sys/stat.h>
#include <unistd.h>
#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "util.h"
#include "zmalloc.h"

/* ------------------------------------------------------- Configuration --- */

/* Raise the open files limit to maxclients + NK_RESERVED_FDS if it is
 * lower, as upstream's adjustOpenFilesLimit(); where the system refuses,
 * lower maxclients to what the limit allows, and say so. Returns -1 when
 * the limit leaves no room for a single client. */
int nkAdjustOpenFilesLimit(void) {
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
#define NK_CFG_NAME (1<<4)        /* STRING: letters, digits and ._- only: it
                                   * goes into INFO lines and Pub/Sub messages */

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

/* node <ip:port>...: the members (nickv_member.c). Lines of the config
 * file and --node options add to the list; CONFIG SET replaces it. */
static int cfgLoading;          /* configLoad runs: a node line adds */
static int cfgSetNodes(int argc, sds *argv, const char **err) {
    nkNodeAddr nodes[NK_MAX_NODES];
    int n = cfgLoading ? nk.cfg.nodecount : 0;
    memcpy(nodes, nk.cfg.nodes, sizeof(nodes));
    for (int i = 0; i < argc; i++) {
        if (!*argv[i]) continue;
        if (n == NK_MAX_NODES) {
            snprintf(cfgErr, sizeof(cfgErr), "at most %d nodes", NK_MAX_NODES);
            *err = cfgErr;
            return 0;
        }
        if (!nkMemberParse(argv[i], &nodes[n], err)) return 0;
        n++;
    }
    memcpy(nk.cfg.nodes, nodes, sizeof(nodes));
    nk.cfg.nodecount = n;
    return 1;
}

static sds cfgGetNodes(void) {
    sds s = sdsempty();
    for (int i = 0; i < nk.cfg.nodecount; i++)
        s = sdscatprintf(s, strchr(nk.cfg.nodes[i].ip, ':') ? "%s[%s]:%d" : "%s%s:%d", i ? " " : "",
                         nk.cfg.nodes[i].ip, nk.cfg.nodes[i].port);
    return s;
}

static int applyMembers(const char **err) {
    return nkMembersCheck(err);
}

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

/* enable-protected-configs, as upstream's PROTECTED_ACTION_ALLOWED_*
 * (NK_PROTECTED_*: nickv_int.h). */
static const nkConfigEnum protectedEnum[] = {
    {"no", NK_PROTECTED_NO}, {"yes", NK_PROTECTED_YES}, {"local", NK_PROTECTED_LOCAL}, {NULL, 0}
};

/* The admin password must not be the replicas' one (requirepass, else
 * masterauth): every replica holds that, and would be an admin. Checked at
 * start and by CONFIG SET of any of the three. */
int applyPasswords(const char **err) {
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

static const nkConfigEnum tlsAuthEnum[] = {
    {"no", NK_TLS_AUTH_NO}, {"yes", NK_TLS_AUTH_YES}, {"optional", NK_TLS_AUTH_OPTIONAL}, {NULL, 0}
};

static const nkConfigEnum loglevelEnum[] = {
    {"debug", LL_DEBUG}, {"verbose", LL_VERBOSE}, {"notice", LL_NOTICE},
    {"warning", LL_WARNING}, {NULL, 0}
};

#define IMM NK_CFG_IMMUTABLE
#define MULTI NK_CFG_MULTI_ARG
#define PROT NK_CFG_PROTECTED
#define NONEMPTY NK_CFG_NONEMPTY
static nkConfigOption nkConfigs[] = {
    {"port", NK_CFG_INT, IMM, &nk.cfg.port, 0, 65535, 7380, NULL, NULL, NULL, NULL, NULL,
     "<n>", "TCP port for replicas and admin clients (0: none, TLS only)"},
    {"tls-port", NK_CFG_INT, IMM, &nk.cfg.tls_port, 0, 65535, 0, NULL, NULL, NULL, NULL, NULL,
     "<n>", "TLS port for replicas and admin clients (0: none)"},
    {"tls-replication", NK_CFG_BOOL, IMM, &nk.cfg.tls_replication, 0, 1, 0, NULL, NULL, NULL, NULL, NULL,
     "yes|no", "connect to the nodes (the link, probes, failover, the\n"
     "                        master's watch) over TLS, their certificates\n"
     "                        verified against the CA before anything is sent"},
    {"tls-cert-file", NK_CFG_STRING, IMM|PROT, &nk.cfg.tls_cert_file, 0, 0, 0, NULL, NULL, NULL, NULL, NULL,
     "<path>", "Nic-KV's certificate (PEM), for tls-port and, unless\n"
     "                        tls-client-cert-file, for what it connects to"},
    {"tls-key-file", NK_CFG_STRING, IMM|PROT, &nk.cfg.tls_key_file, 0, 0, 0, NULL, NULL, NULL, NULL, NULL,
     "<path>", "... its private key"},
    {"tls-client-cert-file", NK_CFG_STRING, IMM|PROT, &nk.cfg.tls_client_cert_file, 0, 0, 0, NULL, NULL,
     NULL, NULL, NULL, "<path>", "the certificate Nic-KV shows the nodes it connects to"},
    {"tls-client-key-file", NK_CFG_STRING, IMM|PROT, &nk.cfg.tls_client_key_file, 0, 0, 0, NULL, NULL,
     NULL, NULL, NULL, "<path>", "... its private key"},
    {"tls-ca-cert-file", NK_CFG_STRING, IMM|PROT, &nk.cfg.tls_ca_cert_file, 0, 0, 0, NULL, NULL, NULL,
     NULL, NULL, "<path>", "the CA that signs the nodes' and clients' certificates"},
    {"tls-ca-cert-dir", NK_CFG_STRING, IMM|PROT, &nk.cfg.tls_ca_cert_dir, 0, 0, 0, NULL, NULL, NULL,
     NULL, NULL, "<path>", "... or a directory of CAs (c_rehash)"},
    {"tls-auth-clients", NK_CFG_ENUM, IMM, &nk.cfg.tls_auth_clients, 0, 0, NK_TLS_AUTH_YES, NULL,
     tlsAuthEnum, NULL, NULL, NULL, "yes|no|optional", "a client of tls-port must show a certificate\n"
     "                        the CA signed (optional: checked if shown)"},
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
    {"replica-user", NK_CFG_STRING, 0, &nk.cfg.replica_user, 0, 0, 0, NULL, NULL, NULL, NULL, NULL,
     "<user>", "the ACL user replicas replicate as (their masteruser):\n"
     "                        AUTH <user> <requirepass> is the replicas' password"},
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
    {"busy-limit", NK_CFG_INT, 0, &nk.cfg.busy_limit, 0, 3600000, 5000, NULL, NULL, NULL, NULL, NULL,
     "<ms>", "a master whose watch thread says it is busy (a long\n"
     "                        command, a fork) is failed over only when busy this long;\n"
     "                        0: silent is dead, busy or not"},
    {"node", NK_CFG_SPECIAL, MULTI, NULL, 0, 0, 0, "", NULL, cfgSetNodes, cfgGetNodes, applyMembers,
     "<ip:port...>", "a member: a node Nic-KV may send its credentials to,\n"
     "                        name valid, promote and repoint; a line per node,\n"
     "                        or several on a line (the master-host is one)"},
    {"min-slaves", NK_CFG_INT, 0, &nk.cfg.min_slaves, 0, 1000000, 0, NULL, NULL, NULL, NULL, applyMembers,
     "<n>", "the master refuses writes (-NOREPLICAS) while fewer\n"
     "                        replicas answer probes, and WAIT counts only those\n"
     "                        (0: the probes change nothing)"},
    {"master-name", NK_CFG_STRING, NONEMPTY | NK_CFG_NAME, &nk.cfg.master_name, 0, 0, 0, "mymaster", NULL, NULL, NULL,
     NULL, "<name>", "what clients asking SENTINEL call the master"},
    {"failover", NK_CFG_BOOL, 0, &nk.cfg.failover, 0, 1, 0, NULL, NULL, NULL, NULL, applyMembers,
     "yes|no", "promote the best replica when the master fails (the\n"
     "                        master needs nickv-lease yes); no: detect only"},
    {"lease-time", NK_CFG_INT, 0, &nk.cfg.lease_time, 50, NICKV_LEASE_MAX_MS, 250, NULL, NULL, NULL,
     NULL, applyLeaseTime, "<ms>", "the master's write lease: a promotion waits this long\n"
     "                        after the last grant"},
    {"failback", NK_CFG_BOOL, 0, &nk.cfg.failback, 0, 1, 0, NULL, NULL, NULL, NULL, NULL,
     "yes|no", "the configured master, back and caught up as a\n"
     "                        replica, takes over again (a planned handover)"},
    {"confirm-claims", NK_CFG_BOOL, 0, &nk.cfg.confirm_claims, 0, 1, 0, NULL, NULL, NULL, NULL, NULL,
     "yes|no", "take a replica's offset past the master's known\n"
     "                        stream when a replica at another address claims as much;\n"
     "                        only with one replica per host (DESIGN.md, Fencing)"},
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
int argsHaveNul(int argc, sds *argv) {
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
        if ((o->flags & NK_CFG_NAME) && (strlen(v) > 128 || v[strspn(v, "abcdefghijklmnopqrstuvwxyz"
                                        "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-")])) {
            *err = "a name of letters, digits, '.', '_' and '-' only, 128 at most";
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

/* Each option's default as configGetValue() shows it, taken once the
 * defaults are set (CONFIG REWRITE leaves out what is still the default). */
static sds configDefaultShown[sizeof(nkConfigs) / sizeof(nkConfigs[0])];

void configDefaults(void) {
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
    for (nkConfigOption *o = nkConfigs; o->name; o++) {
        sdsfree(configDefaultShown[o - nkConfigs]);
        configDefaultShown[o - nkConfigs] = configGetValue(o);
    }
}

/* Load "name value..." lines (# comments, quotes as in redis.conf): the
 * config file, then the command line's options. Any error stops Nic-KV.
 * The text is all of it, NUL bytes included: a line is parsed as a C
 * string, so one with a NUL byte in it is refused, not cut short there. */
void configLoad(sds text, const char *origin) {
    int nlines = 0;
    cfgLoading = 1;
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
    cfgLoading = 0;
}

void usage(FILE *fp) {
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

/* ------------------------------------------------------ CONFIG GET/SET --- */

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

/* ------------------------------------------------------ CONFIG REWRITE --- */

/* "name value" as configLoad() reads it back: a value of several words
 * (MULTI_ARG) as they are, any other quoted when it is empty or holds a
 * space, a quote, a backslash or a byte that is not printable. */
static sds configCatLine(sds s, nkConfigOption *o) {
    sds v = configGetValue(o);
    int quote = sdslen(v) == 0 && !(o->flags & NK_CFG_MULTI_ARG);
    for (size_t i = 0; i < sdslen(v) && !(o->flags & NK_CFG_MULTI_ARG); i++)
        if (v[i] <= ' ' || v[i] > '~' || v[i] == '"' || v[i] == '\'' || v[i] == '\\') quote = 1;
    s = sdscatfmt(s, "%s ", o->name);
    s = quote ? sdscatrepr(s, v, sdslen(v)) : sdscatsds(s, v);
    sdsfree(v);
    return sdscat(s, "\n");
}

/* CONFIG REWRITE: the file Nic-KV was started with, its options as they
 * are now. Each option's first line gets the current value; a later line
 * for the same option is dropped; comments, blank lines and lines that
 * name no option are kept as they were; options the file does not name
 * and whose value is not the default (CONFIG SET, the command line) are
 * appended. Written to a temporary file in the same directory, synced and
 * renamed over the file: a crash leaves the old file or the new, whole.
 * Returns 0, or -1 with err set. */
static int configRewrite(char *err, size_t errlen) {
    const char *path = nk.cfg.config_file;
    char tmp[PATH_MAX];
    char done[sizeof(nkConfigs) / sizeof(nkConfigs[0])] = {0};
    sds text = sdsempty(), out = sdsempty();
    char buf[4096];
    size_t n;
    int nlines = 0, nuse, fd = -1;
    sds *lines = NULL;
    struct stat st;
    FILE *fp;

    if (!path) {
        snprintf(err, errlen, "The server is running without a config file");
        goto err;
    }
    if (!(fp = fopen(path, "r")) || fstat(fileno(fp), &st) == -1) {
        snprintf(err, errlen, "cannot read the config file %s: %s", path, strerror(errno));
        if (fp) fclose(fp);
        goto err;
    }
    while ((n = fread(buf, 1, sizeof(buf), fp)) > 0) text = sdscatlen(text, buf, n);
    fclose(fp);
    lines = sdssplitlen(text, sdslen(text), "\n", 1, &nlines);
    /* The text ends with a newline: the last "line" is the empty rest. */
    nuse = nlines && sdslen(lines[nlines - 1]) == 0 ? nlines - 1 : nlines;
    for (int i = 0; i < nuse; i++) {
        int argc = 0;
        sds line = sdstrim(sdsdup(lines[i]), " \t\r");
        sds *argv = line[0] && line[0] != '#' ? sdssplitargs(line, &argc) : NULL;
        nkConfigOption *o = argc ? configLookup(argv[0]) : NULL;
        if (!o) {
            out = sdscatsds(out, lines[i]);
            out = sdscat(out, "\n");
        } else if (!done[o - nkConfigs]) {
            out = configCatLine(out, o);
            done[o - nkConfigs] = 1;
        }
        if (argv) sdsfreesplitres(argv, argc);
        sdsfree(line);
    }
    for (nkConfigOption *o = nkConfigs; o->name; o++) {
        sds v, d = configDefaultShown[o - nkConfigs];
        if (done[o - nkConfigs]) continue;
        v = configGetValue(o);
        if (!d || sdscmp(v, d)) out = configCatLine(out, o);
        sdsfree(v);
    }
    snprintf(tmp, sizeof(tmp), "%s.rewrite-%d", path, (int)getpid());
    if ((fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, st.st_mode & 0777)) == -1 ||
        write(fd, out, sdslen(out)) != (ssize_t)sdslen(out) || fsync(fd) == -1) {
        snprintf(err, errlen, "cannot write %s: %s", tmp, strerror(errno));
        goto err;
    }
    close(fd);
    fd = -1;
    if (rename(tmp, path) == -1) {
        snprintf(err, errlen, "cannot rename %s to %s: %s", tmp, path, strerror(errno));
        goto err;
    }
    nkLog(LL_NOTICE, "CONFIG REWRITE: %s written", path);
    sdsfreesplitres(lines, nlines);
    sdsfree(text);
    sdsfree(out);
    return 0;

err:
    if (fd != -1) {
        close(fd);
        unlink(tmp);
    }
    if (lines) sdsfreesplitres(lines, nlines);
    sdsfree(text);
    sdsfree(out);
    return -1;
}

void configCommand(nkClient *c, int argc, sds *argv) {
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
        /* A map to a RESP3 client, as upstream's. */
        sds head = nkCatMapLen(sdsempty(), c->resp, n / 2);
        nkClientWriteRaw(c, head, sdslen(head));
        sdsfree(head);
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
        nkClusterResetStats();
        nkCommandStatsReset();
        rdmaResetStats();
        nkClientReply(c, "+OK\r\n");
    } else if (argc == 2 && !strcasecmp(argv[1], "rewrite")) {
        char err[PATH_MAX + 128];
        if (configRewrite(err, sizeof(err)) == -1) nkClientReply(c, "-ERR Rewriting config file: %s\r\n", err);
        else nkClientReply(c, "+OK\r\n");
    } else {
        nkClientReply(c, "-ERR CONFIG takes GET <pattern>..., SET <name> <value>, RESETSTAT or REWRITE\r\n");
    }
}
