/* nickv_state.c -- the failover's state file: written at every change of
 * the master, read and checked at start.
 *
 * Copyright (c) 2026, the SKV authors. BSD 3-Clause licence (see LICENSE).
 *
 * The state file (state-file): epoch, the master, the master configured
 * when it was written, the nodes still to repoint, the largest lease-time
 * granted; written to a temporary file, fsynced and renamed before every
 * promotion and whenever the master changes, so that a restart neither
 * forgets nor reverses a failover. It is ignored (and said so) when the
 * configured master-host/master-port changed since. Its first line after
 * the comments names its format and writer, its last is a checksum of
 * the others: one cut short or changed stops Nic-KV at start (stateRead).
 *
 * Here too, as they sat with the state file in nickv_failover.c: the
 * failover's start (nkFailoverInit: the state file read, a lease of our
 * previous run waited for). The master it records is set by foMasterSet
 * (nickv_failover.c) alone. The failover's state, F, and its
 * types are in nickv_failover_int.h; the state machine is described at the
 * top of nickv_failover.c.
 */

#include "nickv_failover_int.h"
#include "nickv_upstream.h"
#include "nickv_cluster.h"
#include "nickv_failover.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sha256.h"
#include "skv_version.h"
#include "util.h"

/* The newest format this Nic-KV reads and writes: 2 has the cluster lines,
 * and is written only in cluster mode (an older Nic-KV then says the file
 * is newer than it reads, rather than damaged); else 1. */
#define NK_STATE_FORMAT 2
#define NK_STATE_MAX (1024 * 1024)        /* a longer state file is not ours */

/* -------------------------------------------------------- State file --- */

static sds addr(sds s, const char *a) {
    return sdscatrepr(s, a, strlen(a));
}

/* The checksum of a state file's text: SHA-256 of len bytes at p, as 64
 * hex digits into hex (65 bytes). */
static void stateChecksum(const char *p, size_t len, char *hex) {
    BYTE digest[SHA256_BLOCK_SIZE];
    SHA256_CTX ctx;
    sha256_init(&ctx);
    sha256_update(&ctx, (const BYTE *)p, len);
    sha256_final(&ctx, digest);
    for (int i = 0; i < SHA256_BLOCK_SIZE; i++) snprintf(hex + 2 * i, 3, "%02x", digest[i]);
}

/* All of len bytes to fd: 0, or -1 with errno set (ENOSPC for a write
 * that stopped short). */
