/* nickv_etcd_check.c -- nickv-etcd-check: one nickv_etcd.c call from the shell.
 *
 * Copyright (c) 2026, the SKV authors. BSD 3-Clause licence (see LICENSE).
 *
 * For the tests (tests/unit/etcd-client.tcl) and for an operator who wants
 * to see what Nic-KV's coordinator would see. One call per run:
 *
 *   nickv-etcd-check [-t ms] <urls> grant <ttl>          -> "<id> <granted>"
 *   nickv-etcd-check [-t ms] <urls> keepalive <id>       -> "<ttl left>"
 *   nickv-etcd-check [-t ms] <urls> revoke <id>          -> "ok"
 *   nickv-etcd-check [-t ms] <urls> create <key> <val> <lease>
 *                                                        -> "won" | "lost <cur>"
 *   nickv-etcd-check [-t ms] <urls> get <key>            -> "<val> <mod_rev>" | "none"
 *   nickv-etcd-check [-t ms] <urls> putif <guard> <gval> <key> <val>
 *                                                        -> "ok" | "refused"
 *   nickv-etcd-check [-t ms] <urls> deleteif <key> <val> -> "ok" | "refused"
 *   nickv-etcd-check [-t ms] <urls> movelease <key> <val> <from> <to>
 *                                                        -> "ok" | "refused"
 *   nickv-etcd-check [-t ms] <urls> ttl <id>             -> "<ttl> <granted> <raft term>"
 *
 * Then "endpoint <h:p>" on a second line: the endpoint the call used. On
 * failure the error is on stderr and the exit status is 1; bad usage exits
 * with 2. Options, before <urls>:
 *
 *   -t ms               the call's timeout (1000 ms)
 *   --user u            authenticate as u; the password is
 *   --password p        this, or else the environment's NICKV_ETCD_PASSWORD
 *                       (which, unlike an argument, ps does not show)
 *   --cacert f          TLS (etcds:// or https://): etcd's CA, PEM
 *   --cert f --key f    TLS: the client's certificate and key, PEM
 *   --auth-timeout ms   authenticate first (nkEtcdAuthenticate) within ms,
 *                       not within the call's timeout
 *   --again ms          make the call, wait ms, make it again with the
 *                       same client (its token, its refusals are kept);
 *                       prints both results, then "authentications <n>";
 *                       exit status 1 when either failed
 */

#include "fmacros.h"

#include <stdio.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "nickv_etcd.h"
#include "sds.h"
#include "util.h"

static void usage(void) {
    fprintf(stderr, "usage: nickv-etcd-check [-t ms] [--user u [--password p]] [--cacert f] [--cert f --key f]\n"
                    "       [--auth-timeout ms] [--again ms] <urls> grant <ttl> | keepalive <id> | revoke <id> |\n"
                    "       create <key> <val> <lease> | get <key> | putif <guard> <gval> <key> <val> |\n"
                    "       deleteif <key> <val> | movelease <key> <val> <from> <to> | ttl <id>\n");
    exit(2);
}

static long long number(const char *s) {
    long long v;
    if (!string2ll(s, strlen(s), &v)) {
        fprintf(stderr, "nickv-etcd-check: '%s' is not a number\n", s);
        exit(2);
    }
    return v;
}

/* One call of op with its n arguments: 0 done (printed), -1 failed (err),
 * -2 bad usage. */
