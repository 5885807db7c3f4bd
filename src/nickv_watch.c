/* nickv_watch.c -- a master's side thread tells Nic-KV "busy" from "dead".
 *
 * Copyright (c) 2026, the SKV authors. BSD 3-Clause licence (see LICENSE).
 *
 * Nic-KV's probes are answered by the main thread. A master that is only
 * busy there (a KEYS over millions of keys, a synchronous DEL of a big
 * key, SAVE, the fork of a BGSAVE on a large heap) answers nothing for as
 * long, and after waiting-time Nic-KV would fail a live master over. With
 * nickv-lease yes, a small thread of the master's own answers a second
 * connection of Nic-KV's, the watch, whatever the main thread does, with
 * the main thread's state:
 *
 *   Nic-KV:  AUTH <token>
 *   master:  +OK
 *   Nic-KV:  WATCH <t> <ms> <instance>
 *   master:  +WATCH <now> <busy-ms> <what> <lease-left-ms>
 *
 * <busy-ms> is how long the main thread has been awake without going back
 * to its event loop's wait (0 while it waits), <what> the command it runs
 * then ("-" when none: cron, the event loop itself), <now> the master's
 * CLOCK_BOOTTIME in ms, as in the lease's answers. A stopped or crashed
 * process, or a dead host, silences the thread as well as the main
 * thread: that is still detected within waiting-time. A master busy for
 * longer than Nic-KV's busy-limit is failed over as a dead one would be.
 *
 * What the thread may do with the lease (nickvLeaseProlong): a WATCH with
 * t > 0 is a grant, as "lease <t> <ms>" on the probe connection, and
 * prolongs the lease to t + ms on our clock, t being a <now> this thread
 * sent (so the argument of src/nickv_lease.c holds: the lease ends no
 * later, in real time, than ms after Nic-KV sent the grant). It never
 * starts one: only a lease the main thread took and that still runs is
 * prolonged, only while this node is a master whose nickv-user only
 * Nic-KV can use (as the main thread checks at each grant), only from the Nic-KV
 * instance that grants this master's lease (the grantor, nickvGrantorCheck)
 * and only on a connection that gave the token, a secret the main thread
 * hands to that instance alone, in its lease answers, and draws anew each
 * time a connection becomes the grantor (a token seen by an earlier one,
 * even of the same Nic-KV, opens nothing). A WATCH prolongs by no more
 * than the grantor's last grant on the probe connection gave (its <ms>;
 * none after a query): a watch asks for what the probe would grant, never
 * more. The main thread still checks the lease before
 * every data command: a busy master that Nic-KV gave up on finds its lease
 * run out when it comes back, and refuses. The thread touches nothing
 * else of the server's: it reads the main thread's state from atomics and
 * the token and grantor under a mutex.
 *
 * The thread also pushes one line of the main thread's to the grantor's
 * connections, unasked: "+WANT <now> <offset>", a lease answer sent early
 * because a WAIT waits for Nic-KV to confirm <offset> (src/nickv_lease.c,
 * nickvLeaseWant). The main thread hands it over through a pipe, and
 * neither waits for the other.
 *
 * The port: nickv-watch-port (0: one the kernel picks, -1: no thread), on
 * the addresses of bind; Nic-KV learns it from the lease answers. With
 * tls-replication yes (the nodes speak TLS to each other, and Nic-KV to
 * them: its own tls-replication yes), the watch is TLS too: this node's
 * certificate (tls-cert-file), Nic-KV's verified against tls-ca-cert-file
 * as tls-auth-clients says, the handshake before the token.
 */

#include "server.h"
#include "anet.h"
#include "nickv_server.h"
#include "nickv_proto.h"

#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <time.h>

#ifdef USE_OPENSSL
#include <openssl/err.h>
#include <openssl/ssl.h>
#endif

int nickvWatchPort = 0;

#define WATCH_CONNS 8                 /* connections at once, at most */
#define WATCH_LINE 256                /* a request's longest line */
#define WATCH_AUTH_MS 5000            /* to give the token, from accept */
#define WATCH_NAME 32                 /* a command's name, as reported */

#define WATCH_SENT 8                  /* <now>s a connection may echo */

