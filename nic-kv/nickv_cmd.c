/* nickv_cmd.c -- Nic-KV's commands: who may run what, AUTH, and every
 * command a client sends before (or instead of) replicating.
 *
 * Copyright (c) 2026, the SKV authors. BSD 3-Clause licence (see LICENSE).
 *
 * nickv.c reads a client's requests and hands each one to execCommand here;
 * the answer goes back through nkClientReply. Two roles may send commands
 * ("Who may run what" below, NIC-KV.md): replication and discovery (PING,
 * REPLCONF, PSYNC, INFO, ROLE, SENTINEL, SUBSCRIBE, HELLO, CLIENT...), and
 * admin (CONFIG, FAILOVER, SHUTDOWN, CLIENT LIST/KILL). Every command is a
 * row of nkCommands[]. PSYNC is nickv_replica.c's, SENTINEL and SUBSCRIBE
 * nickv_sentinel.c's, CONFIG nickv_config.c's; INFO's sections come from
 * every part, put together in genInfo.
 */

#include "nickv_int.h"
#include "nickv_resp.h"
#include "nickv_conn.h"
#include "nickv_resolve.h"
#include "nickv_backlog.h"
#include "nickv_fanout.h"
#include "nickv_upstream.h"
#include "nickv_coord.h"
#include "nickv_probe.h"
#include "nickv_cluster.h"
#include "nickv_failover.h"
#include "nickv_client.h"
#include "nickv_replica.h"
#include "nickv_sentinel.h"
#include "monotonic.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/time.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "sha256.h"
#include "skv_version.h"
#include "util.h"
#include "version.h"
#include "zmalloc.h"

/* ------------------------------------------------------------- Commands --- */

/* The replicas' password: requirepass, else masterauth when that is the
 * master's default user's password (replicas hold it already). With a
 * masteruser, masterauth is Nic-KV's own credential (the nickv-user's,
 * which grants the master its lease): it is never its clients'. */
const char *requiredPassword(void) {
    if (nk.cfg.requirepass) return nk.cfg.requirepass;
    return nk.cfg.masteruser ? NULL : nk.cfg.masterauth;
}

int isLoopback(const char *ip) {
    return !strcmp(ip, "127.0.0.1") || !strcmp(ip, "::1") || !strncmp(ip, "127.", 4);
}

/* ---------------------------------------------------- Who may run what --- */

/* Two roles (NIC-KV.md, "Who may run what"):
 *
 *   replication and discovery   any client that passed requirepass (else
 *                               masterauth), or every client when neither
 *                               is set: AUTH, HELLO, PING, ECHO, REPLCONF,
 *                               PSYNC, SYNC, INFO, ROLE, TIME, SENTINEL
 *                               (read only), the SUBSCRIBE family, CLIENT
 *                               ID/GETNAME/SETNAME/INFO (the client's own),
 *                               ACL WHOAMI, COMMAND, SLOWLOG, LATENCY,
 *                               MEMORY STATS, QUIT
 *   admin                       what changes Nic-KV or the nodes, reads
 *                               its secrets or touches other clients:
 *                               CONFIG (GET, SET, RESETSTAT, REWRITE),
 *                               FAILOVER, SHUTDOWN, CLIENT LIST and CLIENT
 *                               KILL. A client that gave
 *                               adminpass (AUTH <adminpass>, or AUTH admin
 *                               <adminpass>); with no adminpass set, a
 *                               loopback client, as upstream's protected
 *                               mode trusts the machine's own users. Never
 *                               a remote client by the replicas' password.
 *
 * And CONFIG SET of an option that names a program or a file (PROTECTED:
 * fence-command) also needs enable-protected-configs yes, or local and a
 * loopback client, as upstream 7.0's. The table is nkCommands[] (below,
 * its admin column) and nkAdminName (CLIENT's subcommands). */

static int nkClientIsAdmin(nkClient *c) {
    if (nk.cfg.adminpass) return c->admin;
    return isLoopback(c->ip);
}

/* May c change a PROTECTED option? (It is an admin already.) */
int nkAllowProtected(nkClient *c) {
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

/* INFO's sections that Nic-KV's own counters fill: one function each. */
static sds infoServer(sds s) {
    /* os: as upstream's; on the DPU, its Arm kernel (the tests check
     * the machine of the aarch64 build they run under qemu-user). */
    struct utsname un;
    if (uname(&un) == -1) memset(&un, 0, sizeof(un));
    s = sdscatprintf(s,
        "# Server\r\n"
        "redis_version:%s\r\n"
        "redis_mode:nickv\r\n"
        "nickv_version:%s\r\n"
        "skv_version:%s\r\n"
        "os:%s %s %s\r\n"
        "arch_bits:%d\r\n"
        "process_id:%d\r\n"
        "run_id:%s\r\n"
        "tcp_port:%d\r\n"
        "tls_port:%d\r\n"
        "tls_replication:%s\r\n"
        "rdma_port:%d\r\n"
        "uptime_in_seconds:%lld\r\n"
        "thread_num:%d\r\n"
        "fanout_threads:%d\r\n"
        "config_file:%s\r\n\r\n",
        REDIS_VERSION, NICKV_VERSION, SKV_VERSION, un.sysname, un.release, un.machine, (int)(sizeof(void *) * 8),
        (int)getpid(), nk.instance, nk.cfg.port, nk.cfg.tls_port, nk.cfg.tls_replication ? "yes" : "no",
        nkRdmaPort(),
        nkUnixTime() - (long long)nk.start_time, nk.cfg.thread_num, nkFanoutThreads(),
        nk.cfg.config_file ? nk.cfg.config_file : "");
    return s;
}

static sds infoStats(sds s) {
    s = sdscatprintf(s, "# Stats\r\ntotal_connections_received:%lld\r\n"
                     "total_commands_processed:%lld\r\n", stats.connections, stats.commands);
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
    return s;
}

static sds infoRdma(sds s) {
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
    return s;
}

static sds infoClients(sds s) {
    s = sdscatprintf(s,
        "# Clients\r\n"
        "connected_clients:%lu\r\n"
        "blocked_clients:0\r\n"        /* Nic-KV blocks no client (redis-cli --stat reads it) */
        "maxclients:%d\r\n"
        "client_slots_free:%d\r\n\r\n",
        listLength(nk.clients), nk.cfg.maxclients, nkClientSlotsFree());
    return s;
}

static sds infoMemory(sds s) {
    s = sdscatprintf(s,
        "# Memory\r\n"
        "used_memory:%lld\r\n"
        "used_memory_heap:%zu\r\n"
        "mem_replication_backlog:%lld\r\n"
        "backlog_allocated:%lld\r\n\r\n",
        (long long)zmalloc_used_memory() + nkBacklogMapped(), zmalloc_used_memory(),
        nkBacklogSize(), nkBacklogSize());
    return s;
}

static sds infoCpu(sds s) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    s = sdscatprintf(s,
        "# CPU\r\n"
        "used_cpu_sys:%ld.%06ld\r\n"
        "used_cpu_user:%ld.%06ld\r\n\r\n",
        (long)ru.ru_stime.tv_sec, (long)ru.ru_stime.tv_usec,
        (long)ru.ru_utime.tv_sec, (long)ru.ru_utime.tv_usec);
    return s;
}

