/* nickv_status.c -- Nic-KV's failover state as read-only keys, for tools
 * that read keys but not Nic-KV's INFO sections.
 *
 * Copyright (c) 2026, the SKV authors. BSD 3-Clause licence (see LICENSE).
 *
 * Nic-KV holds no data. A stock Prometheus redis_exporter exports only the
 * INFO fields it knows, so Nic-KV's epoch, lease state and the reason a
 * failover is blocked never reach a dashboard through INFO. What the
 * exporter does export is keys: --check-single-keys=nickv:epoch,... runs
 * SELECT, TYPE, MEMORY USAGE, PFCOUNT, STRLEN and GET on each, and makes
 * redis_key_value{key="nickv:epoch"} of a number, and
 * redis_key_value_as_string{key=...,val="<text>"} plus redis_key_size of
 * a word. So every field of INFO failover and INFO coordinator is also a
 * string key "nickv:<field>" in database 0, built from those sections on
 * each read: the keys cannot say anything INFO does not, and there is
 * nothing to keep in step. nickv:<name> that names no field does not
 * exist; a key outside nickv: is an error, as the data commands always
 * were here.
 * NIC-KV.md "Monitoring" has the exporter's flags and the alert rules.
 */

#include "nickv_int.h"
#include "nickv_coord.h"
#include "nickv_failover.h"
#include "nickv_probe.h"
#include "nickv_resp.h"

#include <string.h>
#include <strings.h>

#include "util.h"

#define STATUS_PREFIX "nickv:"
#define STATUS_PREFIX_LEN (sizeof(STATUS_PREFIX) - 1)

/* The status as INFO lines ("field:value\r\n"): INFO failover (the
 * probes' section, then the failover's), then INFO coordinator. No two
 * fields share a name (the test's SCAN checks it). */
static sds statusText(void) {
    return nkCoordInfo(nkFailoverInfo(nkProbeInfo(sdsempty())));
}

/* The value of field in text (statusText's), or NULL: the field's line is
 * "<field>:<value>", the value running to the line's end (it may hold
 * colons, as master:<ip>:<port> does). */
static sds statusField(const char *text, const char *field, size_t flen) {
    const char *line = text;
    while (*line) {
        const char *end = strstr(line, "\r\n");
        size_t len = end ? (size_t)(end - line) : strlen(line);
        if (line[0] != '#' && len > flen && line[flen] == ':' && !memcmp(line, field, flen))
            return sdsnewlen(line + flen + 1, len - flen - 1);
        line += len + (end ? 2 : 0);
    }
    return NULL;
}

/* Is key in the status keys' namespace (nickv:<something>)? Outside it a
 * key is not "missing": Nic-KV holds no data, and an application sent
 * here by mistake must hear so, not read nil for every key. Replies that
 * error to c when it is not. */
static int statusNamespace(nkClient *c, const sds key) {
    if (sdslen(key) > STATUS_PREFIX_LEN && !strncmp(key, STATUS_PREFIX, STATUS_PREFIX_LEN)) return 1;
    /* At most 64 bytes of the name, unprintable ones as '?': one line. */
    sds k = sdsnewlen(key, sdslen(key) > 64 ? 64 : sdslen(key));
    for (size_t i = 0; i < sdslen(k); i++)
        if (k[i] < ' ' || k[i] > '~') k[i] = '?';
    nkClientReply(c, "-ERR Nic-KV holds no data: '%s' is not one of its status keys (nickv:<field of INFO failover "
                  "or INFO coordinator>); send data commands to the master\r\n", k);
    sdsfree(k);
    return 0;
}

/* The value of status key key, or NULL when there is no such field (text:
 * statusText's, or NULL to build it here). */
static sds statusValue(const char *text, const sds key) {
    size_t klen = sdslen(key);
    if (klen <= STATUS_PREFIX_LEN || strncmp(key, STATUS_PREFIX, STATUS_PREFIX_LEN)) return NULL;
    /* A field name has no ':', '#', CR, LF or NUL: a key holding one
     * names no field (and cannot reach into a value). */
    for (size_t i = STATUS_PREFIX_LEN; i < klen; i++)
        if (key[i] == ':' || key[i] == '#' || key[i] == '\r' || key[i] == '\n' || key[i] == '\0') return NULL;
    if (text) return statusField(text, key + STATUS_PREFIX_LEN, klen - STATUS_PREFIX_LEN);
    sds own = statusText();
    sds v = statusField(own, key + STATUS_PREFIX_LEN, klen - STATUS_PREFIX_LEN);
    sdsfree(own);
    return v;
}

/* Every key of argv[from..argc) in the namespace? Replies the error for
 * the first that is not. */
static int statusNamespaceAll(nkClient *c, int from, int argc, sds *argv) {
    for (int i = from; i < argc; i++)
        if (!statusNamespace(c, argv[i])) return 0;
    return 1;
}

/* SELECT <db>: database 0 is the only one (the exporter selects it before
 * reading keys). */
void nkStatusSelectCommand(nkClient *c, int argc, sds *argv) {
    long long db;
    (void)argc;
    if (!string2ll(argv[1], sdslen(argv[1]), &db))
        nkClientReply(c, "-ERR value is not an integer or out of range\r\n");
    else if (db != 0)
        nkClientReply(c, "-ERR DB index is out of range\r\n");
    else
        nkClientReply(c, "+OK\r\n");
}

