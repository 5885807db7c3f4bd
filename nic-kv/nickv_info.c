/* nickv_info.c -- the INFO replies of the nodes Nic-KV probes, read strictly.
 *
 * Copyright (c) 2026, the SKV authors. BSD 3-Clause licence (see LICENSE).
 *
 * What a node says in INFO decides where the link goes (nickv_probe.c) and
 * which replica a failover promotes (nickv_failover.c), and any process
 * that can PSYNC from the master can be such a node. So a field is taken
 * only as the master takes REPLCONF ACK: a number is the whole of its value
 * (string2ll: no sign games, no trailing bytes, no clamping of an overflow
 * to LLONG_MAX), within the range it can have; an id is exactly 40 hex
 * digits; a role is one of the two words. A field that breaks these rules
 * is absent, and the first one is named in bad[], so that the caller can
 * refuse the node and say why. Fields we do not read are not looked at.
 */

#include "nickv.h"
#include "nickv_info.h"

#include <ctype.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "util.h"

/* The value of one "name:value" line, as a NUL-terminated copy in buf
 * (values of the fields read here are short: a longer one is malformed). */
#define NK_INFO_VALUE_MAX 256

static void infoBad(nkInfo *in, const char *name, size_t namelen) {
    if (!in->bad[0]) snprintf(in->bad, sizeof(in->bad), "%.*s", (int)namelen, name);
}

static int infoNumber(const char *v, size_t vlen, long long min, long long max, long long *out) {
    long long n;
    if (!string2ll(v, vlen, &n) || n < min || n > max) return 0;
    *out = n;
    return 1;
}

/* 40 hex digits, as Redis's run and replication ids are. */
static int infoId(const char *v, size_t vlen, char *out) {
    if (vlen != NK_RUNID_SIZE) return 0;
    for (size_t i = 0; i < vlen; i++)
        if (!isxdigit((unsigned char)v[i])) return 0;
    memcpy(out, v, vlen);
    out[vlen] = '\0';
    return 1;
}

/* Printable, no separator of the lines and lists it came from. */
static int infoText(const char *v, size_t vlen, char *out, size_t outlen) {
    if (vlen == 0 || vlen >= outlen) return 0;
    for (size_t i = 0; i < vlen; i++)
        if (!isgraph((unsigned char)v[i]) || v[i] == ',') return 0;
    memcpy(out, v, vlen);
    out[vlen] = '\0';
    return 1;
}

/* A replication id and offset as a master's replies give them ("<id>
 * <offset>": the hello's +<replid> <offset>, +FULLRESYNC's), read as INFO
 * is: one space between, the id 40 hex digits, the offset the whole rest,
 * 0 or more (and below LLONG_MAX: the stream goes on from offset + 1).
 * 1 if so; 0 and nothing set otherwise. */
int nkReplyIdOffset(const char *s, char *id, long long *offset) {
    const char *sp = strchr(s, ' ');
    long long off;
    char buf[NK_RUNID_SIZE + 1];
    if (!sp || !infoId(s, (size_t)(sp - s), buf) || !infoNumber(sp + 1, strlen(sp + 1), 0, LLONG_MAX - 1, &off))
        return 0;
    memcpy(id, buf, sizeof(buf));
    *offset = off;
    return 1;
}

/* A replication id alone (+CONTINUE <replid>): exactly 40 hex digits. */
int nkReplyId(const char *s, char *id) {
    return infoId(s, strlen(s), id);
}