/* The sections redis-server has and tools ask for (redis_exporter, redis-cli
 * --stat): what applies to Nic-KV, which keeps no keys and persists
 * nothing but its state file. commandstats: each command's calls and time
 * (nkCommandStats); errorstats: none kept. Only when asked by name, as
 * upstream's "everything" sections are. */
static sds nkCommandStats(sds s);

static sds infoUpstreamOnly(sds s, int nsec, sds *secs) {
    for (int i = 0; i < nsec; i++) {
        if (!strcasecmp(secs[i], "persistence"))
            s = sdscat(s, "# Persistence\r\nloading:0\r\nasync_loading:0\r\n\r\n");
        else if (!strcasecmp(secs[i], "keyspace"))
            s = sdscat(s, "# Keyspace\r\n\r\n");
        else if (!strcasecmp(secs[i], "errorstats"))
            s = sdscat(s, "# Errorstats\r\n\r\n");
        else if (!strcasecmp(secs[i], "commandstats"))
            s = nkCommandStats(sdscat(s, "# Commandstats\r\n"));
    }
    return s;
}

/* INFO [section ...]: the sections asked for (infoWants), as upstream 7.0
 * takes them; each part of Nic-KV writes its own. */
static sds genInfo(int nsec, sds *secs) {
    sds s = sdsempty();
    long long first, last;

    nkBacklogRange(&first, &last);
    if (infoWants(nsec, secs, "server", NULL)) s = infoServer(s);
    if (infoWants(nsec, secs, "replication", "upstream")) {
        s = nkLinkInfo(s, last);
        s = nkReplicasReplicationInfo(s);
        s = nkBacklogReplicationInfo(s);
        s = sdscat(s, "\r\n");
    }
    if (infoWants(nsec, secs, "backlog", NULL)) s = nkBacklogInfo(s);
    if (infoWants(nsec, secs, "replicas", "replication")) s = nkReplicasInfo(s);
    if (infoWants(nsec, secs, "stats", NULL)) s = infoStats(s);
    if (infoWants(nsec, secs, "failover", NULL)) {
        s = nkProbeInfo(s);
        s = nkFailoverInfo(s);
    }
    if (infoWants(nsec, secs, "sentinel", NULL)) s = nkSentinelInfo(s);
    if (infoWants(nsec, secs, "cluster", NULL)) s = nkClusterInfo(s);
    if (infoWants(nsec, secs, "coordinator", NULL)) s = nkCoordInfo(s);
    if (infoWants(nsec, secs, "rdma", NULL)) s = infoRdma(s);
    if (infoWants(nsec, secs, "clients", NULL)) s = infoClients(s);
    if (infoWants(nsec, secs, "memory", NULL)) s = infoMemory(s);
    if (infoWants(nsec, secs, "cpu", NULL)) s = infoCpu(s);
    s = infoUpstreamOnly(s, nsec, secs);
    if (sdslen(s) >= 2) sdsrange(s, 0, -3);   /* no blank line at the end */
    return s;
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

void nkAuthFailuresCron(void) {
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

/* The outcome of a password given by AUTH or HELLO AUTH. */
#define NK_AUTH_OK 0
#define NK_AUTH_WRONG 1         /* -WRONGPASS */
#define NK_AUTH_NONE 2          /* no password is set: nothing to give */

/* Check user/given against adminpass and the replicas' password; on a
 * match, c gets the role it grants and its user name (ACL WHOAMI). */
static int nkAuthenticate(nkClient *c, const sds user, const sds given) {
    const char *pass = requiredPassword();
    const char *admin = nk.cfg.adminpass;
    /* A NUL in the user or password would end the comparison early:
     * "pass\0anything" is not "pass". */
    sds both[2] = {user, given};
    int nul = argsHaveNul(2, both);
    int user_ok = !nul &&
                  (!strcmp(user, "default") ||
                   (nk.cfg.masteruser && !strcmp(user, nk.cfg.masteruser)) ||
                   (nk.cfg.replica_user && !strcmp(user, nk.cfg.replica_user)));
    int admin_ok = !nul && (!strcmp(user, "default") || !strcmp(user, "admin"));
    if (!pass && !admin) return NK_AUTH_NONE;
    if (admin && secretEqual(given, admin) && admin_ok) {
        c->admin = 1;
    } else if (pass && secretEqual(given, pass) && user_ok) {
        c->admin = 0;
    } else {
        nkAuthFailed(c);
        return NK_AUTH_WRONG;
    }
    c->authenticated = 1;
    sdsfree(c->user);
    c->user = strcmp(user, "default") ? sdsdup(user) : NULL;
    return NK_AUTH_OK;
}

static void authCommand(nkClient *c, int argc, sds *argv) {
    sds user = argc == 3 ? argv[1] : NULL;
    if (argc != 2 && argc != 3) {
        nkClientReply(c, "-ERR wrong number of arguments for 'auth' command\r\n");
        return;
    }
    if (!user) user = sdsnew("default");
    switch (nkAuthenticate(c, user, argv[argc - 1])) {
    case NK_AUTH_OK:
        nkClientReply(c, "+OK\r\n");
        break;
    case NK_AUTH_NONE:
        nkClientReply(c, "-ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?\r\n");
        break;
    default:
        nkClientReply(c, "-WRONGPASS invalid username-password pair or user is disabled.\r\n");
    }
    if (argc != 3) sdsfree(user);
}

/* A client name as upstream takes it: printable ASCII, no spaces. */
static int nkValidClientName(const sds name) {
    for (size_t i = 0; i < sdslen(name); i++)
        if (name[i] < '!' || name[i] > '~') return 0;
    return 1;
}

static void nkSetClientName(nkClient *c, const sds name) {
    sdsfree(c->name);
    c->name = sdslen(name) ? sdsdup(name) : NULL;
}

/* HELLO [protover [AUTH username password] [SETNAME clientname]], as
 * upstream 7.0's: it switches the client to RESP2 or RESP3, may
 * authenticate it (the same passwords and roles as AUTH) and name it, and
 * answers what the server is. Nic-KV answers as what it is to a client,
 * a Sentinel for its master (mode), and its ROLE (role). */
static void helloCommand(nkClient *c, int argc, sds *argv) {
    long long ver = 0;
    sds name = NULL;
    if (argc >= 2) {
        if (!string2ll(argv[1], sdslen(argv[1]), &ver)) {
            nkClientReply(c, "-ERR Protocol version is not an integer or out of range\r\n");
            return;
        }
        if (ver < 2 || ver > 3) {
            nkClientReply(c, "-NOPROTO unsupported protocol version\r\n");
            return;
        }
    }
    for (int j = 2; j < argc; j++) {
        int more = argc - 1 - j;
        if (!strcasecmp(argv[j], "auth") && more >= 2) {
            int r = nkAuthenticate(c, argv[j + 1], argv[j + 2]);
            if (r == NK_AUTH_WRONG) {
                nkClientReply(c, "-WRONGPASS invalid username-password pair or user is disabled.\r\n");
                return;
            }
            /* NK_AUTH_NONE: no password to give, as upstream's nopass
             * default user takes any. */
            j += 2;
        } else if (!strcasecmp(argv[j], "setname") && more >= 1) {
            if (!nkValidClientName(argv[j + 1])) {
                nkClientReply(c, "-ERR Client names cannot contain spaces, newlines or special characters.\r\n");
                return;
            }
            name = argv[++j];
        } else {
            sds a = sdscatrepr(sdsempty(), argv[j], sdslen(argv[j]) > 64 ? 64 : sdslen(argv[j]));
            nkClientReply(c, "-ERR Syntax error in HELLO option %s\r\n", a);
            sdsfree(a);
            return;
        }
    }
    if (requiredPassword() && !c->authenticated) {
        nkClientReply(c, "-NOAUTH HELLO must be called with the client already authenticated, "
                      "otherwise the HELLO AUTH <user> <pass> option can be used to authenticate "
                      "the client and select the RESP protocol version at the same time\r\n");
        return;
    }
    if (name) nkSetClientName(c, name);
    if (ver) c->resp = (int)ver;
    sds out = nkCatMapLen(sdsempty(), c->resp, 7);
    out = nkCatBulk(out, "server", 6);
    out = nkCatBulk(out, "nic-kv", 6);
    out = nkCatBulk(out, "version", 7);
    out = nkCatBulk(out, NICKV_VERSION, strlen(NICKV_VERSION));
    out = sdscatfmt(out, "$5\r\nproto\r\n:%i\r\n$2\r\nid\r\n:%I\r\n", c->resp, c->id);
    out = nkCatBulk(out, "mode", 4);
    out = nkCatBulk(out, "sentinel", 8);
    out = nkCatBulk(out, "role", 4);
    out = nkCatBulk(out, "nickv", 5);
    out = nkCatBulk(out, "modules", 7);
    out = sdscat(out, "*0\r\n");
    nkClientWriteRaw(c, out, sdslen(out));
    sdsfree(out);
}

/* ---------------------------------------------------------- CLIENT --- */

/* One line of CLIENT LIST / CLIENT INFO: upstream's fields, in its order,
 * for what Nic-KV keeps of a client (it has no databases, no MULTI, a
 * single output buffer: db=0 multi=-1 oll=0; its arguments are freed
 * once the command ran: argv-mem=0; fd=-1 over RDMA). Replicas that
 * stream (handed over to a fan-out thread) are no longer clients: INFO
 * replicas lists them. */
static sds catClientInfo(sds s, nkClient *c) {
    static const char *states[NK_CLIENT_STATES] = {"N", "W", "F", "H", "c"};
    long long now = nkMstime();
    size_t qmem = sdsAllocSize(c->querybuf), omem = sdsAllocSize(c->outbuf);
    int subscribed = (c->channels && listLength(c->channels)) || (c->patterns && listLength(c->patterns));
    char flags[8] = "";
    /* Upstream's letters: P a subscriber, O a MONITOR, N nothing else to
     * say. */
    if (c->state < NK_CLIENT_STATES && strcmp(states[c->state], "N")) strcat(flags, states[c->state]);
    else if (c->state >= NK_CLIENT_STATES) strcat(flags, "?");
    if (subscribed) strcat(flags, "P");
    if (c->monitor) strcat(flags, "O");
    if (!flags[0]) strcat(flags, "N");
    s = sdscatfmt(s, strchr(c->ip, ':') ? "id=%I addr=[%s]:%i" : "id=%I addr=%s:%i", c->id, c->ip, c->port);
    s = sdscatfmt(s, " fd=%i name=%s age=%I idle=%I flags=%s db=0 sub=%i psub=%i multi=-1",
                  c->conn ? nkConnFd(c->conn) : -1, c->name ? c->name : "",
                  (now - c->ctime_ms) / 1000, (now - c->last_cmd_ms) / 1000, flags,
                  c->channels ? (int)listLength(c->channels) : 0,
                  c->patterns ? (int)listLength(c->patterns) : 0);
    s = sdscatfmt(s, " qbuf=%U qbuf-free=%U argv-mem=0 obl=%U oll=0 omem=%U tot-mem=%U",
                  (unsigned long long)sdslen(c->querybuf), (unsigned long long)sdsavail(c->querybuf),
                  (unsigned long long)sdslen(c->outbuf), (unsigned long long)omem,
                  (unsigned long long)(sizeof(*c) + qmem + omem));
    s = sdscatfmt(s, " cmd=%s user=%s resp=%i\n", c->last_cmd[0] ? c->last_cmd : "NULL",
                  c->user ? c->user : "default", c->resp);
    return s;
}

/* The peer as CLIENT KILL ADDR names it: ip:port, or [ip]:port for IPv6. */
static int clientAddrIs(nkClient *c, const char *addr) {
    char buf[96];
    snprintf(buf, sizeof(buf), strchr(c->ip, ':') ? "[%s]:%d" : "%s:%d", c->ip, c->port);
    return !strcmp(buf, addr);
}

/* CLIENT KILL <ip:port> | CLIENT KILL [ID <id>] [ADDR <ip:port>] [SKIPME yes|no]:
 * the old form kills one (itself too) and answers +OK or an error; the
 * new, every match (not itself unless SKIPME no), and answers how many. */
static void clientKill(nkClient *c, int argc, sds *argv) {
    const char *addr = NULL;
    long long id = 0;
    int skipme = 1, killed = 0, close_self = 0;
    listIter li;
    listNode *ln;
    if (argc == 3) {
        addr = argv[2];
        skipme = 0;
    } else if (argc > 3) {
        for (int i = 2; i < argc; i += 2) {
            if (i + 1 >= argc) {
                nkClientReply(c, "-ERR syntax error\r\n");
                return;
            } else if (!strcasecmp(argv[i], "id")) {
                if (!string2ll(argv[i + 1], sdslen(argv[i + 1]), &id) || id < 1) {
                    nkClientReply(c, "-ERR client-id should be greater than 0\r\n");
                    return;
                }
            } else if (!strcasecmp(argv[i], "addr")) {
                addr = argv[i + 1];
            } else if (!strcasecmp(argv[i], "skipme") && !strcasecmp(argv[i + 1], "yes")) {
                skipme = 1;
            } else if (!strcasecmp(argv[i], "skipme") && !strcasecmp(argv[i + 1], "no")) {
                skipme = 0;
            } else {
                nkClientReply(c, "-ERR syntax error (Nic-KV's CLIENT KILL takes ID, ADDR and SKIPME)\r\n");
                return;
            }
        }
    } else {
        nkClientReply(c, "-ERR syntax error\r\n");
        return;
    }
    listRewind(nk.clients, &li);
    while ((ln = listNext(&li))) {
        nkClient *o = listNodeValue(ln);
        if (addr && !clientAddrIs(o, addr)) continue;
        if (id && o->id != id) continue;
        if (o == c && skipme) continue;
        killed++;
        if (o == c) {
            close_self = 1;
        } else {
            nkLog(LL_VERBOSE, "CLIENT KILL by %s:%d: closing client %s:%d", c->ip, c->port, o->ip, o->port);
            nkClientFree(o);    /* listNext already holds the next node */
        }
    }
    if (argc == 3) {
        if (killed) nkClientReply(c, "+OK\r\n");
        else nkClientReply(c, "-ERR No such client\r\n");
    } else {
        nkClientReply(c, ":%d\r\n", killed);
    }
    if (close_self) nkClientSetState(c, NK_CLIENT_CLOSING);
}

static void clientCommand(nkClient *c, int argc, sds *argv) {
    const char *sub = argc > 1 ? argv[1] : "";
    if (!strcasecmp(sub, "id") && argc == 2) {
        nkClientReply(c, ":%lld\r\n", c->id);
    } else if (!strcasecmp(sub, "getname") && argc == 2) {
        sds out = c->name ? nkCatBulk(sdsempty(), c->name, sdslen(c->name)) : nkCatNull(sdsempty(), c->resp);
        nkClientWriteRaw(c, out, sdslen(out));
        sdsfree(out);
    } else if (!strcasecmp(sub, "setname") && argc == 3) {
        if (!nkValidClientName(argv[2])) {
            nkClientReply(c, "-ERR Client names cannot contain spaces, newlines or special characters.\r\n");
            return;
        }
        nkSetClientName(c, argv[2]);
        nkClientReply(c, "+OK\r\n");
    } else if ((!strcasecmp(sub, "info") && argc == 2) || (!strcasecmp(sub, "list") && argc == 2)) {
        sds lines = sdsempty(), out;
        if (!strcasecmp(sub, "info")) {
            lines = catClientInfo(lines, c);
        } else {
            listIter li;
            listNode *ln;
            listRewind(nk.clients, &li);
            while ((ln = listNext(&li))) lines = catClientInfo(lines, listNodeValue(ln));
        }
        out = nkCatVerbatim(sdsempty(), c->resp, lines, sdslen(lines));
        nkClientWriteRaw(c, out, sdslen(out));
        sdsfree(out);
        sdsfree(lines);
    } else if (!strcasecmp(sub, "kill")) {
        clientKill(c, argc, argv);
    } else {
        sds a = sdscatrepr(sdsempty(), sub, strlen(sub) > 64 ? 64 : strlen(sub));
        nkClientReply(c, "-ERR unknown subcommand or wrong number of arguments for CLIENT %s "
                      "(Nic-KV serves CLIENT ID, GETNAME, SETNAME, INFO, LIST, KILL)\r\n", a);
        sdsfree(a);
    }
}

/* ------------------------------------------------- The command table --- */

/* Every command Nic-KV serves: its arity as upstream counts it (negative:
 * at least), its help (COMMAND DOCS, redis-cli's hints), and the role it
 * needs ("Who may run what"). CLIENT's LIST and KILL are admin's too,
 * checked by name below: they show and close other clients. */
typedef void nkCommandProc(nkClient *c, int argc, sds *argv);

typedef struct nkCommand {
    const char *name;
    int arity;
    int admin;
    nkCommandProc *proc;
    const char *group;
    const char *summary;
} nkCommand;

static nkCommandProc sentinelCommand, pingCommand, replconfCommand, syncCommand, infoCommand, roleCmd,
    echoCommand, timeCommand, aclCommand, commandCommand, slowlogCommand, latencyCommand,
    memoryCommand, failoverCommand, shutdownCommand, quitCommand, monitorCommand;

static const nkCommand nkCommands[] = {
    {"auth", -2, 0, authCommand, "connection", "Authenticate: the replicas' password, or adminpass"},
    {"hello", -1, 0, helloCommand, "connection", "Switch to RESP2 or RESP3, authenticate, name the client"},
    {"ping", -1, 0, pingCommand, "connection", "Ping Nic-KV"},
    {"echo", 2, 0, echoCommand, "connection", "Echo the given string"},
    {"quit", -1, 0, quitCommand, "connection", "Close the connection"},
    {"client", -2, 0, clientCommand, "connection", "ID, GETNAME, SETNAME, INFO; LIST and KILL (admin)"},
    {"replconf", -1, 0, replconfCommand, "server", "A replica's handshake"},
    {"psync", -3, 0, nkPsyncCommand, "server", "A replica resyncs from Nic-KV's backlog, or fully through it"},
    {"sync", 1, 0, syncCommand, "server", "Refused: Nic-KV serves PSYNC only"},
    {"info", -1, 0, infoCommand, "server", "Nic-KV's state, by section"},
    {"role", 1, 0, roleCmd, "server", "Nic-KV's master, stream offset and replicas"},
    {"time", 1, 0, timeCommand, "server", "Nic-KV's clock"},
    {"acl", -2, 0, aclCommand, "server", "WHOAMI: the user the client authenticated as"},
    {"command", -1, 0, commandCommand, "server", "The commands Nic-KV serves: COUNT, INFO, DOCS"},
    {"slowlog", -2, 0, slowlogCommand, "server", "Empty: Nic-KV keeps no slow log"},
    {"latency", -2, 0, latencyCommand, "server", "Empty: Nic-KV measures no latency events"},
    {"memory", -2, 0, memoryCommand, "server", "STATS: Nic-KV's memory; USAGE of a status key: nil"},
    {"select", 2, 0, nkStatusSelectCommand, "connection", "Database 0 only: Nic-KV's status keys"},
    {"type", 2, 0, nkStatusTypeCommand, "keyspace", "string for a status key nickv:<INFO failover field>"},
    {"get", 2, 0, nkStatusGetCommand, "string", "A status key's value: nickv:epoch, nickv:failover_blocked..."},
    {"strlen", 2, 0, nkStatusStrlenCommand, "string", "A status key's length"},
    {"exists", -2, 0, nkStatusExistsCommand, "keyspace", "How many of the keys are status keys"},
    {"pfcount", -2, 0, nkStatusPfcountCommand, "hyperloglog", "WRONGTYPE for a status key: none is a HyperLogLog"},
    {"scan", -2, 0, nkStatusScanCommand, "keyspace", "The status keys, in one answer"},
    {"sentinel", -2, 0, sentinelCommand, "sentinel", "Find the master, as through Redis Sentinel; "
     "FAILOVER, SET, RESET (admin)"},
    {"subscribe", -2, 0, nkPubsubCommand, "pubsub", "Listen for Sentinel's events (+switch-master, +sdown...)"},
    {"psubscribe", -2, 0, nkPubsubCommand, "pubsub", "Listen for channels matching patterns"},
    {"unsubscribe", -1, 0, nkPubsubCommand, "pubsub", "Stop listening for channels"},
    {"punsubscribe", -1, 0, nkPubsubCommand, "pubsub", "Stop listening for patterns"},
    {"config", -2, 1, configCommand, "server", "GET, SET, RESETSTAT, REWRITE Nic-KV's options"},
    {"failover", -1, 1, failoverCommand, "server", "A planned handover to a replica"},
    {"monitor", 1, 1, monitorCommand, "server", "Stream the commands Nic-KV's clients run (passwords redacted)"},
    {"shutdown", -1, 1, shutdownCommand, "server", "Stop Nic-KV"},
    {NULL, 0, 0, NULL, NULL, NULL}
};

/* Calls and time per row of nkCommands[] (INFO commandstats; CONFIG
 * RESETSTAT clears them). */
static struct { long long calls, usec; } cmdstats[sizeof(nkCommands) / sizeof(nkCommands[0])];

static sds nkCommandStats(sds s) {
    for (size_t i = 0; nkCommands[i].name; i++) {
        if (!cmdstats[i].calls) continue;
        s = sdscatprintf(s, "cmdstat_%s:calls=%lld,usec=%lld,usec_per_call=%.2f,rejected_calls=0,failed_calls=0\r\n",
                         nkCommands[i].name, cmdstats[i].calls, cmdstats[i].usec,
                         (double)cmdstats[i].usec / cmdstats[i].calls);
    }
    return sdscat(s, "\r\n");
}

void nkCommandStatsReset(void) {
    memset(cmdstats, 0, sizeof(cmdstats));
}

static const nkCommand *nkLookupCommand(const char *name) {
    for (const nkCommand *cmd = nkCommands; cmd->name; cmd++)
        if (!strcasecmp(name, cmd->name)) return cmd;
    return NULL;
}

/* The name the role check reports: the command, or "client|list" style
 * for an admin subcommand of an everyone's command. */
static const char *nkAdminName(const nkCommand *cmd, int argc, sds *argv) {
    if (cmd->admin) return cmd->name;
    if (!strcmp(cmd->name, "client") && argc >= 2) {
        if (!strcasecmp(argv[1], "list")) return "client|list";
        if (!strcasecmp(argv[1], "kill")) return "client|kill";
    }
    if (!strcmp(cmd->name, "sentinel") && argc >= 2) {
        if (!strcasecmp(argv[1], "failover")) return "sentinel|failover";
        if (!strcasecmp(argv[1], "set")) return "sentinel|set";
        if (!strcasecmp(argv[1], "reset")) return "sentinel|reset";
    }
    return NULL;
}

/* ---------------------------------------------------------- MONITOR --- */

/* The MONITOR clients there are: execCommand looks for them only when
 * there is one. */
static int monitors;

static void monitorCommand(nkClient *c, int argc, sds *argv) {
    (void)argc, (void)argv;
    if (!c->monitor) monitors++;
    c->monitor = 1;
    nkClientReply(c, "+OK\r\n");
}

void nkMonitorForget(nkClient *c) {
    if (c->monitor) monitors--;
    c->monitor = 0;
}

/* SENTINEL's subcommands a MONITOR sees with their arguments: those that
 * only name a master or read. Any other (CONFIG SET sentinel-pass, SET
 * auth-pass: refused or an admin's, but a password all the same) shows
 * its name only. */
static const char *monitorSentinelReads[] = {
    "masters", "master", "replicas", "slaves", "sentinels", "get-master-addr-by-name", "myid",
    "ckquorum", "reset", "failover", NULL
};

/* Which arguments of argv a MONITOR must not see, into hide[] (argc
 * entries). As upstream 7.0 redacts: AUTH's arguments, each user and
 * password pair of HELLO's AUTH, walked as helloCommand parses HELLO (a
 * SETNAME's value is a name, not a keyword), and whatever HELLO holds that
 * it cannot parse; ACL's arguments past the subcommand (SETUSER takes
 * passwords); SENTINEL's past a subcommand that is not a read. */
static void monitorRedact(const nkCommand *cmd, int argc, sds *argv, char *hide) {
    long long v;
    memset(hide, 0, argc);
    if (cmd->proc == authCommand) {
        memset(hide + 1, 1, argc - 1);
    } else if (cmd->proc == helloCommand) {
        int j = 1;
        if (argc > 1 && string2ll(argv[1], sdslen(argv[1]), &v)) j = 2;
        while (j < argc) {
            if (!strcasecmp(argv[j], "auth")) {
                for (int k = j + 1; k < argc && k <= j + 2; k++) hide[k] = 1;
                j += 3;
            } else if (!strcasecmp(argv[j], "setname")) {
                j += 2;
            } else {
                hide[j++] = 1;
            }
        }
    } else if (cmd->proc == aclCommand) {
        if (argc > 2) memset(hide + 2, 1, argc - 2);
    } else if (!strcmp(cmd->name, "sentinel") && argc > 2) {
        int reads = 0;
        for (int k = 0; monitorSentinelReads[k]; k++)
            if (!strcasecmp(argv[1], monitorSentinelReads[k])) reads = 1;
        if (!reads) memset(hide + 2, 1, argc - 2);
    }
}

/* Send the command c is about to run to every MONITOR but c, one line as
 * upstream's: +<s>.<us> [0 <addr>] "arg" ... Commands that only an admin
 * may run and the replication handshake are left out, as upstream leaves
 * out its admin commands (CONFIG, MONITOR, REPLCONF...). */
static void monitorFeed(nkClient *c, const nkCommand *cmd, int argc, sds *argv) {
    if (cmd->admin || nkAdminName(cmd, argc, argv) || cmd->proc == replconfCommand ||
        cmd->proc == nkPsyncCommand || cmd->proc == syncCommand)
        return;
    struct timeval tv;
    gettimeofday(&tv, NULL);
    sds line = sdscatprintf(sdsempty(), "+%ld.%06ld [0 ", (long)tv.tv_sec, (long)tv.tv_usec);
    line = sdscatprintf(line, strchr(c->ip, ':') ? "[%s]:%d]" : "%s:%d]", c->ip, c->port);
    char *hide = zmalloc(argc);
    monitorRedact(cmd, argc, argv, hide);
    for (int i = 0; i < argc; i++) {
        line = sdscatlen(line, " ", 1);
        if (hide[i]) line = sdscat(line, "\"(redacted)\"");
        else line = sdscatrepr(line, argv[i], sdslen(argv[i]));
    }
    zfree(hide);
    line = sdscatlen(line, "\r\n", 2);
    listIter li;
    listNode *ln;
    listRewind(nk.clients, &li);
    while ((ln = listNext(&li))) {
        nkClient *m = listNodeValue(ln);
        if (m == c || !m->monitor || !m->conn || m->state != NK_CLIENT_CONNECTED) continue;
        /* One that does not read is closed, as a client that does not
         * read its replies is (nkClientReadable): it would grow without
         * bound, as fast as every other client sends. */
        if (sdslen(m->outbuf) + sdslen(line) > NK_OUTBUF_MAX) {
            nkLog(LL_NOTICE, "MONITOR client %s:%d does not read: closing it", m->ip, m->port);
            stats.obuf_drops++;
            nkClientFree(m);
            continue;
        }
        nkClientWriteRaw(m, line, sdslen(line));
        nkClientFlushSoon(m);     /* may free m (not c): its node only */
    }
    sdsfree(line);
}

/* ------------------------------------------------------ The commands --- */

static void quitCommand(nkClient *c, int argc, sds *argv) {
    (void)argc, (void)argv;
    nkClientReply(c, "+OK\r\n");
    nkClientSetState(c, NK_CLIENT_CLOSING);
}

static void pingCommand(nkClient *c, int argc, sds *argv) {
    if (nkPubsubSubscribed(c) && c->resp == 2) {
        /* As in subscribed mode: ["pong", <the argument or "">]. */
        sds out = sdscatfmt(sdsempty(), "*2\r\n$4\r\npong\r\n$%u\r\n", argc > 1 ? (unsigned)sdslen(argv[1]) : 0U);
        if (argc > 1) out = sdscatsds(out, argv[1]);
        out = sdscat(out, "\r\n");
        nkClientWriteRaw(c, out, sdslen(out));
        sdsfree(out);
    } else if (argc > 1) {
        replyBulk(c, argv[1], sdslen(argv[1]));
    } else {
        nkClientReply(c, "+PONG\r\n");
    }
}

/* REPLCONF from a replica: what it told us, pair by pair, as upstream's
 * master takes it; a listening-port that is not a port (the whole word,
 * 0-65535; 0 is "not said": the replica's own source port stands in) is
 * refused, as upstream refuses one that is not a number. */
static void replconfCommand(nkClient *c, int argc, sds *argv) {
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcasecmp(argv[i], "listening-port")) {
            long long port;
            if (!string2ll(argv[i + 1], sdslen(argv[i + 1]), &port) || port < 0 || port > 65535) {
                nkClientReply(c, "-ERR REPLCONF listening-port must be a port number (0-65535)\r\n");
                return;
            }
            c->listening_port = (int)port;
        } else if (!strcasecmp(argv[i], "capa")) {
            if (!strcasecmp(argv[i + 1], "eof")) c->capa_eof = 1;
            else if (!strcasecmp(argv[i + 1], "psync2")) c->capa_psync2 = 1;
            else if (!strcasecmp(argv[i + 1], NICKV_CAPA_VIA)) c->capa_nickv = 1;
        }
    }
    nkClientReply(c, "+OK\r\n");
}

