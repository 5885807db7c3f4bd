/* nickv_fullsync.c -- proxied full syncs: an upstream replica that Nic-KV
 * cannot serve from its backlog gets its RDB from the master through us.
 *
 * Copyright (c) 2026, the SKV authors. BSD 3-Clause licence (see LICENSE).
 *
 * A client of ours (nickv.c) in state FULLSYNC owns an nkFullSync: a
 * connection of its own to the master (TCP, master-port), which goes
 *
 *   CONNECTING --connected--> HANDSHAKE: the replica handshake of
 *   nickv_resp.c (nkHandshake), as the link does it but with the replica's
 *   listening-port and capas, and no hello --> PSYNC ? -1
 *   --+FULLRESYNC <replid> <offset>, our stream's replid-->
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
#include "nickv_resp.h"
#include "nickv_info.h"
#include "nickv_conn.h"
#include "nickv_backlog.h"
#include "nickv_upstream.h"
#include "nickv_member.h"
#include "nickv_client.h"
#include "nickv_replica.h"
#include "nickv_fullsync.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "zmalloc.h"

#define NK_PROXY_PAUSE (4*1024*1024)   /* stop reading the RDB above this */

typedef enum { FS_CONNECTING, FS_HANDSHAKE, FS_RDB } fsState;

struct nkFullSync {
    nkClient *c;
    nkConn *conn;                  /* to the master */
    fsState state;
    nkHandshake hs;                /* FS_HANDSHAKE */
    sds in;
    long long offset;              /* from +FULLRESYNC */
    nkRdbReader rdb;               /* FS_RDB: what it passes on */
    int paused;
};

static void fsReadable(nkConn *conn, void *data);

static void fsEnd(nkClient *c, const char *error) {
    nkFullSync *fs = c->fs;
    if (!fs) return;
    if (fs->conn) nkConnClose(fs->conn);
    sdsfree(fs->in);
    sdsfree(fs->hs.out);
    c->fs = NULL;
    if (error) {
        nkLog(LL_WARNING, "Full sync of replica %s:%d through Nic-KV failed: %s", c->ip,
              c->listening_port, error);
        if (c->conn) nkClientSetState(c, NK_CLIENT_CLOSING);
    }
    zfree(fs);
}

/* Send what the handshake queued. A handshake command is far smaller than
 * the socket's buffer; a failed write shows as the master's silence or
 * EOF, which end the sync. */
