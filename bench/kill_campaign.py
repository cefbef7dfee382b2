#!/usr/bin/env python3
"""Random-kill campaign against `neardup serve` (issue 15).

Each round starts the service on the same data directory, checks every
write acknowledged so far, checks that a restart replays to the same
snapshot bytes, then runs a mixed load — upserts and replacements,
tombstones, compaction, snapshot downloads and restores, with the
service's own checkpoints every second — and SIGKILLs the process at a
random instant. A write in flight at the kill may or may not have landed;
one acknowledged must be there.

    python3 bench/kill_campaign.py --rounds 100 --out bench/results/kill-campaign.md

Needs the debug or release binary (NEARDUP_BIN, default target/release/neardup);
the service client is loaded from python/neardup/client.py.
"""

import argparse
import hashlib
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _client_module():
    """The service client (standard library only), straight from the
    source tree: no need to build the package's extension."""
    import importlib.util
    spec = importlib.util.spec_from_file_location("neardup_client", ROOT / "python/neardup/client.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_CLIENT = _client_module()
Client, ServiceError = _CLIENT.Client, _CLIENT.ServiceError

ADMIN = "kill-campaign-operator-token-0123"


def sentences():
    """Real text: the document fixtures, cut into sentences."""
    out = []
    for p in sorted((ROOT / "tests/fixtures/docs").glob("*")):
        if p.suffix in (".txt", ".md"):
            for s in re.split(r"(?<=[.!?])\s+", p.read_text(errors="replace")):
                s = " ".join(s.split())
                if len(s.split()) >= 6:
                    out.append(s)
    return out


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Service:
    def __init__(self, binary, data, log, store):
        self.binary, self.data, self.log, self.store = binary, data, log, store
        self.proc = None
        self.url = None

    def start(self):
        port = free_port()
        self.url = f"http://127.0.0.1:{port}"
        env = dict(os.environ, NEARDUP_ADMIN_TOKEN=ADMIN)
        self.proc = subprocess.Popen(
            [self.binary, "serve", "--listen", f"127.0.0.1:{port}", "--data-dir", str(self.data),
             "--log-format", "text", "--checkpoint-interval-secs", "1", "--fsync", "always",
             "--store", self.store],
            env=env, stdout=subprocess.DEVNULL, stderr=open(self.log, "ab"),
        )
        admin = Client(self.url, token=ADMIN, timeout=10)
        deadline = time.time() + 60
        while True:
            try:
                if admin.ready():
                    return admin
            except Exception:
                pass
            if self.proc.poll() is not None:
                raise SystemExit(f"the service exited with {self.proc.returncode}; see {self.log}")
            if time.time() > deadline:
                raise SystemExit("the service did not become ready within 60 s")
            time.sleep(0.02)

    def kill(self):
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()


def digest(text):
    return hashlib.sha256(text.encode()).hexdigest()


class Model:
    """What each id must be after a restart: the last acknowledged state,
    or the result of the one operation in flight on it at the kill."""

    def __init__(self):
        self.lock = threading.Lock()
        self.acked = {}  # id -> ("live", epoch) | ("gone", epoch)
        self.pending = {}  # id -> the state the in-flight op would leave
        self.acked_writes = 0

    def begin(self, item, state):
        with self.lock:
            self.pending[item] = state

    def ack(self, item, state):
        with self.lock:
            self.acked[item] = state
            self.pending.pop(item, None)
            self.acked_writes += 1

    def fail(self, item):
        with self.lock:
            self.pending.pop(item, None)


def verify(admin, tenant, model, in_flight):
    """Every id is in an allowed state — its last acknowledged one, or the
    result of the op in flight on it at the kill (an id never acknowledged
    may also be absent). The model takes what was found. Returns
    (checked, lost)."""
    checked, lost = 0, []
    for item in sorted(set(model.acked) | set(in_flight)):
        want = model.acked.get(item)
        allowed = [want if want else ("absent", None)] + ([in_flight[item]] if item in in_flight else [])
        try:
            got = ("live", admin.get(tenant, item)["epoch"])
        except ServiceError as e:
            if e.status != 404:
                raise
            got = ("gone", None)

        def fits(a):
            if got[0] == "live":
                return a[0] == "live" and a[1] == got[1]
            return a[0] in ("gone", "absent")

        match = next((a for a in allowed if fits(a)), None)
        checked += 1
        if match is None:
            lost.append((item, allowed, got))
        elif match[0] == "absent":
            model.acked.pop(item, None)
        else:
            model.acked[item] = match
    return checked, lost


def snapshot_bytes(url, tenant):
    import urllib.request
    req = urllib.request.Request(f"{url}/v1/tenants/{tenant}/snapshot", headers={"Authorization": f"Bearer {ADMIN}"})
    with urllib.request.urlopen(req, timeout=60) as r:
        return r.read()


def writer(url, tenant, ids, texts, model, stop, rng, counts):
    c = Client(url, token=ADMIN, timeout=10)
    while not stop.is_set():
        item = rng.choice(ids)
        with model.lock:
            cur = model.acked.get(item)
            if item in model.pending:
                continue
        try:
            if cur is None or cur[0] == "gone":
                epoch = (cur[1] + 1) if cur else 1
                text = rng.choice(texts) + " " + rng.choice(texts)
                model.begin(item, ("live", epoch))
                r = c.upsert(tenant, item, text, epoch=epoch)
                model.ack(item, ("live", r["epoch"]))
                counts["upsert"] += 1
            elif rng.random() < 0.3:
                model.begin(item, ("gone", cur[1]))
                c.tombstone(tenant, item, epoch=cur[1])
                model.ack(item, ("gone", cur[1]))
                counts["tombstone"] += 1
            else:
                epoch = cur[1] + 1
                model.begin(item, ("live", epoch))
                r = c.upsert(tenant, item, rng.choice(texts), epoch=epoch)
                model.ack(item, ("live", r["epoch"]))
                counts["replace"] += 1
        except ServiceError as e:
            if e.status >= 500:
                return  # the service is going down: the op stays in flight
            # A refusal (409 …) means the model is wrong: report it.
            print(f"writer: {item}: {e}", file=sys.stderr, flush=True)
            counts["refused"] += 1
            model.fail(item)
        except Exception:
            # Killed mid-request: the op stays in flight until the
            # verification after the restart resolves it.
            return


def admin_load(url, stop, rng, counts):
    c = Client(url, token=ADMIN, timeout=30)
    while not stop.is_set():
        try:
            op = rng.random()
            if op < 0.35:
                c._call("POST", "/v1/tenants/t1/compact")
                counts["compact"] += 1
            elif op < 0.7:
                snapshot_bytes(url, "t1")
                counts["snapshot"] += 1
            else:
                # Restore t2 from its own snapshot: its state must not change.
                import urllib.request
                snap = snapshot_bytes(url, "t2")
                req = urllib.request.Request(f"{url}/v1/tenants/t2/snapshot", data=snap, method="PUT",
                                             headers={"Authorization": f"Bearer {ADMIN}",
                                                      "Content-Type": "application/octet-stream"})
                urllib.request.urlopen(req, timeout=60).read()
                counts["restore"] += 1
            time.sleep(rng.uniform(0, 0.2))
        except Exception:
            return


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=100)
    ap.add_argument("--writers", type=int, default=4)
    ap.add_argument("--ids", type=int, default=400)
    ap.add_argument("--seed", type=int, default=15)
    ap.add_argument("--store", choices=["fjall", "memory"], default="fjall")
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    binary = os.environ.get("NEARDUP_BIN", str(ROOT / "target/release/neardup"))
    rng = random.Random(a.seed)
    texts = sentences()
    work = Path(tempfile.mkdtemp(prefix="neardup-kill-"))
    svc = Service(binary, work / "data", work / "server.log", a.store)
    admin = svc.start()
    admin.create_tenant("t1", {"threshold": 0.8})
    admin.create_tenant("t2", {"threshold": 0.8})
    t2 = {f"r{i}": rng.choice(texts) for i in range(50)}
    for k, v in t2.items():
        admin.upsert("t2", k, v)
    model = Model()
    ids = [f"i{i}" for i in range(a.ids)]
    counts = {k: 0 for k in ("upsert", "replace", "tombstone", "compact", "snapshot", "restore", "refused")}
    rows, lost_total, mismatches, checked_total = [], [], 0, 0
    started = time.time()
    for rnd in range(1, a.rounds + 1):
        stop = threading.Event()
        threads = [threading.Thread(target=writer, args=(svc.url, "t1", ids, texts, model, stop,
                                                         random.Random(rng.random()), counts))
                   for _ in range(a.writers)]
        threads.append(threading.Thread(target=admin_load, args=(svc.url, stop, random.Random(rng.random()), counts)))
        for t in threads:
            t.start()
        time.sleep(rng.uniform(0.2, 2.5))
        in_flight = dict(model.pending)
        svc.kill()
        stop.set()
        for t in threads:
            t.join()
        admin = svc.start()
        checked, lost = verify(admin, "t1", model, in_flight)
        model.pending.clear()
        t2_ok = all(admin.get("t2", k)["item_id"] == k for k in t2) and \
            len(admin._call("GET", "/v1/tenants/t2/items", query={"limit": 1000})["items"]) == len(t2)
        # A restart replays to the same state: same snapshot bytes.
        s1 = snapshot_bytes(svc.url, "t1")
        svc.kill()
        admin = svc.start()
        same = snapshot_bytes(svc.url, "t1") == s1
        mismatches += 0 if same else 1
        checked_total += checked
        lost_total += lost
        rows.append((rnd, len(in_flight), checked, len(lost), t2_ok, same))
        print(f"round {rnd}: {len(in_flight)} in flight at the kill, {checked} ids checked, {len(lost)} lost, "
              f"t2 intact {t2_ok}, replay same bytes {same}", flush=True)
        if lost or not t2_ok or not same:
            print("FAILED:", lost[:5], flush=True)
    svc.kill()
    elapsed = time.time() - started
    summary = (f"{a.rounds} SIGKILLs in {elapsed:.0f} s; {model.acked_writes} acknowledged writes "
               f"({counts['upsert']} inserts, {counts['replace']} replacements, {counts['tombstone']} tombstones), "
               f"{counts['compact']} compactions, {counts['snapshot']} snapshot downloads, {counts['restore']} "
               f"restores; {counts['refused']} writes refused; {checked_total} id checks after restarts; lost: {len(lost_total)}; "
               f"restarts giving other snapshot bytes: {mismatches}; t2 (restored over and over) intact in "
               f"{sum(r[4] for r in rows)}/{a.rounds} rounds")
    print(summary)
    if a.out:
        lines = [
            f"# Random-kill campaign (issue 15), {a.store} store",
            "",
            f"- command: `NEARDUP_BIN={os.path.relpath(binary, ROOT)} python3 bench/kill_campaign.py "
            f"--rounds {a.rounds} --writers {a.writers} --ids {a.ids} --seed {a.seed} --store {a.store}`",
            f"- machine: {os.cpu_count()} cores; {time.strftime('%Y-%m-%d')}; `--fsync always`, {a.store} store, "
            "checkpoints every second",
            "- each round: restart on the same data directory; check every id against the last acknowledged "
            "write (or the one in flight at the kill); restart again with no writes and compare tenant t1's "
            "snapshot bytes; then 4 writers (insert, replace with a higher epoch, tombstone) and an admin "
            "thread (compact, snapshot download, restore of tenant t2 from its own snapshot) for 0.2-2.5 s; "
            "SIGKILL",
            "",
            f"**Result:** {summary}.",
            "",
            "| round | ops in flight at the kill | ids checked | lost | t2 intact | same snapshot bytes after replay |",
            "|---|---|---|---|---|---|",
        ]
        lines += [f"| {r[0]} | {r[1]} | {r[2]} | {r[3]} | {r[4]} | {r[5]} |" for r in rows]
        Path(a.out).write_text("\n".join(lines) + "\n")
    shutil.rmtree(work, ignore_errors=True)
    sys.exit(1 if lost_total or mismatches or not all(r[4] for r in rows) else 0)


if __name__ == "__main__":
    main()