typedef struct watchConn {
    int fd;
    void *ssl;                        /* TLS: its session (SSL *), or NULL */
    int handshake;                    /* ... under way: 1 wants to read, 2 to write */
    int authed;
    unsigned long long gen;           /* the token's generation it gave */
    long long sent[WATCH_SENT];       /* the <now>s it was sent (a grant's t) */
    int sent_next;
    long long accepted_ms;
    size_t len;
    char buf[WATCH_LINE];
} watchConn;

static struct {
    int started;
    int fds[CONFIG_BINDADDR_MAX];     /* listening */
    int nfds;
    int port;                         /* where it listens (0: nowhere) */
    watchConn conns[WATCH_CONNS];
    void *ssl_ctx;                    /* tls-replication yes: an SSL_CTX * */
    pthread_mutex_t lock;             /* token and grantor: */
    char token[NICKV_INSTANCE_LEN + 1];
    char grantor[NICKV_INSTANCE_LEN + 1];
    char grantor_ip[NET_IP_STR_LEN];  /* ... its connection's peer address */
    unsigned long long gen;           /* bumped with every new token */
    long long grant_cap;              /* the grantor's last probe grant's ms (0: none) */
    const nickvWatchLeaseOps *lease;  /* the lease (nickvWatchStart), set before the thread */
} W = { .lock = PTHREAD_MUTEX_INITIALIZER };

/* The main thread's state, written by it, read by the watch thread. */
static _Atomic long long awake_since;     /* left the event loop's wait (0: waiting) */
static _Atomic long long cmd_since;       /* the command it runs began (0: none) */
static _Atomic unsigned cmd_seq;          /* seqlock over cmd_name */
static char cmd_name[WATCH_NAME];
static _Atomic int is_master;             /* a master with nickv-lease yes */
static _Atomic int grantor_watches;       /* authenticated connections of the grantor */
/* The push (nickvWatchWant): <now> and <offset> through a pipe, 16 bytes
 * a write (atomic: the thread never reads half of one, nor the clock of
 * one push with the offset of the next). */
static int want_pipe[2] = {-1, -1};
static _Atomic int may_prolong;           /* ... whose nickv-user is safe (nickvCron) */

