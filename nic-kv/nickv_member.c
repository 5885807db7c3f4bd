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
#include "nickv_resolve.h"
#include "nickv_coord.h"
#include "nickv_member.h"

#include <stdio.h>
#include <string.h>

#include "zmalloc.h"

/* Is ip:port (where Nic-KV connects) a member? */
int nkMember(const char *ip, int port) {
    if (port == nk.cfg.master_port && nkSameAddr(ip, nk.cfg.master_host)) return 1;
    for (int i = 0; i < nk.cfg.nodecount; i++)
        if (nk.cfg.nodes[i].port == port && nkSameAddr(ip, nk.cfg.nodes[i].ip)) return 1;
    return nkCoordMember(ip, port);
}

int nkMembers(nkNodeAddr *out, int max) {
    int n = 0;
    if (n < max && nk.cfg.master_host && nkAddrNumeric(nk.cfg.master_host)) {
        snprintf(out[n].ip, sizeof(out[n].ip), "%s", nk.cfg.master_host);
        out[n++].port = nk.cfg.master_port;
    }
    for (int i = 0; i < nk.cfg.nodecount && n < max; i++) out[n++] = nk.cfg.nodes[i];
    return n + nkCoordMembers(out + n, max - n);
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
