/* nickv_client.h -- the clients (nickv.c): connections to Nic-KV on its
 * port, in the main thread.
 *
 * Copyright (c) 2026, the SKV authors. BSD 3-Clause licence (see LICENSE).
 */
#ifndef NICKV_CLIENT_H
#define NICKV_CLIENT_H

#include "nickv.h"

/* A connection to Nic-KV on its port, in the main thread: an admin
 * (redis-cli), or a replica until its PSYNC succeeds, when its socket goes
 * to a fan-out thread and the client is freed. Its state is one of these,
 * changed only by nkClientSetState(), which checks every move against the
 * diagram at the top of nickv_replica.c ("A replica's state in Nic-KV"). */
typedef enum {
    NK_CLIENT_CONNECTED = 0,  /* reading commands (AUTH, REPLCONF, PSYNC, admin) */
    NK_CLIENT_WAITING,        /* PSYNC ahead of the backlog: waits for the stream */
    NK_CLIENT_FULLSYNC,       /* a proxied full sync: the RDB passes through (fs) */
    NK_CLIENT_HANDOVER,       /* +CONTINUE or the RDB queued: to a fan-out thread
                               * at stream_from once it is sent */
    NK_CLIENT_CLOSING,        /* a last reply queued, then closed */
    NK_CLIENT_STATES
} nkClientState;

typedef struct nkFullSync nkFullSync;
typedef struct nkClient {
    long long id;
    nkConn *conn;             /* NULL once freed or handed over */
    char ip[64];
    int port;                 /* peer's port */
    sds querybuf;
    sds outbuf;
    int authenticated;
    int admin;                /* AUTH gave adminpass (nkClientIsAdmin) */
    nkClientState state;
    int rx_granted;           /* RDMA: full receive buffer granted */
    int listening_port;       /* REPLCONF listening-port */
    int capa_eof, capa_psync2, capa_nickv;
    long long stream_from;    /* HANDOVER: the offset the stream starts at */
    int stream_on_ack;        /* HANDOVER: ... once the replica's first REPLCONF ACK
                               * says it found the end of an EOF-marked RDB */
    long long stream_history; /* ... in this history (nkLinkHistory) */
    long long ack_wait_io;    /* ... the last time (ms) it sent anything */
    long long psync_wait;     /* WAITING: the offset the PSYNC waits for */
    long long psync_deadline; /* ... until this time (ms) */
    char psync_replid[NK_RUNID_SIZE+1]; /* ... in this history */
    nkFullSync *fs;           /* a proxied full sync in progress */
    list *channels, *patterns; /* SUBSCRIBE / PSUBSCRIBE (sds): nickv_sentinel.c */
    long long obuf_soft_since; /* ms: its queue went over the soft limit; 0: not over */
    time_t ctime;
    long long ctime_ms;
    int resp;                 /* 2 or 3: the protocol HELLO chose (nickv_cmd.c) */
    sds name;                 /* CLIENT SETNAME, HELLO SETNAME; NULL: none */
    sds user;                 /* the user AUTH named; NULL: default */
    long long last_cmd_ms;    /* when its last command ran (CLIENT LIST idle) */
    char last_cmd[24];        /* ... and its name, lower case (CLIENT LIST cmd) */
    int monitor;              /* MONITOR: it is sent the commands others run */
} nkClient;

void nkClientReply(nkClient *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void nkClientWriteRaw(nkClient *c, const char *buf, size_t len);
void nkClientFree(nkClient *c);
/* Send what is queued (may free c: do not touch it afterwards). */
void nkClientFlushSoon(nkClient *c);
size_t nkClientPending(nkClient *c);
/* How many more clients Nic-KV can take now (maxclients, less the clients
 * and replicas it has; 0 while it is out of file descriptors). The master
 * redirects replicas here only while this is above zero. */
int nkClientSlotsFree(void);
/* The RDMA port the master may send replicas to (0: none). */
int nkRdmaPort(void);

#endif