static void infoField(nkInfo *in, const char *name, size_t nlen, const char *v, size_t vlen) {
    long long n;
#define IS(s) (nlen == sizeof(s) - 1 && !memcmp(name, s, nlen))
    if (IS("role")) {
        if (vlen == 6 && !memcmp(v, "master", 6)) strcpy(in->role, "master");
        else if (vlen == 5 && !memcmp(v, "slave", 5)) strcpy(in->role, "slave");
        else infoBad(in, name, nlen);
    } else if (IS("run_id")) {
        if (!infoId(v, vlen, in->runid)) infoBad(in, name, nlen);
    } else if (IS("master_replid")) {
        if (!infoId(v, vlen, in->replid)) infoBad(in, name, nlen);
    } else if (IS("master_replid2")) {
        if (!infoId(v, vlen, in->replid2)) infoBad(in, name, nlen);
    } else if (IS("master_repl_offset")) {
        if (infoNumber(v, vlen, 0, LLONG_MAX, &n)) in->master_repl_offset = n;
        else infoBad(in, name, nlen);
    } else if (IS("slave_repl_offset")) {
        if (infoNumber(v, vlen, 0, LLONG_MAX, &n)) in->slave_repl_offset = n;
        else infoBad(in, name, nlen);
    } else if (IS("master_host")) {
        if (!infoText(v, vlen, in->master_host, sizeof(in->master_host))) infoBad(in, name, nlen);
    } else if (IS("master_port")) {
        if (infoNumber(v, vlen, 1, 65535, &n)) in->master_port = (int)n;
        else infoBad(in, name, nlen);
    } else if (IS("slave_priority") || IS("replica_priority")) {
        if (infoNumber(v, vlen, 0, INT_MAX, &n)) in->priority = (int)n;
        else infoBad(in, name, nlen);
    } else if (IS("rdma_port")) {
        /* 0: no listener configured. */
        if (infoNumber(v, vlen, 0, 65535, &n)) in->rdma_port = (int)n;
        else infoBad(in, name, nlen);
    } else if (IS("rdma_listener")) {
        in->rdma_listener = vlen == 2 && !memcmp(v, "on", 2);
    } else if (IS("rdma_replication")) {
        in->rdma_replication = vlen == 1 && v[0] == '1';
    } else if (IS("nickv_lease")) {
        in->lease = !(vlen == 3 && !memcmp(v, "off", 3));
    } else if (IS("nickv_lease_left_ms")) {
        if (infoNumber(v, vlen, 0, LLONG_MAX, &n)) in->lease_left_ms = n;
        else infoBad(in, name, nlen);
    } else if (IS("cluster_enabled")) {
        if (infoNumber(v, vlen, 0, 1, &n)) in->cluster = (int)n;
        else infoBad(in, name, nlen);
    }
#undef IS
}

/* Parse an INFO reply (any sections) into in. Lines end in CRLF (a bare LF
 * is taken too); "# Section" and blank lines are skipped. */
void nkInfoParse(const char *reply, size_t len, nkInfo *in) {
    const char *p = reply, *end = reply + len;
    memset(in, 0, sizeof(*in));
    in->master_repl_offset = in->slave_repl_offset = -1;
    in->priority = -1;
    in->lease = -1;
    in->cluster = -1;
    in->lease_left_ms = -1;
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        const char *eol = nl ? nl : end;
        const char *line_end = eol > p && eol[-1] == '\r' ? eol - 1 : eol;
        const char *colon = memchr(p, ':', (size_t)(line_end - p));
        if (colon && p[0] != '#')
            infoField(in, p, (size_t)(colon - p), colon + 1, (size_t)(line_end - colon - 1));
        p = nl ? nl + 1 : end;
    }
}

/* One "slaveN:ip=...,port=...,state=...[,via=nickv],..." line of a master's
 * INFO replication. 1 with its fields (ip and state as given, port in
 * 1..65535), 0 for any other line or a malformed one. */
int nkInfoReplicaLine(const char *line, nkInfoReplica *r) {
    const char *p, *end;
    int have_ip = 0, have_port = 0;
    memset(r, 0, sizeof(*r));
    if (strncmp(line, "slave", 5) || !isdigit((unsigned char)line[5])) return 0;
    p = line + 5;
    while (isdigit((unsigned char)*p)) p++;
    if (*p != ':') return 0;
    p++;
    end = p + strlen(p);
    while (p < end) {
        const char *comma = memchr(p, ',', (size_t)(end - p));
        const char *fe = comma ? comma : end;
        const char *eq = memchr(p, '=', (size_t)(fe - p));
        if (eq) {
            size_t nlen = (size_t)(eq - p), vlen = (size_t)(fe - eq - 1);
            long long n;
            if (nlen == 2 && !memcmp(p, "ip", 2)) {
                if (!infoText(eq + 1, vlen, r->ip, sizeof(r->ip))) return 0;
                have_ip = 1;
            } else if (nlen == 4 && !memcmp(p, "port", 4)) {
                if (!infoNumber(eq + 1, vlen, 1, 65535, &n)) return 0;
                r->port = (int)n;
                have_port = 1;
            } else if (nlen == 5 && !memcmp(p, "state", 5)) {
                if (!infoText(eq + 1, vlen, r->state, sizeof(r->state))) return 0;
            } else if (nlen == 3 && !memcmp(p, "via", 3)) {
                r->via_nickv = vlen == 5 && !memcmp(eq + 1, "nickv", 5);
            }
        }
        p = comma ? comma + 1 : end;
    }
    return have_ip && have_port;
}
