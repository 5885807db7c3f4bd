/* nickv_proto.h -- the Nic-KV protocol's words and timers, for both sides.
 *
 * Copyright (c) 2026, the SKV authors. BSD 3-Clause licence (see LICENSE).
 *
 * The master's and replicas' side (src/nickv_server.c) and the daemon
 * (nic-kv/) include this one file: every REPLCONF extension, capa, reply
 * prefix and timer of the protocol is defined here and nowhere else. The
 * message sequence is written down at the top of nic-kv/nickv.c.
 */
#ifndef SKV_NICKV_PROTO_H
#define SKV_NICKV_PROTO_H

/* ---------------------------------------------------- REPLCONF capa --- */

/* replica -> master: it follows a redirect to Nic-KV. */
#define NICKV_CAPA "nickv"
/* replica -> master: ... but not now (a redirect just failed it). */
#define NICKV_CAPA_HOLD "nickv-hold"
/* replica -> Nic-KV: it came by a redirect; send it back if need be. */
#define NICKV_CAPA_VIA "nickv-via"

/* ------------------------------------------- REPLCONF nickv "<msg>" --- */

/* daemon -> master, as the one argument after REPLCONF nickv. Each verb's
 * words after it, and their count (the verb included). */
#define NICKV_REPLCONF "nickv"
/* hello <host|?> <port> <rdma-port> <instance> <key> <tls-port>: the ports
 * replicas reach the daemon on (0: none; a replica goes to the one of its
 * own transport: RDMA, TLS or TCP). <instance> is the
 * daemon process's random id (NICKV_INSTANCE_LEN hex digits, new at every
 * start), public (Nic-KV's INFO shows it as run_id); <key> a second random
 * value of the same length, drawn with it, that the process never shows
 * (no INFO, no log line) and sends only to the masters it serves. Both go
 * in its lease messages too: the master takes the daemon role, leases and
 * verdicts from one Nic-KV at a time, and "the same Nic-KV" means the same
 * instance and the same key (src/nickv_server.c, "One Nic-KV"): knowing
 * the public id proves nothing. */
#define NICKV_MSG_HELLO "hello"
#define NICKV_MSG_HELLO_ARGC 7
#define NICKV_INSTANCE_LEN 40
#define NICKV_KEY_LEN 40
#define NICKV_MSG_ADD "add"           /* add <id> <ip> <listening-port> */
#define NICKV_MSG_ADD_ARGC 4
#define NICKV_MSG_DEL "del"           /* del <id> */
#define NICKV_MSG_DEL_ARGC 2
#define NICKV_MSG_ACK "ack"           /* ack <id> <offset> */
#define NICKV_MSG_ACK_ARGC 3
/* backlog <first> <last> [<free-client-slots>]: what the daemon can serve,
 * sent every NICKV_HEARTBEAT_MS: also its heartbeat. */
#define NICKV_MSG_BACKLOG "backlog"
#define NICKV_MSG_BACKLOG_ARGC 4
/* health <min-slaves> <n> [<addr> <port>]...: Nic-KV's probes' verdicts
 * (nic-kv/nickv_probe.c), sent when they change and with every heartbeat.
 * The n replicas listed (by the address and listening port the master
 * knows them by) answer probes. With min-slaves > 0, a replica not listed
 * counts neither for WAIT nor for min-replicas-to-write, and while fewer
 * than min-slaves remain the master refuses writes with -NOREPLICAS; with
 * 0 the verdicts change nothing. A master that has heard none for
 * NICKV_HEALTH_TIMEOUT_MS lets them lapse. */
#define NICKV_MSG_HEALTH "health"
#define NICKV_MSG_HEALTH_ARGC 3         /* and two words per replica listed */
/* After the n replicas, optionally: <k> [<addr> <port>]...: replicas
 * joining. Nic-KV has just made them replicas of this master (a failover's
 * repoint), they answer its probes, and each counts for min-slaves
 * before it is connected, for NICKV_JOINING_MS after the first message that
 * named it joining at most (naming it again does not extend that), so that
 * a promoted master takes writes from its first one instead of answering
 * -NOREPLICAS until its replicas' PSYNCs are done. Nic-KV names a replica
 * joining for NICKV_JOINING_MS after the promotion at most. WAIT counts
 * only acknowledgements, as always. */
#define NICKV_JOINING_MS 3000
#define NICKV_HEALTH_MAX 256            /* replicas listed at most */

/* lease <t> <ms> <instance> <key>: Nic-KV's probe connection (a client of the
 * nickv-user, not the daemon's link) grants the master a lease until t +
 * ms on the master's monotonic clock, where t is a clock value the master
 * sent in an earlier reply (0: none, a query). The master answers
 * NICKV_REPLY_LEASE <its clock now> <run-id> <offset>. With nickv-lease
 * yes a master serves data only while it holds a lease:
 * src/nickv_lease.c. Only one connection at a time may send these (and
 * health, while the link is down): src/nickv_server.c, "One Nic-KV". */