static int stateWriteAll(int fd, const char *p, size_t len) {
    while (len) {
        ssize_t n = write(fd, p, len);
        if (n == -1 && errno == EINTR) continue;
        if (n <= 0) {
            if (n == 0) errno = ENOSPC;
            return -1;
        }
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

/* Why the state file cannot be kept, into F.state_err and the log (a full
 * disk fails every save: the line is rate-limited). Returns -1. */
static int stateSaveFailed(const char *what, const char *file) {
    snprintf(F.state_err, sizeof(F.state_err), "%s %.100s: %s", what, file, strerror(errno));
    nkLogRepeat(LL_WARNING, NULL, "Failover: cannot keep the state file: %s", F.state_err);
    return -1;
}

/* The state, atomically: a temporary file, fsync, rename, fsync of the
 * directory. The temporary file is created anew (O_EXCL, O_NOFOLLOW,
 * after removing whatever has its name), so that a file or a symbolic
 * link planted there is never written through. The text opens with the
 * format and the writer's version and ends with "end <checksum>" of
 * every byte before it: a file cut short or changed is told at start
 * (stateRead). 0, or -1 (F.state_err says why, and it is logged). */
int stateSave(void) {
    char tmp[PATH_MAX], dirbuf[PATH_MAX], sum[2 * SHA256_BLOCK_SIZE + 1];
    const char *path = nk.cfg.state_file, *dir;
    sds s;
    int fd, dfd;
    if (!path) return 0;
    /* Addresses are written quoted (sdscatrepr): whatever a replica
     * announced, sdssplitargs reads it back. */
    s = sdscatprintf(sdsempty(),
        "# The failover state of Nic-KV: written by nic-kv, read at its start.\n"
        "# Do not edit: the last line is the checksum of the lines before it.\n"
        "version %d nic-kv %s skv %s\n"
        "epoch %lld\n"
        "lease-max-ms %lld\n", nkClusterOn() ? NK_STATE_FORMAT : 1, NICKV_VERSION, SKV_VERSION, F.epoch, F.lease_max_ms);
    s = sdscatprintf(addr(sdscat(s, "configured "), nk.cfg.master_host), " %d\n", nk.cfg.master_port);
    if (F.have_master) s = sdscatprintf(addr(sdscat(s, "master "), F.master.reach), " %d\n", F.master.port);
    if (F.known_lease >= 0) s = sdscatprintf(s, "master-lease %d\n", F.known_lease);
    if (F.known_runid[0]) s = sdscatprintf(s, "master-runid %s\n", F.known_runid);
    if (F.known_replid[0]) s = sdscatprintf(s, "stream %s %lld\n", F.known_replid, F.known_offset);
    for (int i = 0; i < F.nknown; i++)
        s = sdscatprintf(addr(sdscat(s, "replica "), F.known[i].ip), " %d\n", F.known[i].port);
    for (int i = 0; i < F.nrepoint; i++)
        s = sdscatprintf(addr(sdscat(s, "repoint "), F.repoint[i].node.reach), " %d %d\n",
                         F.repoint[i].node.port, F.repoint[i].old_master);
    /* In cluster mode only (an older Nic-KV reads the other files). */
    s = nkClusterStateLines(s);
    stateChecksum(s, sdslen(s), sum);
    s = sdscatprintf(s, "end %s\n", sum);
    snprintf(tmp, sizeof(tmp), "%s.tmp", path);
    if (unlink(tmp) == -1 && errno != ENOENT) {
        sdsfree(s);
        return stateSaveFailed("removing", tmp);
    }
    fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd == -1) {
        sdsfree(s);
        return stateSaveFailed("creating", tmp);
    }
    if (stateWriteAll(fd, s, sdslen(s)) == -1 || fsync(fd) == -1) {
        int e = errno;
        close(fd);
        unlink(tmp);
        sdsfree(s);
        errno = e;
        return stateSaveFailed("writing", tmp);
    }
    sdsfree(s);
    if (close(fd) == -1) {
        int e = errno;
        unlink(tmp);
        errno = e;
        return stateSaveFailed("writing", tmp);
    }
    if (rename(tmp, path) == -1) {
        int e = errno;
        unlink(tmp);
        errno = e;
        return stateSaveFailed("renaming", tmp);
    }
    /* The rename is durable only once the directory is (a file system
     * that cannot sync a directory says EINVAL: nothing more to do). */
    snprintf(dirbuf, sizeof(dirbuf), "%s", path);
    dir = dirname(dirbuf);
    dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd == -1) return stateSaveFailed("opening the directory", dir);
    if (fsync(dfd) == -1 && errno != EINVAL) {
        int e = errno;
        close(dfd);
        errno = e;
        return stateSaveFailed("syncing the directory", dir);
    }
    close(dfd);
    if (F.state_err[0]) nkLog(LL_NOTICE, "Failover: the state file %s is written again", path);
    F.state_err[0] = '\0';
    return 0;
}

/* A state file Nic-KV cannot trust stops it at start: it could follow a
 * master that is no longer one, or forget a failover. What to do. */
static void stateDamaged(const char *path, const char *why) {
    nkLog(LL_WARNING, "Failover: the state file %s is damaged (%s): Nic-KV does not start with it. "
          "Check which node is the master now (INFO replication on each node, the last \"is the "
          "master\" line in this log), make master-host and master-port name it, then remove %s "
          "(or restore a good copy of it) and start Nic-KV again", path, why, path);
}

/* The state file's text, checked: its last line, "end <checksum>", must
 * be the checksum of every byte before it (stateSave), and its first line
 * after the comments "version <format> ..." with a format this Nic-KV
 * reads. Returns the text before the "end" line, or NULL: with *missing
 * set when there is no file, else with why filled in. */
