/* nickv_resolve.c -- addresses: host names resolved off Nic-KV's event
 * loop; numeric addresses compared and parsed.
 *
 * Copyright (c) 2026, the SKV authors. BSD 3-Clause licence (see LICENSE).
 *
 * The master Nic-KV streams from and probes may be given by name (the
 * configured master-host, or the master_host a demoted master follows).
 * getaddrinfo() may wait seconds on a slow or dead DNS server; in the event
 * loop that would stop the fan-out, the probes and our heartbeat to the
 * master, which then drops us as silent. So a name is resolved here, by
 * a thread of its own per lookup, and the loop asks again until the
 * answer is in:
 *
 *   loop                           lookup thread (one per name looked up)
 *   nkResolve(name) -> 0  ------>  getaddrinfo(name)
 *   (the caller retries on its                   |
 *    own timer: the link every                   |
 *    cron, a probe every tick)                   v
 *   nkResolve(name) -> n, ips  <-  the slot: addresses, or an error
 *
 * One lookup that never ends (a DNS server that does not answer, an NSS
 * module that hangs) holds its slot and its thread, not the others: a
 * master that moved to another name is looked up at once.
 *
 * An answer (up to NK_RESOLVE_ADDRS addresses, in getaddrinfo's order: the
 * caller tries them in turn, as anet does) is used for NK_RESOLVE_FRESH_MS;
 * after that the next ask starts a new lookup and, meanwhile, gets the old
 * addresses (a name that moved is followed within a lookup's time; a DNS
 * outage does not take away an address that worked). A failure with no
 * address known is kept NK_RESOLVE_RETRY_MS, so that a name that does not
 * resolve is not asked in a loop.
 *
 * Threads: the table is the loop's and the lookup threads', under `lock`;
 * a lookup holds no lock while it resolves, and its slot is not reused
 * while it is busy. Only the main thread asks.
 */

#include "nickv.h"
#include "nickv_resolve.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>

#include "monotonic.h"
#include "util.h"

#define NK_RESOLVE_SLOTS 8              /* names known, and lookups at once */
#define NK_RESOLVE_NAME 256             /* as long as a host name may be */
#define NK_RESOLVE_FRESH_MS 10000
#define NK_RESOLVE_RETRY_MS 1000

typedef struct {
    char name[NK_RESOLVE_NAME];         /* "": a free slot */
    char ip[NK_RESOLVE_ADDRS][NK_RESOLVE_IP]; /* the addresses found last */
    int nip;                            /* how many, 0: none yet */
    char err[128];                      /* why the last lookup failed, "": it did not */
    long long done_ms;                  /* when the last lookup ended, 0: never */
    long long asked_ms;                 /* when it was last asked for */
    int busy;                           /* a lookup thread owns it */
} resolveSlot;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static resolveSlot slots[NK_RESOLVE_SLOTS];
static long long resolutions, failures;

static long long nowMs(void) { return (long long)(getMonotonicUs() / 1000); }

/* name -> up to NK_RESOLVE_ADDRS numeric addresses; the count, or -1 and
 * why in err. */
static int resolveNow(const char *name, char ip[][NK_RESOLVE_IP], char *err, size_t errlen) {
    struct addrinfo hints, *res, *p;
    int rv, n = 0;
    memset(&hints, 0, sizeof(hints));
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    if ((rv = getaddrinfo(name, NULL, &hints, &res)) != 0) {
        snprintf(err, errlen, "%s", rv == EAI_SYSTEM ? strerror(errno) : gai_strerror(rv));
        return -1;
    }
    for (p = res; p && n < NK_RESOLVE_ADDRS; p = p->ai_next)
        if (getnameinfo(p->ai_addr, p->ai_addrlen, ip[n], NK_RESOLVE_IP, NULL, 0, NI_NUMERICHOST) == 0)
            n++;
    freeaddrinfo(res);
    if (!n) {
        snprintf(err, errlen, "no usable address");
        return -1;
    }
    return n;
}

