#!/usr/bin/env python3
"""failover-bench.py -- what a client sees through Nic-KV's failovers.

Run by utils/failover-bench.sh (which sets up redis-py and gnuplot). Starts
a master, three replicas (nickv-lease yes) and Nic-KV (failover yes,
min-slaves 1) on loopback, and drives one client that appends to a list,
each append followed by WAIT 1 (pipelined: one round trip), through the
master Nic-KV names (SENTINEL get-master-addr-by-name, asked again after
every connection error, every 5 ms). It counts acknowledged appends in
100 ms buckets:

  replica  a replica killed (-9) at 2 s, restarted at 4 s, run ends at 7 s:
           the master's throughput during the crash against before it
  master   the master killed (-9) at 1 s; the window from the kill to the
           first append the new master acknowledges; --runs times (the old
           master is restarted, Nic-KV makes it a replica, the next run
           kills the new master)
  failback failback yes set at 1 s: the configured master, a replica by
           then, takes over by a planned handover; the longest time
           without an acknowledged append

Every run checks that every acknowledged append is on the final master.
Prints a table, writes the buckets (CSV) and, with gnuplot, a PNG.

With --coordinator (or --scenarios naming them), whole-server scenarios,
each beside Sentinel on a shard of its own:

  server   a server lost: its node and its coordinating process (the
           Nic-KV on its DPU, or the Sentinel beside it) killed (-9)
           together, the master's server each time; the window from the
           kill to the first append a new master acknowledges; the node
           comes back empty and its process with it, the next run waits
           until the topology is whole again
  nickv    the master's server's coordinating process alone killed (-9):
           the longest time without an acknowledged append

--scenarios kills (the single mode beside the coordinated one: master's
node kills on a seeded schedule) and mixed: --faults-per-run faults of
every kind below, in an order and with gaps (1-4 s) drawn from --seed, the
same for Nic-KV coordinated (leader-ttl 2 s, lease-time 250 ms) and
Sentinel (down-after 1000 ms); after each, appends until the topology is
whole again. Per kind: the longest time without an acknowledged append,
from the last one before the fault until whole again (median, max):

  node             the master's node killed (-9), restarted (empty) once
                   a new master acknowledged an append
  server           the master's server lost: its node and its
                   coordinating process killed together, both restarted
                   likewise (whole, a coordinated shard's leader is on
                   the master's server: the leader goes with it)
  server-elsewhere the master's node killed; as soon as the new master
                   acknowledged an append, its whole server killed,
                   before leadership could follow it (the window counts
                   from the second kill)
  pause            the master's node and its coordinating process
                   stopped (SIGSTOP) for 2 s
  coord-leading    the coordinating process on the master's server (the
                   leader, for Nic-KV) killed, restarted 3 s later
  coord-standby    the coordinating process on another server killed,
                   restarted 3 s later
  etcd             an etcd member killed, restarted 3 s later (Nic-KV
                   only: Sentinel has none; skipped there)

Nic-KV coordinated: three etcd members, three nodes (nickv-lease yes) and
a Nic-KV per node (--local-node, --coordinator, failover yes, min-slaves
1). Sentinel: three nodes without the lease and three redis-sentinel
processes (quorum 2), down-after-milliseconds 1000, then 200. The client
asks the Nic-KVs, or the Sentinels, in turn (SENTINEL
get-master-addr-by-name), as a Sentinel client does; an append counts as
acknowledged when WAIT 1 answers >= 1 within 1 s, for both. Appends
Sentinel loses are counted and reported; Nic-KV losing one is a failure.
The table goes to stdout and to server.csv.

With --detect (or --scenarios naming them), how fast a fault is detected
and whether a busy master is mistaken for a dead one (issue 21):

  detect   each fault of --faults on the master, --runs times, for the
           single Nic-KV above (its defaults, nodes with
           enable-debug-command yes) and for Sentinel (three nodes, three
           redis-sentinel processes, quorum 2) at each
           --sentinel-down-after:
             kill       kill -9; the node is restarted once a new master
                        acknowledges an append
             stop       SIGSTOP, SIGCONT 2 s later
             sleep-0.3, sleep-1, sleep-3
                        DEBUG SLEEP: the main thread busy, the process
                        alive; no failover is the right answer for Nic-KV
                        (busy-limit 5 s)
           Per fault and system: the failovers made (Nic-KV: INFO failover
           failovers; Sentinel: +switch-master, the most one Sentinel
           published), the time from the fault to the first append
           acknowledged after it (by the new master when there was a
           failover), the longest time without an acknowledged append
           until the system is whole again, median and max of each, and
           the error replies the client got (NOREPLICAS, READONLY,
           MASTERDOWN, other; its PING on connecting included). Table
           to stdout and detect.csv.
  lease    the single Nic-KV at each --lease-times (CONFIG SET
           lease-time): --steady seconds of appends with no fault, then as
           many with --load-clients redis-benchmark clients writing SETs
           to the master beside them, then --runs kill -9 of the master.
           A healthy master should keep its lease: the master's
           nickv_lease_refused_commands over each steady period, the
           client's errors, redis-benchmark quitting on an error reply
           (it does at the first; it is started again), and failovers
           with no fault, beside the kill -9 window. Table to stdout and
           lease.csv.

The client here gives up a read after 250 ms (2 s elsewhere) and asks
again, and an append counts as acknowledged when WAIT 1 answers >= 1
within 200 ms: a client stuck reading from a stopped master would
otherwise time the window itself. --wait-cmd names a shell command run
before each run and steady period and waited for, e.g. to stay out of
the way of a test suite on a shared machine (between runs: a run is never
paused). The acknowledged-append check holds here too: every append
acknowledged during a fault's runs (a lease-time's, for lease) must be on
the final master; a loss is reported for Sentinel and is a failure for
Nic-KV.
"""
import argparse
import os
import random
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time

import redis

TOP = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# The binaries: SKV_BIN (or --bin) names a build elsewhere, e.g. the main
# tree's when this runs from a git worktree that was never built.
BIN = os.environ.get("SKV_BIN") or os.path.join(TOP, "build", "bin")
CLASSIC = ["replica", "master", "failback"]
SERVER = ["server", "nickv"]
KILLS = ["kills", "mixed"]
MIXED_KINDS = ["node", "server", "server-elsewhere", "pause", "coord-leading", "coord-standby", "etcd"]
MIXED_PAUSE_S = 2.0     # how long a paused server stays stopped
MIXED_RESTART_S = 3.0   # a killed coordinating process or etcd member restarts after this
DETECT = ["detect", "lease"]
# The error replies a Writer counts (Writer._count).
ERRORS = ("NOREPLICAS", "READONLY", "MASTERDOWN", "other")
# The password of Nic-KV's own ACL user, which every node defines and only
# Nic-KV uses (the replicas replicate as the default user).
NICKV_PASS = "failover-bench-nickv"


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def spawn(argv, port, what):
    """Start argv and wait until it listens on port. The ports may lie in
    the kernel's ephemeral range (net.ipv4.ip_local_port_range), where any
    client's connection can hold one for a while: the bind fails, the
    process exits, and it is started again a moment later."""
    for _ in range(40):
        p = subprocess.Popen(argv)
        deadline = time.monotonic() + 10
        while p.poll() is None:
            if Topology._answers(port):
                return p
            if time.monotonic() > deadline:
                p.kill()
                p.wait()
                sys.exit(f"failover-bench: {what} does not listen on {port}")
            time.sleep(0.02)
        time.sleep(0.25)
    sys.exit(f"failover-bench: {what} could not listen on {port} in 40 tries: see its log")


# Ports handed out so far, for free_ports.
TAKEN = set()


def free_ports(n, start, limit):
    """n ports from start up to limit (excluded) that nothing holds now and
    that were not handed out before: the range may overlap the ephemeral
    one, where other clients' connections sit on ports for minutes."""
    out = []
    for p in range(start, limit):
        if p in TAKEN:
            continue
        s = socket.socket()
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", p))
            s.listen(1)
        except OSError:
            continue
        finally:
            s.close()
        TAKEN.add(p)
        out.append(p)
        if len(out) == n:
            return out
    sys.exit(f"failover-bench: not {n} free ports in {start}..{limit - 1}")


class Topology:
    """A master, three replicas and Nic-KV, each in a directory of its own."""

    def __init__(self, base, out, nkport=None, debug=False):
        # base.. base + 3 unless something holds one of them.
        self.ports = free_ports(4, base, base + 1000)
        self.nkport = nkport or base + 1001
        self.out = out
        # DEBUG SLEEP makes a busy master (the detect scenarios).
        self.debug = debug
        self.procs = {}
        self.nk = None
        shutil.rmtree(out, ignore_errors=True)
        os.makedirs(out)
        for p in self.ports:
            if self._answers(p) or self._answers(self.nkport):
                sys.exit(f"failover-bench: port {p} or {self.nkport} is in use")
        try:
            for p in self.ports:
                self.start(p, replicaof=None if p == self.ports[0] else self.ports[0])
            self.start_nickv()
        except BaseException:
            self.stop()
            raise

    @staticmethod
    def _answers(port):
        try:
            socket.create_connection(("127.0.0.1", port), 0.2).close()
            return True
        except OSError:
            return False

    def start(self, port, replicaof=None):
        d = os.path.join(self.out, str(port))
        os.makedirs(d, exist_ok=True)
        conf = os.path.join(d, "redis.conf")
        if not os.path.exists(conf):
            with open(conf, "w") as f:
                # nickv-lease needs a user of Nic-KV's own; every node has it
                # and follows its master with it (NIC-KV.md, "Security model").
                f.write(f'port {port}\nbind 127.0.0.1\nsave ""\nappendonly no\nnickv-lease yes\n'
                        f'user nickv on >{NICKV_PASS} ~* &* +@all\nnickv-user nickv\n'
                        f'dir "{d}"\nlogfile "{d}/redis.log"\n')
                if self.debug:
                    f.write("enable-debug-command yes\n")
                if replicaof:
                    f.write(f"replicaof 127.0.0.1 {replicaof}\n")
        self.procs[port] = spawn([os.path.join(BIN, "redis-server"), conf], port, "redis-server")

    def start_nickv(self):
        # failover yes promotes and repoints only members: every node is one
        # (NIC-KV.md, "Members").
        members = [a for p in self.ports for a in ("--node", f"127.0.0.1:{p}")]
        self.nk = spawn([os.path.join(BIN, "nic-kv"), "--port", str(self.nkport),
                         "--master-port", str(self.ports[0]), "--failover", "yes",
                         "--min-slaves", "1", "--masteruser", "nickv",
                         "--masterauth", NICKV_PASS, "--state-file",
                         os.path.join(self.out, "nic-kv.state"), "--logfile",
                         os.path.join(self.out, "nic-kv.log")] + members, self.nkport, "nic-kv")

    def kill(self, port):
        self.procs[port].send_signal(signal.SIGKILL)
        self.procs[port].wait()

    def nickv_info(self):
        r = redis.Redis(port=self.nkport, socket_timeout=2)
        try:
            return r.info("all")
        finally:
            r.close()

    def master(self):
        r = redis.Redis(port=self.nkport, socket_timeout=1)
        try:
            host, port = r.execute_command("SENTINEL", "GET-MASTER-ADDR-BY-NAME", "mymaster")
            return host.decode(), int(port)
        finally:
            r.close()

    def whole(self):
        """Nic-KV sees the master (with its lease) and three replicas."""
        try:
            i = self.nickv_info()
        except redis.RedisError:
            return False
        return (i.get("valid_replicas") == 3 and i.get("repoint_pending") == 0 and
                i.get("failover_state") == "watching" and i.get("master_lease") == "on" and
                i.get("master_link_status") == "up")

    def wait_whole(self, timeout=30):
        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.whole():
                return
            time.sleep(0.1)
        sys.exit("failover-bench: the topology is not whole: see " + self.out)

    def stop(self):
        for p in list(self.procs.values()) + [self.nk]:
            if p and p.poll() is None:
                p.kill()
                p.wait()