static sds stateRead(const char *path, int *missing, char *why, size_t whylen) {
    char buf[4096], sum[2 * SHA256_BLOCK_SIZE + 1];
    sds text = sdsempty();
    size_t n, body;
    const char *last, *p;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    *missing = 0;
    if (fd == -1) {
        if (errno == ENOENT) *missing = 1;
        else snprintf(why, whylen, "it cannot be read: %s", strerror(errno));
        goto err;
    }
    while (1) {
        ssize_t r = read(fd, buf, sizeof(buf));
        if (r == -1 && errno == EINTR) continue;
        if (r == -1) {
            snprintf(why, whylen, "it cannot be read: %s", strerror(errno));
            close(fd);
            goto err;
        }
        if (r == 0) break;
        if (sdslen(text) + (size_t)r > NK_STATE_MAX) {
            snprintf(why, whylen, "it is larger than %d bytes", NK_STATE_MAX);
            close(fd);
            goto err;
        }
        text = sdscatlen(text, buf, (size_t)r);
    }
    close(fd);
    n = sdslen(text);
    if (n == 0) {
        snprintf(why, whylen, "it is empty");
        goto err;
    }
    /* The last line, and the text before it. */
    last = n >= 2 ? memrchr(text, '\n', n - 1) : NULL;
    body = last ? (size_t)(last - text) + 1 : 0;
    last = text + body;
    if (text[n - 1] != '\n' || strncmp(last, "end ", 4)) {
        snprintf(why, whylen, "it has no \"end\" line: it was cut short, or written by a Nic-KV older "
                 "than state file format 1, which had none");
        goto err;
    }
    stateChecksum(text, body, sum);
    if (n - body != 4 + strlen(sum) + 1 || memcmp(last + 4, sum, strlen(sum))) {
        snprintf(why, whylen, "its checksum does not match its text: it was changed or cut");
        goto err;
    }
    sdsrange(text, 0, (ssize_t)body - 1);
    /* The format, on the first line that is not a comment. */
    for (p = text; *p == '#' && (p = strchr(p, '\n')) != NULL; p++)
        ;
    long long format = 0;
    int argc = 0;
    const char *eol = p ? strchr(p, '\n') : NULL;
    sds line = eol ? sdsnewlen(p, (size_t)(eol - p)) : NULL;
    sds *argv = line ? sdssplitargs(line, &argc) : NULL;
    int ok = argv && argc >= 2 && !strcmp(argv[0], "version") &&
             string2ll(argv[1], sdslen(argv[1]), &format) && format >= 1;
    if (argv) sdsfreesplitres(argv, argc);
    sdsfree(line);
    if (!ok) {
        snprintf(why, whylen, "it has no \"version\" line");
        goto err;
    }
    if (format > NK_STATE_FORMAT) {
        snprintf(why, whylen, "it is of format %lld, written by a newer Nic-KV; this one reads formats 1 to %d",
                 format, NK_STATE_FORMAT);
        goto err;
    }
    return text;
err:
    sdsfree(text);
    return NULL;
}

/* Whether the directory of the state file at path is missing (a stat of
 * it says ENOENT or ENOTDIR): 1 with the directory into dir, else 0. */
static int stateDirMissing(const char *path, char *dir, size_t len) {
    char buf[PATH_MAX];
    struct stat st;
    snprintf(buf, sizeof(buf), "%s", path);
    snprintf(dir, len, "%s", dirname(buf));
    return stat(dir, &st) == -1 && (errno == ENOENT || errno == ENOTDIR);
}

/* What the state file says, as nkFailoverInit reads it. */
typedef struct {
    long long lease_max, epoch;
    char mhost[NK_ADDR_LEN], chost[NK_ADDR_LEN];
    int mport, cport;
    struct { char ip[NK_ADDR_LEN]; int port, old; } rp[NK_FO_REPOINT];
    int nrp, known_lease, nknown, cluster;
    struct { char ip[NK_ADDR_LEN]; int port; } known[NK_FO_CANDIDATES];
} stateFile;

/* Read the state file at path into sf (the master's run id and our
 * stream's history straight into F, the cluster's lines into
 * nickv_cluster.c): 0; 1 when there is none; -1 when it cannot be read or
 * is damaged (logged). */
