/* fencing.pml -- SKV's fencing protocol as a Promela model, checked by spin.
 *
 * Copyright (c) 2026, the SKV authors. BSD 3-Clause licence (see LICENSE).
 *
 * What is modelled (DESIGN.md, "The model", maps every step to its code):
 *
 *   NODES redis-servers with nickv-lease yes (node 0 the first master, the
 *   others its replicas); two Nic-KVs (Nic-KV k on node k's server) that
 *   take leadership through etcd's leader key; etcd itself (the leader key
 *   with its TTL, the record, the member keys); clients that write and wait
 *   for acknowledgements (WAIT); and faults.
 *
 * Time is ticks. Every deadline is a countdown that the Clock process
 * decrements (and ages that it increments, saturating), so the state space
 * is finite without a time horizon. One tick is the drift margin: a lease
 * of LEASE ticks on Nic-KV's clock may last LEASE + 1 on the master's.
 *
 * A Nic-KV acts in rounds (nickvCron): one atomic step that does what its
 * event loop and its etcd thread would do on a timer, in the code's order.
 * Interleaving rounds with ticks, clients and faults gives every ordering
 * of messages that the code can see; a fault process adds what the network
 * and the machines can do: a crash and a restart empty, a pause of any
 * length, a grant delayed (and so reordered) or lost, a connection or an
 * etcd session lost, a client with Nic-KV's instance id but not its key,
 * an etcd leader change (it revives a lease expired but not yet swept).
 *
 * Properties, checked as assertions at the step that would break them:
 *
 *   P1 one acknowledging master: a node takes or acknowledges a write only
 *      when no other node holds a lease (onlyWriter);
 *   P2 no acknowledged write lost: a master that takes or acknowledges a
 *      write, and a node promoted, holds every acknowledged write
 *      (hasAcked);
 *   P3 a lease counted as a Nic-KV's came from that Nic-KV (nickvLeaseGrant);
 *   P4 record before count (DESIGN.md's chain, 6.): a node takes
 *      REPLICAOF NO ONE only once etcd's record names it, and an epoch
 *      once recorded names one master, so a later leader knows the master
 *      and its epoch;
 *   P5 a leader resigns only to a Nic-KV whose member key etcd holds now;
 *
 * and the LTL claim `live`: once the faults stop, a master is eventually
 * named and granted (checked under weak fairness, smallest configuration).
 *
 * Mutations (spin -DMUT_...), each a bug SKV had, must each break one:
 *
 *   MUT_GRANT_ANY_HOLDER   the master takes a grant from any client that
 *                          names the grantor's instance id (issue 30)
 *   MUT_WINDOW_FROM_NOW    the failover's named-valid window counted back
 *                          from now, not from the last lease's end
 *   MUT_STALE_MEMBER       a leader decides on a member key it read in an
 *                          earlier leadership (resigning to a dead Nic-KV)
 *   MUT_COUNT_BEFORE_RECORD  a promotion sent, and the winner granted,
 *                          before the record names it
 *   MUT_ROLLBACK_NO_BUMP   a promotion undone records the old master under
 *                          the failed promotion's own epoch
 *   MUT_RESUME_AFTER_LAPSE a keep-alive answered after the leadership we
 *                          counted ran out (the lease revived by an etcd
 *                          leader change) resumes leading on that lease
 *                          (four faults: DESIGN.md, "The model")
 */

/* --------------------------------------------------------- Configuration */

#ifndef NODES
#define NODES 3            /* redis-servers */
#endif
#ifndef MAXW
#define MAXW 1             /* writes the clients make */
#endif
#ifndef FAULTS
#define FAULTS 3           /* fault steps, in all */
#endif
#ifndef NODE_FAULTS
#define NODE_FAULTS 2      /* redis-server faults: a pause costs 1, a crash 2 */
#endif

#define NK 2               /* Nic-KVs */
#define LEASE 2            /* lease-time */
#define MARGIN 1           /* 10 % of it and 10 ms, and of the TTL: the drift */
#define BOUND (LEASE + MARGIN)   /* leaseGranted: when every grant has run out */
#define TTL 5              /* leader-ttl */
#define HELD (TTL - MARGIN)      /* roundLease: the leadership we count */
#define VERDICT 1          /* the master keeps Nic-KV's last health this long */
#define WINDOW 2           /* the record keeps a named replica (VERDICT + MARGIN) */
#define AGED (WINDOW + 1)  /* ages saturate here */
#define SUCC_HOLD 2        /* NK_COORD_SUCCESSOR_MS */
#define MAXEPOCH (2 * FAULTS + 3)

#define NONE 255
#define IMPOSTOR 9         /* the key of a client that read an instance id */