class Writer:
    """Appends with WAIT 1 through the master Nic-KV names. timeout: how
    long a read may take before the client gives up on the connection and
    asks again; wait_ms: WAIT's timeout, within which an append must be
    acknowledged to count."""

    def __init__(self, topo, key, timeout=2.0, wait_ms=1000):
        self.topo, self.key = topo, key
        self.timeout, self.wait_ms = timeout, wait_ms
        self.r = None
        self.addr = None
        self.next = 0
        self.acked = []
        # Error replies seen, by code: what a refused write costs a client
        # of each system (READONLY, NOREPLICAS, MASTERDOWN, other).
        self.errors = dict.fromkeys(ERRORS, 0)
        self.traced = False

    def _trace(self, what):
        """SKV_BENCH_TRACE=1: each step of the client on stderr, with the
        time, to see where a failover's window goes."""
        if TRACE:
            self.traced = True
            sys.stderr.write(f"{time.strftime('%H:%M:%S')}.{int(time.time() * 1000) % 1000:03d} "
                             f"writer {self.key}: {what}\n")

    def _count(self, e):
        """Count e if it is an error reply (not a timeout or a lost
        connection). redis-py strips READONLY into its own class, and
        prefixes a pipeline's error with the command, so look inside."""
        self._trace(f"{type(e).__name__}: {str(e)[:80]}")
        if not isinstance(e, redis.ResponseError):
            return
        if isinstance(e, redis.ReadOnlyError):
            kind = "READONLY"
        else:
            kind = next((k for k in ("NOREPLICAS", "MASTERDOWN") if k in str(e)), "other")
        self.errors[kind] += 1

    def _connect(self):
        deadline = time.monotonic() + 60
        while True:
            if time.monotonic() > deadline:
                sys.exit("failover-bench: no master to connect to for 60 s")
            try:
                self.addr = self.topo.master()
                self.r = redis.Redis(host=self.addr[0], port=self.addr[1],
                                     socket_timeout=self.timeout)
                self.r.ping()
                self._trace(f"connected to {self.addr[0]}:{self.addr[1]}")
                return
            except (redis.RedisError, OSError, TypeError, ValueError) as e:
                # TypeError, ValueError: no master named (a nil answer).
                # (A master without a lease answers PING: its refusals of
                # the writes, below, send the writer back to Nic-KV.)
                self._count(e)
                self.r = None
                time.sleep(0.005)

    def append(self):
        """One append: the address it was acknowledged by, or None."""
        if self.r is None:
            self._connect()
        v = self.next
        self.next += 1
        try:
            p = self.r.pipeline(transaction=False)
            p.rpush(self.key, v)
            p.execute_command("WAIT", 1, self.wait_ms)
            _, w = p.execute()
            if w >= 1:
                self.acked.append(v)
                if self.traced:
                    self._trace(f"append {v} acknowledged by {self.addr[1]}")
                    self.traced = False
                return self.addr
            self._trace(f"append {v}: WAIT 1 answered {w}")
        except redis.ConnectionError as e:
            self._trace(f"append {v}: {type(e).__name__}: {str(e)[:80]}")
            self.r = None
        except redis.RedisError as e:
            # Refused (no lease yet, -NOREPLICAS): ask Nic-KV again.
            self._count(e)
            self.r = None
            time.sleep(0.005)
        return None

    def check(self):
        """Every acknowledged append on the master now, in order: lost count."""
        host, port = self.topo.master()
        r = redis.Redis(host=host, port=port)
        got = [int(x) for x in r.lrange(self.key, 0, -1)]
        r.close()
        pos, lost = 0, 0
        index = {}
        for i, v in enumerate(got):
            index.setdefault(v, []).append(i)
        for v in self.acked:
            later = [i for i in index.get(v, []) if i >= pos]
            if not later:
                lost += 1
            else:
                pos = later[0] + 1
        return lost


def run(topo, writer, seconds, events):
    """Append for seconds; events: [(at, fn)]. Buckets of 100 ms, and the
    (time, address) of each acknowledged append."""
    buckets = [0] * int(seconds * 10 + 1)
    acks = []
    t0 = time.monotonic()
    events = sorted(events)
    while True:
        now = time.monotonic() - t0
        if now >= seconds:
            break
        while events and events[0][0] <= now:
            events.pop(0)[1]()
        addr = writer.append()
        if addr:
            t = time.monotonic() - t0
            buckets[min(int(t * 10), len(buckets) - 1)] += 1
            acks.append((t, addr))
    return buckets, acks, t0


def classic(args, wanted):
    """The single Nic-KV scenarios (replica, master, failback) that ran
    before the whole-server ones: the same table, buckets and plot, the
    rows of what was asked for. Returns the acknowledged appends lost."""
    rep_buckets = master_buckets = back_buckets = None
    topo = Topology(args.port, args.out, args.nickv_port)
    try:
        topo.wait_whole()
        writer = Writer(topo, "bench")
        lost_total = 0

        # (a) a replica crash and its return.
        if "replica" in wanted:
            m = topo.master()[1]
            victim = [p for p in topo.ports if p != m][0]
            log(f"replica crash: killing {victim} at 2 s, back at 4 s")
            rep_buckets, _, _ = run(topo, writer, 7.0, [(2.0, lambda: topo.kill(victim)),
                                                     (4.0, lambda: topo.start(victim))])
            lost_total += writer.check()
            topo.wait_whole()
            before = statistics.mean(rep_buckets[5:20]) * 10
            during = statistics.mean(rep_buckets[21:40]) * 10

        # (b) master crashes.
        windows = []
        for i in range(args.runs if "master" in wanted else 0):
            host, m = topo.master()
            state = {}

            def crash(m=m):
                state["t"] = time.monotonic()
                topo.kill(m)

            buckets, acks, t0 = run(topo, writer, 3.0, [(1.0, crash)])
            # The window: from the kill to the first append acknowledged by
            # another node (acks' times are relative to t0).
            kill = state["t"] - t0
            first = next((t for t, a in acks if t >= kill and a[1] != m), None)
            if first is None:
                sys.exit(f"failover-bench: run {i}: no write on a new master within 2 s")
            windows.append((first - kill) * 1000)
            if master_buckets is None:
                master_buckets = buckets
            lost_total += writer.check()
            topo.start(m)
            topo.wait_whole()
            log(f"master crash {i + 1}/{args.runs}: {m} killed, writes on "
                f"{topo.master()[1]} after {windows[-1]:.0f} ms")

        # (c) failback: the configured master takes over again.
        if "failback" in wanted:
            if topo.master()[1] == topo.ports[0]:
                nk = redis.Redis(port=topo.nkport)
                nk.execute_command("FAILOVER", "TO", "127.0.0.1", topo.ports[1])
                nk.close()
                time.sleep(1)
                topo.wait_whole()
            time.sleep(5.5)     # the configured master, valid 5 s as a replica

            def failback():
                nk = redis.Redis(port=topo.nkport)
                nk.config_set("failback", "yes")
                nk.close()

            back_buckets, acks, _ = run(topo, writer, 4.0, [(1.0, failback)])
            lost_total += writer.check()
            times = [t for t, a in acks if t >= 1.0]
            back_gap = max((b - a for a, b in zip(times, times[1:])), default=3.0) * 1000
            back_on = [a for t, a in acks if t >= 1.0]
            if not back_on or back_on[-1][1] != topo.ports[0]:
                sys.exit("failover-bench: no failback to the configured master within 3 s")
            log(f"failback: writes on {topo.ports[0]} again; longest pause {back_gap:.0f} ms")
        info = topo.nickv_info()
    finally:
        topo.stop()

    series = [rep_buckets or [], master_buckets or [], back_buckets or []]
    with open(os.path.join(args.out, "throughput.csv"), "w") as f:
        f.write("t_s,replica_crash_ops_per_s,master_crash_ops_per_s,failback_ops_per_s\n")
        for i in range(max(len(b) for b in series)):
            a, b, c = (x[i] * 10 if i < len(x) else "" for x in series)
            f.write(f"{i / 10:.1f},{a},{b},{c}\n")

    print()
    print("Appends with WAIT 1 through Nic-KV (one client, loopback TCP), default settings:")
    d = nickv_defaults()
    print(f"probe-interval {d['probe-interval']} ms, waiting-time {d['waiting-time']} ms, "
          f"lease-time {d['lease-time']} ms, min-slaves 1.")
    print()
    print("| what | value |")
    print("|---|---|")
    if rep_buckets:
        print(f"| replica crash: acknowledged appends/s before (0.5-2 s) | {before:.0f} |")
        print(f"| ... during the crash (2.1-4 s) | {during:.0f} ({during / before * 100:.0f} %) |")
    if windows:
        print(f"| master crash (-9) to the first write the new master acknowledges, median of {len(windows)} | "
              f"{statistics.median(windows):.0f} ms |")
        print(f"| ... min / max | {min(windows):.0f} / {max(windows):.0f} ms |")
    if back_buckets:
        print(f"| failback (planned handover): longest pause between acknowledged appends | {back_gap:.0f} ms |")
    print(f"| failovers made{' (the failback included)' if back_buckets else ''} | {info.get('failovers')} |")
    print(f"| acknowledged appends lost (all runs) | {lost_total} |")
    print()
    print(f"buckets: {args.out}/throughput.csv")
    if shutil.which("gnuplot"):
        png = os.path.join(args.out, "throughput.png")
        lines = [f"'{args.out}/throughput.csv' every ::1 using 1:{col} with steps title '{title}'"
                 for col, title, b in ((2, "replica killed at 2 s, back at 4 s", rep_buckets),
                                       (3, "master killed at 1 s (failover)", master_buckets),
                                       (4, "failback asked for at 1 s", back_buckets)) if b]
        script = f"""
set terminal pngcairo size 900,420
set output '{png}'
set datafile separator ','
set key top right
set xlabel 'seconds'
set ylabel 'acknowledged appends/s (100 ms buckets)'
set yrange [0:*]
plot {", ".join(lines)}
"""
        subprocess.run(["gnuplot"], input=script.encode(), check=True)
        print(f"plot: {png}")
    return lost_total