static int stateParse(const char *path, stateFile *sf) {
    FILE *fp;
    sds text;
    char line[4096], why[300];
    int lineno = 0, missing;
    text = stateRead(path, &missing, why, sizeof(why));
    if (!text) {
        if (missing) return 1;
        stateDamaged(path, why);
        return -1;
    }
    fp = fmemopen(text, sdslen(text), "r");
    if (!fp) {
        nkLog(LL_WARNING, "Failover: cannot read the state file %s: fmemopen: %s", path, strerror(errno));
        sdsfree(text);
        return -1;
    }
    while (fgets(line, sizeof(line), fp)) {
        int argc;
        lineno++;
        if (line[0] == '#' || line[0] == '\n') continue;
        sds *argv = sdssplitargs(line, &argc);
        long long v;
        int ok = 1;
        if (!argv) ok = 0;
        else if (argc == 0) ;
        else if (!strcmp(argv[0], "version")) ;     /* checked by stateRead */
        else if (!strcmp(argv[0], "epoch") && argc == 2 && string2ll(argv[1], sdslen(argv[1]), &v) && v >= 0)
            sf->epoch = v;
        else if (!strcmp(argv[0], "lease-max-ms") && argc == 2 && string2ll(argv[1], sdslen(argv[1]), &v) &&
                 v >= 0 && v <= NICKV_LEASE_MAX_MS) sf->lease_max = v;
        else if ((!strcmp(argv[0], "master") || !strcmp(argv[0], "configured")) && argc == 3 &&
                 sdslen(argv[1]) < NK_ADDR_LEN && string2ll(argv[2], sdslen(argv[2]), &v) && v > 0 && v < 65536) {
            if (argv[0][0] == 'm') {
                snprintf(sf->mhost, sizeof(sf->mhost), "%s", argv[1]);
                sf->mport = (int)v;
            }
            else { snprintf(sf->chost, sizeof(sf->chost), "%s", argv[1]); sf->cport = (int)v; }
        } else if (!strcmp(argv[0], "master-runid") && argc == 2 && sdslen(argv[1]) == NK_RUNID_SIZE) {
            memcpy(F.known_runid, argv[1], NK_RUNID_SIZE + 1);
        } else if (!strcmp(argv[0], "stream") && argc == 3 && sdslen(argv[1]) == NK_RUNID_SIZE &&
                   string2ll(argv[2], sdslen(argv[2]), &v) && v >= 0) {
            memcpy(F.known_replid, argv[1], NK_RUNID_SIZE + 1);
            F.known_offset = v;
        } else if (!strcmp(argv[0], "master-lease") && argc == 2 && string2ll(argv[1], sdslen(argv[1]), &v) &&
                   (v == 0 || v == 1)) {
            sf->known_lease = (int)v;
        } else if (!strcmp(argv[0], "replica") && argc == 3 && sdslen(argv[1]) < NK_ADDR_LEN &&
                   string2ll(argv[2], sdslen(argv[2]), &v) && v > 0 && v < 65536) {
            if (sf->nknown < NK_FO_CANDIDATES) {
                snprintf(sf->known[sf->nknown].ip, sizeof(sf->known[sf->nknown].ip), "%s", argv[1]);
                sf->known[sf->nknown].port = (int)v;
                sf->nknown++;
            }
        } else if (!strncmp(argv[0], "cluster", 7)) {
            ok = nkClusterStateRead(argc, argv) == 0;
            sf->cluster = 1;
        } else if (!strcmp(argv[0], "repoint") && argc == 4 && sdslen(argv[1]) < NK_ADDR_LEN &&
                   string2ll(argv[2], sdslen(argv[2]), &v) && v > 0 && v < 65536 && sf->nrp < NK_FO_REPOINT) {
            snprintf(sf->rp[sf->nrp].ip, sizeof(sf->rp[sf->nrp].ip), "%s", argv[1]);
            sf->rp[sf->nrp].port = (int)v;
            sf->rp[sf->nrp].old = atoi(argv[3]) != 0;
            sf->nrp++;
        } else ok = 0;
        if (argv) sdsfreesplitres(argv, argc);
        if (!ok) {
            fclose(fp);
            sdsfree(text);
            snprintf(why, sizeof(why), "line %d is not understood", lineno);
            stateDamaged(path, why);
            return -1;
        }
    }
    fclose(fp);
    sdsfree(text);
    return 0;
}

/* What a state file read whole says takes effect: the master it names is
 * followed, its nodes repointed; only what concerns the lease when it is
 * for another configured master. */