static void syncCommand(nkClient *c, int argc, sds *argv) {
    (void)argc, (void)argv;
    nkClientReply(c, "-ERR Nic-KV serves PSYNC only (replicas of Redis 2.8 and later)\r\n");
}

/* INFO: a bulk string, or to a RESP3 client a verbatim one ("txt"), as
 * upstream 7.0's redis-server answers. */
static void infoCommand(nkClient *c, int argc, sds *argv) {
    /* A section Nic-KV does not have answers empty, as upstream's unknown
     * ones do: tools ask for sections by name (keyspace, errorstats...). */
    sds info = genInfo(argc - 1, argv + 1);
    sds out = nkCatVerbatim(sdsempty(), c->resp, info, sdslen(info));
    nkClientWriteRaw(c, out, sdslen(out));
    sdsfree(out);
    sdsfree(info);
}

static void roleCmd(nkClient *c, int argc, sds *argv) {
    (void)argc, (void)argv;
    roleCommand(c);
}

static void echoCommand(nkClient *c, int argc, sds *argv) {
    (void)argc;
    replyBulk(c, argv[1], sdslen(argv[1]));
}

static void timeCommand(nkClient *c, int argc, sds *argv) {
    (void)argc, (void)argv;
    struct timeval tv;
    gettimeofday(&tv, NULL);
    sds out = nkCatBulkLL(sdscat(sdsempty(), "*2\r\n"), (long long)tv.tv_sec);
    out = nkCatBulkLL(out, (long long)tv.tv_usec);
    nkClientWriteRaw(c, out, sdslen(out));
    sdsfree(out);
}

