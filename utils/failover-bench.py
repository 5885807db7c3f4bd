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
"""
import argparse
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import time

import redis

TOP = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.path.join(TOP, "build", "bin")
# The password of Nic-KV's own ACL user, which every node defines and only
# Nic-KV uses (the replicas replicate as the default user).
NICKV_PASS = "failover-bench-nickv"


def log(msg):
    print(msg, file=sys.stderr, flush=True)


class Topology:
    """A master, three replicas and Nic-KV, each in a directory of its own."""

    def __init__(self, base, out):
        self.ports = [base, base + 1, base + 2, base + 3]
        self.nkport = base + 1001
        self.out = out
        self.procs = {}
        self.nk = None
        shutil.rmtree(out, ignore_errors=True)
        os.makedirs(out)
        for p in self.ports:
            if self._answers(p) or self._answers(self.nkport):
                sys.exit(f"failover-bench: port {p} or {self.nkport} is in use")
        for p in self.ports:
            self.start(p, replicaof=None if p == self.ports[0] else self.ports[0])
        self.start_nickv()

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
                if replicaof:
                    f.write(f"replicaof 127.0.0.1 {replicaof}\n")
        self.procs[port] = subprocess.Popen([os.path.join(BIN, "redis-server"), conf])
        self._wait_port(port)

    def start_nickv(self):
        self.nk = subprocess.Popen([os.path.join(BIN, "nic-kv"), "--port", str(self.nkport),
                                    "--master-port", str(self.ports[0]), "--failover", "yes",
                                    "--min-slaves", "1", "--masteruser", "nickv",
                                    "--masterauth", NICKV_PASS, "--state-file",
                                    os.path.join(self.out, "nic-kv.state"), "--logfile",
                                    os.path.join(self.out, "nic-kv.log")])
        self._wait_port(self.nkport)

    def _wait_port(self, port):
        for _ in range(200):
            if self._answers(port):
                return
            time.sleep(0.02)
        sys.exit(f"failover-bench: nothing listens on {port}")

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

    def wait_whole(self, timeout=30):
        """Nic-KV sees the master (with its lease) and three replicas."""
        deadline = time.time() + timeout
        while time.time() < deadline:
            try:
                i = self.nickv_info()
                if (i.get("valid_replicas") == 3 and i.get("repoint_pending") == 0 and
                        i.get("failover_state") == "watching" and i.get("master_lease") == "on" and
                        i.get("master_link_status") == "up"):
                    return
            except redis.RedisError:
                pass
            time.sleep(0.1)
        sys.exit("failover-bench: the topology is not whole: see " + self.out)

    def stop(self):
        for p in list(self.procs.values()) + [self.nk]:
            if p and p.poll() is None:
                p.kill()
                p.wait()


class Writer:
    """Appends with WAIT 1 through the master Nic-KV names."""

    def __init__(self, topo, key):
        self.topo, self.key = topo, key
        self.r = None
        self.addr = None
        self.next = 0
        self.acked = []

    def _connect(self):
        while True:
            try:
                self.addr = self.topo.master()
                self.r = redis.Redis(host=self.addr[0], port=self.addr[1], socket_timeout=2)
                self.r.ping()
                return
            except (redis.RedisError, OSError):
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
            p.execute_command("WAIT", 1, 1000)
            _, w = p.execute()
            if w >= 1:
                self.acked.append(v)
                return self.addr
        except redis.ConnectionError:
            self.r = None
        except redis.RedisError:
            # Refused (no lease yet, -NOREPLICAS): ask Nic-KV again.
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


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--port", type=int, default=26379)
    ap.add_argument("--out", default=os.path.join(TOP, "build", "failover-bench"))
    args = ap.parse_args()

    topo = Topology(args.port, args.out)
    try:
        topo.wait_whole()
        writer = Writer(topo, "bench")
        lost_total = 0

        # (a) a replica crash and its return.
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
        windows, master_buckets = [], None
        for i in range(args.runs):
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

    with open(os.path.join(args.out, "throughput.csv"), "w") as f:
        f.write("t_s,replica_crash_ops_per_s,master_crash_ops_per_s,failback_ops_per_s\n")
        for i in range(max(len(rep_buckets), len(master_buckets), len(back_buckets))):
            a = rep_buckets[i] * 10 if i < len(rep_buckets) else ""
            b = master_buckets[i] * 10 if i < len(master_buckets) else ""
            c = back_buckets[i] * 10 if i < len(back_buckets) else ""
            f.write(f"{i / 10:.1f},{a},{b},{c}\n")

    print()
    print("Appends with WAIT 1 through Nic-KV (one client, loopback TCP), default settings:")
    print("probe-interval 100 ms, waiting-time 500 ms, lease-time 500 ms, min-slaves 1.")
    print()
    print("| what | value |")
    print("|---|---|")
    print(f"| replica crash: acknowledged appends/s before (0.5-2 s) | {before:.0f} |")
    print(f"| ... during the crash (2.1-4 s) | {during:.0f} ({during / before * 100:.0f} %) |")
    print(f"| master crash (-9) to the first write the new master acknowledges, median of {len(windows)} | "
          f"{statistics.median(windows):.0f} ms |")
    print(f"| ... min / max | {min(windows):.0f} / {max(windows):.0f} ms |")
    print(f"| failback (planned handover): longest pause between acknowledged appends | {back_gap:.0f} ms |")
    print(f"| failovers made (the failback included) | {info.get('failovers')} |")
    print(f"| acknowledged appends lost (all runs) | {lost_total} |")
    print()
    print(f"buckets: {args.out}/throughput.csv")
    if shutil.which("gnuplot"):
        png = os.path.join(args.out, "throughput.png")
        script = f"""
set terminal pngcairo size 900,420
set output '{png}'
set datafile separator ','
set key top right
set xlabel 'seconds'
set ylabel 'acknowledged appends/s (100 ms buckets)'
set yrange [0:*]
plot '{args.out}/throughput.csv' every ::1 using 1:2 with steps title 'replica killed at 2 s, back at 4 s', \\
     '' every ::1 using 1:3 with steps title 'master killed at 1 s (failover)', \\
     '' every ::1 using 1:4 with steps title 'failback asked for at 1 s'
"""
        subprocess.run(["gnuplot"], input=script.encode(), check=True)
        print(f"plot: {png}")
    return 0 if lost_total == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