static void stateApply(const char *path, const stateFile *sf) {
    if (sf->lease_max > F.lease_max_ms) F.lease_max_ms = sf->lease_max;
    if (strcmp(sf->chost, nk.cfg.master_host) || sf->cport != nk.cfg.master_port) {
        nkLog(LL_WARNING, "Failover: the state file %s is for the master configured as %s:%d, not "
              "%s:%d: ignoring what it says of the topology", path, sf->chost, sf->cport,
              nk.cfg.master_host, nk.cfg.master_port);
        F.epoch = sf->epoch;
        F.known_runid[0] = F.known_replid[0] = '\0';
        nkClusterStateApply(0);
        return;
    }
    F.epoch = sf->epoch;
    nkClusterStateApply(sf->cluster);
    if (sf->mhost[0]) {
        const char *h;
        int p;
        nkLinkMaster(&h, &p);
        foNode n = {.port = sf->mport};
        snprintf(n.ip, sizeof(n.ip), "%s", sf->mhost);
        snprintf(n.reach, sizeof(n.reach), "%s", sf->mhost);
        foMasterSet(&n, NULL, 0, sf->epoch, FO_MS_QUIET);
        if (strcmp(h, sf->mhost) || p != sf->mport) {
            nkLog(LL_WARNING, "Failover: the state file says the master is %s:%d (epoch %lld), "
                  "not the configured %s:%d: following it", sf->mhost, sf->mport, sf->epoch, h, p);
            nkLinkFollow(sf->mhost, sf->mport, 0);
        }
    }
    for (int i = 0; i < sf->nrp; i++) repointAdd(sf->rp[i].ip, sf->rp[i].port, sf->rp[i].old);
    F.known_lease = sf->known_lease;
    F.nknown = sf->nknown;
    memcpy(F.known, sf->known, sizeof(sf->known[0]) * (size_t)sf->nknown);
    nkLog(LL_NOTICE, "Failover: state file %s read: epoch %lld, master %s:%d, %d node(s) to repoint",
          path, sf->epoch, sf->mhost[0] ? sf->mhost : nk.cfg.master_host,
          sf->mhost[0] ? sf->mport : nk.cfg.master_port, sf->nrp);
}

/* Whatever the state file said: the lease our previous run may have
 * granted, the master, and a state file that can be written. 0, or -1
 * when failover yes cannot record itself. */
static int stateStart(const char *path) {
    char dir[PATH_MAX];
    /* Our previous run may have granted a lease that still holds. */
    F.lease_bound_us = foNowUs() + F.lease_max_ms * 1000 +
                       F.lease_max_ms * NK_LEASE_DRIFT_PPM / 1000 + NK_LEASE_MARGIN_US;
    if (!F.have_master) {
        foNode n = {.port = nk.cfg.master_port};
        snprintf(n.ip, sizeof(n.ip), "%s", nk.cfg.master_host);
        snprintf(n.reach, sizeof(n.reach), "%s", nk.cfg.master_host);
        foMasterSet(&n, NULL, 0, F.epoch, FO_MS_QUIET);
    }
    /* A failover must be able to record itself: find out now, not then.
     * A missing directory is a setup step not taken (a path of the
     * package's, given outside it): say which option and what to do. */
    if (path && stateDirMissing(path, dir, sizeof(dir))) {
        nkLog(LL_WARNING, "Failover: state-file %s: its directory %s does not exist: create it "
              "(writable by the user Nic-KV runs as), or set state-file to a file in an existing "
              "directory (a relative path is from the working directory)%s", path, dir,
              nk.cfg.failover ? "; with failover yes Nic-KV does not start without it" : "");
        if (nk.cfg.failover) return -1;
    } else if (path && stateSave() == -1) {
        if (nk.cfg.failover) {
            nkLog(LL_WARNING, "Failover: cannot write the state file %s (%s): with failover yes "
                  "Nic-KV does not start without it", path, F.state_err);
            return -1;
        }
        nkLog(LL_WARNING, "Failover: cannot write the state file %s (%s)", path, F.state_err);
    }
    return 0;
}

int nkFailoverInit(void) {
    const char *path = nk.cfg.state_file;
    stateFile sf = {.known_lease = -1};

    F.state = FO_WATCHING;
    F.lease_max_ms = nk.cfg.lease_time;
    F.known_lease = -1;
    if (!path) {
        if (nk.cfg.failover)
            nkLog(LL_WARNING, "Failover: no state-file: a restart forgets a failover");
    } else {
        int read = stateParse(path, &sf);
        if (read == -1) return -1;
        if (read == 0) stateApply(path, &sf);
    }
    return stateStart(path);
}