static void aclCommand(nkClient *c, int argc, sds *argv) {
    if (argc == 2 && !strcasecmp(argv[1], "whoami")) {
        const char *u = c->user ? c->user : "default";
        replyBulk(c, u, strlen(u));
    } else {
        nkClientReply(c, "-ERR Nic-KV has no ACL users: it serves ACL WHOAMI only\r\n");
    }
}

/* One entry of COMMAND / COMMAND INFO, as upstream 7.0 lays it out: name,
 * arity, flags, first key, last key, step, ACL categories, tips, key
 * specs, subcommands. Nic-KV's commands take no keys. */
static sds catCommandInfo(sds s, const nkCommand *cmd) {
    s = nkCatBulk(sdscat(s, "*10\r\n"), cmd->name, strlen(cmd->name));
    s = sdscatfmt(s, ":%i\r\n*1\r\n+%s\r\n:0\r\n:0\r\n:0\r\n", cmd->arity, cmd->admin ? "admin" : "fast");
    return sdscat(s, "*0\r\n*0\r\n*0\r\n*0\r\n");
}

static sds catCommandDocs(sds s, int resp, const nkCommand *cmd) {
    s = nkCatBulk(s, cmd->name, strlen(cmd->name));
    s = nkCatMapLen(s, resp, 3);
    s = nkCatBulk(nkCatBulk(s, "summary", 7), cmd->summary, strlen(cmd->summary));
    s = nkCatBulk(nkCatBulk(s, "since", 5), NICKV_VERSION, strlen(NICKV_VERSION));
    return nkCatBulk(nkCatBulk(s, "group", 5), cmd->group, strlen(cmd->group));
}

