/* nickv_member.c -- members: the nodes Nic-KV trusts with its credentials.
 *
 * Copyright (c) 2026, the SKV authors. BSD 3-Clause licence (see LICENSE).
 *
 * Anything that holds the replicas' password can PSYNC from the master,
 * announce an address of its own, and be listed by the master as a
 * replica: an announcement proves nothing. So Nic-KV sends its
 * credentials (the nickv-user's password: AUTH, then INFO, REPLICAOF,
 * CONFIG REWRITE, CLUSTER NODES), names a replica valid to the master
 * (which then counts it for min-slaves and WAIT), promotes and repoints
 * only members:
 *
 *   - the master Nic-KV was configured with (master-host:master-port),
 *   - the nodes the operator names, one `node <ip>:<port>` line each (or
 *     several on one line; `--node` on the command line; CONFIG SET node
 *     replaces the list);
 *   - with a coordinator and etcd's authentication (coordinator-user), the
 *     nodes the deployment's Nic-KVs registered there (member/<local-node>,
 *     each attached to its Nic-KV's etcd lease: nickv_coord.c). Not with
 *     coordinator-insecure: whoever reaches such an etcd could add one.
 *
 * A node is a member when the address Nic-KV connects to (what it
 * probes, commands and sends its password to) is a member's: the same
 * port and the same address, numerically (10.0.0.7 and ::ffff:10.0.0.7
 * are one), or the same text for master-host (it may be a name). A
 * replica that is not a member is still served (it streams from Nic-KV
 * like any replica), probed with PING only, and shown in INFO failover
 * (member=no); it is never sent a credential, named valid, promoted or
 * repointed, and the log says so once per node.
 *
 * With failover yes or min-slaves > 0, Nic-KV needs members to work with:
 * without a node line it refuses to start (and CONFIG SET refuses to set
 * either), rather than quietly promoting or counting nobody
 * (nkMembersCheck). Only addresses: a name would have to be resolved, and
 * what a resolver answers is not the operator's word.
 */

#include "nickv.h"

#include <arpa/inet.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "util.h"
#include "zmalloc.h"

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

/* Is ip:port (where Nic-KV connects) a member? */
int nkMember(const char *ip, int port) {
    if (port == nk.cfg.master_port && nkSameAddr(ip, nk.cfg.master_host)) return 1;
    for (int i = 0; i < nk.cfg.nodecount; i++)
        if (nk.cfg.nodes[i].port == port && nkSameAddr(ip, nk.cfg.nodes[i].ip)) return 1;
    return nkCoordMember(ip, port);
}

/* Start-up and CONFIG SET of failover, min-slaves and node: a failover or
 * min-slaves with no node named would promote, or count, nobody. */
int nkMembersCheck(const char **err) {
    if (nk.cfg.nodecount || (nk.cfg.coordinator && nk.cfg.coordinator_user))
        return 1;
    if (nk.cfg.failover) {
        *err = "failover yes needs the nodes it may promote and repoint: a 'node <ip>:<port>' line for "
               "each SKV node, or a coordinator with etcd authentication (NIC-KV.md, \"Members\")";
        return 0;
    }
    if (nk.cfg.min_slaves > 0) {
        *err = "min-slaves counts members only: name each SKV replica with a 'node <ip>:<port>' line "
               "(NIC-KV.md, \"Members\")";
        return 0;
    }
    return 1;
}
