/* nickv_member.h -- the members: the nodes Nic-KV trusts with its credentials.
 *
 * Copyright (c) 2026, the SKV authors. BSD 3-Clause licence (see LICENSE).
 */
#ifndef NICKV_MEMBER_H
#define NICKV_MEMBER_H

#include "nickv.h"

/* nickv_member.c: the members, the nodes Nic-KV trusts with its
 * credentials, names valid, promotes and repoints (see its top). */
int nkMember(const char *ip, int port);
/* Every member named by a numeric address, up to max: the configured
 * master, the node lines, the nodes registered in etcd. */
int nkMembers(nkNodeAddr *out, int max);
/* failover and min-slaves need members: 1, or 0 with err. */
int nkMembersCheck(const char **err);

#endif