/* COMMAND, COMMAND COUNT, COMMAND INFO [name...], COMMAND DOCS [name...]:
 * Nic-KV's own commands (nkCommands), enough for redis-cli's help and
 * hints and for clients that look a command up. */
static void commandCommand(nkClient *c, int argc, sds *argv) {
    const char *sub = argc > 1 ? argv[1] : "";
    int n = 0;
    sds out = sdsempty();
    for (const nkCommand *cmd = nkCommands; cmd->name; cmd++) n++;
    if (argc == 1) {
        out = sdscatfmt(out, "*%i\r\n", n);
        for (const nkCommand *cmd = nkCommands; cmd->name; cmd++) out = catCommandInfo(out, cmd);
    } else if (!strcasecmp(sub, "count") && argc == 2) {
        out = sdscatfmt(out, ":%i\r\n", n);
    } else if (!strcasecmp(sub, "info")) {
        out = sdscatfmt(out, "*%i\r\n", argc == 2 ? n : argc - 2);
        if (argc == 2) {
            for (const nkCommand *cmd = nkCommands; cmd->name; cmd++) out = catCommandInfo(out, cmd);
        }
        for (int i = 2; i < argc; i++) {
            const nkCommand *cmd = nkLookupCommand(argv[i]);
            out = cmd ? catCommandInfo(out, cmd) : nkCatNullArray(out, c->resp);
        }
    } else if (!strcasecmp(sub, "docs")) {
        int found = 0;
        sds docs = sdsempty();
        for (const nkCommand *cmd = nkCommands; cmd->name; cmd++) {
            int want = argc == 2;
            for (int i = 2; i < argc && !want; i++) want = !strcasecmp(argv[i], cmd->name);
            if (want) {
                docs = catCommandDocs(docs, c->resp, cmd);
                found++;
            }
        }
        out = sdscatsds(nkCatMapLen(out, c->resp, found), docs);
        sdsfree(docs);
    } else {
        sds a = sdscatrepr(sdsempty(), sub, strlen(sub) > 64 ? 64 : strlen(sub));
        nkClientReply(c, "-ERR unknown subcommand or wrong number of arguments for COMMAND %s "
                      "(Nic-KV serves COMMAND, COMMAND COUNT, COMMAND INFO, COMMAND DOCS)\r\n", a);
        sdsfree(a);
    }
    nkClientWriteRaw(c, out, sdslen(out));
    sdsfree(out);
}