static void fsSendHandshake(nkFullSync *fs) {
    if (nkConnWrite(fs->conn, fs->hs.out, sdslen(fs->hs.out)) != (ssize_t)sdslen(fs->hs.out)) {
        /* the reply will tell */
    }
    sdsclear(fs->hs.out);
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

/* The master's answer to PSYNC ? -1: a full sync of our stream's history. */
static void fsPsyncReply(nkClient *c, const char *line) {
    nkFullSync *fs = c->fs;
    char id[NK_RUNID_SIZE + 1];
    if (strncmp(line, "+FULLRESYNC ", 12) || !nkReplyIdOffset(line + 12, id, &fs->offset)) {
        fsEnd(c, line);
        return;
    }
    if (strcmp(id, nkLinkReplid())) {
        fsEnd(c, "the master's replication id differs from our stream's");
        return;
    }
    c->stream_history = nkLinkHistory();
    nkClientReply(c, "%s\r\n", line);
    nkRdbReaderInit(&fs->rdb);
    fs->state = FS_RDB;
    nkLog(LL_NOTICE, "Full sync of replica %s:%d through Nic-KV: RDB at offset %lld",
          c->ip, c->listening_port, fs->offset);
}

static void fsHandleLine(nkClient *c, const char *line) {
    nkFullSync *fs = c->fs;
    switch (nkHandshakeReply(&fs->hs, line)) {
    case NK_HS_SENT:
        fsSendHandshake(fs);
        break;
    case NK_HS_PSYNC_NEXT:
        nkHandshakePsync(&fs->hs, NULL, 0);
        fsSendHandshake(fs);
        break;
    case NK_HS_PSYNC_REPLY:
        fsPsyncReply(c, line);
        break;
    case NK_HS_FAILED:
        fsEnd(c, fs->hs.err);
        break;
    }
}

/* Read from the master while the replica keeps up. */
static void fsPump(nkClient *c) {
    nkFullSync *fs = c->fs;
    if (!fs || fs->state == FS_CONNECTING) return;
    if (nkClientPending(c) > NK_PROXY_PAUSE) {
        if (!fs->paused) nkConnSetReadHandler(fs->conn, NULL);
        fs->paused = 1;
    } else if (fs->paused) {
        nkConnSetReadHandler(fs->conn, fsReadable);
        fs->paused = 0;
    }
}

/* The RDB ended: the replica streams from our backlog just after it. An
 * RDB that ends with an EOF mark is found complete by its last 40 bytes
 * read: a stream glued to it would hide the mark and the replica would wait
 * for ever (it happened under load, when the replica read the two at once).
 * So, as a master does for such a replica, the stream starts only once it
 * says with its first REPLCONF ACK that it loaded the RDB. */
static void fsDone(nkClient *c) {
    long long first, last, from = c->fs->offset + 1;
    int marked = c->fs->rdb.left == NK_RDB_EOFMARK;
    nkBacklogRange(&first, &last);
    if (c->stream_history != nkLinkHistory()) {
        fsEnd(c, "the master's history changed during the transfer");
        return;
    }
    if (from < first) {
        fsEnd(c, "the backlog no longer holds the RDB's offset (raise backlog-size)");
        return;
    }
    fsEnd(c, NULL);
    c->stream_from = from;    /* once the RDB is out (and acknowledged) */
    c->stream_on_ack = marked;
    c->ack_wait_io = nkMstime();
    nkClientSetState(c, NK_CLIENT_HANDOVER);
}

static void fsReadable(nkConn *conn, void *data) {
    nkClient *c = data;
    nkFullSync *fs = c->fs;
    char buf[64 * 1024];
    ssize_t n = nkConnRead(conn, buf, sizeof(buf));
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
                fsDone(c);
                break;
            }
            if (used == 0) break;
            continue;
        }
        const char *err;
        sds line = nkNextLine(&fs->in, &err);
        if (err) fsEnd(c, err);
        if (!line) break;
        if (sdslen(line)) fsHandleLine(c, line);
        sdsfree(line);
    }
    if (c->fs) fsPump(c);
    nkClientFlushSoon(c);
}

static void fsConnected(nkConn *conn, void *data) {
    nkClient *c = data;
    nkFullSync *fs = c->fs;
    if (nkConnError(conn)) {
        nkLog(LL_WARNING, "Full sync for replica %s:%d: cannot connect to the master: %s",
              c->ip, c->listening_port, nkConnError(conn));
        fsEnd(c, "cannot connect to the master");
        nkClientFlushSoon(c);
        return;
    }
    nkConnSetWriteHandler(conn, NULL);
    nkConnSetReadHandler(conn, fsReadable);
    fs->state = FS_HANDSHAKE;
    fs->hs.port = c->listening_port;
    fs->hs.capa_eof = c->capa_eof;
    nkHandshakeStart(&fs->hs, nk.cfg.masteruser, nk.cfg.masterauth);
    fsSendHandshake(fs);
}

/* Start a proxied full sync for c; with no c->conn (client going away),
 * tear it down. Called again by the client's writer to resume reading. */
int nkProxyFullSync(nkClient *c) {
    char err[256];
    const char *mhost;
    int mport;
    nkConn *conn;
    if (c->fs) {
        if (!c->conn) fsEnd(c, NULL);
        else fsPump(c);
        return 0;
    }
    nkLinkMaster(&mhost, &mport);
    if (!nkMember(mhost, mport)) {
        nkLog(LL_WARNING, "Full sync for replica %s:%d: the master %s:%d is not a member: no full sync "
              "through Nic-KV", c->ip, c->listening_port, mhost, mport);
        return -1;
    }
    conn = nkConnConnect(nk.loop, mhost, mport, 0, NULL, 0, err, sizeof(err));
    if (!conn) {
        nkLog(LL_WARNING, "Full sync for replica %s:%d: cannot connect to the master: %s",
              c->ip, c->listening_port, err);
        return -1;
    }
    c->fs = zcalloc(sizeof(nkFullSync));
    c->fs->c = c;
    c->fs->conn = conn;
    c->fs->in = sdsempty();
    c->fs->state = FS_CONNECTING;
    nkConnSetData(conn, c);
    nkConnSetWriteHandler(conn, fsConnected);
    return 0;
}
