/* nickv_int.h -- private to the server's files: nickv.c (clients, the RDMA
 * listener, main), nickv_cmd.c (commands), nickv_config.c (options) and
 * nickv_status.c (the status keys).
 *
 * Copyright (c) 2026, the SKV authors. BSD 3-Clause licence (see LICENSE).
 *
 * These were one file, nickv.c, and share what it kept static: the stats
 * the server counts, and the few functions one of them calls in another.
 * Nothing else includes this header; the rest of the daemon sees their
 * calls in nickv_client.h (the clients, nickv.c's).
 */
#ifndef NICKV_INT_H
#define NICKV_INT_H

#include "nickv.h"     /* first: upstream's feature macros (fmacros.h) */
#include "nickv_client.h"

#include <stdio.h>

/* The stats the server counts (the replicas', the link's and the RDMA
 * transport's are their files'). Defined in nickv.c; INFO (nickv_cmd.c)
 * shows them, CONFIG RESETSTAT (nickv_config.c) clears them. */
struct nkServerStats {
    long long connections;
    long long auth_failures;
    long long protocol_errors;
    long long rejected_conn;            /* refused: maxclients reached */
    long long obuf_drops;               /* dropped: output buffer limits */
    long long auth_timeouts;            /* closed: did not authenticate */
    long long commands;                 /* commands run (known, allowed, well formed) */
};
extern struct nkServerStats stats;

/* enable-protected-configs, as upstream's PROTECTED_ACTION_ALLOWED_*: the
 * option's values (nickv_config.c), checked by nkAllowProtected. */
#define NK_PROTECTED_NO 0
#define NK_PROTECTED_YES 1
#define NK_PROTECTED_LOCAL 2

/* nickv.c, for the commands (nickv_cmd.c): a bulk string reply. */
void replyBulk(nkClient *c, const char *s, size_t len);

/* nickv_cmd.c. The replicas' password (NULL: none), for the clients
 * (nickv.c) and for applyPasswords (nickv_config.c). */
const char *requiredPassword(void);
/* Is ip a loopback address? (protected mode, nickv.c) */
int isLoopback(const char *ip);
/* May c (an admin) CONFIG SET a PROTECTED option? (nickv_config.c) */
int nkAllowProtected(nkClient *c);
/* The failed AUTH summary, once a second (nkCron, nickv.c). */
void nkAuthFailuresCron(void);
/* Run one command a client sent (nkClientReadable, nickv.c). */
void execCommand(nkClient *c, int argc, sds *argv);
void nkCommandStatsReset(void);      /* INFO commandstats' counters (CONFIG RESETSTAT) */
/* A client leaves: it is no longer a MONITOR (nkClientFree, nickv.c). */
void nkMonitorForget(nkClient *c);

/* nickv_status.c, for the commands' table (nickv_cmd.c): INFO failover's
 * and INFO coordinator's fields as read-only string keys nickv:<field>,
 * for redis_exporter's --check-single-keys. */
void nkStatusSelectCommand(nkClient *c, int argc, sds *argv);
void nkStatusTypeCommand(nkClient *c, int argc, sds *argv);
void nkStatusGetCommand(nkClient *c, int argc, sds *argv);
void nkStatusStrlenCommand(nkClient *c, int argc, sds *argv);
void nkStatusExistsCommand(nkClient *c, int argc, sds *argv);
void nkStatusPfcountCommand(nkClient *c, int argc, sds *argv);
void nkStatusScanCommand(nkClient *c, int argc, sds *argv);
void nkStatusMemoryUsage(nkClient *c, int argc, sds *argv);   /* MEMORY USAGE <key> */

/* nickv_config.c, for main() (nickv.c): the defaults, the config file
 * and the command line, --help, the checks made at start. */
void configDefaults(void);
void configLoad(sds text, const char *origin);
void usage(FILE *fp);
int applyPasswords(const char **err);
int nkAdjustOpenFilesLimit(void);
/* ... and for the commands (nickv_cmd.c): CONFIG, and the check that
 * AUTH's arguments hold no NUL byte. */
void configCommand(nkClient *c, int argc, sds *argv);
int argsHaveNul(int argc, sds *argv);

#endif