# ------------------------------------------------ Whole-server scenarios ---
#
# Ports: from --port + 100 to --port + 999, the first free ones, in the
# order the shards are started (the coordinated shard: nodes, Nic-KVs, etcd
# clients, etcd peers; then each Sentinel shard: nodes, Sentinels). Node i
# and coordinating process i share "server i".


def pairs(reply):
    """A flat [field, value, ...] reply as a dict of str."""
    it = iter(x.decode() if isinstance(x, bytes) else x for x in reply)
    return dict(zip(it, it))


class PortRange:
    """Free ports from a range, in order (see free_ports)."""

    def __init__(self, start, limit):
        self.start, self.limit = start, limit

    def take(self, n):
        return free_ports(n, self.start, self.limit)


class Etcd:
    """Three etcd members on loopback, each with its data dir under out."""

    def __init__(self, ports, out):
        self.clients = ports.take(3)
        peers = ports.take(3)
        self.procs, self.argvs, self.logs = [], [], []
        initial = ",".join(f"m{i}=http://127.0.0.1:{p}" for i, p in enumerate(peers))
        for i in range(3):
            url = f"http://127.0.0.1:{self.clients[i]}"
            peer = f"http://127.0.0.1:{peers[i]}"
            self.argvs.append(
                ["etcd", "--name", f"m{i}", "--data-dir", os.path.join(out, f"etcd{i}.data"),
                 "--listen-client-urls", url, "--advertise-client-urls", url,
                 "--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
                 "--initial-cluster", initial, "--initial-cluster-state", "new",
                 "--initial-cluster-token", "failover-bench",
                 "--heartbeat-interval", "50", "--election-timeout", "500"])
            self.logs.append(open(os.path.join(out, f"etcd{i}.log"), "a"))
            self.procs.append(None)
        endpoints = ",".join(f"127.0.0.1:{p}" for p in self.clients)
        deadline = time.monotonic() + 30
        while True:
            # A member whose port was taken (see spawn) exits: again.
            for i, p in enumerate(self.procs):
                if p is None or p.poll() is not None:
                    self.procs[i] = subprocess.Popen(self.argvs[i], stdout=self.logs[i],
                                                     stderr=subprocess.STDOUT)
            if subprocess.run(["etcdctl", f"--endpoints={endpoints}", "--command-timeout=2s",
                               "endpoint", "health"], capture_output=True).returncode == 0:
                break
            if time.monotonic() > deadline:
                self.stop()
                sys.exit(f"failover-bench: etcd not healthy in 30 s: see {out}/etcd*.log")
            time.sleep(0.2)
        self.urls = "etcd://" + endpoints

    def kill_member(self, i):
        self.procs[i].kill()
        self.procs[i].wait()

    def start_member(self, i):
        self.procs[i] = subprocess.Popen(self.argvs[i], stdout=self.logs[i], stderr=subprocess.STDOUT)

    def stop(self):
        for p in self.procs:
            if p and p.poll() is None:
                p.kill()
                p.wait()
        for f in self.logs:
            f.close()


class Shard:
    """Three nodes on three "servers", and on each server the process that
    coordinates failovers (a Nic-KV or a Sentinel). The client asks those
    processes in turn where the master is."""

    system = None
    lease = False
    debug = False       # enable-debug-command yes, for DEBUG SLEEP

    def __init__(self, nodes, coords, out):
        self.nodes, self.coords, self.out = nodes, coords, out
        self.procs, self.cprocs = {}, {}
        shutil.rmtree(out, ignore_errors=True)
        os.makedirs(out)
        try:
            for i, p in enumerate(nodes):
                self.start_node(i, replicaof=None if i == 0 else nodes[0])
        except BaseException:
            self.stop()
            raise

    def start_node(self, i, replicaof=None):
        port = self.nodes[i]
        d = os.path.join(self.out, str(port))
        os.makedirs(d, exist_ok=True)
        conf = os.path.join(d, "redis.conf")
        if not os.path.exists(conf):
            with open(conf, "w") as f:
                f.write(f'port {port}\nbind 127.0.0.1\nsave ""\nappendonly no\n'
                        f'dir "{d}"\nlogfile "{d}/redis.log"\n')
                if self.lease:
                    f.write(f"nickv-lease yes\nuser nickv on >{NICKV_PASS} ~* &* +@all\n"
                            "nickv-user nickv\n")
                if self.debug:
                    f.write("enable-debug-command yes\n")
                if replicaof:
                    f.write(f"replicaof 127.0.0.1 {replicaof}\n")
        # No persistence: a restarted node comes back empty.
        self.procs[i] = spawn([os.path.join(BIN, "redis-server"), conf], port, "redis-server")

    def master(self):
        """What the first coordinating process that answers names."""
        for p in self.coords:
            try:
                r = redis.Redis(port=p, socket_timeout=0.5, socket_connect_timeout=0.5)
                try:
                    host, port = r.execute_command("SENTINEL", "GET-MASTER-ADDR-BY-NAME", "mymaster")
                    return host.decode(), int(port)
                finally:
                    r.close()
            except (redis.RedisError, OSError, TypeError, ValueError):
                continue
        raise redis.ConnectionError("no Nic-KV or Sentinel names a master")

    def master_index(self):
        return self.nodes.index(self.master()[1])

    def kill_node(self, i):
        self.procs[i].send_signal(signal.SIGKILL)
        self.procs[i].wait()

    def kill_coord(self, i):
        self.cprocs[i].send_signal(signal.SIGKILL)
        self.cprocs[i].wait()

    def info(self, port, section="all"):
        r = redis.Redis(port=port, socket_timeout=1)
        try:
            return r.info(section)
        finally:
            r.close()

    def stop(self):
        for p in list(self.procs.values()) + list(self.cprocs.values()):
            if p.poll() is None:
                p.kill()
                p.wait()


def shard_nickv_argv(port, master_port):
    """A shard's nic-kv, as every shard starts it: failover yes,
    min-slaves 1, Nic-KV's own user."""
    return [os.path.join(BIN, "nic-kv"), "--port", str(port), "--master-host", "127.0.0.1",
            "--master-port", str(master_port), "--failover", "yes", "--min-slaves", "1",
            "--masteruser", "nickv", "--masterauth", NICKV_PASS]


class CoordShard(Shard):
    """Nic-KV coordinated through etcd: a Nic-KV per server."""

    system = "Nic-KV coordinated"
    lease = True

    def __init__(self, ports, out, ttl=2, lease_ms=500):
        self.etcd = None
        self.ttl, self.lease_ms = ttl, lease_ms
        self.system = f"Nic-KV coordinated, leader-ttl {ttl} s, lease-time {lease_ms} ms"
        super().__init__(ports.take(3), ports.take(3), out)
        try:
            self.etcd = Etcd(ports, out)
            for i in range(3):
                self.start_coord(i)
        except BaseException:
            self.stop()
            raise

    def start_coord(self, i):
        self.cprocs[i] = spawn(
            shard_nickv_argv(self.coords[i], self.nodes[0]) + ["--coordinator", self.etcd.urls,
             # The bench's etcd runs without authentication, on loopback:
             # a deployment sets coordinator-user (NIC-KV.md, "Many Nic-KVs").
             "--coordinator-insecure", "yes",
             "--leader-ttl", str(self.ttl), "--lease-time", str(self.lease_ms),
             "--local-node", f"127.0.0.1:{self.nodes[i]}",
             "--state-file", os.path.join(self.out, f"nic-kv{i}.state"),
             "--logfile", os.path.join(self.out, f"nic-kv{i}.log")]
            # Without etcd authentication the members come from node lines.
            + [a for p in self.nodes for a in ("--node", f"127.0.0.1:{p}")], self.coords[i], "nic-kv")

    def leaders(self):
        out = []
        for i, p in enumerate(self.coords):
            try:
                if self.info(p, "coordinator").get("coordinator_role") == "leader":
                    out.append(i)
            except redis.RedisError:
                pass
        return out

    def whole(self):
        """One leader, on the master's server, granting it and streaming
        from it, two valid replicas, every Nic-KV naming the same master."""
        try:
            leaders = self.leaders()
            if len(leaders) != 1:
                return False
            i = self.info(self.coords[leaders[0]])
            want = {"valid_replicas": 2, "repoint_pending": 0, "failover_state": "watching",
                    "master_lease": "on", "master_link_status": "up"}
            if any(i.get(k) != v for k, v in want.items()):
                return False
            names = set()
            for p in self.coords:
                r = redis.Redis(port=p, socket_timeout=1)
                try:
                    names.add(tuple(r.execute_command("SENTINEL", "GET-MASTER-ADDR-BY-NAME", "mymaster")))
                finally:
                    r.close()
            if len(names) != 1:
                return False
            return int(names.pop()[1]) == self.nodes[leaders[0]]
        except (redis.RedisError, OSError, TypeError, ValueError):
            return False

    def stop(self):
        super().stop()
        if self.etcd:
            self.etcd.stop()