/* SLOWLOG GET [count] | LEN | RESET: Nic-KV's commands do no I/O and no
 * work that grows with data (the stream is the fan-out threads'), so it
 * keeps no slow log: empty, never an error, for tools that ask. */
static void slowlogCommand(nkClient *c, int argc, sds *argv) {
    long long count;
    if (!strcasecmp(argv[1], "get") && (argc == 2 || (argc == 3 && string2ll(argv[2], sdslen(argv[2]), &count) && count >= -1)))
        nkClientReply(c, "*0\r\n");
    else if (!strcasecmp(argv[1], "len") && argc == 2)
        nkClientReply(c, ":0\r\n");
    else if (!strcasecmp(argv[1], "reset") && argc == 2)
        nkClientReply(c, "+OK\r\n");
    else
        nkClientReply(c, "-ERR syntax: SLOWLOG GET [count] | LEN | RESET (Nic-KV keeps no slow log)\r\n");
}

/* LATENCY LATEST | HISTORY <event> | RESET [event...] | DOCTOR: Nic-KV
 * measures no latency events (it has no latency monitor): empty. */
static void latencyCommand(nkClient *c, int argc, sds *argv) {
    if (!strcasecmp(argv[1], "latest") && argc == 2) {
        nkClientReply(c, "*0\r\n");
    } else if (!strcasecmp(argv[1], "history") && argc == 3) {
        nkClientReply(c, "*0\r\n");
    } else if (!strcasecmp(argv[1], "reset")) {
        nkClientReply(c, ":0\r\n");
    } else if (!strcasecmp(argv[1], "histogram")) {
        /* Per-command latency histograms: none kept (upstream answers a
         * map of the commands it has one for). */
        nkClientReply(c, c->resp >= 3 ? "%%0\r\n" : "*0\r\n");
    } else if (!strcasecmp(argv[1], "doctor") && argc == 2) {
        const char *t = "Nic-KV measures no latency events: nothing to report. "
                        "INFO stats and INFO failover show the link's and the probes' timings.\n";
        sds out = nkCatVerbatim(sdsempty(), c->resp, t, strlen(t));
        nkClientWriteRaw(c, out, sdslen(out));
        sdsfree(out);
    } else {
        nkClientReply(c, "-ERR syntax: LATENCY LATEST | HISTORY <event> | RESET [event...] | DOCTOR | "
                      "HISTOGRAM [command...]\r\n");
    }
}

