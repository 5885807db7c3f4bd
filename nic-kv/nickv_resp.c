/* nickv_resp.c -- what Nic-KV's connections to the master speak: commands
 * as argument vectors, the replica handshake, and a master's full sync
 * reply.
 *
 * Copyright (c) 2026, the SKV authors. BSD 3-Clause licence (see LICENSE).
 *
 * Used by the link (nickv_upstream.c) and by proxied full syncs
 * (nickv_fullsync.c), which each have a connection of their own to the
 * master and join it the same way, as a replica does: one handshake
 * (nkHandshake), one RDB reader (nkRdbReader). Its request parser serves
 * the clients (nickv.c) and the fan-out threads (replicas' ACKs). It calls
 * nothing of the daemon: any layer may use it.
 */

#include "nickv.h"
#include "nickv_resp.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "util.h"
#include "zmalloc.h"

/* ------------------------------------------------------------ Commands --- */

/* Append a command to out in Redis's protocol: *<argc>, then every argument
 * as a bulk string holding exactly its bytes. The arguments are first, then
 * those in ap, up to a NULL. Nothing is quoted, split or formatted, so a
 * password with quotes, backslashes or spaces arrives as it was given. */
sds nkCatCommandV(sds out, const char *first, va_list ap) {
    va_list count;
    const char *arg;
    int argc = 1;

    va_copy(count, ap);
    while (va_arg(count, const char *) != NULL) argc++;
    va_end(count);
    out = sdscatfmt(out, "*%i\r\n", argc);
    for (arg = first; arg != NULL; arg = va_arg(ap, const char *)) {
        size_t len = strlen(arg);
        out = sdscatfmt(out, "$%U\r\n", (unsigned long long)len);
        out = sdscatlen(out, arg, len);
        out = sdscatlen(out, "\r\n", 2);
    }
    return out;
}

/* Queue a command (first, then the arguments up to a NULL) in out. */
sds nkCatCommand(sds out, const char *first, ...) {
    va_list ap;
    va_start(ap, first);
    out = nkCatCommandV(out, first, ap);
    va_end(ap);
    return out;
}

/* ------------------------------------------------------------ Replies --- */

/* What a client reads back, in the protocol it chose with HELLO. RESP2
 * has arrays, bulk strings and one null per kind; RESP3 adds types of its
 * own, and each becomes in RESP2 what upstream's networking.c makes of it:
 *
 *   RESP3                         RESP2
 *   %<pairs>  map                 *<2*pairs>  the keys and values in turn
 *   ><n>      push (pub/sub)      *<n>
 *   _         null                $-1 (a bulk), *-1 (an array)
 *   =<len>    verbatim "txt:..."  $<len> without the "txt:"
 */

sds nkCatBulk(sds s, const char *p, size_t len) {
    s = sdscatfmt(s, "$%U\r\n", (unsigned long long)len);
    s = sdscatlen(s, p, len);
    return sdscatlen(s, "\r\n", 2);
}

sds nkCatBulkLL(sds s, long long v) {
    char buf[LONG_STR_SIZE];
    int len = ll2string(buf, sizeof(buf), v);
    return nkCatBulk(s, buf, len);
}

sds nkCatMapLen(sds s, int resp, long n) {
    return resp == 3 ? sdscatfmt(s, "%%%I\r\n", (long long)n) : sdscatfmt(s, "*%I\r\n", (long long)n * 2);
}

sds nkCatPushLen(sds s, int resp, long n) {
    return sdscatfmt(s, resp == 3 ? ">%I\r\n" : "*%I\r\n", (long long)n);
}

sds nkCatNull(sds s, int resp) {
    return sdscat(s, resp == 3 ? "_\r\n" : "$-1\r\n");
}

sds nkCatNullArray(sds s, int resp) {
    return sdscat(s, resp == 3 ? "_\r\n" : "*-1\r\n");
}

sds nkCatVerbatim(sds s, int resp, const char *p, size_t len) {
    if (resp != 3) return nkCatBulk(s, p, len);
    s = sdscatfmt(s, "=%U\r\ntxt:", (unsigned long long)len + 4);
    s = sdscatlen(s, p, len);
    return sdscatlen(s, "\r\n", 2);
}