static long long watchNow(void) {
    struct timespec ts;
    clock_gettime(CLOCK_BOOTTIME, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ------------------------------------------------- The main thread's side */

void nickvWatchAwake(void) {
    if (!W.started) return;
    atomic_store_explicit(&awake_since, watchNow(), memory_order_relaxed);
}

void nickvWatchSleeping(void) {
    if (!W.started) return;
    atomic_store_explicit(&awake_since, 0, memory_order_relaxed);
    atomic_store_explicit(&cmd_since, 0, memory_order_relaxed);
    atomic_store_explicit(&is_master, nickvLease && !server.masterhost, memory_order_relaxed);
}

/* From nickvCron: whether the main thread would take a grant now (the
 * nickv-user is one only Nic-KV can use: nickvUserUnsafe). Checked there,
 * ten times a second, not at every event-loop turn: it looks the user up. */
void nickvWatchAllow(int allow) {
    atomic_store_explicit(&may_prolong, allow, memory_order_relaxed);
}

/* A client's command begins (processCommand, after its checks). Its name
 * goes under a seqlock: the thread never follows a pointer of ours. */
/* ACL and CONFIG SET may change the nickv-user or nickv-lease. */
static int watchMayUnsettle(struct redisCommand *cmd) {
    return cmd->proc == aclCommand || cmd->proc == configSetCommand;
}

void nickvWatchCommand(client *c) {
    struct redisCommand *cmd = c->cmd;
    if (!W.started) return;
    /* No prolonging until the next cron has looked again
     * (nickvWatchAllow) after a command that may change who may grant,
     * run alone or in a transaction that a busy spell may follow. */
    int unsettle = watchMayUnsettle(cmd);
    if (cmd->proc == execCommand && (c->flags & CLIENT_MULTI))
        for (int j = 0; j < c->mstate.count && !unsettle; j++)
            unsettle = watchMayUnsettle(c->mstate.commands[j].cmd);
    if (unsettle) atomic_store_explicit(&may_prolong, 0, memory_order_relaxed);
    unsigned seq = atomic_load_explicit(&cmd_seq, memory_order_relaxed);
    atomic_store_explicit(&cmd_seq, seq + 1, memory_order_relaxed);
    atomic_thread_fence(memory_order_release);
    size_t n = cmd->fullname ? sdslen(cmd->fullname) : 0;
    if (n >= WATCH_NAME) n = WATCH_NAME - 1;
    for (size_t i = 0; i < n; i++) {
        char ch = cmd->fullname[i];
        cmd_name[i] = (ch == ' ' || ch == '\r' || ch == '\n') ? '|' : ch;
    }
    cmd_name[n] = '\0';
    atomic_store_explicit(&cmd_seq, seq + 2, memory_order_release);
    atomic_store_explicit(&cmd_since, watchNow(), memory_order_relaxed);
}

/* The grantor, as nickvGrantorCheck bound it: a new bind (or another
 * instance) gets a new token, so that a watch of an earlier grantor, or of
 * whoever saw an earlier answer, cannot go on prolonging a lease. The
 * token, for the grantor's lease answer ("" while there is no thread). */
const char *nickvWatchGrantor(const char *instance, const char *peer_ip, int bound, long long grant_ms) {
    static char token[NICKV_INSTANCE_LEN + 1];
    if (!W.started) return "";
    pthread_mutex_lock(&W.lock);
    if (bound || strcmp(W.grantor, instance)) {
        snprintf(W.grantor, sizeof(W.grantor), "%s", instance);
        snprintf(W.grantor_ip, sizeof(W.grantor_ip), "%s", peer_ip);
        getRandomHexChars(W.token, NICKV_INSTANCE_LEN);
        W.token[NICKV_INSTANCE_LEN] = '\0';
        W.gen++;        /* connections that gave the old token lose their rights */
    }
    W.grant_cap = grant_ms;
    memcpy(token, W.token, sizeof(token));
    pthread_mutex_unlock(&W.lock);
    return token;
}

int nickvWatchListeningPort(void) {
    return W.started ? W.port : 0;
}

/* Push "+WANT <clock> <offset>" to the grantor's watch connections (the
 * main thread; src/nickv_lease.c says why). 0 when nobody would read it:
 * no thread, no connection of the grantor's, or a full pipe (the thread
 * has not read the pushes before: this one goes at the next retry). */
int nickvWatchWant(long long clock, long long offset) {
    if (!W.started || want_pipe[1] == -1 || !atomic_load_explicit(&grantor_watches, memory_order_relaxed))
        return 0;
    long long pair[2] = {clock, offset};
    return write(want_pipe[1], pair, sizeof(pair)) == (ssize_t)sizeof(pair);
}

/* ------------------------------------------------------- The thread --- */

static void watchClose(watchConn *c) {
#ifdef USE_OPENSSL
    if (c->ssl) SSL_free(c->ssl);
#endif
    c->ssl = NULL;
    c->handshake = 0;
    if (c->fd != -1) close(c->fd);
    c->fd = -1;
    c->authed = 0;
    c->len = 0;
}

/* Bytes to, and from, the peer: as send(2) and recv(2), through the TLS
 * session when there is one. */
static ssize_t watchSend(watchConn *c, const char *p, size_t n) {
#ifdef USE_OPENSSL
    if (c->ssl) {
        ERR_clear_error();
        int r = SSL_write(c->ssl, p, (int)n);
        return r > 0 ? r : -1;
    }
#endif
    return send(c->fd, p, n, MSG_NOSIGNAL);
}

static ssize_t watchRecv(watchConn *c, char *p, size_t n) {
#ifdef USE_OPENSSL
    if (c->ssl) {
        ERR_clear_error();
        int r = SSL_read(c->ssl, p, (int)n);
        if (r > 0) return r;
        int e = SSL_get_error(c->ssl, r);
        if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) {
            errno = EAGAIN;
            return -1;
        }
        if (e == SSL_ERROR_ZERO_RETURN) return 0;
        errno = EIO;
        return -1;
    }
#endif
    return recv(c->fd, p, n, 0);
}

/* One reply, whole, or the connection goes: a peer that does not read a
 * few dozen bytes is not Nic-KV's watch. */
static void watchReply(watchConn *c, const char *fmt, ...) {
    char out[256];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(out, sizeof(out), fmt, ap);
    va_end(ap);
    if (n < 0 || n >= (int)sizeof(out) || watchSend(c, out, (size_t)n) != n) watchClose(c);
}

/* The main thread's command, if it still runs the one named (0 if not). */
static int watchCommandName(char *name) {
    for (int tries = 0; tries < 4; tries++) {
        unsigned a = atomic_load_explicit(&cmd_seq, memory_order_acquire);
        if (a & 1) continue;
        memcpy(name, cmd_name, WATCH_NAME);
        atomic_thread_fence(memory_order_acquire);
        if (atomic_load_explicit(&cmd_seq, memory_order_relaxed) == a) {
            name[WATCH_NAME - 1] = '\0';
            return name[0] != '\0';
        }
    }
    return 0;
}

/* WATCH <t> <ms> <instance>. */
static void watchRequest(watchConn *c, int argc, sds *argv) {
    long long t, ms, now = watchNow();
    if (argc != 4 || !string2ll(argv[1], sdslen(argv[1]), &t) || t < 0 || t > now ||
        !string2ll(argv[2], sdslen(argv[2]), &ms) || ms < 0 || ms > NICKV_LEASE_MAX_MS ||
        sdslen(argv[3]) != NICKV_INSTANCE_LEN) {
        watchReply(c, "-ERR malformed watch: expected WATCH <t> <ms> <instance>, t a time we sent\r\n");
        return;
    }
    int sent = 0;
    for (int i = 0; t > 0 && i < WATCH_SENT; i++)
        if (c->sent[i] == t) sent = 1;
    if (t > 0 && !sent) {
        watchReply(c, "-ERR t is not a time this connection was sent\r\n");
        watchClose(c);
        return;
    }
    /* The grantor and the token's generation are checked, and the lease
     * prolonged, under the lock nickvWatchGrantor takes: a grantor bound
     * meanwhile waits for this prolonging to be done, or stops it. */
    pthread_mutex_lock(&W.lock);
    int grantor = !strcmp(argv[3], W.grantor) && c->gen == W.gen;
    if (ms > W.grant_cap) ms = W.grant_cap;
    if (grantor && t > 0 && ms > 0 && atomic_load_explicit(&is_master, memory_order_relaxed) &&
        atomic_load_explicit(&may_prolong, memory_order_relaxed))
        W.lease->prolong(t, ms);
    pthread_mutex_unlock(&W.lock);
    if (!grantor) {
        watchReply(c, "-ERR not the Nic-KV that grants this master's lease\r\n");
        watchClose(c);
        return;
    }
    long long awake = atomic_load_explicit(&awake_since, memory_order_relaxed);
    long long since = atomic_load_explicit(&cmd_since, memory_order_relaxed);
    long long busy = awake && now > awake ? now - awake : 0;
    char name[WATCH_NAME];
    const char *what = "-";
    if (busy && since && since >= awake && watchCommandName(name)) what = name;
    c->sent[c->sent_next] = now;
    c->sent_next = (c->sent_next + 1) % WATCH_SENT;
    watchReply(c, "+WATCH %lld %lld %s %lld\r\n", now, busy, what, W.lease->left_ms_at(now));
}

/* Are the two tokens (NICKV_INSTANCE_LEN bytes each) equal? In a time
 * that does not depend on where they differ. */
static int watchSameToken(const char *a, const char *b) {
    unsigned char diff = 0;
    for (int i = 0; i < NICKV_INSTANCE_LEN; i++) diff |= (unsigned char)(a[i] ^ b[i]);
    return diff == 0;
}

/* A whole line from c. */
static void watchLine(watchConn *c, char *line) {
    int argc = 0;
    sds *argv = sdssplitargs(line, &argc);
    if (!argv || argc == 0) {
        watchReply(c, "-ERR empty or unparsable request\r\n");
        watchClose(c);
    } else if (!strcasecmp(argv[0], "AUTH") && argc == 2) {
        pthread_mutex_lock(&W.lock);
        int ok = W.token[0] && sdslen(argv[1]) == NICKV_INSTANCE_LEN && watchSameToken(argv[1], W.token);
        c->gen = W.gen;
        pthread_mutex_unlock(&W.lock);
        if (ok) {
            c->authed = 1;
            watchReply(c, "+OK\r\n");
        } else {
            watchReply(c, "-ERR invalid token\r\n");
            watchClose(c);
        }
    } else if (!c->authed) {
        watchReply(c, "-NOAUTH AUTH <token> first\r\n");
        watchClose(c);
    } else if (!strcasecmp(argv[0], "WATCH")) {
        watchRequest(c, argc, argv);
    } else {
        watchReply(c, "-ERR unknown request (the watch answers AUTH and WATCH)\r\n");
        watchClose(c);
    }
    if (argv) sdsfreesplitres(argv, argc);
}

/* Is c an authenticated connection of the grantor's, now? */
static int watchOfGrantor(watchConn *c) {
    pthread_mutex_lock(&W.lock);
    int ours = c->fd != -1 && c->authed && !c->handshake && c->gen == W.gen;
    pthread_mutex_unlock(&W.lock);
    return ours;
}

/* The main thread's push (nickvWatchWant): the latest, to each of the
 * grantor's connections. */
static void watchPushWant(void) {
    long long buf[2 * 32], clock = 0, offset = 0;
    ssize_t n;
    while ((n = read(want_pipe[0], buf, sizeof(buf))) >= (ssize_t)(2 * sizeof(long long))) {
        int last = (int)(n / (ssize_t)(2 * sizeof(long long))) - 1;
        clock = buf[2 * last];
        offset = buf[2 * last + 1];
    }
    for (int i = 0; i < WATCH_CONNS && clock > 0; i++)
        if (watchOfGrantor(&W.conns[i])) watchReply(&W.conns[i], "+WANT %lld %lld\r\n", clock, offset);
}

/* The TLS handshake's next step: 1 done, 0 under way, -1 failed (closed). */
static int watchHandshake(watchConn *c) {
#ifdef USE_OPENSSL
    ERR_clear_error();
    int r = SSL_do_handshake(c->ssl);
    if (r == 1) {
        c->handshake = 0;
        return 1;
    }
    int e = SSL_get_error(c->ssl, r);
    if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) {
        c->handshake = e == SSL_ERROR_WANT_READ ? 1 : 2;
        return 0;
    }
#endif
    watchClose(c);
    return -1;
}

