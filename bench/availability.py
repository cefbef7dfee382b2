#!/usr/bin/env python3
"""Availability of the replicated service under faults (issue 41).

Three NATS servers (one JetStream cluster, R = 3) and three `neardup serve
--cluster` nodes on loopback. Writer threads drive one tenant at a fixed
rate through the failing-over client (`neardup.client.Client` with every
node, each write with its own idempotency key, sent again until it is
acknowledged) while, on a schedule, a service node is SIGKILLed and
restarted and, later, the NATS server leading the tenant's stream is.

Reported: the fraction of writes acknowledged within 3 s of their
scheduled time, the longest time without any acknowledgement, and, after
the run, every acknowledged write read back on every node (`min_lsn` of
its answer) and the three nodes' snapshot bytes of the tenant compared.

    python3 bench/availability.py --seconds 90 --rate 200 [--nats-victim follower]

Needs `nats-server` on PATH and the binary (NEARDUP_BIN, default
target/release/neardup); the client is loaded from python/neardup/client.py.
Exits non-zero if an acknowledged write is missing or the replicas differ.
"""

import argparse
import concurrent.futures
import importlib.util
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _kill_campaign():
    """The kill campaign's helpers (real-text sentences, free ports, the
    client from the source tree), shared rather than copied."""
    spec = importlib.util.spec_from_file_location("kill_campaign", ROOT / "bench/kill_campaign.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_KC = _kill_campaign()
Client, ServiceError, free_port, sentences = _KC.Client, _KC.ServiceError, _KC.free_port, _KC.sentences
ADMIN = "availability-operator-token-0123"
TENANT = "avail"


class Nats:
    """One nats-server of the JetStream cluster, restartable on its ports."""

    def __init__(self, name, root, routes, client, cluster, monitor):
        self.name, self.client, self.monitor = name, client, monitor
        store = root / name
        store.mkdir(parents=True, exist_ok=True)
        self.args = ["nats-server", "-a", "127.0.0.1", "-p", str(client), "-m", str(monitor), "-js",
                     "-sd", str(store), "--server_name", name, "--cluster_name", "neardup-avail",
                     "--cluster", f"nats://127.0.0.1:{cluster}", "--routes", routes]
        self.log = root / f"{name}.log"
        self.proc = None

    def start(self):
        self.proc = subprocess.Popen(self.args, stdout=subprocess.DEVNULL, stderr=open(self.log, "ab"))

    def kill(self):
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()

    def leads(self, stream):
        """Whether this server leads `stream` (its monitoring endpoint)."""
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.monitor}/jsz?streams=true", timeout=2) as r:
                jsz = json.load(r)
        except Exception:
            return False
        for acc in jsz.get("account_details", []):
            for s in acc.get("stream_detail", []):
                if s.get("name") == stream and s.get("cluster", {}).get("leader") == self.name:
                    return True
        return False