/* --------------------------------------------------------- Handshake --- */

/* A replica's handshake with its master, as both our connections do it:
 *
 *   AUTH [user] password   (with a password)   reply must be +OK
 *   REPLCONF listening-port <port>             -NOAUTH fails; other errors
 *                                              are ignored, as a Redis
 *                                              replica does (old masters)
 *   REPLCONF capa [eof] psync2                 errors ignored (the same)
 *   REPLCONF nickv "hello ..."  (the link)     the caller reads the reply
 *   PSYNC <replid> <offset>, or PSYNC ? -1     the caller reads the reply
 *
 * nkHandshakeStart() queues the first command in hs->out; each reply line
 * then goes to nkHandshakeReply(), which queues the next one or hands the
 * line back. The caller sends what is in hs->out. */

static const char *hsStepNames[NK_HS_STEPS] = {
    "auth", "port", "capa", "hello", "psync", "done"
};

const char *nkHandshakeStepName(const nkHandshake *hs) {
    return hs->step < NK_HS_STEPS ? hsStepNames[hs->step] : "?";
}

static void hsPort(nkHandshake *hs) {
    char port[LONG_STR_SIZE];
    ll2string(port, sizeof(port), hs->port);
    hs->out = nkCatCommand(hs->out, "REPLCONF", "listening-port", port, NULL);
    hs->step = NK_HS_PORT;
}

/* (Re)start: whatever a previous handshake left is dropped. */
void nkHandshakeStart(nkHandshake *hs, const char *user, const char *pass) {
    if (!hs->out) hs->out = sdsempty();
    sdsclear(hs->out);
    hs->err[0] = '\0';
    if (pass) {
        if (user) hs->out = nkCatCommand(hs->out, "AUTH", user, pass, NULL);
        else hs->out = nkCatCommand(hs->out, "AUTH", pass, NULL);
        hs->step = NK_HS_AUTH;
    } else {
        hsPort(hs);
    }
}

nkHandshakeResult nkHandshakeReply(nkHandshake *hs, const char *line) {
    hs->err[0] = '\0';
    switch (hs->step) {
    case NK_HS_AUTH:
        if (line[0] != '+') {
            snprintf(hs->err, sizeof(hs->err), "the master refused our AUTH: %s "
                     "(check masteruser/masterauth)", line);
            return NK_HS_FAILED;
        }
        hsPort(hs);
        return NK_HS_SENT;
    case NK_HS_PORT:
        if (!strncmp(line, "-NOAUTH", 7)) {
            snprintf(hs->err, sizeof(hs->err), "the master requires a password: set masterauth");
            return NK_HS_FAILED;
        }
        if (hs->capa_eof) hs->out = nkCatCommand(hs->out, "REPLCONF", "capa", "eof", "capa", "psync2", NULL);
        else hs->out = nkCatCommand(hs->out, "REPLCONF", "capa", "psync2", NULL);
        hs->step = NK_HS_CAPA;
        return NK_HS_SENT;
    case NK_HS_CAPA:
        if (hs->hello) {
            hs->out = nkCatCommand(hs->out, "REPLCONF", NICKV_REPLCONF, hs->hello, NULL);
            hs->step = NK_HS_HELLO;
            return NK_HS_SENT;
        }
        return NK_HS_PSYNC_NEXT;
    case NK_HS_HELLO:
        return NK_HS_PSYNC_NEXT;
    case NK_HS_PSYNC:
        hs->step = NK_HS_DONE;
        return NK_HS_PSYNC_REPLY;
    default:
        snprintf(hs->err, sizeof(hs->err), "unexpected reply from the master: %s", line);
        return NK_HS_FAILED;
    }
}

void nkHandshakePsync(nkHandshake *hs, const char *replid, long long offset) {
    char off[LONG_STR_SIZE];
    if (replid) {
        ll2string(off, sizeof(off), offset);
        hs->out = nkCatCommand(hs->out, "PSYNC", replid, off, NULL);
    } else {
        hs->out = nkCatCommand(hs->out, "PSYNC", "?", "-1", NULL);
    }
    hs->step = NK_HS_PSYNC;
}

