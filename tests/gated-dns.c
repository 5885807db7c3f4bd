/* gated-dns.c -- a DNS for tests, preloaded into the process under test.
 *
 * Copyright (c) 2026, the SKV authors. BSD 3-Clause licence (see LICENSE).
 *
 *   cc -shared -fPIC -o gated-dns.so tests/gated-dns.c -ldl
 *   LD_PRELOAD=gated-dns.so SKV_TEST_DNS_GATE=/path/gate nic-kv ...
 *
 * getaddrinfo() of a name ending in ".gate.test" waits while the file
 * $SKV_TEST_DNS_GATE does not exist (a DNS server that does not answer),
 * at most SKV_TEST_DNS_MAX seconds (default 60), then answers 127.0.0.1;
 * every other name goes to libc. Each such call appends a line to
 * $SKV_TEST_DNS_GATE.log: "ask <name>" when it starts, "answer <name>" when
 * it returns, so a test sees what was asked and when it blocked.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

typedef int (*gaiFn)(const char *, const char *, const struct addrinfo *, struct addrinfo **);

static void note(const char *gate, const char *what, const char *name) {
    char path[4096];
    FILE *f;
    snprintf(path, sizeof(path), "%s.log", gate);
    if ((f = fopen(path, "a"))) {
        fprintf(f, "%s %s\n", what, name);
        fclose(f);
    }
}

int getaddrinfo(const char *node, const char *service, const struct addrinfo *hints,
                struct addrinfo **res) {
    static gaiFn real;
    const char *gate = getenv("SKV_TEST_DNS_GATE");
    const char *suffix = ".gate.test";
    size_t n = node ? strlen(node) : 0, sl = strlen(suffix);
    if (!real) real = (gaiFn)dlsym(RTLD_NEXT, "getaddrinfo");
    if (gate && n > sl && !strcmp(node + n - sl, suffix)) {
        const char *max = getenv("SKV_TEST_DNS_MAX");
        time_t until = time(NULL) + (max ? atoi(max) : 60);
        note(gate, "ask", node);
        while (access(gate, F_OK) != 0 && time(NULL) < until) usleep(20000);
        note(gate, "answer", node);
        return real("127.0.0.1", service, hints, res);
    }
    return real(node, service, hints, res);
}