/* redis-server roles */
#define R_MASTER 0
#define R_REPLICA 1
#define R_ORPHAN 2         /* restarted empty as a master: not vetted (probeVet) */

/* coordinator roles (coordRole) */
#define CO_STANDBY 0
#define CO_LEADER 1
#define CO_RESIGNING 2

/* failover states (foState) */
#define WATCHING 0
#define FENCING 1
#define QUERYING 2
#define PROMOTING 3

/* ------------------------------------------------------------ The nodes */

byte role[NODES];
bool up[NODES];
bool paused[NODES];
byte off[NODES];               /* how many writes its log holds */
byte wlog[NODES * MAXW];       /* the writes, by id (1..MAXW) */
#define LOG(i, p) wlog[(i) * MAXW + (p)]
byte master_of[NODES];
bit ninc[NODES];               /* its process: a restart is another one */
bool fresh[NODES];             /* promoted, and not granted yet (see Faults) */
byte lease_left[NODES];        /* nickvLeaseHeld: ticks to run */
/* nickvGrantorCheck's binding: the grantor's instance (1 + 2k + incarnation)
 * and key (the same number for the real process, IMPOSTOR for another) */
byte grantor_inst[NODES];
byte grantor_key[NODES];
bool gconn[NODES];             /* the grantor's connection is open */
byte nkheld[NODES];            /* nickvHeld: what the grantor said it holds */
byte verdict[NODES * NODES];   /* master m counts replica j named valid: ticks left */
#define VERD(m, j) verdict[(m) * NODES + (j)]

/* ------------------------------------------------------------ Nic-KVs */

bool nk_up[NK];
bool nk_paused[NK];
bool cut[NK];                  /* cut off from etcd */
bit inc[NK];                   /* incarnation: a restart draws a new instance id and key */
#define INST(k) (1 + 2 * (k) + inc[k])
byte co[NK];                   /* coordRole */
byte fo[NK];                   /* foState */
byte kmaster[NK];              /* F.master */
byte kepoch[NK];
byte cand[NK];                 /* the candidate chosen, while PROMOTING */
bit cand_inc[NK];              /* ... the process that answered the query */
byte bound_left[NK];           /* leaseBoundUs: our grants have run out in */
byte held_left[NK];            /* heldUs */
byte wait_left[NK];            /* a new leader's or a restarted Nic-KV's wait */
byte succ[NK];                 /* the successor named when resigning (its instance) */
byte mview[NK];                /* the member key of the master's server, as read */
bool stable[NK];               /* the master was valid at the previous round too */
bool delay_next[NK];           /* the next grant is held up in the network */
bool ran[NK];                  /* took a round since the last tick */
bool rec_due[NK];              /* MUT_COUNT_BEFORE_RECORD: the record still to write */

/* a grant in flight (probe or watch connection), one per Nic-KV */
byte fl_to[NK];                /* to which node, NONE: nothing in flight */
byte fl_left[NK];              /* ticks of lease it still carries */
byte fl_inst[NK];
byte fl_off[NK];               /* what the Nic-KV said it holds */

/* ------------------------------------------------------------ etcd */

byte key = NONE;               /* the leader key's holder */
byte key_ttl;
bool key_expired;              /* its lease's TTL ran out, not swept yet: the key
                                * is still there, its keep-alive refused */
bool rv_pending[NK];           /* a standby's revoke of the key's lease, sent */
byte rec_epoch;                /* the record */
byte rec_master;
bool rec_named[NODES];
byte rec_age[NODES];           /* ticks since the leader last named it */
byte rec_succ = NONE;          /* a successor's instance */
byte succ_hold;                /* the other standbys leave it the key this long */
byte member[NK];               /* member key: the Nic-KV's instance, 0 none */

/* ------------------------------------------------------------ Ghosts */

bool acked[MAXW + 1];
byte ep_master[MAXEPOCH + 2];  /* the master an epoch was recorded with */          /* WAIT answered for write w */
byte wid;                      /* writes made */
byte faults;                   /* fault steps taken */
byte nfaults;
bool faults_over;

/* Scratch for the atomic steps, kept out of the state vector (hidden):
 * every step sets what it reads, and no step blocks half-way. */
hidden byte i, j, p, q, w, m, c, s, drift;
hidden byte found, ok, same, wrote, blocked;

/* ------------------------------------------------------------ Properties */

/* P1: no node but m holds a lease (a lease running is writes it may take). */
inline onlyWriter(m) {
    for (i : 0 .. NODES - 1) {
        assert(i == m || !up[i] || role[i] != R_MASTER || lease_left[i] == 0)
    }
}