/* The next complete line of *in (without its CR LF), taken out of it; NULL
 * until one is complete, and then *err is set if what is there is already
 * longer than any reply line a master sends (the caller closes). Free the
 * line with sdsfree(). */
sds nkNextLine(sds *in, const char **err) {
    char *nl = memchr(*in, '\n', sdslen(*in));
    sds line;
    *err = NULL;
    if (!nl) {
        if (sdslen(*in) > NK_REPLY_LINE_MAX)
            *err = "protocol error: a reply line from the master longer than 64 KB";
        return NULL;
    }
    line = sdsnewlen(*in, nl - *in);
    sdsrange(*in, nl - *in + 1, -1);
    return sdstrim(line, "\r");
}

/* ------------------------------------------------ A master's full sync --- */

/* What follows a +FULLRESYNC from the master: newlines (keepalives while it
 * prepares the RDB), then "$<len>" and that many bytes, or "$EOF:<mark>"
 * (40 bytes), the RDB and the mark again. Our link drops it; a proxied full
 * sync passes it to the replica unchanged. One reader for both (the
 * struct is in nickv_resp.h). */

void nkRdbReaderInit(nkRdbReader *r) {
    memset(r, 0, sizeof(*r));
    r->left = NK_RDB_PREAMBLE;
}

/* Feed p[0..len): returns how many of those bytes belong to the full sync
 * (what follows the RDB is the stream's, and stays with the caller), with
 * *done set when the RDB ended there; or -1 with *err for a preamble that
 * is not one. Bytes of a $ line not complete yet are not consumed. */
ssize_t nkRdbReaderFeed(nkRdbReader *r, const char *p, size_t len, int *done,
                             const char **err) {
    size_t used = 0;
    *done = 0;
    if (r->left == NK_RDB_PREAMBLE) {
        const char *line, *nl;
        size_t linelen;
        while (used < len && p[used] == '\n') used++;
        if (used == len) return used;
        line = p + used;
        if (line[0] != '$') { *err = "bad RDB preamble from the master"; return -1; }
        if (!(nl = memchr(line, '\n', len - used))) {
            if (len - used > NK_RDB_PREAMBLE_MAX) { *err = "bad RDB preamble from the master"; return -1; }
            return used;
        }
        linelen = nl - line;
        if (linelen && line[linelen - 1] == '\r') linelen--;
        if (linelen == 5 + NK_RUNID_SIZE && !memcmp(line + 1, "EOF:", 4)) {
            memcpy(r->mark, line + 5, NK_RUNID_SIZE);
            r->taillen = 0;
            r->left = NK_RDB_EOFMARK;
        } else if (!string2ll(line + 1, linelen - 1, &r->left) || r->left < 0) {
            r->left = NK_RDB_PREAMBLE;
            *err = "bad RDB length in the master's preamble";
            return -1;
        }
        used = nl - p + 1;
    }
    if (r->left >= 0) {
        size_t n = len - used;
        if ((long long)n > r->left) n = (size_t)r->left;
        r->left -= n;
        used += n;
        if (r->left == 0) *done = 1;
        return used;
    }
    /* Until the mark: its first occurrence ends the RDB. */
    const char *q = p + used, *m;
    size_t qlen = len - used;
    if (r->taillen) {
        /* One that begins in the bytes kept from the last read. */
        char win[2 * NK_RUNID_SIZE];
        size_t head = qlen < NK_RUNID_SIZE - 1 ? qlen : NK_RUNID_SIZE - 1;
        memcpy(win, r->tail, r->taillen);
        memcpy(win + r->taillen, q, head);
        if ((m = memmem(win, r->taillen + head, r->mark, NK_RUNID_SIZE))) {
            *done = 1;
            return used + (size_t)(m - win) + NK_RUNID_SIZE - r->taillen;
        }
    }
    if ((m = memmem(q, qlen, r->mark, NK_RUNID_SIZE))) {
        *done = 1;
        return used + (size_t)(m - q) + NK_RUNID_SIZE;
    }
    /* Keep the last NK_RUNID_SIZE-1 bytes seen. */
    if (qlen >= NK_RUNID_SIZE - 1) {
        memcpy(r->tail, q + qlen - (NK_RUNID_SIZE - 1), NK_RUNID_SIZE - 1);
        r->taillen = NK_RUNID_SIZE - 1;
    } else {
        size_t keep = r->taillen + qlen > NK_RUNID_SIZE - 1 ? NK_RUNID_SIZE - 1 - qlen : r->taillen;
        memmove(r->tail, r->tail + r->taillen - keep, keep);
        memcpy(r->tail + keep, q, qlen);
        r->taillen = keep + qlen;
    }
    return len;
}