/* TYPE <key>: string for a status key, none for another nickv:<name>. */
void nkStatusTypeCommand(nkClient *c, int argc, sds *argv) {
    (void)argc;
    if (!statusNamespace(c, argv[1])) return;
    sds v = statusValue(NULL, argv[1]);
    nkClientReply(c, "+%s\r\n", v ? "string" : "none");
    sdsfree(v);
}

/* GET <key>: the field's value, as INFO says it now; nil for another
 * nickv:<name> (a coordinator's field without a coordinator). */
void nkStatusGetCommand(nkClient *c, int argc, sds *argv) {
    (void)argc;
    if (!statusNamespace(c, argv[1])) return;
    sds v = statusValue(NULL, argv[1]);
    sds out = v ? nkCatBulk(sdsempty(), v, sdslen(v)) : nkCatNull(sdsempty(), c->resp);
    nkClientWriteRaw(c, out, sdslen(out));
    sdsfree(out);
    sdsfree(v);
}

/* STRLEN <key>: the value's length (redis_exporter's key_size). */
void nkStatusStrlenCommand(nkClient *c, int argc, sds *argv) {
    (void)argc;
    if (!statusNamespace(c, argv[1])) return;
    sds v = statusValue(NULL, argv[1]);
    nkClientReply(c, ":%zu\r\n", v ? sdslen(v) : 0);
    sdsfree(v);
}

/* How many of argv[1..argc) are status keys, INFO read once for all. */
static long long statusCount(int argc, sds *argv) {
    sds text = statusText();
    long long n = 0;
    for (int i = 1; i < argc; i++) {
        sds v = statusValue(text, argv[i]);
        n += v != NULL;
        sdsfree(v);
    }
    sdsfree(text);
    return n;
}

/* PFCOUNT <key> ...: no status key is a HyperLogLog (the exporter asks, to
 * tell one from a string); keys that do not exist count 0, as upstream's. */
void nkStatusPfcountCommand(nkClient *c, int argc, sds *argv) {
    if (!statusNamespaceAll(c, 1, argc, argv)) return;
    if (statusCount(argc, argv))
        nkClientReply(c, "-WRONGTYPE Key is not a valid HyperLogLog string value.\r\n");
    else
        nkClientReply(c, ":0\r\n");
}

/* EXISTS <key> ...: how many of the keys named are status keys (a key
 * named twice counts twice, as upstream's). */
void nkStatusExistsCommand(nkClient *c, int argc, sds *argv) {
    if (!statusNamespaceAll(c, 1, argc, argv)) return;
    nkClientReply(c, ":%lld\r\n", statusCount(argc, argv));
}

/* The status keys whose names match pattern (NULL: all), as bulk strings
 * appended to out; *n counts them. */
static sds statusKeys(sds out, const char *pattern, long *n) {
    sds text = statusText();
    const char *line = text;
    *n = 0;
    while (*line) {
        const char *end = strstr(line, "\r\n");
        size_t len = end ? (size_t)(end - line) : strlen(line);
        const char *colon = memchr(line, ':', len);
        if (line[0] != '#' && colon) {
            sds key = sdscatlen(sdsnew(STATUS_PREFIX), line, colon - line);
            if (!pattern || stringmatchlen(pattern, (int)strlen(pattern), key, (int)sdslen(key), 0)) {
                out = nkCatBulk(out, key, sdslen(key));
                (*n)++;
            }
            sdsfree(key);
        }
        line += len + (end ? 2 : 0);
    }
    sdsfree(text);
    return out;
}

/* SCAN <cursor> [MATCH <pattern>] [COUNT <n>] [TYPE <type>]: every status
 * key in one answer, cursor 0 (there are a few dozen). */
void nkStatusScanCommand(nkClient *c, int argc, sds *argv) {
    const char *pattern = NULL;
    int strings = 1;
    long long v;
    if (!string2ll(argv[1], sdslen(argv[1]), &v) || v != 0) {
        nkClientReply(c, "-ERR invalid cursor\r\n");
        return;
    }
    for (int i = 2; i < argc; i += 2) {
        if (i + 1 >= argc) {
            nkClientReply(c, "-ERR syntax error\r\n");
            return;
        }
        if (!strcasecmp(argv[i], "match")) {
            pattern = argv[i + 1];
        } else if (!strcasecmp(argv[i], "count")) {
            if (!string2ll(argv[i + 1], sdslen(argv[i + 1]), &v) || v < 1) {
                nkClientReply(c, "-ERR value is not an integer or out of range\r\n");
                return;
            }
        } else if (!strcasecmp(argv[i], "type")) {
            strings = !strcasecmp(argv[i + 1], "string");
        } else {
            nkClientReply(c, "-ERR syntax error\r\n");
            return;
        }
    }
    long n = 0;
    sds keys = strings ? statusKeys(sdsempty(), pattern, &n) : sdsempty();
    sds out = sdscatfmt(sdsempty(), "*2\r\n$1\r\n0\r\n*%i\r\n", (int)n);
    out = sdscatsds(out, keys);
    nkClientWriteRaw(c, out, sdslen(out));
    sdsfree(out);
    sdsfree(keys);
}

/* MEMORY USAGE <key> [SAMPLES <n>]: nil for a status key (built on each
 * read, it takes no memory); the namespace's error for another. */
void nkStatusMemoryUsage(nkClient *c, int argc, sds *argv) {
    (void)argc;
    if (!statusNamespace(c, argv[2])) return;
    sds out = nkCatNull(sdsempty(), c->resp);
    nkClientWriteRaw(c, out, sdslen(out));
    sdsfree(out);
}