static void watchRead(watchConn *c) {
    if (c->handshake && watchHandshake(c) != 1) return;
    ssize_t n = watchRecv(c, c->buf + c->len, sizeof(c->buf) - 1 - c->len);
    if (n <= 0) {
        if (n == 0 || (errno != EAGAIN && errno != EINTR)) watchClose(c);
        return;
    }
    c->len += (size_t)n;
    c->buf[c->len] = '\0';
    char *nl;
    while (c->fd != -1 && (nl = memchr(c->buf, '\n', c->len))) {
        size_t linelen = (size_t)(nl - c->buf);
        *nl = '\0';
        if (linelen && nl[-1] == '\r') nl[-1] = '\0';
        watchLine(c, c->buf);
        if (c->fd == -1) return;
        c->len -= linelen + 1;
        memmove(c->buf, nl + 1, c->len);
        c->buf[c->len] = '\0';
    }
    if (c->len >= sizeof(c->buf) - 1) {
        watchReply(c, "-ERR request too long\r\n");
        watchClose(c);
    }
}

static void watchAccept(int lfd) {
    int fd = accept(lfd, NULL, NULL);
    if (fd == -1) {
        /* Out of descriptors: the listener stays readable, and poll()
         * would return at once, for ever. A pause instead. */
        if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) usleep(100000);
        return;
    }
    /* Only the grantor's address may speak to the watch (its lease answer
     * gave the port to that connection alone): others are closed at once,
     * and a flood from elsewhere takes no slot. */
    char ip[NET_IP_STR_LEN];
    int port;
    pthread_mutex_lock(&W.lock);
    int ours = W.grantor_ip[0] && anetFdToString(fd, ip, sizeof(ip), &port, FD_TO_PEER_NAME) == 0 &&
               !strcmp(ip, W.grantor_ip);
    pthread_mutex_unlock(&W.lock);
    if (!ours) {
        close(fd);
        return;
    }
    /* A free slot; when full, one that has not given the token yet goes
     * (a peer holding every slot unauthenticated must not lock Nic-KV
     * out), picked at random (no order an intruder could keep ahead of);
     * full of authenticated ones, the newcomer goes. */
    int slot = -1;
    for (int i = 0; i < WATCH_CONNS && slot == -1; i++)
        if (W.conns[i].fd == -1) slot = i;
    if (slot == -1) {
        int unauthed[WATCH_CONNS], n = 0;
        for (int i = 0; i < WATCH_CONNS; i++)
            if (!W.conns[i].authed) unauthed[n++] = i;
        if (n) slot = unauthed[random() % n];
    }
    if (slot == -1) {
        close(fd);
        return;
    }
    if (W.conns[slot].fd != -1) watchClose(&W.conns[slot]);
    anetNonBlock(NULL, fd);
    anetCloexec(fd);
    anetEnableTcpNoDelay(NULL, fd);
    memset(&W.conns[slot], 0, sizeof(W.conns[slot]));
    W.conns[slot].fd = fd;
    W.conns[slot].accepted_ms = watchNow();