class SingleShard(Shard):
    """The same three nodes with one Nic-KV and no coordinator: the single
    mode, for the kills scenario's side-by-side rate."""

    lease = True

    def __init__(self, ports, out, lease_ms=250):
        self.lease_ms = lease_ms
        self.system = f"Nic-KV single, lease-time {lease_ms} ms"
        super().__init__(ports.take(3), ports.take(1), out)
        try:
            self.start_coord(0)
        except BaseException:
            self.stop()
            raise

    def start_coord(self, i):
        self.cprocs[i] = spawn(
            shard_nickv_argv(self.coords[i], self.nodes[0]) + ["--lease-time", str(self.lease_ms),
             "--state-file", os.path.join(self.out, "nic-kv.state"),
             "--logfile", os.path.join(self.out, "nic-kv.log")]
            + [a for p in self.nodes for a in ("--node", f"127.0.0.1:{p}")], self.coords[i], "nic-kv")

    def whole(self):
        """Nic-KV grants the master, streams from it, two valid replicas."""
        try:
            i = self.info(self.coords[0])
        except (redis.RedisError, OSError):
            return False
        want = {"valid_replicas": 2, "repoint_pending": 0, "failover_state": "watching",
                "master_lease": "on", "master_link_status": "up"}
        return all(i.get(k) == v for k, v in want.items())


class SentinelShard(Shard):
    """Three nodes watched by three redis-sentinel processes, quorum 2."""

    def __init__(self, ports, out, down_after, debug=False):
        self.system = f"Sentinel {down_after}"
        self.down_after = down_after
        self.debug = debug
        super().__init__(ports.take(3), ports.take(3), out)
        try:
            for i in range(3):
                self.start_coord(i)
        except BaseException:
            self.stop()
            raise

    def start_coord(self, i):
        port = self.coords[i]
        d = os.path.join(self.out, f"sentinel-{port}")
        os.makedirs(d, exist_ok=True)
        conf = os.path.join(d, "sentinel.conf")
        if not os.path.exists(conf):
            # Sentinel rewrites this file (its id, the master, the others);
            # a restarted Sentinel starts from what it knew.
            with open(conf, "w") as f:
                f.write(f'port {port}\nbind 127.0.0.1\ndir "{d}"\nlogfile "{d}/sentinel.log"\n'
                        f"sentinel monitor mymaster 127.0.0.1 {self.nodes[0]} 2\n"
                        f"sentinel down-after-milliseconds mymaster {self.down_after}\n"
                        "sentinel failover-timeout mymaster 2000\n"
                        "sentinel parallel-syncs mymaster 2\n")
        self.cprocs[i] = spawn([os.path.join(BIN, "redis-sentinel"), conf], port, "redis-sentinel")

    def whole(self):
        """Every Sentinel names the same master, sees it up with both
        replicas up and the two other Sentinels; the master streams to both."""
        try:
            names = set()
            for p in self.coords:
                r = redis.Redis(port=p, socket_timeout=1)
                try:
                    m = pairs(r.execute_command("SENTINEL", "MASTER", "mymaster"))
                    if m["flags"] != "master" or m["num-other-sentinels"] != "2" or \
                            m["num-slaves"] != "2":
                        return False
                    for s in r.execute_command("SENTINEL", "REPLICAS", "mymaster"):
                        s = pairs(s)
                        if s["flags"] != "slave" or s["master-link-status"] != "ok":
                            return False
                    names.add((m["ip"], int(m["port"])))
                finally:
                    r.close()
            if len(names) != 1:
                return False
            i = self.info(names.pop()[1], "replication")
            online = [v for k, v in i.items() if k.startswith("slave") and isinstance(v, dict)
                      and v.get("state") == "online"]
            return i.get("role") == "master" and len(online) == 2
        except (redis.RedisError, OSError, KeyError, TypeError, ValueError):
            return False


def drive(writer, until, timeout, what):
    """Append until until() holds (checked every 100 ms); the (time,
    address) of every acknowledged append, in monotonic time."""
    acks = []
    deadline = time.monotonic() + timeout
    checked = 0
    while True:
        now = time.monotonic()
        if now - checked >= 0.1:
            if until(acks):
                return acks
            checked = time.monotonic()
            if checked > deadline:
                sys.exit(f"failover-bench: not {what} within {timeout} s")
        addr = writer.append()
        if addr:
            acks.append((time.monotonic(), addr))


def longest_pause(acks, since):
    """The longest time without an acknowledged append from since on
    (the gap that spans since included)."""
    times = [t for t, _ in acks]
    before = [t for t in times if t < since]
    after = [t for t in times if t >= since]
    seq = before[-1:] + after
    return max((b - a for a, b in zip(seq, seq[1:])), default=0.0) * 1000


def server_scenario(shard, scenario, runs):
    """runs kills of the master's server (scenario server) or of the
    coordinating process on it (nickv); per run the measure in ms, and the
    acknowledged appends the final master lacks."""
    writer = Writer(shard, f"bench:{scenario}")
    drive(writer, lambda a: shard.whole(), 60, "whole at the start")
    measures, back_pauses = [], []
    begin = time.monotonic()
    steady_acks, steady_s = 0, 0.0
    for run_no in range(runs):
        m = shard.master_index()
        # 1 s of appends on a whole topology: the steady rate.
        t0 = time.monotonic()
        steady = drive(writer, lambda a: len(a) >= 20 and time.monotonic() - t0 >= 1.0, 10,
                       "writing before the fault")
        steady_acks += len(steady)
        steady_s += time.monotonic() - t0
        kill = time.monotonic()
        if scenario == "server":
            # The server loses power: its node and its coordinator at once.
            shard.kill_node(m)
            shard.kill_coord(m)
            old = shard.nodes[m]

            def moved(acks):
                return any(t >= kill and a[1] != old for t, a in acks)
            acks = drive(writer, moved, 60, "failed over")
            first = next(t for t, a in acks if t >= kill and a[1] != old)
            measures.append((first - kill) * 1000)
            shard.start_node(m)
        else:
            shard.kill_coord(m)
            if isinstance(shard, CoordShard):
                # Writes stop when the lease lapses and resume once a
                # standby leads and grants: go on 1 s past that.
                lead = {}

                def led(acks):
                    if "t" not in lead and shard.leaders():
                        lead["t"] = time.monotonic()
                    return "t" in lead and time.monotonic() - lead["t"] > 1.0 and \
                        any(t > lead["t"] for t, _ in acks)
                acks = drive(writer, led, 60, "led by a standby")
            else:
                # Sentinel is not on the write path: 3 s of appends.
                acks = drive(writer, lambda a: time.monotonic() - kill > 3.0, 10, "writing")
            # From the last append acknowledged before the kill: the
            # writes may stop at once (before, only the gaps after the
            # first acknowledged one were counted).
            measures.append(longest_pause(steady + acks, kill))
        shard.start_coord(m)
        back = time.monotonic()
        acks = drive(writer, lambda a: shard.whole(), 90, "whole again")
        back_pauses.append(longest_pause(acks, back))
        log(f"{shard.system}, {scenario} {run_no + 1}/{runs}: server {m} "
            f"({shard.nodes[m]}) {'lost' if scenario == 'server' else 'lost its coordinator'}: "
            f"{measures[-1]:.0f} ms; master now {shard.master()[1]}, "
            f"longest pause while it came back {back_pauses[-1]:.0f} ms")
    rates = (steady_acks / steady_s, len(writer.acked) / (time.monotonic() - begin))
    lost = writer.check()
    return measures, back_pauses, lost, len(writer.acked), rates


def server_bench(args, wanted):
    """The whole-server scenarios on each system; the table's rows."""
    rows = []
    ports = PortRange(args.port + 100, args.port + 1000)
    systems = [lambda t=t, l=l: CoordShard(ports, os.path.join(args.out, f"coordinated-{t}-{l}"), t, l)
               for t, l in args.coord_configs]
    for d in args.sentinel_down_after:
        systems.append(lambda d=d: SentinelShard(ports, os.path.join(args.out, f"sentinel-{d}"), d))
    for make in systems:
        shard = make()
        try:
            for scenario in [s for s in SERVER if s in wanted]:
                try:
                    measures, back, lost, acked, rates = server_scenario(shard, scenario, args.runs)
                except SystemExit as e:
                    # Stuck (no failover, not whole again): a row saying
                    # so, the logs kept, and the next system.
                    log(f"{shard.system}, {scenario}: {e}; logs in {shard.out}")
                    rows.append((scenario, shard.system, None, None, None, None, None))
                    shutil.copytree(shard.out, shard.out + "-stuck", dirs_exist_ok=True)
                    break
                rows.append((scenario, shard.system, measures, back, lost, acked, rates))
        finally:
            shard.stop()
    return rows


def whole_flag(shard, timeout):
    """An event set once shard.whole() holds, polled by a thread of its
    own: the writer keeps writing meanwhile (a coordinated shard's check
    asks every Nic-KV, and costs the writer's loop far more than the
    single one's)."""
    ev = threading.Event()

    def poll():
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if shard.whole():
                ev.set()
                return
            time.sleep(0.1)
    threading.Thread(target=poll, daemon=True).start()
    return ev


