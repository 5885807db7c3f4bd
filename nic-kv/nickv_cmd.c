/* nickv_cmd.c -- Nic-KV's commands: who may run what, AUTH, and every
 * command a client sends before (or instead of) replicating.
 *
 * Copyright (c) 2026, the SKV authors. BSD 3-Clause licence (see LICENSE).
 *
 * nickv.c reads a client's requests and hands each one to execCommand here;
 * the answer goes back through nkClientReply. Two roles may send commands
 * ("Who may run what" below, NIC-KV.md): replication and discovery (PING,
 * REPLCONF, PSYNC, INFO, ROLE, SENTINEL, SUBSCRIBE...), and admin (CONFIG,
 * FAILOVER, SHUTDOWN). PSYNC is nickv_replica.c's, SENTINEL and SUBSCRIBE
 * nickv_sentinel.c's, CONFIG nickv_config.c's; INFO's sections come from
 * every part, put together in genInfo.
 */

#include "nickv_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
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
            "redis_version:%s\r\n"
            "redis_mode:nickv\r\n"
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
            REDIS_VERSION, NICKV_VERSION, SKV_VERSION, un.sysname, un.release, un.machine, (int)(sizeof(void *) * 8),
            (int)getpid(), nk.instance, nk.cfg.port, nkRdmaPort(),
            nkUnixTime() - (long long)nk.start_time, nk.cfg.thread_num, nkFanoutThreads(),
            nk.cfg.config_file ? nk.cfg.config_file : "");
    }
    if (infoWants(nsec, secs, "replication", "upstream")) {
        s = nkLinkInfo(s, last);
        s = nkReplicasReplicationInfo(s);
        s = nkBacklogReplicationInfo(s);
        s = sdscat(s, "\r\n");
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
    if (infoWants(nsec, secs, "cluster", NULL)) {
        s = nkClusterInfo(s);
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
            "used_memory:%lld\r\n"
            "used_memory_heap:%zu\r\n"
            "mem_replication_backlog:%lld\r\n"
            "backlog_allocated:%lld\r\n\r\n",
            (long long)zmalloc_used_memory() + nkBacklogMapped(), zmalloc_used_memory(),
            nkBacklogSize(), nkBacklogSize());
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

void execCommand(nkClient *c, int argc, sds *argv) {
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