/* P2: node n holds every acknowledged write. */
inline hasAcked(n) {
    for (w : 1 .. MAXW) {
        if
        :: acked[w] ->
            found = false;
            for (p : 0 .. MAXW - 1) {
                if :: p < off[n] && LOG(n, p) == w -> found = true :: else -> skip fi
            }
            assert(found)
        :: else -> skip
        fi
    }
}

/* ------------------------------------------------------------ The master */

/* nickvGrantorCheck: may a client with (inst, ikey) grant node m's lease?
 * ok set to 1 if so (binding it when its place is free). */
inline nickvGrantorCheck(m, inst, ikey) {
#ifdef MUT_GRANT_ANY_HOLDER
    same = (grantor_inst[m] == inst);
#else
    same = (grantor_inst[m] == inst && grantor_key[m] == ikey);
#endif
    if
    :: gconn[m] -> ok = same
    :: !gconn[m] && grantor_inst[m] != 0 && !same && lease_left[m] > 0 -> ok = false
    :: else ->
        ok = true;
        gconn[m] = true;
        if
        :: !same ->
            /* another Nic-KV: what the previous one said is not its word */
            grantor_inst[m] = inst; grantor_key[m] = ikey; nkheld[m] = 0;
            for (j : 0 .. NODES - 1) { VERD(m, j) = 0 }
        :: else -> skip
        fi
    fi
}

/* nickvLeaseGrant (and nickvLeaseProlong from the watch): a grant with
 * left ticks still to run, anchored on the master's clock; the master's
 * clock may run slow by the drift margin. P3: what extends the lease of
 * the grantor bound is from that grantor. */
inline nickvLeaseGrant(m, inst, ikey, left, held) {
    if
    :: up[m] && !paused[m] && role[m] == R_MASTER && left > 0 ->
        nickvGrantorCheck(m, inst, ikey);
        if
        :: ok ->
            assert(grantor_inst[m] == inst && grantor_key[m] == ikey);
            if :: drift = 0 :: drift = MARGIN fi;
            if :: lease_left[m] < left + drift -> lease_left[m] = left + drift :: else -> skip fi;
            fresh[m] = false;
            if :: held > nkheld[m] -> nkheld[m] = held :: else -> skip fi
        :: else -> skip
        fi
    :: else -> skip
    fi
}

/* A write on master m: refused without a lease (nickvLeaseRefuses). */
inline clientWrite(m) {
    if
    :: up[m] && !paused[m] && role[m] == R_MASTER && lease_left[m] > 0 &&
       off[m] < MAXW && wid < MAXW ->
        onlyWriter(m);
        hasAcked(m);
        wid++;
        LOG(m, off[m]) = wid;
        off[m]++
    :: else -> skip
    fi
}

/* WAIT answered for the write at p on m: a replica its grantor named valid
 * (nickvCountAcksByOffset) holds it, and Nic-KV said it holds it too
 * (nickvDirectAckCounts: the ack bound). Only under a lease. */
inline waitAcked(m, j, p) {
    if
    :: up[m] && !paused[m] && role[m] == R_MASTER && lease_left[m] > 0 &&
       p < off[m] && !acked[LOG(m, p)] && j != m && up[j] && role[j] == R_REPLICA &&
       master_of[j] == m && off[j] > p && VERD(m, j) > 0 && nkheld[m] > p ->
        onlyWriter(m);
        hasAcked(m);
        acked[LOG(m, p)] = true
    :: else -> skip
    fi
}

/* Replica j reads one more write of its master's stream. */
inline replicate(j) {
    if
    :: up[j] && !paused[j] && role[j] == R_REPLICA && master_of[j] != NONE &&
       up[master_of[j]] && !paused[master_of[j]] && role[master_of[j]] == R_MASTER &&
       off[j] < off[master_of[j]] ->
        LOG(j, off[j]) = LOG(master_of[j], off[j]);
        off[j]++
    :: else -> skip
    fi
}

/* ------------------------------------------------------------ Nic-KV */

/* The master answers Nic-KV k and would take its grant (foNodeValid, and
 * the master's refusal read by leaseForeign: a master whose place is held
 * by another grantor counts as invalid once its lease has run out). */
#define answers(m) (m != NONE && up[m] && !paused[m] && role[m] == R_MASTER)
#define takes(k, m) (!gconn[m] || (grantor_inst[m] == INST(k) && grantor_key[m] == INST(k)))
#define valid(k, m) (answers(m) && (takes(k, m) || lease_left[m] == 0))

/* nkCoordMayGrant and the probe's grant (nkLeaseGrantMs): only while every
 * lease we grant runs out before our leadership can (the chain, 3.). */
