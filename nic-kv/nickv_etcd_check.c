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
 *
 * Then "endpoint <h:p>" on a second line: the endpoint the call used. On
 * failure the error is on stderr and the exit status is 1; bad usage exits
 * with 2. The timeout (-t) is 1000 ms unless given.
 */

#include "fmacros.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nickv_etcd.h"
#include "sds.h"
#include "util.h"

static void usage(void) {
    fprintf(stderr, "usage: nickv-etcd-check [-t ms] <urls> grant <ttl> | keepalive <id> | revoke <id> |\n"
                    "       create <key> <val> <lease> | get <key> | putif <guard> <gval> <key> <val> |\n"
                    "       deleteif <key> <val>\n");
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

int main(int argc, char **argv) {
    char err[1024] = "";
    long long timeout = 1000, a, b;
    int rv = -1, ok;
    sds val = NULL;
    nkEtcd *e;

    if (argc > 2 && !strcmp(argv[1], "-t")) {
        timeout = number(argv[2]);
        argc -= 2;
        argv += 2;
    }
    if (argc < 3) usage();
    if (!(e = nkEtcdNew(argv[1], (int)timeout, err, sizeof(err)))) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    const char *op = argv[2];
    int n = argc - 3;
    char **arg = argv + 3;

    if (!strcmp(op, "grant") && n == 1) {
        if ((rv = nkEtcdLeaseGrant(e, number(arg[0]), &a, &b, err, sizeof(err))) == 0) printf("%lld %lld\n", a, b);
    } else if (!strcmp(op, "keepalive") && n == 1) {
        if ((rv = nkEtcdLeaseKeepAlive(e, number(arg[0]), &a, err, sizeof(err))) == 0) printf("%lld\n", a);
    } else if (!strcmp(op, "revoke") && n == 1) {
        if ((rv = nkEtcdLeaseRevoke(e, number(arg[0]), err, sizeof(err))) == 0) printf("ok\n");
    } else if (!strcmp(op, "create") && n == 3) {
        if ((rv = nkEtcdCreate(e, arg[0], arg[1], number(arg[2]), &ok, &val, err, sizeof(err))) == 0) {
            if (ok) printf("won\n");
            else printf("lost %s\n", val);
        }
    } else if (!strcmp(op, "get") && n == 1) {
        if ((rv = nkEtcdGet(e, arg[0], &val, &a, err, sizeof(err))) == 0) {
            if (val) printf("%s %lld\n", val, a);
            else printf("none\n");
        }
    } else if (!strcmp(op, "putif") && n == 4) {
        if ((rv = nkEtcdPutIf(e, arg[0], arg[1], arg[2], arg[3], &ok, err, sizeof(err))) == 0)
            printf("%s\n", ok ? "ok" : "refused");
    } else if (!strcmp(op, "deleteif") && n == 2) {
        if ((rv = nkEtcdDeleteIf(e, arg[0], arg[1], &ok, err, sizeof(err))) == 0)
            printf("%s\n", ok ? "ok" : "refused");
    } else {
        nkEtcdFree(e);
        usage();
    }
    if (rv == 0) printf("endpoint %s\n", nkEtcdEndpoint(e));
    else fprintf(stderr, "%s\n", err);
    sdsfree(val);
    nkEtcdFree(e);
    return rv == 0 ? 0 : 1;
}