def kills_scenario(shard, seed, n):
    """n kills -9 of the master's node (its Nic-KV alive), on a schedule
    drawn from seed: after each, appends until the topology is whole again
    (with a coordinator: leadership back on the master's server), then a
    drawn 1-4 s of appends before the next. Returns the windows (kill to
    the first append the new master acknowledged, ms), the longest pause
    from that append until whole again (ms: with a coordinator, the
    handover of leadership to the new master's server is in it), the
    acknowledged appends, their rate over the whole scenario, and those
    lost."""
    rng = random.Random(seed)
    writer = Writer(shard, "bench:kills")
    drive(writer, lambda a: shard.whole(), 60, "whole at the start")
    windows = []
    after = []
    begin = time.monotonic()
    for k in range(n):
        gap = rng.uniform(1.0, 4.0)
        t0 = time.monotonic()
        drive(writer, lambda a: time.monotonic() - t0 >= gap, gap + 10, "writing before the kill")
        m = shard.master_index()
        old = shard.nodes[m]
        kill = time.monotonic()
        shard.kill_node(m)
        acks = drive(writer, lambda a: any(t >= kill and addr[1] != old for t, addr in a), 60,
                     "failed over")
        first = next(t for t, addr in acks if t >= kill and addr[1] != old)
        windows.append((first - kill) * 1000)
        shard.start_node(m)
        whole = whole_flag(shard, 90)
        back = drive(writer, lambda a: whole.is_set(), 95, "whole again")
        seq = [t for t, _ in acks if t >= first] + [t for t, _ in back]
        gap, at = max(((b - a, a) for a, b in zip(seq, seq[1:])), default=(0.0, first))
        after.append(gap * 1000)
        # When, on the clock the servers' logs use.
        wall = time.strftime("%H:%M:%S", time.localtime(time.time() - time.monotonic() + at))
        frac = int((time.time() - time.monotonic() + at) % 1 * 1000)
        log(f"{shard.system}, kill {k + 1}/{n}: node {old}: {windows[-1]:.0f} ms, then at most "
            f"{after[-1]:.0f} ms (from {wall}.{frac:03d}); {len(writer.acked)} acknowledged so far")
    elapsed = time.monotonic() - begin
    lost = writer.check()
    return windows, after, len(writer.acked), len(writer.acked) / elapsed, lost


def kills_bench(args):
    """The kills scenario, same seed, on the single mode and the
    coordinated one (each at lease-time 250, the default); the table."""
    ports = PortRange(args.port + 100, args.port + 1000)
    systems = [lambda: SingleShard(ports, os.path.join(args.out, "kills-single")),
               lambda: CoordShard(ports, os.path.join(args.out, "kills-coordinated"), 2, 250)]
    rows = []
    for make in systems:
        shard = make()
        try:
            try:
                rows.append((shard.system,) + kills_scenario(shard, args.seed, args.kills))
            except SystemExit as e:
                log(f"{shard.system}, kills: {e}; logs in {shard.out}")
                rows.append((shard.system, None, None, None, None, None))
        finally:
            shard.stop()
    print()
    print(f"Kills: {args.kills} kills -9 of the master's node (its Nic-KV alive), seed {args.seed}: "
          "after each, appends until whole again,")
    print("then 1-4 s (drawn from the seed). One client, appends with WAIT 1 (acknowledged: >= 1 "
          "within 1 s). Window: kill to the")
    print("first append the new master acknowledged. After: the longest pause from that append "
          "until whole again")
    print("(with a coordinator, leadership's move to the new master's server is in it). Rate: "
          "acknowledged appends")
    print("per second over the scenario; ratio: to the single mode's.")
    print()
    print("| system | kills | median window ms | max window ms | after: median / max ms | acknowledged "
          "| per s | ratio | lost |")
    print("|---|---|---|---|---|---|---|---|---|")
    base = rows[0][4] if rows and rows[0][4] else None
    with open(os.path.join(args.out, "kills.csv"), "w") as f:
        f.write("system,kills,median_window_ms,max_window_ms,after_median_slash_max_ms,acknowledged,"
                "per_s,ratio,lost\n")
        for system, w, after, acked, rate, lost in rows:
            if w is None:
                cells = [system, "stuck: see the log above", "", "", "", "", "", "", ""]
            else:
                cells = [system, len(w), f"{statistics.median(w):.0f}", f"{max(w):.0f}",
                         f"{statistics.median(after):.0f} / {max(after):.0f}", acked,
                         f"{rate:.0f}", f"{rate / base:.2f}" if base else "", lost]
            print("| " + " | ".join(str(c) for c in cells) + " |")
            f.write(",".join(str(c) for c in cells) + "\n")
    print(f"table: {args.out}/kills.csv")
    return sum(r[5] for r in rows if r[5] is not None), any(r[1] is None for r in rows)


def mixed_schedule(seed, n):
    """n faults, each kind as often as n allows, in an order and with gaps
    drawn from seed: [(kind, gap s, etcd member)] (the member: an etcd
    fault's victim)."""
    rng = random.Random(seed)
    kinds = [MIXED_KINDS[i % len(MIXED_KINDS)] for i in range(n)]
    rng.shuffle(kinds)
    return [(k, rng.uniform(1.0, 4.0), rng.randrange(3)) for k in kinds]


def mixed_fault(shard, writer, kind, member):
    """Inject one fault of kind and recover from it, appending all the
    while; returns the (time, address) acknowledgements and when the fault
    began (the second kill, for server-elsewhere)."""
    acks = []

    def until_moved(old, what):
        acks.extend(drive(writer, lambda a: any(addr[1] != old for _, addr in a), 60, what))

    def for_s(seconds, what):
        t0 = time.monotonic()
        acks.extend(drive(writer, lambda a: time.monotonic() - t0 >= seconds, seconds + 10, what))

    m = shard.master_index()
    old = shard.nodes[m]
    fault = time.monotonic()
    if kind == "node":
        shard.kill_node(m)
        until_moved(old, "failed over (node)")
        shard.start_node(m)
    elif kind == "server":
        shard.kill_node(m)
        shard.kill_coord(m)
        until_moved(old, "failed over (server)")
        shard.start_node(m)
        shard.start_coord(m)
    elif kind == "server-elsewhere":
        shard.kill_node(m)
        until_moved(old, "failed over (server-elsewhere, first kill)")
        shard.start_node(m)
        m2 = shard.master_index()
        old2 = shard.nodes[m2]
        fault = time.monotonic()
        acks.clear()
        shard.kill_node(m2)
        shard.kill_coord(m2)
        until_moved(old2, "failed over (server-elsewhere, second kill)")
        shard.start_node(m2)
        shard.start_coord(m2)
    elif kind == "pause":
        pids = [shard.procs[m].pid, shard.cprocs[m].pid]
        for pid in pids:
            os.kill(pid, signal.SIGSTOP)
        try:
            for_s(MIXED_PAUSE_S, "writing while a server is paused")
        finally:
            for pid in pids:
                os.kill(pid, signal.SIGCONT)
    elif kind in ("coord-leading", "coord-standby"):
        c = m if kind == "coord-leading" else (m + 1) % len(shard.nodes)
        shard.kill_coord(c)
        for_s(MIXED_RESTART_S, "writing while a coordinating process is down")
        shard.start_coord(c)
    elif kind == "etcd":
        i = member
        shard.etcd.kill_member(i)
        for_s(MIXED_RESTART_S, "writing while an etcd member is down")
        shard.etcd.start_member(i)
    whole = whole_flag(shard, 120)
    acks.extend(drive(writer, lambda a: whole.is_set(), 125, f"whole again after {kind}"))
    return acks, fault


def mixed_run(shard, schedule):
    """The schedule on shard: per kind the windows (ms), the acknowledged
    appends, their rate over the run, and those lost."""
    writer = Writer(shard, "bench:mixed")
    drive(writer, lambda a: shard.whole(), 60, "whole at the start")
    windows = {k: [] for k in MIXED_KINDS}
    stuck = None
    begin = time.monotonic()
    for n, (kind, gap, member) in enumerate(schedule):
        if kind == "etcd" and not isinstance(shard, CoordShard):
            continue
        t0 = time.monotonic()
        try:
            before = drive(writer, lambda a: time.monotonic() - t0 >= gap, gap + 10, "writing before the fault")
            acks, fault = mixed_fault(shard, writer, kind, member)
        except SystemExit as e:
            # No master for 60 s, or never whole again: the rest of the
            # schedule would measure a broken topology. Kept as it was.
            stuck = f"{kind} (fault {n + 1}): {e}"
            log(f"{shard.system}, stuck at fault {n + 1}/{len(schedule)}, {kind}: {e}; logs in {shard.out}-stuck")
            shutil.copytree(shard.out, shard.out + "-stuck", dirs_exist_ok=True)
            break
        windows[kind].append(longest_pause(before + acks, fault))
        log(f"{shard.system}, fault {n + 1}/{len(schedule)}: {kind}: longest pause "
            f"{windows[kind][-1]:.0f} ms; master now {shard.master()[1]}")
    elapsed = time.monotonic() - begin
    try:
        lost = writer.check()
    except (redis.RedisError, OSError, TypeError, ValueError) as e:
        lost = f"not checked ({type(e).__name__}: no master answers)"
    return windows, len(writer.acked), len(writer.acked) / elapsed, lost, stuck


def mixed_bench(args):
    """The mixed scenario, same schedule, on the coordinated mode and on
    Sentinel (down-after 1000); the table."""
    ports = PortRange(args.port + 100, args.port + 1000)
    schedule = mixed_schedule(args.seed, args.faults_per_run)
    systems = [lambda: CoordShard(ports, os.path.join(args.out, "mixed-coordinated"), 2, 250),
               lambda: SentinelShard(ports, os.path.join(args.out, "mixed-sentinel-1000"), 1000)]
    rows = []
    for make in systems:
        shard = make()
        try:
            try:
                rows.append((shard.system,) + mixed_run(shard, schedule))
            except SystemExit as e:
                log(f"{shard.system}, mixed: {e}; logs in {shard.out}")
                shutil.copytree(shard.out, shard.out + "-stuck", dirs_exist_ok=True)
                rows.append((shard.system, None, None, None, None, str(e)))
        finally:
            shard.stop()
    print()
    print(f"Mixed faults: {len(schedule)} faults, seed {args.seed} (the same order and gaps for each "
          "system; etcd faults for Nic-KV only).")
    print("One client, appends with WAIT 1 (acknowledged: >= 1 within 1 s). Window: the longest time "
          "without an acknowledged append,")
    print("from the last one before the fault until the topology is whole again. Rate: acknowledged "
          "appends per second over the run.")
    print()
    print("| fault | " + " | ".join(f"{r[0]}: median / max ms" for r in rows) + " |")
    print("|---|" + "---|" * len(rows))
    with open(os.path.join(args.out, "mixed.csv"), "w") as f:
        f.write("system,fault,faults,median_ms,max_ms\n")
        for kind in MIXED_KINDS:
            cells = []
            for system, w, _, _, _, stuck in rows:
                if w is None:
                    cells.append("stuck: see the log")
                elif not w[kind]:
                    cells.append("stuck here" if stuck and stuck.startswith(kind + " ") else "-")
                else:
                    med, mx = statistics.median(w[kind]), max(w[kind])
                    cells.append(f"{med:.0f} / {mx:.0f} ({len(w[kind])})" +
                                 (", then stuck" if stuck and stuck.startswith(kind + " ") else ""))
                    f.write(f"{system},{kind},{len(w[kind])},{med:.0f},{mx:.0f}\n")
            print(f"| {kind} | " + " | ".join(cells) + " |")
        print("| acknowledged, per s | " + " | ".join(
            "stuck" if r[1] is None else f"{r[2]}, {r[3]:.0f}/s" for r in rows) + " |")
        print("| acknowledged lost | " + " | ".join(
            "stuck" if r[1] is None else str(r[4]) for r in rows) + " |")
    for r in rows:
        if r[5]:
            print(f"{r[0]}: stuck at {r[5]}")
    print(f"table: {args.out}/mixed.csv")
    lost = sum(r[4] for r in rows if r[1] is not None and r[0].startswith("Nic-KV") and isinstance(r[4], int))
    stuck = any(r[1] is None or (r[0].startswith("Nic-KV") and r[5]) for r in rows)
    return lost, stuck


