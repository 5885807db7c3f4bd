/* nickv_fullsync.c -- proxied full syncs: an upstream replica that Nic-KV
 * cannot serve from its backlog gets its RDB from the master through us.
 *
 * Copyright (c) 2026, the SKV authors. BSD 3-Clause licence (see LICENSE).
 *
 * A client of ours (nickv.c) in state FULLSYNC owns an nkFullSync: a
 * connection of its own to the master (TCP, master-port), which goes
 *
 *   CONNECTING --connected--> AUTH (if masterauth) --> PORT (REPLCONF
 *   listening-port, the replica's) --> CAPA (REPLCONF capa, the replica's)
 *   --> PSYNC ? -1 --+FULLRESYNC <replid> <offset>, our stream's replid-->
 *   RDB: the +FULLRESYNC line, the preamble and the RDB pass to the replica
 *   unchanged (nkRdbReaderFeed says where the RDB ends) --end-->
 *   the client goes to HANDOVER at the RDB's offset
 *   any error, EOF, another replid --> the client goes to CLOSING
 *
 * While the replica does not read, we stop reading the master above
 * NK_PROXY_PAUSE bytes queued; the client output limits of nickv.c drop a
 * replica that stays above the soft limit.
 */

#include "nickv.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <sys/socket.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "anet.h"
#include "util.h"
#include "zmalloc.h"

#define NK_PROXY_PAUSE (4*1024*1024)   /* stop reading the RDB above this */

/* ------------------------------------------------- Proxied full syncs --- */

/* An upstream replica that Nic-KV cannot serve from its backlog gets a full
 * sync through Nic-KV: a connection of our own to the master asks for it,
 * and its +FULLRESYNC line and RDB go to the replica unchanged. Then the
 * replica streams from our backlog at the RDB's offset. */
typedef enum { FS_CONNECTING, FS_AUTH, FS_PORT, FS_CAPA, FS_PSYNC, FS_RDB } fsState;

struct nkFullSync {
    nkClient *c;
    int fd;
    fsState state;
    sds in;
    long long offset;              /* from +FULLRESYNC */
    nkRdbReader rdb;               /* FS_RDB: what it passes on */
    int paused;
};

static void fsReadable(aeEventLoop *el, int fd, void *data, int mask);

static void fsEnd(nkClient *c, const char *error) {
    nkFullSync *fs = c->fs;
    if (!fs) return;
    if (fs->fd != -1) {
        aeDeleteFileEvent(nk.el, fs->fd, AE_READABLE | AE_WRITABLE);
        close(fs->fd);
    }
    sdsfree(fs->in);
    c->fs = NULL;
    if (error) {
        nkLog(LL_WARNING, "Full sync of replica %s:%d through Nic-KV failed: %s", c->ip,
              c->listening_port, error);
        if (c->conn) nkClientSetState(c, NK_CLIENT_CLOSING);
    }
    zfree(fs);
}

/* Send a command (its arguments, then NULL) on the full sync's connection.
 * A handshake command is far smaller than the socket's buffer; a failed
 * write shows as the master's silence or EOF, which end the sync. */
static void fsSend(nkFullSync *fs, const char *first, ...) __attribute__((sentinel));
static void fsSend(nkFullSync *fs, const char *first, ...) {
    va_list ap;
    va_start(ap, first);
    sds out = nkCatCommandV(sdsempty(), first, ap);
    va_end(ap);
    if (write(fs->fd, out, sdslen(out)) != (ssize_t)sdslen(out)) { /* the reply will tell */ }
    sdsfree(out);
}

/* Pass RDB bytes to the replica; returns bytes used, sets done at the end. */
static size_t fsForward(nkClient *c, const char *p, size_t len, int *done) {
    const char *err = NULL;
    ssize_t used = nkRdbReaderFeed(&c->fs->rdb, p, len, done, &err);
    if (used < 0) {
        fsEnd(c, err);
        return len;
    }
    nkClientWriteRaw(c, p, (size_t)used);
    return (size_t)used;
}

static void fsHandleLine(nkClient *c, const char *line) {
    nkFullSync *fs = c->fs;
    char port[LONG_STR_SIZE];
    switch (fs->state) {
    case FS_AUTH:
        if (line[0] != '+') { fsEnd(c, "the master refused our AUTH"); return; }
        /* fall through */
    case FS_CONNECTING:
        ll2string(port, sizeof(port), c->listening_port);
        fsSend(fs, "REPLCONF", "listening-port", port, NULL);
        fs->state = FS_PORT;
        break;
    case FS_PORT:
        if (c->capa_eof) fsSend(fs, "REPLCONF", "capa", "eof", "capa", "psync2", NULL);
        else fsSend(fs, "REPLCONF", "capa", "psync2", NULL);
        fs->state = FS_CAPA;
        break;
    case FS_CAPA:
        fsSend(fs, "PSYNC", "?", "-1", NULL);
        fs->state = FS_PSYNC;
        break;
    case FS_PSYNC: {
        char id[NK_RUNID_SIZE + 1];
        if (strncmp(line, "+FULLRESYNC", 11) || sscanf(line + 11, " %40s %lld", id, &fs->offset) != 2) {
            fsEnd(c, line);
            return;
        }
        if (strcmp(id, nkLinkReplid())) {
            fsEnd(c, "the master's replication id differs from our stream's");
            return;
        }
        nkClientReply(c, "%s\r\n", line);
        nkRdbReaderInit(&fs->rdb);
        fs->state = FS_RDB;
        nkLog(LL_NOTICE, "Full sync of replica %s:%d through Nic-KV: RDB at offset %lld",
              c->ip, c->listening_port, fs->offset);
        break;
    }
    default:
        break;
    }
}