class Node:
    """One `neardup serve --cluster` node, restartable on its port and data."""

    def __init__(self, binary, name, root, nats_urls):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.data = root / name
        self.log = root / f"{name}.log"
        self.args = [binary, "serve", "--listen", f"127.0.0.1:{self.port}", "--data-dir", str(self.data),
                     "--cluster", nats_urls, "--node-id", name, "--log-format", "text",
                     "--cluster-snapshot-secs", "0"]
        self.proc = None

    def start(self):
        env = dict(os.environ, NEARDUP_ADMIN_TOKEN=ADMIN)
        self.proc = subprocess.Popen(self.args, env=env, stdout=subprocess.DEVNULL, stderr=open(self.log, "ab"))

    def wait_ready(self, limit=60):
        c, deadline = Client(self.url, token=ADMIN, timeout=2), time.time() + limit
        while time.time() < deadline:
            try:
                if c.ready():
                    return
            except Exception:
                pass
            if self.proc.poll() is not None:
                raise SystemExit(f"{self.url} exited; see {self.log}")
            time.sleep(0.05)
        raise SystemExit(f"{self.url} not ready within {limit} s; see {self.log}")

    def kill(self):
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=90, help="how long writes are sent (at least 60)")
    ap.add_argument("--rate", type=float, default=200, help="writes a second, all into one tenant")
    ap.add_argument("--threads", type=int, default=64, help="writer threads sharing the schedule")
    ap.add_argument("--nats-victim", choices=["leader", "follower"], default="leader",
                    help="the NATS server killed: the stream's leader (the worst case) or another")
    ap.add_argument("--keep", action="store_true", help="keep the temporary folder (logs)")
    args = ap.parse_args()
    binary = os.environ.get("NEARDUP_BIN", str(ROOT / "target/release/neardup"))
    root = Path(tempfile.mkdtemp(prefix="neardup-avail-"))
    ports = [(free_port(), free_port(), free_port()) for _ in range(3)]
    routes = ",".join(f"nats://127.0.0.1:{c}" for _, c, _ in ports)
    servers = [Nats(f"s{i + 1}", root, routes, *p) for i, p in enumerate(ports)]
    for s in servers:
        s.start()
    time.sleep(1)
    nats_urls = ",".join(f"nats://127.0.0.1:{s.client}" for s in servers)
    nodes = [Node(binary, f"n{i + 1}", root, nats_urls) for i in range(3)]
    for n in nodes:
        n.start()
    for n in nodes:
        n.wait_ready()
    admin = Client(nodes[0].url, token=ADMIN, timeout=10, nodes=[n.url for n in nodes[1:]])
    admin.create_tenant(TENANT)
    text = sentences()

    total = int(args.seconds * args.rate)
    start = time.monotonic() + 0.5
    events = []  # (t, what)
    acked = {}  # i -> (lsn, ack time)
    tries = {}
    lock = threading.Lock()
    next_i = [0]

    def doc(i):
        return " ".join(text[(i * 7 + k) % len(text)] for k in range(6)) + f" (write {i})"

    def writer(w):
        # Each thread its own client (its node order is its own), every node
        # in it; the first node differs by thread, as clients spread.
        urls = [n.url for n in nodes]
        urls = urls[w % 3:] + urls[:w % 3]
        c = Client(urls[0], token=ADMIN, timeout=2.5, nodes=urls[1:])
        while True:
            with lock:
                i = next_i[0]
                next_i[0] += 1
            if i >= total:
                return
            due = start + i / args.rate
            time.sleep(max(0.0, due - time.monotonic()))
            key = f"k{i}"
            n = 0
            while True:
                n += 1
                try:
                    r = c.upsert(TENANT, f"w{i}", doc(i), idempotency_key=key)
                    with lock:
                        acked[i] = (r["lsn"], time.monotonic() - start, due - start)
                        tries[i] = n
                    break
                except ServiceError as e:
                    if e.status not in (503, 408, 500) and e.code not in ("unreachable",):
                        with lock:
                            events.append((time.monotonic() - start, f"write {i} refused: {e}"))
                        break
                    time.sleep(0.1)
                if time.monotonic() - due > 120:
                    break

    def schedule():
        def at(t):
            time.sleep(max(0.0, start + t - time.monotonic()))

        def note(what):
            with lock:
                events.append((time.monotonic() - start, what))

        d = args.seconds
        at(d * 0.2)
        nodes[0].kill()
        note(f"SIGKILL node n1 ({nodes[0].url})")
        at(d * 0.2 + 10)
        nodes[0].start()
        note("node n1 restarted")
        at(d * 0.55)
        leads = [s.leads("NEARDUP_LOG") for s in servers]
        pick = [s for s, lead in zip(servers, leads) if lead == (args.nats_victim == "leader")]
        victim = (pick or servers)[0]
        victim.kill()
        note(f"SIGKILL NATS server {victim.name} (the stream's {args.nats_victim if pick else 'leader unknown'})")
        at(d * 0.55 + 10)
        victim.start()
        note(f"NATS server {victim.name} restarted")

    threads = [threading.Thread(target=writer, args=(w,)) for w in range(args.threads)]
    sched = threading.Thread(target=schedule)
    for t in threads + [sched]:
        t.start()
    for t in threads + [sched]:
        t.join()
    ended = time.monotonic() - start

    # Results: acknowledged within 3 s of the scheduled time, longest gap.
    within = sum(1 for lsn, at_, due in acked.values() if at_ - due <= 3.0)
    times = sorted(at_ for _, at_, _ in acked.values())
    gaps = [b - a for a, b in zip([0.0] + times, times + [ended])]
    worst = max(gaps) if gaps else float("inf")
    late = sorted(((at_ - due), i) for i, (_, at_, due) in acked.items())[-5:]
    print(f"machine: {os.cpu_count()} cores; binary {binary}; nats-server {subprocess.run(['nats-server', '--version'], capture_output=True, text=True).stdout.strip()}")
    print(f"writes scheduled: {total} at {args.rate:.0f}/s over {args.seconds:.0f} s, {args.threads} writer threads, one tenant")
    for t, what in sorted(events):
        print(f"  {t:7.2f} s  {what}")
    print(f"acknowledged: {len(acked)} of {total}; within 3 s of schedule: {within} ({100.0 * within / total:.3f} %)")
    print(f"longest time without an acknowledgement: {worst:.2f} s; slowest writes (s late, write): "
          + ", ".join(f"{d:.2f} w{i}" for d, i in late))
    print(f"writes sent more than once: {sum(1 for n in tries.values() if n > 1)}")
    # When the late writes were due: runs of them, each with its count.
    late_due = sorted(due for _, at_, due in acked.values() if at_ - due > 3.0)
    late_due += sorted(start_due for start_due in (i / args.rate for i in range(total) if i not in acked))
    runs = []
    for d in sorted(late_due):
        if runs and d - runs[-1][1] <= 1.0:
            runs[-1][1], runs[-1][2] = d, runs[-1][2] + 1
        else:
            runs.append([d, d, 1])
    for a, b, n in runs:
        print(f"  {n} writes due {a:.2f}-{b:.2f} s acknowledged more than 3 s late (or never)")

    # Every acknowledged write on every node, once each caught up.
    for n in nodes:
        n.wait_ready()
    top = max((lsn for lsn, _, _ in acked.values()), default=0)
    missing = []

    def check(item):
        i, lsn = item
        for n in nodes:
            c = Client(n.url, token=ADMIN, timeout=30)
            try:
                c.get(TENANT, f"w{i}", min_lsn=top)
            except ServiceError as e:
                missing.append((n.url, i, e.code))

    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        list(pool.map(check, [(i, v[0]) for i, v in acked.items()]))
    snaps = []
    for n in nodes:
        req = urllib.request.Request(f"{n.url}/v1/tenants/{TENANT}/snapshot", headers={"Authorization": f"Bearer {ADMIN}"})
        with urllib.request.urlopen(req, timeout=60) as r:
            snaps.append(r.read())
    same = all(s == snaps[0] for s in snaps)
    print(f"acknowledged writes missing on some node: {len(missing)} {missing[:5]}")
    print(f"snapshot bytes of the tenant: {[len(s) for s in snaps]}; identical on the three nodes: {same}")
    for n in nodes:
        n.kill()
    for s in servers:
        if s.proc.poll() is None:
            s.kill()
    if args.keep:
        print(f"logs kept in {root}")
    else:
        shutil.rmtree(root, ignore_errors=True)
    sys.exit(1 if missing or not same else 0)


if __name__ == "__main__":
    main()
