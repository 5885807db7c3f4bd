/* nickv_log.c -- Nic-KV's log: nkLog, the rate-limited nkLogRepeat, and the
 * clocks they and the rest of the daemon read.
 *
 * Copyright (c) 2026, the SKV authors. BSD 3-Clause licence (see LICENSE).
 *
 * Every part of the daemon logs through nkLog (any thread: a lock keeps the
 * lines whole); a line that may come again on every tick goes through
 * nkLogRepeat instead (nickv.h says how it counts). Split out of nickv.c
 * as it was; nothing here knows of clients or commands.
 */

#include "nickv.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/time.h>
#include <unistd.h>

#include "monotonic.h"

/* ------------------------------------------------------------ Logging --- */

static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;

void nkLog(int level, const char *fmt, ...) {
    static const char marks[] = ".-*#";
    char msg[1024], ts[64];
    struct timeval tv;
    struct tm tm;
    va_list ap;
    FILE *fp;

    if (level < nk.cfg.verbosity) return;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    gettimeofday(&tv, NULL);
    localtime_r(&tv.tv_sec, &tm);
    strftime(ts, sizeof(ts), "%d %b %Y %H:%M:%S", &tm);
    pthread_mutex_lock(&log_lock);
    fp = (nk.cfg.logfile && *nk.cfg.logfile) ? fopen(nk.cfg.logfile, "a") : stdout;
    if (fp) {
        fprintf(fp, "%d:K %s.%03d %c %s\n", (int)getpid(), ts, (int)(tv.tv_usec / 1000),
                marks[level], msg);
        fflush(fp);
        if (fp != stdout) fclose(fp);
    }
    pthread_mutex_unlock(&log_lock);
}

/* The lines nkLogRepeat is counting: a slot per key (its hash), with the
 * last text, when its window began, and how many were not logged. A slot
 * whose window ended with nothing counted is free again. */
#define NK_LOG_REPEAT_SLOTS 32

static struct nkLogRepeatSlot {
    uint64_t key;               /* 0: free */
    int level;
    long long since_ms;         /* the window began (the line was logged) */
    long long count;            /* lines like it since then, not logged */
    char last[1024];            /* the last of them */
} nkRepeats[NK_LOG_REPEAT_SLOTS];

static uint64_t nkLogRepeatHash(const char *s) {
    uint64_t h = 1469598103934665603ULL;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ULL;
    return h ? h : 1;
}

static long long nkLogRepeatNow(void) {
    return (long long)getMonotonicUs() / 1000;
}

/* The slot's count, logged, and a new window begun. */
static void nkLogRepeatFlush(struct nkLogRepeatSlot *r, long long now) {
    nkLog(r->level, "%s (%lld more in the last %lld s)", r->last, r->count,
          (now - r->since_ms + 999) / 1000);
    r->count = 0;
    r->since_ms = now;
}

void nkLogRepeat(int level, const char *key, const char *fmt, ...) {
    char msg[1024];
    va_list ap;
    long long now = nkLogRepeatNow();
    struct nkLogRepeatSlot *r = NULL, *unused = NULL, *oldest = &nkRepeats[0];

    if (level < nk.cfg.verbosity) return;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    uint64_t h = nkLogRepeatHash(key ? key : msg);
    for (int i = 0; i < NK_LOG_REPEAT_SLOTS; i++) {
        struct nkLogRepeatSlot *s = &nkRepeats[i];
        if (s->key == h) {
            r = s;
            break;
        }
        if (!s->key && !unused) unused = s;
        if (s->key && s->since_ms < oldest->since_ms) oldest = s;
    }
    if (r && now - r->since_ms < NK_LOG_REPEAT_MS) {
        r->count++;
        memcpy(r->last, msg, sizeof(r->last));
        r->level = level;
        return;
    }
    if (r && r->count) {
        /* Its window ended before the cron saw it: this line says the count. */
        memcpy(r->last, msg, sizeof(r->last));
        r->level = level;
        nkLogRepeatFlush(r, now);
        return;
    }
    if (!r) r = unused;
    if (!r) {
        /* Every slot in use: the oldest window ends early. */
        r = oldest;
        if (r->count) nkLogRepeatFlush(r, now);
    }
    nkLog(level, "%s", msg);
    r->key = h;
    r->level = level;
    r->since_ms = now;
    r->count = 0;
    memcpy(r->last, msg, sizeof(r->last));
}

/* Windows that ended: their counts logged (a new window begins, so a line
 * that keeps coming is summed up once per window), or their slot freed. */
void nkLogRepeatCron(void) {
    long long now = nkLogRepeatNow();
    for (int i = 0; i < NK_LOG_REPEAT_SLOTS; i++) {
        struct nkLogRepeatSlot *r = &nkRepeats[i];
        if (!r->key || now - r->since_ms < NK_LOG_REPEAT_MS) continue;
        if (r->count) nkLogRepeatFlush(r, now);
        else r->key = 0;
    }
}

long long nkUnixTime(void) {
    return (long long)time(NULL);
}

long long nkMstime(void) {
    struct timeval tv;
    gettimeofday(&tv, NULL);
    return (long long)tv.tv_sec * 1000 + tv.tv_usec / 1000;
}