inline probeGrant(k, m) {
    if
    :: held_left[k] >= BOUND && takes(k, m) ->
        bound_left[k] = BOUND;                             /* leaseGranted */
        if
        :: delay_next[k] && fl_to[k] == NONE ->
            fl_to[k] = m; fl_left[k] = LEASE; fl_inst[k] = INST(k); fl_off[k] = off[m];
            delay_next[k] = false
        :: else ->
            nickvLeaseGrant(m, INST(k), INST(k), LEASE, off[m])
        fi;
        /* healthSend, after nkCoordMayName: the record lists a replica
         * (roundRecord) before the master counts it */
        if
        :: !cut[k] ->
            for (j : 0 .. NODES - 1) {
                if
                :: j != m && up[j] && !paused[j] && role[j] == R_REPLICA && master_of[j] == m ->
                    rec_named[j] = true; rec_age[j] = 0;
                    if :: gconn[m] && grantor_inst[m] == INST(k) -> VERD(m, j) = VERDICT :: else -> skip fi
                :: else ->
                    /* recordedList: named longer ago than the window: dropped */
                    if :: rec_age[j] >= AGED -> rec_named[j] = false :: else -> skip fi
                fi
            }
        :: else -> skip
        fi
    :: else -> skip
    fi
}

/* A record write, guarded by the leader key (nkCoordPublish, roundRecord);
 * never to an older epoch than etcd holds. wrote: it went through. */
inline nkCoordPublish(k, epoch, m) {
    if
    :: !cut[k] && key == k && epoch >= rec_epoch ->
        assert(ep_master[epoch] == NONE || ep_master[epoch] == m);     /* P4 */
        ep_master[epoch] = m;
        rec_epoch = epoch; rec_master = m; rec_succ = NONE; wrote = true
    :: else -> wrote = false
    fi
}

/* The key deleted (its lease revoked: etcd's sweep, a revoke, a resign).
 * A revoke still on its way is of that lease: it can no longer apply. */
inline keyDelete() {
    key = NONE; key_ttl = 0; key_expired = false;
    for (q : 0 .. NK - 1) { rv_pending[q] = false }
}

/* roleLost: the leader key is no longer surely ours: abandon the attempt,
 * close the probe connection to the master. */
inline roleLost(k) {
    co[k] = CO_STANDBY; fo[k] = WATCHING; stable[k] = false; rec_due[k] = false;
    if
    :: kmaster[k] != NONE && grantor_inst[kmaster[k]] == INST(k) -> gconn[kmaster[k]] = false
    :: else -> skip
    fi
}

/* standbyCampaign, roundLeaderKey, roleWon: create the key if it is free
 * (etcd's create-once), unless a named successor may take it first; adopt
 * the record; promote nobody for a lease-time (the chain, 7.). */
inline standbyCampaign(k) {
    if
    :: !cut[k] && key == NONE && (rec_succ == NONE || rec_succ == INST(k) || succ_hold == 0) ->
        key = k; key_ttl = TTL; held_left[k] = HELD;
        co[k] = CO_LEADER; fo[k] = WATCHING;
        kmaster[k] = rec_master; kepoch[k] = rec_epoch;
        if :: wait_left[k] < BOUND -> wait_left[k] = BOUND :: else -> skip fi;
        stable[k] = false;
#ifndef MUT_STALE_MEMBER
        mview[k] = 0;              /* nothing read in an earlier leadership counts */
#endif
        nkCoordPublish(k, rec_epoch, rec_master)
    :: else -> skip
    fi
}

/* leaderMaybeResign: the master is on the other Nic-KV's server, valid for
 * two rounds, and that Nic-KV is alive (its member key, read this round by
 * coordReadMembers): no more grants. P5. */
inline leaderMaybeResign(k) {
    s = kmaster[k];
    if
    :: s < NK && s != k && !cut[k] ->
#ifdef MUT_STALE_MEMBER
        if :: member[s] != 0 -> mview[k] = member[s] :: else -> skip fi;
#else
        mview[k] = member[s];
#endif
        if
        :: stable[k] && mview[k] != 0 && fo[k] == WATCHING && rec_epoch == kepoch[k] ->
            assert(member[s] == mview[k]);                 /* P5 */
            co[k] = CO_RESIGNING; succ[k] = mview[k]
        :: else -> skip
        fi
    :: else -> skip
    fi
}

/* A resigning leader confirms, without a lease ("lease <t> 0 ...": the
 * grant of nothing, probeWant and probeSendCmd in nic-kv/nickv_probe.c),
 * what the master's stream reached, so that WAIT goes on until its last
 * grant runs out. Only on the connection it granted on. */
inline probeConfirm(k, m) {
    if
    :: answers(m) && gconn[m] && grantor_inst[m] == INST(k) && grantor_key[m] == INST(k) &&
       off[m] > nkheld[m] ->
        nkheld[m] = off[m]
    :: else -> skip
    fi
}