WHAT = {
    "server": "server lost (node + its Nic-KV/Sentinel, -9): kill -> first append acknowledged by the new master",
    "nickv": "the master's Nic-KV/Sentinel alone killed (-9): longest pause",
}


def server_table(args, rows):
    """Print the table and write it to server.csv."""
    print()
    print("Whole-server scenarios: appends with WAIT 1 (acknowledged: >= 1 within 1 s), one client")
    print("asking each Nic-KV or Sentinel in turn, loopback TCP. Nic-KV: leader-ttl and lease-time")
    print("as named, min-slaves 1; etcd: heartbeat 50 ms, election timeout 500 ms (its shortest")
    print("lease TTL 1 s); Sentinel: quorum 2, failover-timeout 2000 ms. back: the longest")
    print("pause while the lost server (or process) came back; acknowledged: over all runs;")
    print("steady/s: acknowledged appends per second in the 1 s before each fault; all/s: over")
    print("the whole scenario, faults and recoveries included.")
    print()
    print("| scenario | system | runs | median ms | min ms | max ms | back: max pause ms | acknowledged | steady/s | all/s | acknowledged lost |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    with open(os.path.join(args.out, "server.csv"), "w") as f:
        f.write("scenario,system,runs,median_ms,min_ms,max_ms,back_max_pause_ms,acknowledged,"
                "steady_per_s,all_per_s,acknowledged_lost\n")
        for scenario, system, m, back, lost, acked, rates in rows:
            if m is None:
                cells = [scenario, system, "stuck: see the log above", "", "", "", "", "", "", "", ""]
                print("| " + " | ".join(str(c) for c in cells) + " |")
                f.write(",".join(str(c) for c in cells) + "\n")
                continue
            cells = [scenario, system, len(m), f"{statistics.median(m):.0f}", f"{min(m):.0f}",
                     f"{max(m):.0f}", f"{max(back):.0f}", acked, f"{rates[0]:.0f}", f"{rates[1]:.0f}", lost]
            print("| " + " | ".join(str(c) for c in cells) + " |")
            f.write(",".join(str(c) for c in cells) + "\n")
    print()
    for s in sorted({r[0] for r in rows}):
        print(f"{s}: {WHAT[s]}")
    print(f"table: {args.out}/server.csv")


# ---------------------------------------------------- Detection scenarios ---
#
# detect: each fault on the master, --runs times, for the single Nic-KV
# (its defaults) and for Sentinel at each --sentinel-down-after; lease: the
# single Nic-KV at each --lease-times, a healthy master under load, then
# kill -9. Ports: from --port + 100 on, the first free ones (free_ports
# never hands one out twice, so these and the whole-server shards share
# the range).

TRACE = os.environ.get("SKV_BENCH_TRACE") == "1"


def nickv_defaults():
    """The defaults of the nic-kv measured, as its --help says them, so the
    tables name what ran."""
    out = subprocess.run([os.path.join(os.environ["SKV_BIN"], "nic-kv"), "--help"],
                         capture_output=True, text=True).stdout
    d = {}
    for name in ("probe-interval", "waiting-time", "lease-time", "busy-limit"):
        i = out.find(name + " <")
        j = out.find("\n*", i) if i >= 0 else -1
        block = out[i:j if j >= 0 else len(out)]
        m = [w for w in block.replace("(", " ").replace(")", " ").split() if w.isdigit()]
        d[name] = m[-1] if m else "?"
    return d

FAULTS = ["kill", "stop", "sleep-0.3", "sleep-1", "sleep-3"]
STOP_S = 2.0        # how long the fault stop holds the master (SIGSTOP .. SIGCONT)
SETTLE_S = 3.0      # how long past a fault's end a late failover is waited for
# The detection client's read timeout and WAIT timeout. With the other
# scenarios' 2 s, a client reading from a stopped master would notice the
# new one no sooner than 2 s after the stop, whatever the system: the
# client, not the detection, would set the window. WAIT answers before
# the client gives up, so a slow acknowledgement costs the append, not
# the connection.
DETECT_TIMEOUT_S = 0.25
DETECT_WAIT_MS = 200


class DetectNickv:
    """The single Nic-KV (failover yes, min-slaves 1, its defaults) with a
    master and three replicas, behind the interface the detect scenarios
    drive: the master, signals to a node, its restart, whole, failovers."""

    def __init__(self, ports, out, debug=True):
        self.system = "Nic-KV"
        nkport = ports.take(1)[0]
        self.topo = Topology(ports.start, out, nkport, debug=debug)
        self.out = out

    def master(self):
        return self.topo.master()

    def signal(self, port, sig):
        self.topo.procs[port].send_signal(sig)

    def kill(self, port):
        self.topo.kill(port)

    def restart(self, port):
        self.topo.start(port)

    def whole(self):
        return self.topo.whole()

    def failovers(self):
        return int(self.topo.nickv_info()["failovers"])

    def stop(self):
        self.topo.stop()


class DetectSentinel:
    """A SentinelShard (three nodes, three Sentinels, quorum 2) behind the
    same interface. Sentinel keeps no count of its failovers: each Sentinel
    publishes +switch-master once per failover it makes or learns of, so
    the count is the most any one of them published."""

    def __init__(self, ports, out, down_after):
        self.shard = SentinelShard(ports, out, down_after, debug=True)
        self.system, self.out = self.shard.system, out
        self.subs, self.switches = [], []
        try:
            for p in self.shard.coords:
                ps = redis.Redis(port=p, socket_timeout=2).pubsub()
                ps.subscribe("+switch-master")
                self.subs.append(ps)
                self.switches.append(0)
        except BaseException:
            self.stop()
            raise

    def master(self):
        return self.shard.master()

    def _index(self, port):
        return self.shard.nodes.index(port)

    def signal(self, port, sig):
        self.shard.procs[self._index(port)].send_signal(sig)

    def kill(self, port):
        self.shard.kill_node(self._index(port))

    def restart(self, port):
        self.shard.start_node(self._index(port))

    def whole(self):
        return self.shard.whole()

    def failovers(self):
        for i, ps in enumerate(self.subs):
            while True:
                m = ps.get_message(timeout=0)
                if m is None:
                    break
                if m["type"] == "message":
                    self.switches[i] += 1
        return max(self.switches)

    def stop(self):
        for ps in self.subs:
            ps.close()
        self.shard.stop()


def stamp():
    return time.strftime("%H:%M:%S")


def hold_off(args):
    """Run --wait-cmd and wait until it exits: the bench's way to stay out
    of the way of other work on a shared machine (a test suite) between
    runs, never in the middle of one."""
    if not args.wait_cmd:
        return
    t = time.monotonic()
    subprocess.run(args.wait_cmd, shell=True)
    if time.monotonic() - t >= 1:
        log(f"{stamp()} --wait-cmd held the bench {time.monotonic() - t:.0f} s")


def build(make, what):
    """make() a system, up to three times: its ports lie in the kernel's
    ephemeral range, where a client's connection can hold one for as long
    as it lives, and a new attempt takes other ports. None if it never
    starts."""
    for attempt in range(3):
        try:
            return make()
        except SystemExit as e:
            log(f"{what}: {e} (attempt {attempt + 1} of 3)")
    return None


def detect_run(sys_, writer, fault, args):
    """One fault on the master of sys_, appending throughout, until the
    system is whole again. Returns the old master's port, the failovers
    made, the time from the fault to the first append acknowledged after
    it (by another node if there was a failover, so kill and stop measure
    the new master) and the longest time without an acknowledged append
    from the fault on (the gap that spans it included), both in ms."""
    hold_off(args)
    # Whole again after --wait-cmd: whatever it waited for may have
    # disturbed the idle system.
    drive(writer, lambda a: sys_.whole(), 90, "whole before the fault")
    warm = drive(writer, lambda a: len(a) >= 20, 10, "writing before the fault")
    old = sys_.master()[1]
    before = sys_.failovers()
    timer = hold = None
    t = time.monotonic()
    try:
        if fault == "kill":
            sys_.kill(old)
            acks = drive(writer, lambda a: any(p != old for _, (_, p) in a), 30,
                         "failed over after kill -9")
            sys_.restart(old)
        else:
            if fault == "stop":
                busy = STOP_S
                sys_.signal(old, signal.SIGSTOP)
                # A timer, not the loop: the writer may sit in a read from
                # the stopped master for its whole socket timeout.
                timer = threading.Timer(STOP_S, sys_.signal, (old, signal.SIGCONT))
                timer.start()
            else:
                # Sent on a connection of its own, its reply never read:
                # the main thread is busy for that long, the process runs.
                busy = float(fault.split("-")[1])
                hold = socket.create_connection(("127.0.0.1", old), 1)
                hold.sendall(f"DEBUG SLEEP {busy}\r\n".encode())
            # Past the fault's end, SETTLE_S more: a failover may start
            # late, and a master kept must take writes again.
            acks = drive(writer, lambda a: time.monotonic() - t >= busy + SETTLE_S and
                         any(x >= t + busy for x, _ in a), 60, f"writing after {fault}")
    finally:
        if timer:
            timer.join()
        if hold:
            hold.close()
    acks += drive(writer, lambda a: sys_.whole(), 90, "whole again")
    made = sys_.failovers() - before
    new = next((x for x, (_, p) in acks if x >= t and p != old), None)
    first = new if made and new is not None else next(x for x, _ in acks if x >= t)
    return old, made, (first - t) * 1000, longest_pause(warm + acks, t)


def detect_fault(sys_, fault, runs, args):
    """runs of one fault on one system: a row's figures."""
    writer = Writer(sys_, f"detect:{fault}", DETECT_TIMEOUT_S, DETECT_WAIT_MS)
    drive(writer, lambda a: sys_.whole(), 60, "whole at the start")
    # What the client met while the system first came up (replicas not yet
    # synced: -NOREPLICAS) is not the fault's.
    writer.errors = dict.fromkeys(ERRORS, 0)
    firsts, pauses, failovers = [], [], 0
    for run_no in range(runs):
        old, made, first, pause = detect_run(sys_, writer, fault, args)
        firsts.append(first)
        pauses.append(pause)
        failovers += made
        log(f"{stamp()} {sys_.system}, {fault} {run_no + 1}/{runs}: master {old}, failovers {made}, "
            f"first acknowledged append after {first:.0f} ms, longest pause {pause:.0f} ms; "
            f"master now {sys_.master()[1]}")
    return {"firsts": firsts, "pauses": pauses, "failovers": failovers,
            "errors": dict(writer.errors), "acked": len(writer.acked), "lost": writer.check()}


def detect_bench(args, ports):
    """Every fault of --faults on every system; [(fault, system, figures
    or None when stuck)]."""
    systems = [lambda: DetectNickv(ports, os.path.join(args.out, "detect-nickv"))]
    for d in args.sentinel_down_after:
        systems.append(lambda d=d: DetectSentinel(ports, os.path.join(args.out, f"detect-sentinel-{d}"), d))
    rows = []
    names = ["Nic-KV"] + [f"Sentinel {d}" for d in args.sentinel_down_after]
    for make, name in zip(systems, names):
        sys_ = build(make, name)
        if sys_ is None:
            rows += [(fault, name, None) for fault in args.faults]
            continue
        try:
            for fault in args.faults:
                try:
                    rows.append((fault, sys_.system, detect_fault(sys_, fault, args.runs, args)))
                except SystemExit as e:
                    # As server_bench: a row saying so, the logs kept, and
                    # the next system (this one's state is unknown).
                    log(f"{sys_.system}, {fault}: {e}; logs in {sys_.out}")
                    rows.append((fault, sys_.system, None))
                    shutil.copytree(sys_.out, sys_.out + "-stuck", dirs_exist_ok=True)
                    break
        finally:
            sys_.stop()
    order = {s: i for i, s in enumerate(names)}
    return sorted(rows, key=lambda r: (args.faults.index(r[0]), order[r[1]]))


FAULT_WHAT = {
    "kill": "kill -9 of the master",
    "stop": f"SIGSTOP of the master, SIGCONT {STOP_S:.0f} s later",
    "sleep-0.3": "DEBUG SLEEP 0.3 on the master (busy, not dead)",
    "sleep-1": "DEBUG SLEEP 1 on the master",
    "sleep-3": "DEBUG SLEEP 3 on the master",
}


def detect_table(args, rows):
    """Print the detect table and write it to detect.csv."""
    print()
    print(f"Detection: a fault on the master, {args.runs} runs each; appends with WAIT 1 (acknowledged:")
    print(f">= 1 within {DETECT_WAIT_MS} ms), one client (read timeout {DETECT_TIMEOUT_S * 1000:.0f} ms) asking Nic-KV or a")
    print("Sentinel for the master after every error or timeout, loopback TCP. Nic-KV: its defaults")
    d = nickv_defaults()
    print(f"(probe-interval {d['probe-interval']}, waiting-time {d['waiting-time']}, lease-time "
          f"{d['lease-time']}, busy-limit {d['busy-limit']} ms), failover yes,")
    print("min-slaves 1, a master and 3 replicas. Sentinel: 3 nodes, 3 Sentinels, quorum 2,")
    print("failover-timeout 2000 ms, down-after-milliseconds as named.")
    print("first ack: fault -> first append acknowledged after it (by the new master when one took")
    print("over); pause: the longest time without an acknowledged append from the fault until the")
    print("system was whole again; errors: error replies the client got (appends, and PING on connect),")
    print("over all runs; failovers: over all runs (Nic-KV: INFO failover; Sentinel: +switch-master).")
    print()
    head = ["fault", "system", "runs", "failovers", "first ack median ms", "first ack max ms",
            "pause median ms", "pause max ms", "NOREPLICAS", "READONLY", "MASTERDOWN", "other errors",
            "acknowledged", "lost"]
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    with open(os.path.join(args.out, "detect.csv"), "w") as f:
        f.write("fault,system,runs,failovers,first_ack_median_ms,first_ack_max_ms,pause_median_ms,"
                "pause_max_ms,noreplicas,readonly,masterdown,other_errors,acknowledged,lost\n")
        for fault, system, r in rows:
            if r is None:
                cells = [fault, system, "stuck: see the log above"] + [""] * (len(head) - 3)
            else:
                cells = [fault, system, len(r["firsts"]), r["failovers"],
                         f"{statistics.median(r['firsts']):.0f}", f"{max(r['firsts']):.0f}",
                         f"{statistics.median(r['pauses']):.0f}", f"{max(r['pauses']):.0f}"] + \
                        [r["errors"][k] for k in ERRORS] + [r["acked"], r["lost"]]
            print("| " + " | ".join(str(c) for c in cells) + " |")
            f.write(",".join(str(c) for c in cells) + "\n")
    print()
    for fault in args.faults:
        print(f"{fault}: {FAULT_WHAT[fault]}")
    print(f"table: {args.out}/detect.csv")


def master_info(port, section):
    r = redis.Redis(port=port, socket_timeout=2)
    try:
        return r.info(section)
    finally:
        r.close()


def lease_steady(sys_, writer, seconds, load_clients, out):
    """seconds of appends with no fault, with load_clients redis-benchmark
    clients writing to the master beside them (0: none). A healthy master
    should never lose its lease: count what shows it did (the master's
    refused commands, the client's errors, redis-benchmark exiting on an
    error reply, as it does) and any failover."""
    m = sys_.master()[1]
    refused = master_info(m, "nickv")["nickv_lease_refused_commands"]
    cmds = master_info(m, "stats")["total_commands_processed"]
    fo = sys_.failovers()
    errs = dict(writer.errors)
    bench = {"p": None, "exits": 0}
    logf = open(os.path.join(out, "redis-benchmark.log"), "a")
    argv = [os.path.join(BIN, "redis-benchmark"), "-h", "127.0.0.1", "-p", str(m), "-t", "set",
            "-n", "1000000000", "-r", "100000", "-d", "64", "-c", str(load_clients), "-q"]

    def loaded(acks):
        # Checked every 100 ms: a benchmark that exited is counted and
        # started again, so the load stays on.
        if load_clients and (bench["p"] is None or bench["p"].poll() is not None):
            if bench["p"] is not None:
                bench["exits"] += 1
            bench["p"] = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=logf)
        return time.monotonic() - t >= seconds

    t = time.monotonic()
    try:
        acks = drive(writer, loaded, seconds + 30, "through the steady period")
    finally:
        if bench["p"] and bench["p"].poll() is None:
            bench["p"].kill()
            bench["p"].wait()
        logf.close()
    took = time.monotonic() - t
    return {"refused": master_info(m, "nickv")["nickv_lease_refused_commands"] - refused,
            "errors": {k: writer.errors[k] - errs[k] for k in ERRORS},
            "failovers": sys_.failovers() - fo,
            "pause": longest_pause(acks, t),
            "cmds_per_s": (master_info(m, "stats")["total_commands_processed"] - cmds) / took,
            "bench_exits": bench["exits"]}