/* One lookup: the slot is busy (ours) until it ends. */
static void *lookupMain(void *arg) {
    resolveSlot *s = arg;
    char name[NK_RESOLVE_NAME], ip[NK_RESOLVE_ADDRS][NK_RESOLVE_IP], err[128] = "";
    int n;
    pthread_mutex_lock(&lock);
    memcpy(name, s->name, sizeof(name));
    pthread_mutex_unlock(&lock);
    n = resolveNow(name, ip, err, sizeof(err));
    pthread_mutex_lock(&lock);
    if (n > 0) {
        memcpy(s->ip, ip, sizeof(s->ip));
        s->nip = n;
        s->err[0] = '\0';
    } else {
        memcpy(s->err, err, sizeof(s->err));
        failures++;
    }
    s->done_ms = nowMs();
    s->busy = 0;
    resolutions++;
    pthread_mutex_unlock(&lock);
    return NULL;
}

/* A slot for name: its own, else a free one, else the least recently asked
 * one with no lookup running. NULL if every slot has one. */
static resolveSlot *slotFor(const char *name) {
    resolveSlot *pick = NULL;
    for (int i = 0; i < NK_RESOLVE_SLOTS; i++)
        if (!strcmp(slots[i].name, name)) return &slots[i];
    for (int i = 0; i < NK_RESOLVE_SLOTS; i++) {
        resolveSlot *s = &slots[i];
        if (s->busy) continue;
        if (!s->name[0]) return s;
        if (!pick || s->asked_ms < pick->asked_ms) pick = s;
    }
    return pick;
}

/* Start a lookup of s's name (under the lock). With no thread for it, it
 * ends at once as a failed lookup (tried again after NK_RESOLVE_RETRY_MS). */
static void lookupStart(resolveSlot *s) {
    pthread_t tid;
    pthread_attr_t attr;
    int rv;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    s->busy = 1;
    if ((rv = pthread_create(&tid, &attr, lookupMain, s)) != 0) {
        s->busy = 0;
        s->done_ms = nowMs();
        snprintf(s->err, sizeof(s->err), "no thread to look it up: %s", strerror(rv));
    }
    pthread_attr_destroy(&attr);
}

int nkResolve(const char *name, char ip[][NK_RESOLVE_IP], char *err, size_t errlen) {
    resolveSlot *s;
    long long now = nowMs();
    int rv;
    if (nkAddrNumeric(name)) {
        snprintf(ip[0], NK_RESOLVE_IP, "%s", name);
        return 1;
    }
    if (!*name || strlen(name) >= NK_RESOLVE_NAME) {
        snprintf(err, errlen, "cannot resolve '%.64s': not a host name", name);
        return -1;
    }
    pthread_mutex_lock(&lock);
    if (!(s = slotFor(name))) {
        pthread_mutex_unlock(&lock);
        snprintf(err, errlen, "resolving '%s' (%d other lookups have not ended)", name, NK_RESOLVE_SLOTS);
        return 0;
    }
    if (strcmp(s->name, name)) {
        memset(s, 0, sizeof(*s));
        snprintf(s->name, sizeof(s->name), "%s", name);
    }
    s->asked_ms = now;
    /* Stale, failed a while ago, or never looked up: a new lookup. */
    if (!s->busy && (!s->done_ms ||
                     now - s->done_ms >= (s->nip ? NK_RESOLVE_FRESH_MS : NK_RESOLVE_RETRY_MS)))
        lookupStart(s);
    if (s->nip) {
        /* The addresses found last: fresh, or while new ones are looked
         * for, or after a failure to find new ones. */
        memcpy(ip, s->ip, sizeof(s->ip));
        rv = s->nip;
    } else if (s->busy) {
        snprintf(err, errlen, "resolving '%s'", name);
        rv = 0;
    } else {
        snprintf(err, errlen, "cannot resolve '%s': %s", name, s->err);
        rv = -1;
    }
    pthread_mutex_unlock(&lock);
    return rv;
}