/* resigningTick, roleResigned: once our last grant has run out, the record
 * names the successor and the key is deleted. */
inline resigningTick(k) {
    if
    :: bound_left[k] == 0 && !cut[k] && key == k ->
        rec_succ = succ[k]; succ_hold = SUCC_HOLD; keyDelete();
        co[k] = CO_STANDBY; fo[k] = WATCHING; stable[k] = false;
        if
        :: grantor_inst[kmaster[k]] == INST(k) -> gconn[kmaster[k]] = false
        :: else -> skip
        fi
    :: else -> skip
    fi
}

/* repointTick: a node that answers and is not a replica of our master is
 * made one (a full resync: it then holds the master's writes, no others). */
inline repointTick(k, m) {
    for (j : 0 .. NODES - 1) {
        if
        :: j != m && up[j] && !paused[j] && (role[j] != R_REPLICA || master_of[j] != m) ->
            role[j] = R_REPLICA; master_of[j] = m; lease_left[j] = 0;
            grantor_inst[j] = 0; grantor_key[j] = 0; gconn[j] = false;   /* nickvGrantorForget */
            for (p : 0 .. MAXW - 1) { LOG(j, p) = LOG(m, p) }
            off[j] = off[m]
        :: else -> skip
        fi
    }
}

/* probeReadView, loopFollow, foMasterServes: the master says it is a
 * replica of another node (a promotion recorded but never sent, its
 * leader gone): the probe follows it there, and that node is the master
 * under a new epoch. */
#define follows(m) (m != NONE && up[m] && !paused[m] && role[m] == R_REPLICA && \
                    master_of[m] != NONE && master_of[m] != m)
inline probeFollow(k, m) {
    kepoch[k]++;
    kmaster[k] = master_of[m];
    nkCoordPublish(k, kepoch[k], kmaster[k]);
    stable[k] = false
}

/* foChoose (collectCandidates, tickQuerying): every replica the record
 * names within the window is heard, unless its process is gone (its port
 * refuses); the highest offset among those answering wins. c: the winner,
 * NONE when there is none; blocked: a named one does not answer yet. */
inline foChoose(k, m) {
    c = NONE; blocked = false;
    for (j : 0 .. NODES - 1) {
        if
        :: j != m && up[j] && paused[j] ->
#ifdef MUT_WINDOW_FROM_NOW
            if :: rec_named[j] && rec_age[j] <= WINDOW -> blocked = true :: else -> skip fi
#else
            if :: rec_named[j] -> blocked = true :: else -> skip fi
#endif
        :: j != m && up[j] && !paused[j] && role[j] == R_REPLICA ->
            if :: c == NONE || off[j] > off[c] -> c = j :: else -> skip fi
        :: else -> skip
        fi
    }
}

/* foPromoted: the winner took REPLICAOF NO ONE. */
inline foPromoted(k, c) {
    hasAcked(c);                                           /* P2 */
    assert(rec_master == c && rec_epoch == kepoch[k]);     /* P4 */
    role[c] = R_MASTER; master_of[c] = NONE; lease_left[c] = 0; fresh[c] = true;
    grantor_inst[c] = 0; grantor_key[c] = 0; gconn[c] = false; nkheld[c] = 0;
    for (j : 0 .. NODES - 1) { VERD(c, j) = 0; rec_named[j] = false }
    kmaster[k] = c; fo[k] = WATCHING; stable[k] = false
}

/* promoteUndo: the old master recorded again, under a newer epoch. */
inline promoteUndo(k) {
#ifdef MUT_ROLLBACK_NO_BUMP
    nkCoordPublish(k, kepoch[k], kmaster[k]);
#else
    kepoch[k]++;
    nkCoordPublish(k, kepoch[k], kmaster[k]);
#endif
    fo[k] = WATCHING; stable[k] = false
}

/* The failover's tick (foTick: tickWatching, tickFencing, tickQuerying,
 * tickPromoting), as the leader. */