/* MEMORY STATS: what Nic-KV allocated (zmalloc), and of it the backlog's
 * ring and the clients' buffers. */
static void memoryCommand(nkClient *c, int argc, sds *argv) {
    if (argc == 2 && !strcasecmp(argv[1], "stats")) {
        size_t bufs = 0;
        listIter li;
        listNode *ln;
        listRewind(nk.clients, &li);
        while ((ln = listNext(&li))) {
            nkClient *o = listNodeValue(ln);
            bufs += sdsAllocSize(o->querybuf) + sdsAllocSize(o->outbuf);
        }
        sds out = nkCatMapLen(sdsempty(), c->resp, 3);
        out = sdscatfmt(nkCatBulk(out, "total.allocated", 15), ":%U\r\n", (unsigned long long)zmalloc_used_memory());
        out = sdscatfmt(nkCatBulk(out, "replication.backlog", 19), ":%I\r\n", nkBacklogSize());
        out = sdscatfmt(nkCatBulk(out, "clients.normal", 14), ":%U\r\n", (unsigned long long)bufs);
        nkClientWriteRaw(c, out, sdslen(out));
        sdsfree(out);
    } else if ((argc == 3 || argc == 5) && !strcasecmp(argv[1], "usage")) {
        nkStatusMemoryUsage(c, argc, argv);
    } else {
        nkClientReply(c, "-ERR Nic-KV holds no data: it serves MEMORY STATS and USAGE only\r\n");
    }
}