/* INFO stats: lookups ended, how many failed, how many run now (a DNS
 * that does not answer shows here). */
sds nkResolveInfo(sds s) {
    int pending = 0;
    pthread_mutex_lock(&lock);
    for (int i = 0; i < NK_RESOLVE_SLOTS; i++) pending += slots[i].busy;
    s = sdscatprintf(s, "resolutions:%lld\r\nresolve_failures:%lld\r\nresolve_pending:%d\r\n",
                     resolutions, failures, pending);
    pthread_mutex_unlock(&lock);
    return s;
}

void nkResolveResetStats(void) {
    pthread_mutex_lock(&lock);
    resolutions = failures = 0;
    pthread_mutex_unlock(&lock);
}

/* ------------------------------------------------------------ Addresses --- */

/* A numeric IPv4 or IPv6 address. A replica is probed at a numeric
 * address only: its address is what it announced, and Nic-KV looks up no
 * name a peer gives it (the master's name is looked up off the loop,
 * above). */
int nkAddrNumeric(const char *a) {
    struct in_addr v4;
    struct in6_addr v6;
    return inet_pton(AF_INET, a, &v4) == 1 || inet_pton(AF_INET6, a, &v6) == 1;
}

/* An address's bytes (4 for IPv4, an IPv4-mapped IPv6 address included;
 * 16 for IPv6): 0 when it is not numeric. */
int nkAddrBytes(const char *a, unsigned char *out) {
    struct in_addr v4;
    struct in6_addr v6;
    static const unsigned char mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    if (inet_pton(AF_INET, a, &v4) == 1) {
        memcpy(out, &v4, 4);
        return 4;
    }
    if (inet_pton(AF_INET6, a, &v6) != 1) return 0;
    if (!memcmp(v6.s6_addr, mapped, 12)) {
        memcpy(out, v6.s6_addr + 12, 4);
        return 4;
    }
    memcpy(out, v6.s6_addr, 16);
    return 16;
}

/* The same address: numerically when both are numeric, else the same text
 * (a host name, compared without case). */
int nkSameAddr(const char *a, const char *b) {
    unsigned char x[16], y[16];
    int lx = nkAddrBytes(a, x), ly = nkAddrBytes(b, y);
    if (lx && ly) return lx == ly && !memcmp(x, y, lx);
    return !lx && !ly && !strcasecmp(a, b);
}

/* "<ip>:<port>" or "[<ipv6>]:<port>" into a node: 1, or 0 with err. */
int nkMemberParse(const char *word, nkNodeAddr *out, const char **err) {
    const char *colon = strrchr(word, ':');
    long long port;
    size_t alen;
    const char *a = word;
    unsigned char bytes[16];
    if (!colon || colon == word) {
        *err = "a node is <ip>:<port>";
        return 0;
    }
    alen = (size_t)(colon - word);
    if (word[0] == '[') {
        if (alen < 3 || word[alen - 1] != ']') {
            *err = "a node is <ip>:<port> ([<ipv6>]:<port>)";
            return 0;
        }
        a++;
        alen -= 2;
    }
    if (alen >= sizeof(out->ip)) {
        *err = "the node's address is too long";
        return 0;
    }
    memcpy(out->ip, a, alen);
    out->ip[alen] = '\0';
    if (!nkAddrBytes(out->ip, bytes)) {
        *err = "a node's address must be numeric (IPv4 or IPv6): Nic-KV resolves no name it is to trust";
        return 0;
    }
    if (!string2ll(colon + 1, strlen(colon + 1), &port) || port < 1 || port > 65535) {
        *err = "a node's port must be 1-65535";
        return 0;
    }
    out->port = (int)port;
    return 1;
}