inline foTick(k) {
    m = kmaster[k];
    if
    :: fo[k] == WATCHING && follows(m) && kepoch[k] + 2 <= MAXEPOCH ->
        probeFollow(k, m)
    :: fo[k] == WATCHING && !follows(m) && valid(k, m) ->
        probeGrant(k, m);
        repointTick(k, m);
        leaderMaybeResign(k);
        stable[k] = true
    :: fo[k] == WATCHING && !follows(m) && !valid(k, m) && !(answers(m) && lease_left[m] > 0) &&
       kepoch[k] + 2 <= MAXEPOCH ->
        fo[k] = FENCING; stable[k] = false                 /* foStart: no more grants */
    :: fo[k] == FENCING || fo[k] == QUERYING ->
        if
        :: valid(k, m) -> fo[k] = WATCHING                 /* foAbort */
        :: else ->
            if
            :: fo[k] == FENCING && bound_left[k] == 0 && wait_left[k] == 0 ->
                fo[k] = QUERYING                           /* foQuery */
            :: fo[k] == QUERYING ->
                foChoose(k, m);
                if
                :: blocked -> skip
                :: !blocked && c == NONE -> fo[k] = WATCHING   /* foAbort */
                :: !blocked && c != NONE ->
                    kepoch[k]++;
                    cand[k] = c; cand_inc[k] = ninc[c];
#ifdef MUT_COUNT_BEFORE_RECORD
                    rec_due[k] = true; fo[k] = PROMOTING
#else
                    nkCoordPublish(k, kepoch[k], c);       /* foPromote: the record first */
                    if :: wrote -> fo[k] = PROMOTING :: else -> promoteUndo(k) fi
#endif
                fi
            :: else -> skip
            fi
        fi
    :: fo[k] == PROMOTING ->
        c = cand[k];
        if
        :: up[c] && !paused[c] && role[c] == R_REPLICA && ninc[c] == cand_inc[k] -> foPromoted(k, c)
        :: else -> promoteUndo(k)     /* unanswered, or its probe connection down (promoteSend) */
        fi
    :: else -> skip
    fi;
#ifdef MUT_COUNT_BEFORE_RECORD
    if
    :: rec_due[k] && fo[k] == WATCHING ->
        nkCoordPublish(k, kepoch[k], kmaster[k]);
        rec_due[k] = !wrote
    :: else -> skip
    fi;
#endif
    skip
}

/* One round of Nic-KV k: its etcd thread's round (roundLease,
 * roundMemberPut, roundLeaderKey), then the coordinator's and the
 * failover's ticks. */
inline nickvCron(k) {
    ran[k] = true;
    if
    :: !cut[k] -> member[k] = INST(k)              /* roundMemberPut */
    :: else -> skip
    fi;
    if
    :: co[k] != CO_STANDBY && !cut[k] && key == k && !key_expired ->
#ifdef MUT_RESUME_AFTER_LAPSE
        key_ttl = TTL; held_left[k] = HELD         /* leads again on a lapsed lease */
#else
        if
        :: held_left[k] > 0 ->
            key_ttl = TTL; held_left[k] = HELD     /* roundLease: a keep-alive answered */
        :: else ->
            /* roundLease, the lapse rule: answered after our held ran out
             * (the lease revived). That lease never counts again: the key
             * moves onto a new one (nkEtcdMoveLease, in one step while it is
             * still ours), so a revoke of the old lease sent earlier no
             * longer reaches it, and held counts from the new grant. */
            key_ttl = TTL; held_left[k] = HELD;
            for (q : 0 .. NK - 1) { rv_pending[q] = false }
        fi
#endif
    :: else -> skip
    fi;
    if
    :: co[k] != CO_STANDBY && (held_left[k] == 0 || (key != k && !cut[k])) ->
        roleLost(k)             /* cut off from etcd, it cannot see its key gone */
    :: else -> skip
    fi;
    if
    :: co[k] == CO_STANDBY ->
        /* roundKeyExpiring, keyLeaseRead: reads of another's key's lease
         * prove it past its TTL: a revoke sent, which takes effect later
         * (NicKV), whatever the key's state by then */
        if :: !cut[k] && key != NONE && key != k && key_expired -> rv_pending[k] = true :: else -> skip fi;
        standbyCampaign(k)
    :: co[k] == CO_LEADER -> foTick(k)
    :: co[k] == CO_RESIGNING ->
        probeConfirm(k, kmaster[k]);
        resigningTick(k)
    fi
}

proctype NicKV(byte k) {
    do
    :: atomic { nk_up[k] && !nk_paused[k] -> nickvCron(k) }
    :: atomic { rv_pending[k] -> keyDelete() }     /* the standby's revoke takes effect */
    od
}

/* ------------------------------------------------------------ Time */

/* A tick: every countdown down by one, every age up; the key whose TTL
 * ran out is expired (still there, not renewed), and etcd's sweep deletes
 * it by the next tick (every 500 ms; or earlier, Clock). A Nic-KV that
 * runs takes a round between two ticks (its timers keep up); one that does
 * not is paused, crashed, or cut off from etcd: the faults. */