#define NICKV_MSG_LEASE "lease"
#define NICKV_MSG_LEASE_ARGC 5
/* ... and with the offset read with <t>: "lease <t> <ms> <instance> <key>
 * <offset>", sent only to a master that pushed (src/nickv_lease.c). */
#define NICKV_MSG_LEASE_AT_ARGC 6
#define NICKV_LEASE_MAX_MS 60000        /* a longer grant is malformed */

/* ------------------------------------------------------------ Replies --- */

/* master -> Nic-KV's probe, to a lease: +LEASE <clock> <run-id> <offset>. */
#define NICKV_REPLY_LEASE "+LEASE "


/* master -> replica, to its PSYNC: +NICKV <host> <port> <rdma-port>. */
#define NICKV_REPLY_REDIRECT "+NICKV "
/* Nic-KV -> redirected replica, to its PSYNC: go back to the master. */
#define NICKV_REPLY_BACK "-NICKV"
/* master -> daemon, to its hello: not as its daemon (an error whose text
 * starts with this; the daemon retries later). */
#define NICKV_REPLY_REFUSED "NICKV refused:"
/* ... and to a lease, when another connection grants (src/nickv_server.c,
 * nickvGrantorCheck): the reason after NICKV_REPLY_REFUSED and a space
 * starts with one of these, which Nic-KV's probe compares exactly. */
#define NICKV_REFUSED_EARLIER "an earlier connection of this Nic-KV (client id "  /* <id>) grants ... */
#define NICKV_REFUSED_OTHER "another Nic-KV (client id "                          /* <id>) grants ... */
#define NICKV_REFUSED_RUNS "the lease another Nic-KV granted runs for "          /* <ms> ms more */
#define NICKV_REFUSED_RUNS_END " ms more"

/* ------------------------------------------------------------- Timers --- */

/* The daemon reports (NICKV_MSG_BACKLOG) this often. */
#define NICKV_HEARTBEAT_MS 200
/* A master that heard nothing from its daemon this long closes its link. */
#define NICKV_DAEMON_TIMEOUT_MS 1000
/* While a healthy daemon carries an idle stream, the master PINGs into it
 * this often, so that a replica behind Nic-KV always hears something. */
#define NICKV_PING_MS 500
/* A replica behind Nic-KV that hears nothing this long goes back to the
 * master. */
#define NICKV_VIA_TIMEOUT_MS 2000
/* A daemon that said hello must be streaming within this time. */
#define NICKV_DAEMON_JOIN_MS 5000
/* The master lets the daemon's verdicts (NICKV_MSG_HEALTH) lapse when it
 * heard none for this long (they come with every heartbeat). */
#define NICKV_HEALTH_TIMEOUT_MS 2000
/* A redirect not followed within this time (or given by another master
 * than the one now configured) is dropped. */
#define NICKV_REDIRECT_TTL_MS 5000
/* serverCron's period at the default hz (10): both sides check the timers
 * at that granularity. */
#define NICKV_CRON_MS 100
/* A PSYNC at Nic-KV for bytes still on their way waits this long. */
#define NICKV_PSYNC_WAIT_MS 2000
/* A replica's handshake through Nic-KV (which may include that wait). */
#define NICKV_VIA_HANDSHAKE_MS 3000

/* What the timers must keep true: a healthy daemon is never declared
 * dead for a missed heartbeat or two; the master declares a daemon dead
 * before its replicas give up on it (so that they are served, not sent
 * back to it); an idle stream carries a PING at least twice per replica
 * timeout; a handshake outlasts a PSYNC's wait for the stream. */
_Static_assert(NICKV_HEARTBEAT_MS * 3 <= NICKV_DAEMON_TIMEOUT_MS, "heartbeat vs daemon timeout");
/* The replica's silence starts at the last PING it got, which may be up to
 * NICKV_PING_MS and a cron older than the daemon's last heartbeat; both
 * sides look at cron ticks. */
_Static_assert(NICKV_DAEMON_TIMEOUT_MS + NICKV_PING_MS + 2 * NICKV_CRON_MS <= NICKV_VIA_TIMEOUT_MS,
               "daemon timeout vs replica timeout");
_Static_assert(NICKV_PING_MS * 2 <= NICKV_VIA_TIMEOUT_MS, "ping vs replica timeout");
_Static_assert(NICKV_PSYNC_WAIT_MS < NICKV_VIA_HANDSHAKE_MS, "PSYNC wait vs handshake");

#endif