#ifdef USE_OPENSSL
    if (W.ssl_ctx) {
        SSL *ssl = SSL_new(W.ssl_ctx);
        if (!ssl || SSL_set_fd(ssl, fd) != 1) {
            if (ssl) SSL_free(ssl);
            watchClose(&W.conns[slot]);
            return;
        }
        SSL_set_accept_state(ssl);
        W.conns[slot].ssl = ssl;
        W.conns[slot].handshake = 1;
    }
#endif
}

#define WATCH_WHO_PIPE (-1 - CONFIG_BINDADDR_MAX)

static void *watchMain(void *arg) {
    struct pollfd pfd[CONFIG_BINDADDR_MAX + WATCH_CONNS + 1];
    int who[CONFIG_BINDADDR_MAX + WATCH_CONNS + 1];
    (void)arg;
    redis_set_thread_title("nickv-watch");
    for (;;) {
        int n = 0, grantors = 0;
        for (int i = 0; i < W.nfds; i++) {
            pfd[n].fd = W.fds[i];
            pfd[n].events = POLLIN;
            who[n++] = -1 - i;
        }
        if (want_pipe[0] != -1) {
            pfd[n].fd = want_pipe[0];
            pfd[n].events = POLLIN;
            who[n++] = WATCH_WHO_PIPE;
        }
        long long now = watchNow();
        for (int i = 0; i < WATCH_CONNS; i++) {
            watchConn *c = &W.conns[i];
            grantors += watchOfGrantor(c);
            if (c->fd == -1) continue;
            if (!c->authed && now - c->accepted_ms > WATCH_AUTH_MS) {
                watchClose(c);
                continue;
            }
            pfd[n].fd = c->fd;
            pfd[n].events = c->handshake == 2 ? POLLOUT : POLLIN;
            who[n++] = i;
        }
        atomic_store_explicit(&grantor_watches, grantors, memory_order_relaxed);
        if (poll(pfd, (nfds_t)n, 1000) <= 0) continue;
        for (int i = 0; i < n; i++) {
            if (!pfd[i].revents) continue;
            if (who[i] == WATCH_WHO_PIPE) watchPushWant();
            else if (who[i] < 0) watchAccept(pfd[i].fd);
            else if (pfd[i].revents & (POLLIN | POLLOUT | POLLHUP | POLLERR)) watchRead(&W.conns[who[i]]);
#ifdef USE_OPENSSL
            /* Bytes the session decrypted and the socket will not signal. */
            watchConn *c = who[i] >= 0 ? &W.conns[who[i]] : NULL;
            for (int k = 0; k < 4 && c && c->fd != -1 && c->ssl && !c->handshake && SSL_pending(c->ssl) > 0; k++)
                watchRead(c);
#endif
        }
    }
    return NULL;
}