inline tick() {
    for (i : 0 .. NODES - 1) {
        if :: lease_left[i] > 0 -> lease_left[i]-- :: else -> skip fi;
        if :: rec_age[i] < AGED -> rec_age[i]++ :: else -> skip fi;
        for (j : 0 .. NODES - 1) {
            if :: VERD(i, j) > 0 -> VERD(i, j)-- :: else -> skip fi
        }
    }
    for (q : 0 .. NK - 1) {
        if :: bound_left[q] > 0 -> bound_left[q]-- :: else -> skip fi;
        if :: held_left[q] > 0 -> held_left[q]-- :: else -> skip fi;
        if :: wait_left[q] > 0 -> wait_left[q]-- :: else -> skip fi;
        if :: fl_to[q] != NONE && fl_left[q] > 0 -> fl_left[q]-- :: else -> skip fi;
        if :: fl_to[q] != NONE && fl_left[q] == 0 -> fl_to[q] = NONE :: else -> skip fi;
        ran[q] = false
    }
    if :: succ_hold > 0 -> succ_hold-- :: else -> skip fi;
    if
    :: key != NONE && key_expired -> keyDelete()          /* the sweep */
    :: key != NONE && !key_expired ->
        key_ttl--;
        if :: key_ttl == 0 -> key_expired = true :: else -> skip fi
    :: else -> skip
    fi
}

#define keptUp(k) (!nk_up[k] || nk_paused[k] || ran[k])
/* A replica that runs keeps up with its master's stream between two ticks;
 * one that lags is a paused one. (Without this the model loses a write:
 * a replica named, acknowledging, then stopped for longer than the
 * window, while the only other one stays valid but behind until the
 * master dies. SKV assumes a valid replica is never behind that long.) */
inline catchUp() {
    for (j : 0 .. NODES - 1) {
        do
        :: up[j] && !paused[j] && role[j] == R_REPLICA && master_of[j] != NONE &&
           up[master_of[j]] && !paused[master_of[j]] && role[master_of[j]] == R_MASTER &&
           off[j] < off[master_of[j]] ->
            LOG(j, off[j]) = LOG(master_of[j], off[j]);
            off[j]++
        :: else -> break
        od
    }
}

proctype Clock() {
    do
    :: atomic { keptUp(0) && keptUp(1) -> catchUp(); tick() }
    :: atomic { key_expired -> keyDelete() }            /* etcd's sweep, early */
    od
}

/* ------------------------------------------------------------ Clients */

proctype Clients() {
    do
    :: atomic { select(m : 0 .. NODES - 1); clientWrite(m) }
    :: atomic { select(m : 0 .. NODES - 1); select(j : 0 .. NODES - 1); select(p : 0 .. MAXW - 1);
                waitAcked(m, j, p) }
    :: atomic { select(j : 0 .. NODES - 1); replicate(j) }
    :: atomic {
        /* a grant held up in the network arrives, late (and so out of order) */
        select(i : 0 .. NK - 1);
        if
        :: fl_to[i] != NONE ->
            m = fl_to[i]; fl_to[i] = NONE;
            nickvLeaseGrant(m, fl_inst[i], fl_inst[i], fl_left[i], fl_off[i])
        :: else -> skip
        fi }
    od
}

/* ------------------------------------------------------------ Faults */

/* A redis-server crashes; restarted, it is empty: a master comes back
 * unvetted, a replica resyncs from nothing. */
inline crash(n) {
    up[n] = false; lease_left[n] = 0; gconn[n] = false
}
inline restart(n) {
    up[n] = true; paused[n] = false; off[n] = 0; ninc[n] = 1 - ninc[n];
    for (p : 0 .. MAXW - 1) { LOG(n, p) = 0 }
    grantor_inst[n] = 0; grantor_key[n] = 0; nkheld[n] = 0;
    if :: role[n] == R_MASTER -> role[n] = R_ORPHAN :: else -> skip fi
}

/* Nic-KV k crashes (its member key goes with its etcd session: modelled
 * at once); restarted, it has a new instance id and key, no role, and
 * waits a lease-time before it promotes anybody (stateStart). */
inline nkCrash(k) {
    nk_up[k] = false; member[k] = 0;
    if
    :: kmaster[k] != NONE && grantor_inst[kmaster[k]] == INST(k) -> gconn[kmaster[k]] = false
    :: else -> skip
    fi
}
inline nkRestart(k) {
    nk_up[k] = true; nk_paused[k] = false; inc[k] = 1 - inc[k];
    co[k] = CO_STANDBY; fo[k] = WATCHING; kmaster[k] = rec_master; kepoch[k] = rec_epoch;
    bound_left[k] = 0; held_left[k] = 0; wait_left[k] = BOUND; mview[k] = 0; stable[k] = false;
    rec_due[k] = false
}