static void failoverCommand(nkClient *c, int argc, sds *argv) {
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
}

/* SENTINEL's subcommands that change something, for an admin (nkAdminName):
 * FAILOVER <name> is Nic-KV's FAILOVER (a planned handover: Sentinel's
 * forces one without agreement; Nic-KV's fencing always applies); SET
 * <name> <option> <value>... maps the options that mean something to
 * Nic-KV onto its own, CONFIG SET's way (all or none), and refuses the
 * others by name. The rest is nickv_sentinel.c's. */
static const struct { const char *sentinel, *nickv, *why; } sentinelSetOptions[] = {
    {"down-after-milliseconds", "waiting-time", NULL},
    {"auth-pass", "masterauth", NULL},
    {"auth-user", "masteruser", NULL},
    {"quorum", NULL, "one Nic-KV decides, or the coordinator's leader through etcd: no quorum to set"},
    {"failover-timeout", NULL, "a failover's steps have deadlines of their own (DESIGN.md, \"The chain of deadlines\")"},
    {"parallel-syncs", NULL, "replicas resync from Nic-KV's backlog, not from the new master"},
    {"notification-script", NULL, "Nic-KV runs no scripts a client names (fence-command is set on the DPU)"},
    {"client-reconfig-script", NULL, "Nic-KV runs no scripts a client names (fence-command is set on the DPU)"},
    {"master-reboot-down-after-period", NULL, "not supported"},
    {"rename-command", NULL, "not supported"},
    {NULL, NULL, NULL}
};

static void sentinelSetCommand(nkClient *c, int argc, sds *argv) {
    sds *cargv;
    int cargc = 2;
    if (argc < 5 || (argc - 3) % 2) {
        nkClientReply(c, "-ERR wrong number of arguments for 'sentinel|set' command\r\n");
        return;
    }
    if (strcmp(argv[2], nk.cfg.master_name)) {
        nkClientReply(c, "-ERR No such master with that name\r\n");
        return;
    }
    cargv = zmalloc(sizeof(sds) * (2 + (argc - 3)));
    cargv[0] = sdsnew("config");
    cargv[1] = sdsnew("set");
    for (int i = 3; i + 1 < argc; i += 2) {
        int j;
        for (j = 0; sentinelSetOptions[j].sentinel; j++)
            if (!strcasecmp(argv[i], sentinelSetOptions[j].sentinel)) break;
        if (!sentinelSetOptions[j].sentinel || !sentinelSetOptions[j].nickv) {
            sds a = sdscatrepr(sdsempty(), argv[i], sdslen(argv[i]) > 64 ? 64 : sdslen(argv[i]));
            nkClientReply(c, "-ERR SENTINEL SET %s: %s\r\n", a, sentinelSetOptions[j].sentinel ?
                          sentinelSetOptions[j].why : "unknown option (Nic-KV maps down-after-milliseconds, "
                          "auth-pass, auth-user)");
            sdsfree(a);
            goto end;
        }
        cargv[cargc++] = sdsnew(sentinelSetOptions[j].nickv);
        cargv[cargc++] = sdsdup(argv[i + 1]);
    }
    configCommand(c, cargc, cargv);
end:
    for (int i = 0; i < cargc; i++) sdsfree(cargv[i]);
    zfree(cargv);
}

static void sentinelCommand(nkClient *c, int argc, sds *argv) {
    char err[512];
    if (!strcasecmp(argv[1], "set")) {
        sentinelSetCommand(c, argc, argv);
    } else if (!strcasecmp(argv[1], "failover") && argc == 3) {
        if (strcmp(argv[2], nk.cfg.master_name))
            nkClientReply(c, "-ERR No such master with that name\r\n");
        else if (nkFailoverPlanned(NULL, 0, "SENTINEL FAILOVER", err, sizeof(err)) == -1)
            nkClientReply(c, "-ERR FAILOVER: %s\r\n", err);
        else
            nkClientReply(c, "+OK\r\n");
    } else {
        nkSentinelCommand(c, argc, argv);
    }
}

static void shutdownCommand(nkClient *c, int argc, sds *argv) {
    (void)argc, (void)argv;
    nkLog(LL_WARNING, "SHUTDOWN by %s:%d", c->ip, c->port);
    nk.shutdown_asap = 1;
    nkClientReply(c, "+OK\r\n");
}

/* Run one command: look it up, check the arity and the role (AUTH, HELLO
 * and QUIT need none: HELLO checks for itself), then its proc. */
void execCommand(nkClient *c, int argc, sds *argv) {
    const nkCommand *cmd = nkLookupCommand(argv[0]);
    const char *admin;

    c->last_cmd_ms = nkMstime();
    if (!cmd) {
        /* Named as upstream does, in quotes; at most 64 bytes of it, and
         * any byte that is not printable as '?', so the line stays one. */
        sds a = sdsnewlen(argv[0], sdslen(argv[0]) > 64 ? 64 : sdslen(argv[0]));
        for (size_t i = 0; i < sdslen(a); i++)
            if (a[i] < ' ' || a[i] > '~') a[i] = '?';
        if (requiredPassword() && !c->authenticated) {
            nkClientReply(c, "-NOAUTH Authentication required.\r\n");
        } else {
            nkClientReply(c, "-ERR unknown command '%s': Nic-KV serves replication, discovery (SENTINEL, "
                          "INFO, ROLE...) and admin commands (COMMAND lists them); send data commands "
                          "to the master\r\n", a);
        }
        sdsfree(a);
        return;
    }
    snprintf(c->last_cmd, sizeof(c->last_cmd), "%s", cmd->name);
    if (cmd->proc != authCommand && cmd->proc != helloCommand && cmd->proc != quitCommand &&
        requiredPassword() && !c->authenticated) {
        nkClientReply(c, "-NOAUTH Authentication required.\r\n");
        return;
    }
    if ((cmd->arity > 0 && argc != cmd->arity) || argc < -cmd->arity) {
        nkClientReply(c, "-ERR wrong number of arguments for '%s' command\r\n", cmd->name);
        return;
    }
    if ((admin = nkAdminName(cmd, argc, argv)) && !nkClientIsAdmin(c)) {
        nkReplyNoPerm(c, admin);
        return;
    }
    if (monitors) monitorFeed(c, cmd, argc, argv);
    long long start = (long long)getMonotonicUs();
    cmd->proc(c, argc, argv);     /* (may free c) */
    stats.commands++;             /* after it, as Redis counts: INFO does not count itself */
    cmdstats[cmd - nkCommands].calls++;
    cmdstats[cmd - nkCommands].usec += (long long)getMonotonicUs() - start;
}