/* Listen on bind's addresses, the first one fixing the port when
 * nickv-watch-port is 0. 0, or -1 when nothing could be bound. */
static int watchListen(void) {
    int port = nickvWatchPort;
    char err[ANET_ERR_LEN];
    for (int j = 0; j < server.bindaddr_count && W.nfds < CONFIG_BINDADDR_MAX; j++) {
        char *addr = server.bindaddr[j];
        if (*addr == '-') addr++;
        int fd = strchr(addr, ':') ? anetTcp6Server(err, port, addr, 16) : anetTcpServer(err, port, addr, 16);
        if (fd == ANET_ERR) {
            serverLog(LL_WARNING, "Nic-KV watch: cannot listen on %s:%d: %s", addr, port, err);
            continue;
        }
        if (port == 0) {
            char ip[NET_IP_STR_LEN];
            if (anetFdToString(fd, ip, sizeof(ip), &port, FD_TO_SOCK_NAME) == -1) {
                close(fd);
                port = 0;
                continue;
            }
        }
        anetNonBlock(NULL, fd);
        anetCloexec(fd);
        W.fds[W.nfds++] = fd;
    }
    W.port = port;
    return W.nfds ? 0 : -1;
}

/* tls-replication yes: the watch's TLS context, from this node's TLS
 * settings (tls-cert-file, tls-key-file, tls-ca-cert-file or -dir,
 * tls-auth-clients). -1 (logged) when it cannot be made: no watch then. */