proctype Faults() {
    do
    :: atomic { faults < FAULTS -> select(i : 0 .. NODES - 1);
        if :: up[i] && nfaults + 2 <= NODE_FAULTS -> crash(i); nfaults = nfaults + 2; faults++ :: else -> skip fi }
    :: atomic { select(i : 0 .. NODES - 1); if :: !up[i] -> restart(i) :: else -> skip fi }
    :: atomic { faults < FAULTS -> select(i : 0 .. NODES - 1);
        /* A master just promoted is not paused before its first grant
         * unless PAUSE_NEW_MASTER: with it, the model loses a write (the
         * open finding in DESIGN.md, "The model"). */
#ifdef PAUSE_NEW_MASTER
        if :: up[i] && !paused[i] && nfaults < NODE_FAULTS -> paused[i] = true; nfaults++; faults++ :: else -> skip fi }
#else
        if :: up[i] && !paused[i] && !fresh[i] && nfaults < NODE_FAULTS -> paused[i] = true; nfaults++; faults++
        :: else -> skip fi }
#endif
    :: atomic { select(i : 0 .. NODES - 1); if :: paused[i] -> paused[i] = false :: else -> skip fi }
    :: atomic { faults < FAULTS -> select(i : 0 .. NK - 1);
        if :: nk_up[i] -> nkCrash(i); faults++ :: else -> skip fi }
    :: atomic { select(i : 0 .. NK - 1); if :: !nk_up[i] -> nkRestart(i) :: else -> skip fi }
    :: atomic { faults < FAULTS -> select(i : 0 .. NK - 1);
        if :: nk_up[i] && !nk_paused[i] -> nk_paused[i] = true; faults++ :: else -> skip fi }
    :: atomic { select(i : 0 .. NK - 1); if :: nk_paused[i] -> nk_paused[i] = false :: else -> skip fi }
    :: atomic { faults < FAULTS -> select(i : 0 .. NK - 1);
        if :: !cut[i] -> cut[i] = true; faults++ :: else -> skip fi }
    :: atomic { select(i : 0 .. NK - 1); if :: cut[i] -> cut[i] = false :: else -> skip fi }
    :: atomic { faults < FAULTS -> select(i : 0 .. NK - 1);
        if :: !delay_next[i] -> delay_next[i] = true; faults++ :: else -> skip fi }
    :: atomic { faults < FAULTS -> select(i : 0 .. NK - 1);
        if :: fl_to[i] != NONE -> fl_to[i] = NONE; faults++ :: else -> skip fi }     /* a grant lost */
    :: atomic { faults < FAULTS -> select(i : 0 .. NODES - 1);
        if :: gconn[i] -> gconn[i] = false; faults++ :: else -> skip fi }           /* a connection lost */
    :: atomic { faults < FAULTS && key_expired ->
        /* an etcd leader change: it revives the lease not yet swept */
        key_expired = false; key_ttl = TTL; faults++ }
    :: atomic { faults < FAULTS -> select(i : 0 .. NODES - 1);
        /* A client that read Nic-KV's instance id (INFO's run_id) but
         * lacks its key grants while the grantor's connection is down and
         * a lease runs. (Once no lease runs, a holder of the nickv-user's
         * password is taken for a Nic-KV: an assumption, DESIGN.md.) */
        if
        :: up[i] && !gconn[i] && grantor_inst[i] != 0 && lease_left[i] > 0 ->
            nickvLeaseGrant(i, grantor_inst[i], IMPOSTOR, LEASE, 0);
            faults++
        :: else -> skip
        fi }
    :: atomic {
        /* The faults stop: what is down comes back. */
        faults_over = true;
        for (i : 0 .. NODES - 1) {
            if :: !up[i] -> restart(i) :: else -> skip fi;
            paused[i] = false
        }
        for (i : 0 .. NK - 1) {
            if :: !nk_up[i] -> nkRestart(i) :: else -> skip fi;
            nk_paused[i] = false; cut[i] = false; delay_next[i] = false
        }
      }
      break
    od
}

/* ------------------------------------------------------------ Liveness */

#define serves(k) (key == k && co[k] == CO_LEADER && kmaster[k] != NONE && \
                   up[kmaster[k]] && role[kmaster[k]] == R_MASTER && lease_left[kmaster[k]] > 0)
#define named (serves(0) || serves(1))

ltl live { [] (faults_over -> <> named) }

init {
    atomic {
        for (i : 0 .. NODES - 1) {
            up[i] = true;
            master_of[i] = 0;
            role[i] = R_REPLICA
        }
        role[0] = R_MASTER; master_of[0] = NONE;
        rec_master = 0; rec_epoch = 1;
        for (i : 0 .. MAXEPOCH + 1) { ep_master[i] = NONE }
        ep_master[1] = 0;
        for (i : 0 .. NK - 1) {
            nk_up[i] = true; kmaster[i] = 0; kepoch[i] = 1;
            fl_to[i] = NONE; member[i] = INST(i)
        }
        run Clock();
        run NicKV(0);
        run NicKV(1);
        run Clients();
        run Faults()
    }
}