/* ------------------------------------------------------------ Requests --- */

int nkParseCommand(sds *buf, int *argc, sds **argv, const char **err) {
    char *p = *buf, *end = *buf + sdslen(*buf), *nl;
    long long count, i;
    sds *v;
    *argc = 0;
    *argv = NULL;
    if (p == end) return 0;
    if (*p != '*') {
        /* Inline command: a line of words. */
        int n = 0;
        sds line, *words;
        if (!(nl = memchr(p, '\n', end - p))) {
            if (sdslen(*buf) > 64 * 1024) { *err = "too big inline request"; return -1; }
            return 0;
        }
        line = sdsnewlen(p, nl - p);
        sdsrange(*buf, nl - p + 1, -1);
        line = sdstrim(line, "\r");
        words = sdssplitargs(line, &n);
        sdsfree(line);
        if (!words) { *err = "unbalanced quotes in request"; return -1; }
        *argc = n;
        *argv = words;
        return 1;
    }
    /* *<count>\r\n, then $<len>\r\n<bytes>\r\n for each argument. */
    char *q = p + 1;
    if (!(nl = memchr(q, '\r', end - q)) || nl + 1 >= end) {
        if (sdslen(*buf) > 64 * 1024) { *err = "too big multibulk header"; return -1; }
        return 0;
    }
    if (!string2ll(q, nl - q, &count) || count > NK_MULTIBULK_MAX || nl[1] != '\n') {
        *err = "invalid multibulk length";
        return -1;
    }
    q = nl + 2;
    if (count <= 0) {
        /* "*0" or "*-1": an empty command, skipped (as upstream does). */
        sdsrange(*buf, q - p, -1);
        return 1;
    }
    /* The whole command is checked before anything is allocated: a count
     * that promises a million arguments costs nothing until they are here,
     * and what is here is at most NK_QUERYBUF_MAX. */
    char *args = q;
    for (i = 0; i < count; i++) {
        long long len;
        if (q >= end) goto more;
        if (*q != '$') {
            *err = "expected '$'";
            return -1;
        }
        if (!(nl = memchr(q, '\r', end - q)) || nl + 1 >= end) {
            if (end - q > 64) { *err = "too big bulk count string"; return -1; }
            goto more;
        }
        if (!string2ll(q + 1, nl - (q + 1), &len) || len < 0 || len > NK_BULK_MAX || nl[1] != '\n') {
            *err = "invalid bulk length";
            return -1;
        }
        q = nl + 2;
        if (end - q < len + 2) goto more;
        q += len + 2;
    }
    /* All there: now the vector, exactly as long as the count. */
    v = zmalloc(sizeof(sds) * count);
    for (i = 0, q = args; i < count; i++) {
        long long len;
        nl = memchr(q, '\r', end - q);
        string2ll(q + 1, nl - (q + 1), &len);
        v[i] = sdsnewlen(nl + 2, len);
        q = nl + 2 + len + 2;
    }
    sdsrange(*buf, q - p, -1);
    *argc = (int)count;
    *argv = v;
    return 1;
more:
    if (sdslen(*buf) > NK_QUERYBUF_MAX) { *err = "request too big"; return -1; }
    return 0;
}

void nkFreeArgv(int argc, sds *argv) {
    for (int i = 0; i < argc; i++) sdsfree(argv[i]);
    zfree(argv);
}