static int watchTlsContext(void) {
#ifdef USE_OPENSSL
    redisTLSContextConfig *t = &server.tls_ctx_config;
    SSL_CTX *ctx = SSL_CTX_new(TLS_server_method());
    const char *why = NULL;
    ERR_clear_error();
    if (!ctx) why = "SSL_CTX_new";
    else {
        SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
        SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION | SSL_OP_NO_COMPRESSION);
        if (t->key_file_pass) SSL_CTX_set_default_passwd_cb_userdata(ctx, t->key_file_pass);
        if (!t->cert_file || SSL_CTX_use_certificate_chain_file(ctx, t->cert_file) != 1) why = "tls-cert-file";
        else if (!t->key_file || SSL_CTX_use_PrivateKey_file(ctx, t->key_file, SSL_FILETYPE_PEM) != 1)
            why = "tls-key-file";
        else if ((t->ca_cert_file || t->ca_cert_dir) &&
                 SSL_CTX_load_verify_locations(ctx, t->ca_cert_file, t->ca_cert_dir) != 1)
            why = "tls-ca-cert-file";
    }
    if (why) {
        unsigned long code = ERR_peek_last_error();
        serverLog(LL_WARNING, "Nic-KV watch: no TLS (%s: %s): no watch thread; Nic-KV judges this master "
                  "by its main thread alone", why, code ? ERR_reason_error_string(code) : "not set");
        if (ctx) SSL_CTX_free(ctx);
        return -1;
    }
    if (server.tls_auth_clients == TLS_CLIENT_AUTH_YES)
        SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, NULL);
    else if (server.tls_auth_clients == TLS_CLIENT_AUTH_OPTIONAL)
        SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
    W.ssl_ctx = ctx;
    return 0;
#else
    serverLog(LL_WARNING, "Nic-KV watch: tls-replication yes, but TLS was not built: no watch thread");
    return -1;
#endif
}

/* From the lease's first grant: the thread starts once, and runs until the
 * process exits. Nothing is lost without it: Nic-KV then judges by the
 * main thread alone, as before. */
void nickvWatchStart(const nickvWatchLeaseOps *lease) {
    static time_t tried;
    pthread_t tid;
    /* A port that could not be bound is tried again, every 10 s at most. */
    if (W.started || nickvWatchPort < 0 || server.bindaddr_count == 0 || (tried && server.unixtime - tried < 10))
        return;
    W.lease = lease;            /* before the thread, which reads it */
    tried = server.unixtime;
    for (int i = 0; i < WATCH_CONNS; i++) W.conns[i].fd = -1;
    if (server.tls_replication && !W.ssl_ctx && watchTlsContext() == -1) return;
    if (watchListen() == -1) {
        serverLog(LL_WARNING, "Nic-KV watch: no port: Nic-KV cannot tell this master busy from dead");
        return;
    }
    /* The push's pipe: without one, nothing is pushed (nickvWatchWant). */
    if (pipe(want_pipe) == -1) want_pipe[0] = want_pipe[1] = -1;
    else
        for (int i = 0; i < 2; i++) {
            anetNonBlock(NULL, want_pipe[i]);
            anetCloexec(want_pipe[i]);
        }
    W.started = 1;
    nickvWatchSleeping();
    if (pthread_create(&tid, NULL, watchMain, NULL) != 0) {
        serverLog(LL_WARNING, "Nic-KV watch: cannot start its thread: %s", strerror(errno));
        W.started = 0;
        for (int i = 0; i < W.nfds; i++) close(W.fds[i]);
        W.nfds = 0;
        for (int i = 0; i < 2; i++)
            if (want_pipe[i] != -1) close(want_pipe[i]);
        want_pipe[0] = want_pipe[1] = -1;
        return;
    }
    pthread_detach(tid);
    serverLog(LL_NOTICE, "Nic-KV watch: listening on port %d (Nic-KV tells a busy master from a dead one)",
              W.port);
}