/* Read from the master while the replica keeps up. */
static void fsPump(nkClient *c) {
    nkFullSync *fs = c->fs;
    if (!fs) return;
    if (nkClientPending(c) > NK_PROXY_PAUSE) {
        if (!fs->paused) aeDeleteFileEvent(nk.el, fs->fd, AE_READABLE);
        fs->paused = 1;
    } else if (fs->paused) {
        aeCreateFileEvent(nk.el, fs->fd, AE_READABLE, fsReadable, c);
        fs->paused = 0;
    }
}

static void fsReadable(aeEventLoop *el, int fd, void *data, int mask) {
    (void)el; (void)mask;
    nkClient *c = data;
    nkFullSync *fs = c->fs;
    char buf[64 * 1024];
    ssize_t n = read(fd, buf, sizeof(buf));
    if (n == 0 || (n < 0 && errno != EAGAIN)) {
        fsEnd(c, "the master closed the connection");
        nkClientFlushSoon(c);
        return;
    }
    if (n < 0) return;
    fs->in = sdscatlen(fs->in, buf, n);
    while (c->fs && sdslen(fs->in)) {
        if (fs->state == FS_RDB) {
            int done;
            size_t used = fsForward(c, fs->in, sdslen(fs->in), &done);
            if (!c->fs) break;
            sdsrange(fs->in, used, -1);
            if (done) {
                long long first, last, from = fs->offset + 1;
                nkBacklogRange(&first, &last);
                if (from < first) {
                    fsEnd(c, "the backlog no longer holds the RDB's offset (raise backlog-size)");
                } else {
                    fsEnd(c, NULL);
                    c->stream_from = from;    /* once the RDB is out */
                    nkClientSetState(c, NK_CLIENT_HANDOVER);
                }
                break;
            }
            if (used == 0) break;
            continue;
        }
        char *nl = memchr(fs->in, '\n', sdslen(fs->in));
        if (!nl) break;
        sds line = sdsnewlen(fs->in, nl - fs->in);
        sdsrange(fs->in, nl - fs->in + 1, -1);
        line = sdstrim(line, "\r");
        if (sdslen(line)) fsHandleLine(c, line);
        sdsfree(line);
    }
    if (c->fs) fsPump(c);
    nkClientFlushSoon(c);
}

static void fsConnected(aeEventLoop *el, int fd, void *data, int mask) {
    (void)el; (void)mask;
    nkClient *c = data;
    int err = 0;
    socklen_t len = sizeof(err);
    aeDeleteFileEvent(nk.el, fd, AE_WRITABLE);
    if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) == -1 || err) {
        fsEnd(c, "cannot connect to the master");
        nkClientFlushSoon(c);
        return;
    }
    aeCreateFileEvent(nk.el, fd, AE_READABLE, fsReadable, c);
    if (nk.cfg.masterauth) {
        if (nk.cfg.masteruser) fsSend(c->fs, "AUTH", nk.cfg.masteruser, nk.cfg.masterauth, NULL);
        else fsSend(c->fs, "AUTH", nk.cfg.masterauth, NULL);
        c->fs->state = FS_AUTH;
    } else {
        fsHandleLine(c, "+OK");      /* as if authenticated */
    }
}

/* Start a proxied full sync for c; with no c->conn (client going away),
 * tear it down. Called again by the client's writer to resume reading. */
int nkProxyFullSync(nkClient *c) {
    char err[ANET_ERR_LEN];
    int fd;
    if (c->fs) {
        if (!c->conn) fsEnd(c, NULL);
        else fsPump(c);
        return 0;
    }
    fd = anetTcpNonBlockConnect(err, nk.cfg.master_host, nk.cfg.master_port);
    if (fd == ANET_ERR) {
        nkLog(LL_WARNING, "Full sync for replica %s:%d: cannot connect to the master: %s",
              c->ip, c->listening_port, err);
        return -1;
    }
    c->fs = zcalloc(sizeof(nkFullSync));
    c->fs->c = c;
    c->fs->fd = fd;
    c->fs->in = sdsempty();
    c->fs->state = FS_CONNECTING;
    aeCreateFileEvent(nk.el, fd, AE_WRITABLE, fsConnected, c);
    return 0;
}