static int call(nkEtcd *e, const char *op, int n, char **arg, char *err, size_t errlen) {
    long long a, b;
    int rv = -2, ok;
    sds val = NULL;

    if (!strcmp(op, "grant") && n == 1) {
        if ((rv = nkEtcdLeaseGrant(e, number(arg[0]), &a, &b, err, errlen)) == 0) printf("%lld %lld\n", a, b);
    } else if (!strcmp(op, "keepalive") && n == 1) {
        if ((rv = nkEtcdLeaseKeepAlive(e, number(arg[0]), &a, err, errlen)) == 0) printf("%lld\n", a);
    } else if (!strcmp(op, "revoke") && n == 1) {
        if ((rv = nkEtcdLeaseRevoke(e, number(arg[0]), err, errlen)) == 0) printf("ok\n");
    } else if (!strcmp(op, "create") && n == 3) {
        if ((rv = nkEtcdCreate(e, arg[0], arg[1], number(arg[2]), &ok, &val, err, errlen)) == 0) {
            if (ok) printf("won\n");
            else printf("lost %s\n", val);
        }
    } else if (!strcmp(op, "get") && n == 1) {
        if ((rv = nkEtcdGet(e, arg[0], &val, &a, err, errlen)) == 0) {
            if (val) printf("%s %lld\n", val, a);
            else printf("none\n");
        }
    } else if (!strcmp(op, "putif") && n == 4) {
        if ((rv = nkEtcdPutIf(e, arg[0], arg[1], arg[2], arg[3], &ok, err, errlen)) == 0)
            printf("%s\n", ok ? "ok" : "refused");
    } else if (!strcmp(op, "deleteif") && n == 2) {
        if ((rv = nkEtcdDeleteIf(e, arg[0], arg[1], &ok, err, errlen)) == 0) printf("%s\n", ok ? "ok" : "refused");
    } else if (!strcmp(op, "movelease") && n == 4) {
        if ((rv = nkEtcdMoveLease(e, arg[0], arg[1], number(arg[2]), number(arg[3]), &ok, err, errlen)) == 0)
            printf("%s\n", ok ? "ok" : "refused");
    } else if (!strcmp(op, "ttl") && n == 1) {
        if ((rv = nkEtcdLeaseTTL(e, number(arg[0]), &a, &b, err, errlen)) == 0)
            printf("%lld %lld %lld\n", a, b, nkEtcdLastTerm(e));
    }
    sdsfree(val);
    if (rv == 0) printf("endpoint %s\n", nkEtcdEndpoint(e));
    return rv;
}

int main(int argc, char **argv) {
    char err[1024] = "";
    long long timeout = 1000, again = -1, auth_timeout = -1;
    const char *user = NULL, *password = getenv("NICKV_ETCD_PASSWORD");
    const char *cacert = NULL, *cert = NULL, *key = NULL;
    int rv;
    nkEtcd *e;

    /* TLS writes can meet a closed connection: an error, not a signal. */
    signal(SIGPIPE, SIG_IGN);
    argc--;
    argv++;
    while (argc > 1 && argv[0][0] == '-') {
        const char *opt = argv[0], *v = argv[1];
        if (!strcmp(opt, "-t")) timeout = number(v);
        else if (!strcmp(opt, "--user")) user = v;
        else if (!strcmp(opt, "--password")) password = v;
        else if (!strcmp(opt, "--cacert")) cacert = v;
        else if (!strcmp(opt, "--cert")) cert = v;
        else if (!strcmp(opt, "--key")) key = v;
        else if (!strcmp(opt, "--again")) again = number(v);
        else if (!strcmp(opt, "--auth-timeout")) auth_timeout = number(v);
        else usage();
        argc -= 2;
        argv += 2;
    }
    if (argc < 2 || timeout <= 0 || timeout > 3600000 ||
        (auth_timeout != -1 && (auth_timeout <= 0 || auth_timeout > 3600000))) usage();
    if (user && !password) {
        fprintf(stderr, "nickv-etcd-check: --user %s needs --password or NICKV_ETCD_PASSWORD\n", user);
        return 2;
    }
    if (!(e = nkEtcdNew(argv[0], (int)timeout, err, sizeof(err)))) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    if (user && nkEtcdSetAuth(e, user, password) != 0) {
        nkEtcdFree(e);
        usage();
    }
    if ((cacert || cert || key) && nkEtcdSetTls(e, cacert, cert, key, err, sizeof(err)) != 0) {
        fprintf(stderr, "%s\n", err);
        nkEtcdFree(e);
        return 1;
    }
    if (auth_timeout > 0 && nkEtcdAuthenticate(e, (int)auth_timeout, err, sizeof(err)) != 0) {
        fprintf(stderr, "%s\n", err);
        nkEtcdFree(e);
        return 1;
    }
    rv = call(e, argv[1], argc - 2, argv + 2, err, sizeof(err));
    if (rv != -2 && again >= 0) {
        if (rv == -1) fprintf(stderr, "%s\n", err);
        fflush(stdout);
        fflush(stderr);
        usleep((useconds_t)again * 1000);
        int rv2 = call(e, argv[1], argc - 2, argv + 2, err, sizeof(err));
        if (rv2 == -1) fprintf(stderr, "%s\n", err);
        printf("authentications %lld\n", nkEtcdAuthentications(e));
        if (rv == 0) rv = rv2;
    } else if (rv == -1) {
        fprintf(stderr, "%s\n", err);
    }
    nkEtcdFree(e);
    if (rv == -2) usage();
    return rv == 0 ? 0 : 1;
}
