/* nickv_resolve.h -- addresses: names resolved off the loop, numeric ones
 * compared and parsed.
 *
 * Copyright (c) 2026, the SKV authors. BSD 3-Clause licence (see LICENSE).
 */
#ifndef NICKV_RESOLVE_H
#define NICKV_RESOLVE_H

#include "nickv.h"

/* nickv_resolve.c: name (or a numeric address) -> up to NK_RESOLVE_ADDRS
 * numeric addresses in ip, to try in turn; returns how many. 0 while it is
 * being looked up (by a thread of its own: ask again later), -1 if it
 * cannot be; err says why. Main thread. */
#define NK_RESOLVE_ADDRS 4
#define NK_RESOLVE_IP 64                /* an IPv6 address, with a zone */
int nkResolve(const char *name, char ip[][NK_RESOLVE_IP], char *err, size_t errlen);
sds nkResolveInfo(sds s);
void nkResolveResetStats(void);
/* ... and numeric addresses, for every layer: a numeric IPv4 or IPv6
 * address (a name would need DNS to probe); an address's bytes (4 or 16;
 * 0: not numeric); the same address, numerically (or the same name);
 * "<ip>:<port>" (or "[<ipv6>]:<port>"), numeric, a member's (node lines):
 * 1, or 0 with err. */
int nkAddrNumeric(const char *a);
int nkAddrBytes(const char *a, unsigned char *out);
int nkSameAddr(const char *a, const char *b);
int nkMemberParse(const char *word, nkNodeAddr *out, const char **err);

#endif