def lease_bench(args, ports):
    """For each lease-time: a steady period with the client alone, one with
    redis-benchmark beside it, then --runs kill -9 of the master. Rows of
    (lease-time, figures or None when stuck)."""
    sys_ = build(lambda: DetectNickv(ports, os.path.join(args.out, "lease"), debug=False), "lease")
    if sys_ is None:
        return [(ms, None) for ms in args.lease_times]
    rows = []
    try:
        for ms in args.lease_times:
            nk = redis.Redis(port=sys_.topo.nkport)
            nk.config_set("lease-time", ms)
            nk.close()
            writer = Writer(sys_, f"lease:{ms}", DETECT_TIMEOUT_S, DETECT_WAIT_MS)
            try:
                # A second of appends: the lease in force is one granted
                # at the new length.
                t = time.monotonic()
                drive(writer, lambda a: sys_.whole() and time.monotonic() - t > 1, 60, "whole")
                hold_off(args)
                drive(writer, lambda a: sys_.whole(), 90, "whole")
                quiet = lease_steady(sys_, writer, args.steady, 0, sys_.out)
                hold_off(args)
                drive(writer, lambda a: sys_.whole(), 90, "whole")
                loaded = lease_steady(sys_, writer, args.steady, args.load_clients, sys_.out)
                log(f"{stamp()} lease-time {ms}: quiet {quiet}, loaded {loaded}")
                kills, errs = [], dict(writer.errors)
                for run_no in range(args.runs):
                    old, made, first, pause = detect_run(sys_, writer, "kill", args)
                    kills.append(first)
                    log(f"{stamp()} lease-time {ms}, kill {run_no + 1}/{args.runs}: master {old}, "
                        f"first acknowledged append on {sys_.master()[1]} after {first:.0f} ms")
                rows.append((ms, {"quiet": quiet, "loaded": loaded, "kills": kills,
                                  "kill_errors": {k: writer.errors[k] - errs[k] for k in ERRORS},
                                  "acked": len(writer.acked), "lost": writer.check()}))
            except SystemExit as e:
                log(f"lease-time {ms}: {e}; logs in {sys_.out}")
                rows.append((ms, None))
                shutil.copytree(sys_.out, sys_.out + "-stuck", dirs_exist_ok=True)
                break
    finally:
        sys_.stop()
    return rows


def lease_table(args, rows):
    """Print the lease table and write it to lease.csv."""
    print()
    print("Lease-time: Nic-KV and the client as in detect (waiting-time 500 ms), lease-time set by")
    print("CONFIG SET on Nic-KV.")
    print(f"quiet / loaded: {args.steady} s of appends with no fault, the client alone / with")
    print(f"redis-benchmark (SET, {args.load_clients} clients, no pipelining) on the master too;")
    print("refused: the master's nickv_lease_refused_commands over the period (a healthy master")
    print("refuses none while its lease holds); client RO/MD/NR: the client's READONLY, MASTERDOWN,")
    print("NOREPLICAS; bench exits: redis-benchmark quitting on an error reply (started again);")
    print(f"kill -9: {args.runs} runs, fault -> first append acknowledged by the new master.")
    print()
    head = ["lease-time ms", "kill -9 median ms", "kill -9 max ms", "kill: client RO/MD/NR",
            "quiet: refused", "quiet: client RO/MD/NR", "quiet: pause max ms",
            "loaded: refused", "loaded: client RO/MD/NR", "loaded: bench exits",
            "loaded: pause max ms", "loaded: master cmds/s", "failovers without a fault",
            "acknowledged", "lost"]
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))

    def rmn(e):
        return f"{e['READONLY']}/{e['MASTERDOWN']}/{e['NOREPLICAS']}"

    with open(os.path.join(args.out, "lease.csv"), "w") as f:
        f.write("lease_time_ms,kill_median_ms,kill_max_ms,kill_readonly,kill_masterdown,kill_noreplicas,"
                "quiet_refused,quiet_readonly,quiet_masterdown,quiet_noreplicas,quiet_pause_max_ms,"
                "loaded_refused,loaded_readonly,loaded_masterdown,loaded_noreplicas,loaded_bench_exits,"
                "loaded_pause_max_ms,loaded_master_cmds_per_s,failovers_without_fault,acknowledged,lost\n")
        for ms, r in rows:
            if r is None:
                print(f"| {ms} | stuck: see the log above |" + " |" * (len(head) - 2))
                f.write(f"{ms},stuck" + "," * (len(head) - 2) + "\n")
                continue
            q, l, ke = r["quiet"], r["loaded"], r["kill_errors"]
            cells = [ms, f"{statistics.median(r['kills']):.0f}", f"{max(r['kills']):.0f}", rmn(ke),
                     q["refused"], rmn(q["errors"]), f"{q['pause']:.0f}",
                     l["refused"], rmn(l["errors"]), l["bench_exits"], f"{l['pause']:.0f}",
                     f"{l['cmds_per_s']:.0f}", q["failovers"] + l["failovers"], r["acked"], r["lost"]]
            print("| " + " | ".join(str(c) for c in cells) + " |")
            csv = [ms, cells[1], cells[2], ke["READONLY"], ke["MASTERDOWN"], ke["NOREPLICAS"],
                   q["refused"], q["errors"]["READONLY"], q["errors"]["MASTERDOWN"],
                   q["errors"]["NOREPLICAS"], cells[6], l["refused"], l["errors"]["READONLY"],
                   l["errors"]["MASTERDOWN"], l["errors"]["NOREPLICAS"], l["bench_exits"],
                   cells[10], cells[11], cells[12], r["acked"], r["lost"]]
            f.write(",".join(str(c) for c in csv) + "\n")
    print()
    print(f"table: {args.out}/lease.csv")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--port", type=int, default=26379,
                    help="base port: the single Nic-KV's nodes from it, the whole-server "
                         "shards' processes from it + 100 to it + 999 (the first free ones)")
    ap.add_argument("--nickv-port", type=int, default=None,
                    help="the single Nic-KV's port (default: --port + 1001)")
    ap.add_argument("--out", default=os.path.join(TOP, "build", "failover-bench"))
    ap.add_argument("--bin", default=None, help="the SKV binaries (default: SKV_BIN or build/bin)")
    ap.add_argument("--coordinator", action="store_true",
                    help="add the whole-server scenarios (server, nickv) to the default ones")
    ap.add_argument("--detect", action="store_true",
                    help="add the detection scenarios (detect, lease) to the default ones")
    ap.add_argument("--scenarios", default=None,
                    help="comma-separated, of " + ",".join(CLASSIC + SERVER + DETECT + KILLS) +
                         f" (default: {','.join(CLASSIC)}; with --coordinator and --detect, theirs too)")
    ap.add_argument("--sentinel-down-after", default="1000,200",
                    help="the Sentinel configurations beside Nic-KV (ms, at most two; '' none)")
    ap.add_argument("--faults", default=",".join(FAULTS),
                    help="the detect scenario's faults, comma-separated, of " + ",".join(FAULTS))
    ap.add_argument("--lease-times", default="500,300,200,150",
                    help="the lease scenario's Nic-KV lease-time values (ms), comma-separated")
    ap.add_argument("--steady", type=float, default=30,
                    help="seconds of each steady period (no fault) of the lease scenario")
    ap.add_argument("--load-clients", type=int, default=4,
                    help="redis-benchmark clients writing beside the client in the lease "
                         "scenario's loaded period")
    ap.add_argument("--wait-cmd", default=None,
                    help="detect and lease: a shell command run before each run and steady "
                         "period, waited for (e.g. to hold off while a test suite runs on a "
                         "shared machine: \"while pgrep -f 'utils/run-test[s].sh'; do sleep 30; "
                         "done\"; the brackets keep the pattern from matching this command's own "
                         "shell)")
    ap.add_argument("--kills", type=int, default=10,
                    help="the kills scenario: kills -9 of the master's node per system")
    ap.add_argument("--seed", type=int, default=1,
                    help="the kills and mixed scenarios: the seed of their schedule (the same for "
                         "each system)")
    ap.add_argument("--faults-per-run", type=int, default=21,
                    help="the mixed scenario: faults per system (each kind as often as this allows)")
    ap.add_argument("--coord-configs", default="2/500",
                    help="the coordinated Nic-KV configurations, leader-ttl/lease-time "
                         "(s/ms), comma-separated: one shard each, side by side")
    args = ap.parse_args()
    try:
        args.coord_configs = [tuple(int(v) for v in c.split("/")) for c in args.coord_configs.split(",") if c]
        assert all(len(c) == 2 for c in args.coord_configs)
    except (ValueError, AssertionError):
        ap.error("--coord-configs: leader-ttl/lease-time pairs, e.g. 2/500,1/300")
    # A SIGTERM unwinds like ^C: every process started is killed on the way
    # out. As KeyboardInterrupt, not SystemExit: the scenarios catch
    # SystemExit to record a stuck system and go on with the next one.
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    global BIN
    if args.bin:
        BIN = os.path.abspath(args.bin)
    wanted = (args.scenarios.split(",") if args.scenarios else
              CLASSIC + (SERVER if args.coordinator else []) + (DETECT if args.detect else []))
    unknown = [s for s in wanted if s not in CLASSIC + SERVER + DETECT + KILLS]
    if unknown:
        ap.error(f"unknown scenario {','.join(unknown)}: choose among {','.join(CLASSIC + SERVER + DETECT + KILLS)}")
    args.sentinel_down_after = [int(x) for x in args.sentinel_down_after.split(",") if x]
    if len(args.sentinel_down_after) > 2:
        ap.error("--sentinel-down-after: at most two configurations")
    args.faults = [f for f in args.faults.split(",") if f]
    if any(f not in FAULTS for f in args.faults):
        ap.error(f"--faults: choose among {','.join(FAULTS)}")
    try:
        args.lease_times = [int(x) for x in args.lease_times.split(",") if x]
    except ValueError:
        ap.error("--lease-times: milliseconds, comma-separated, e.g. 500,300,200,150")

    lost, stuck = 0, False
    if any(s in CLASSIC for s in wanted):
        lost = classic(args, wanted)        # clears args.out first
    else:
        os.makedirs(args.out, exist_ok=True)
    if any(s in SERVER for s in wanted):
        for prog in ("etcd", "etcdctl"):
            if not shutil.which(prog):
                sys.exit(f"failover-bench: no {prog}: apt-get install etcd-server etcd-client")
        for prog in ("redis-server", "redis-sentinel", "nic-kv"):
            if not os.access(os.path.join(BIN, prog), os.X_OK):
                sys.exit(f"failover-bench: no {BIN}/{prog}: build SKV first (make) or pass --bin")
        rows = server_bench(args, wanted)
        server_table(args, rows)
        lost += sum(r[4] for r in rows if r[1].startswith("Nic-KV") and r[4] is not None)
        stuck = any(r[2] is None for r in rows)
    if "kills" in wanted:
        k_lost, k_stuck = kills_bench(args)
        lost += k_lost
        stuck = stuck or k_stuck
    if "mixed" in wanted:
        k_lost, k_stuck = mixed_bench(args)
        lost += k_lost
        stuck = stuck or k_stuck
    if any(s in DETECT for s in wanted):
        for prog in ("redis-server", "redis-sentinel", "redis-benchmark", "nic-kv"):
            if not os.access(os.path.join(BIN, prog), os.X_OK):
                sys.exit(f"failover-bench: no {BIN}/{prog}: build SKV first (make) or pass --bin")
        ports = PortRange(args.port + 100, args.port + 1000)
        if "detect" in wanted:
            rows = detect_bench(args, ports)
            detect_table(args, rows)
            lost += sum(r[2]["lost"] for r in rows if r[1] == "Nic-KV" and r[2] is not None)
            stuck = stuck or any(r[2] is None for r in rows)
        if "lease" in wanted:
            rows = lease_bench(args, ports)
            lease_table(args, rows)
            lost += sum(r[1]["lost"] for r in rows if r[1] is not None)
            stuck = stuck or any(r[1] is None for r in rows)
    return 0 if lost == 0 and not stuck else 1


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        sys.exit("failover-bench: interrupted")
