"""The Python package against the command line: the same parameters give
the same fingerprints, the same verified pairs and the same errors.

Needs the `neardup` binary (NEARDUP_BIN, or target/debug/neardup built by
`cargo test`) and python3 with the package installed (`pip install ./python`).
"""

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

import neardup

ROOT = Path(__file__).resolve().parents[2]
BIN = os.environ.get("NEARDUP_BIN", str(ROOT / "target" / "debug" / "neardup"))


def run_cli(*args):
    out = subprocess.run([BIN, *args], capture_output=True, text=True)
    return out


def test_seed_demonstration():
    idx = neardup.Index(threshold=0.75, shingle_width=2, normalizer="seed")
    assert idx.add("A", "red fox runs very fast") == []
    assert idx.add("B", "red fox runs very fast today") == [("A", 0.8)]
    assert idx.add("C", "database backup completed nightly") == []
    assert len(idx) == 3 and "B" in idx
    assert idx.query("red fox runs very fast") == [("A", 1.0), ("B", 0.8)]
    assert idx.remove("A") is True
    assert idx.remove("A") is False
    assert idx.query("red fox runs very fast") == [("B", 0.8)]
    assert neardup.jaccard(
        "red fox runs very fast", "red fox runs very fast today", shingle_width=2, normalizer="seed"
    ) == 0.8


def test_the_contract_call():
    idx = neardup.Index(threshold=0.85, shingle_width=5, normalizer="seed")
    text = "the quick brown fox jumps over the lazy dog and runs far away into the woods"
    assert idx.add("A", text) == []
    got = idx.add("B", text + " today")
    assert isinstance(got, list) and isinstance(got[0], tuple)
    assert got[0][0] == "A" and 0.85 <= got[0][1] <= 1.0


def test_errors_are_value_errors_with_the_cli_messages():
    for kwargs, flag in [({"threshold": 1.5}, ["--threshold", "1.5"]), ({"normalizer": "nope"}, ["--normalizer", "nope"])]:
        with pytest.raises(ValueError) as e:
            neardup.Index(**kwargs)
        cli = run_cli("dedup", "-", *flag, "-q")
        assert cli.returncode == 2
        assert str(e.value) in cli.stderr, (str(e.value), cli.stderr)
    idx = neardup.Index()
    idx.add("x", "some text here to index for the test")
    with pytest.raises(ValueError, match="already in the index"):
        idx.add("x", "other text")


def test_fingerprints_match_the_cli_configuration():
    f = neardup.Fingerprinter(threshold=0.85, shingle_width=3)
    summary = json.loads(
        run_cli("dedup", "-", "--threshold", "0.85", "--shingle-width", "3", "--json", "-q").stdout
    )
    assert f.fingerprint_version == summary["params"]["fingerprint_version"]
    assert (f.bands, f.rows) == (summary["params"]["bands"], summary["params"]["rows"])
    fp = f.fingerprint("Hello, World! This is the same text.")
    again = f.fingerprint("hello world this is the same text")
    assert fp.content_hash == again.content_hash and (fp.features == again.features).all()
    assert len(fp.signature) == 128 and len(fp.band_keys) == f.bands
    # NumPy arrays, as the fingerprint holds them.
    assert (fp.features.dtype, fp.signature.dtype, fp.band_keys.dtype) == ("uint64", "uint32", "uint64")
    assert list(fp.features) == sorted(set(fp.features.tolist()))
    # The oracle takes them as they come.
    assert neardup.exact_pairs([fp.features, again.features], 1.0) == [(0, 1, 1.0)]
    assert [x.content_hash for x in f.fingerprint_many(["a b c", "d e f"])] == [
        f.fingerprint("a b c").content_hash,
        f.fingerprint("d e f").content_hash,
    ]


def test_simhash_fingerprints_match_the_cli_and_find_near_exact_copies():
    f = neardup.Fingerprinter(signature="simhash")
    summary = json.loads(run_cli("dedup", "-", "--signature", "simhash", "--json", "-q").stdout)
    assert f.fingerprint_version == summary["params"]["fingerprint_version"]
    assert "simhash-v1x64" in f.fingerprint_version and (f.bands, f.rows) == (4, 16)
    text = (ROOT / "tests" / "fixtures" / "docs" / "paper.txt").read_text()
    fp = f.fingerprint(text)
    assert len(fp.signature) == 64 and set(fp.signature.tolist()) <= {0, 1}
    idx = neardup.Index(signature="simhash")
    idx.add("paper", text)
    words = text.split()
    words[len(words) // 2] = "zebra"
    got = idx.query(" ".join(words))
    assert got and got[0][0] == "paper" and got[0][1] > 0.98
    # One word in 60 changed: a MinHash index finds it, SimHash (distance <= 3) does not.
    revised = " ".join("zebra" if i % 60 == 30 else w for i, w in enumerate(text.split()))
    assert idx.query(revised) == []
    minhash = neardup.Index()
    minhash.add("paper", text)
    assert minhash.query(revised)[0][0] == "paper"


def real_corpus(tmp_path, limit):
    out = tmp_path / "real.jsonl"
    subprocess.run([sys.executable, str(ROOT / "bench" / "corpus" / "real.py"), str(out)], check=True,
                   stdout=subprocess.DEVNULL)
    lines = out.read_text().splitlines()[:limit]
    sub = tmp_path / "sub.jsonl"
    sub.write_text("\n".join(lines) + "\n")
    return sub, [json.loads(l) for l in lines]


def test_index_gives_the_cli_verified_pairs_on_real_documents(tmp_path):
    corpus, records = real_corpus(tmp_path, 3000)
    assert len(records) >= 2000
    pairs_tsv = tmp_path / "pairs.tsv"
    cli = run_cli("dedup", str(corpus), "--max-candidates", "10000", "--pairs", str(pairs_tsv), "--json", "-q")
    assert cli.returncode == 0, cli.stderr
    summary = json.loads(cli.stdout)
    # No capped query: the CLI verified every LSH candidate, as add() does.
    assert summary["capped_queries"] == 0, summary
    want = set()
    for line in pairs_tsv.read_text().splitlines():
        left, right, score = line.split("\t")
        want.add((left, right, float(score)))
    assert len(want) >= 100, len(want)

    idx = neardup.Index(max_candidates=10000)
    got = set()
    results = idx.add_many([(r["id"], r["text"]) for r in records])
    for r, matches in zip(records, results):
        for other, score in matches:
            got.add((other, r["id"], score))
    assert got == want, (len(got), len(want), sorted(got ^ want)[:5])


# Whether a call into the extension releases the GIL, decided by the order of
# events rather than by timing. Runs in a fresh interpreter: no pytest, Spark
# or server threads that could take the GIL, and the switch interval is its own.
#
# With a switch interval of 1000 s the interpreter never asks the thread that
# holds the GIL to let go: a thread waiting for it gets it only when the
# holder releases it (a blocking wait, or an extension's `py.detach`). The
# main thread starts a worker and blocks (in `Thread.start`, then on
# `ready`), releasing the GIL; the worker sets `ready`, notes "in", makes the
# call and notes "out", taking no contended lock on the way. The main
# thread, woken, must wait for the GIL: if the call releases it,
# the main thread runs during the call and sees only "in"; if the call holds
# it, the main thread runs after the call and sees "in" and "out" —
# whatever the machine's load. A woken thread that is not scheduled before
# the ~0.1 s call ends can also see both, so a pass needs one of several
# attempts to see "in" alone; a call holding the GIL fails every attempt.
GIL_CHECK = r"""
import faulthandler, sys, threading
import neardup

faulthandler.dump_traceback_later(120, exit=True)  # a hang guard that needs no GIL
block = " ".join(f"word{i}" for i in range(5000))
text = " ".join([block] * 1000)  # 5 M words: ~0.1 s in Rust on a fast machine
f = neardup.Fingerprinter()
calls = {
    "fingerprint": lambda: f.fingerprint(text),
    "add_many": lambda: neardup.Index().add_many([("a", text)]),
}
call = calls[sys.argv[1]]
seen = []
sys.setswitchinterval(1000)
try:
    for attempt in range(5):
        state, ready = [], threading.Event()

        def work():
            ready.set()
            state.append("in")
            call()
            state.append("out")

        t = threading.Thread(target=work)
        t.start()
        ready.wait()
        seen.append(list(state))
        t.join(60)
        assert not t.is_alive() and state == ["in", "out"], ("the call did not finish", state)
        if seen[-1] == ["in"]:
            break
finally:
    sys.setswitchinterval(0.005)
print(seen)
sys.exit(0 if seen[-1] == ["in"] else 1)
"""


@pytest.mark.parametrize("call", ["fingerprint", "add_many"])
def test_work_runs_without_the_gil(call, tmp_path):
    if hasattr(sys, "_is_gil_enabled") and not sys._is_gil_enabled():
        pytest.skip("no GIL in this interpreter")
    run = subprocess.run([sys.executable, "-c", GIL_CHECK, call], capture_output=True, text=True, timeout=300,
                         cwd=tmp_path)
    # Each attempt's view from the main thread: ['in'] — the call let it run.
    assert run.returncode == 0, (run.stdout, run.stderr[-3000:])


# Index.load with the GIL released, by a barrier rather than timing: it reads
# a FIFO, and opening a FIFO's read end blocks until another thread opens the
# write end — here the main thread, which (switch interval 1000 s, as above)
# gets the GIL back only when load releases it. Released: the main thread
# opens the FIFO and writes a saved index, which load reads. Held: neither
# thread can go on, and the hang guard ends the interpreter.
LOAD_CHECK = r"""
import faulthandler, sys, threading
import neardup

faulthandler.dump_traceback_later(60, exit=True)  # the deadlock's end; needs no GIL
saved, fifo = sys.argv[1], sys.argv[2]
data = open(saved, "rb").read()
got, ready = [], threading.Event()
sys.setswitchinterval(1000)

def work():
    ready.set()
    got.append(neardup.Index.load(fifo))

t = threading.Thread(target=work)
t.start()
ready.wait()
with open(fifo, "wb") as w:
    w.write(data)
t.join(60)
sys.setswitchinterval(0.005)
print(len(got[0]))
"""


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
def test_index_load_runs_without_the_gil(tmp_path):
    if hasattr(sys, "_is_gil_enabled") and not sys._is_gil_enabled():
        pytest.skip("no GIL in this interpreter")
    idx = neardup.Index()
    idx.add_many([(str(i), f"item {i} " + " ".join(f"w{j}" for j in range(i, i + 50))) for i in range(200)])
    idx.save(tmp_path / "saved.ndx")
    os.mkfifo(tmp_path / "fifo")
    run = subprocess.run([sys.executable, "-c", LOAD_CHECK, str(tmp_path / "saved.ndx"), str(tmp_path / "fifo")],
                         capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert run.returncode == 0 and run.stdout.split() == ["200"], (run.stdout, run.stderr[-3000:])


def test_a_missing_numpy_is_an_import_error_that_says_so(tmp_path):
    # numpy unimportable (None in sys.modules): `import neardup` fails with
    # the advice, rather than the first fingerprint array panicking in Rust.
    code = "import sys; sys.modules['numpy'] = None; import neardup"
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path)
    assert run.returncode == 1, (run.stdout, run.stderr)
    last = run.stderr.strip().splitlines()[-1]
    assert last.startswith("ImportError: neardup needs NumPy"), run.stderr
    assert "pip install 'numpy>=1.21'" in last, last


def look_alike_groups(records, groups=6, copies=160):
    """Dense groups of look-alikes from real text, as templated pages make
    them: an original of 200 words, then copies that all share one edit of
    its first words and differ from each other by one word. Each copy is
    closer to the other copies (J about 0.99) than to the original (about
    0.84), so past the cap of 100 the ranking keeps copies, all dropped, and
    cuts the original, the one kept item each must be dropped against: the
    rule must look further among the kept items."""
    words = " ".join(r["text"] for r in records).split()
    assert len(words) > 400_000, len(words)
    pages = []
    for g in range(groups):
        base = words[100_000 + g * 5000:100_000 + g * 5000 + 200]
        edited = words[300_000 + g * 100:300_000 + g * 100 + 12] + base[12:]
        pages.append({"id": f"g{g}-original", "text": " ".join(base)})
        for i in range(copies):
            w = list(edited)
            w[30 + i % 150] = f"variant{i}"
            pages.append({"id": f"g{g}-copy{i}", "text": " ".join(w)})
    return pages


def test_dedup_keeps_and_drops_as_the_cli_does_when_queries_are_capped(tmp_path):
    # Issue 39 item 6: one rule, tested where the cap cuts (the default cap,
    # dense look-alikes), where a second implementation would drift: the
    # earlier Python rule (the first kept match, no look further) kept 7
    # copies here that the command line drops.
    _, records = real_corpus(tmp_path, 100_000)
    pages = look_alike_groups(records)
    corpus = tmp_path / "pages.jsonl"
    corpus.write_text("".join(json.dumps(p) + "\n" for p in pages))
    dropped_tsv = tmp_path / "dropped.tsv"
    cli = run_cli("dedup", str(corpus), "--dropped", str(dropped_tsv), "--json", "-q")
    assert cli.returncode == 0, cli.stderr
    summary = json.loads(cli.stdout)
    assert summary["capped_queries"] > len(pages) // 4, summary
    assert summary["kept"] <= 12, summary
    want = {}
    for line in dropped_tsv.read_text().splitlines():
        item, kept_item, score = line.split("\t")
        want[item] = (kept_item, float(score))
    got = {}
    for _, outcome in neardup.dedup(iter(pages), chunk=250):
        if not outcome.kept:
            got[outcome.id] = (outcome.duplicate_of, outcome.score)
    assert got == want


def test_dedup_keeps_and_drops_as_the_cli_does(tmp_path):
    corpus, records = real_corpus(tmp_path, 3000)
    dropped_tsv = tmp_path / "dropped.tsv"
    cli = run_cli("dedup", str(corpus), "--max-candidates", "10000", "--dropped", str(dropped_tsv), "--json", "-q")
    assert cli.returncode == 0, cli.stderr
    assert json.loads(cli.stdout)["capped_queries"] == 0
    want = {}
    for line in dropped_tsv.read_text().splitlines():
        item, kept_item, score = line.split("\t")
        want[item] = (kept_item, float(score))
    assert len(want) >= 50
    seen = 0
    got = {}
    for record, outcome in neardup.dedup(iter(records), max_candidates=10000, chunk=700):
        assert record is records[seen] and outcome.id == record["id"]
        seen += 1
        if not outcome.kept:
            got[outcome.id] = (outcome.duplicate_of, outcome.score)
            assert (outcome.duplicate_of, outcome.score) in outcome.matches
    assert seen == len(records)
    assert got == want
    # Records without an id are named by position; a record without text is an error.
    out = list(neardup.dedup([{"text": "a b c d e f g"}, {"text": "a b c d e f g"}]))
    assert [(o.id, o.kept, o.duplicate_of) for _, o in out] == [("1", True, None), ("2", False, "1")]
    with pytest.raises(ValueError, match="missing string field 'text'"):
        list(neardup.dedup([{"body": "x"}]))


def test_dedup_keeper_policies_decide_as_the_cli(tmp_path):
    # Issue 48 item 6: the same policies as `neardup dedup --keep`, on dense
    # look-alikes where the cap cuts, with a score, a nested date (as text)
    # and records without either.
    _, records = real_corpus(tmp_path, 100_000)
    pages = look_alike_groups(records)
    for n, page in enumerate(pages):
        if n % 7 != 3:
            page["quality"] = (n * 7919) % 1000 / 1000
        if n % 5 != 1:
            page["meta"] = {"crawled": f"20{10 + n * 31 % 15}-{1 + n * 17 % 12:02}-{1 + n * 13 % 28:02}T08:00:00Z"}
    corpus = tmp_path / "pages.jsonl"
    corpus.write_text("".join(json.dumps(p) + "\n" for p in pages))
    first = None
    for keep in ["first", "longest", "max:quality", "min:meta.crawled"]:
        dropped_tsv = tmp_path / f"dropped-{keep.replace(':', '-')}.tsv"
        cli = run_cli("dedup", str(corpus), "--keep", keep, "--dropped", str(dropped_tsv), "--json", "-q")
        assert cli.returncode == 0, cli.stderr
        want = {}
        for line in dropped_tsv.read_text().splitlines():
            item, kept_item, score = line.split("\t")
            want[item] = (kept_item, float(score))
        got, order = {}, []
        for record, outcome in neardup.dedup(iter(pages), chunk=250, keep=keep):
            order.append(record["id"])
            if not outcome.kept:
                got[outcome.id] = (outcome.duplicate_of, outcome.score)
        assert order == [p["id"] for p in pages], "yielded in input order"
        assert got == want, keep
        if first is None:
            first = want
        else:
            assert want != first, f"{keep} decides as first"
    with pytest.raises(ValueError, match="use first, longest"):
        list(neardup.dedup(iter(pages), keep="newest"))


def test_save_and_load_share_the_cli_index_format(tmp_path):
    corpus, records = real_corpus(tmp_path, 1500)
    idx = neardup.Index(threshold=0.85)
    idx.add_many([(r["id"], r["text"]) for r in records])
    gone = records[0]["id"]
    assert idx.remove(gone)
    path = tmp_path / "py.ndx"
    idx.save(path)
    back = neardup.Index.load(path)
    assert len(back) == len(idx) == len(records) - 1
    assert back.threshold == 0.85 and gone not in back
    for r in records[1:40]:
        assert back.query(r["text"]) == idx.query(r["text"])

    # An index written by `neardup dedup --index` loads in Python and
    # answers with the run's settings and items.
    cli = run_cli("dedup", str(corpus), "--threshold", "0.85", "--index", str(tmp_path / "cli"), "-q")
    assert cli.returncode == 0, cli.stderr
    from_cli = neardup.Index.load(tmp_path / "cli" / "index.ndx")
    assert len(from_cli) == len(records) and from_cli.threshold == 0.85
    probe = records[5]["text"]
    assert from_cli.query(probe)[0] == (records[5]["id"], 1.0)
    # And the CLI reads what Python wrote, under the same settings.
    (tmp_path / "py").mkdir()
    (tmp_path / "py" / "index.ndx").write_bytes(path.read_bytes())
    cli = run_cli("dedup", str(corpus), "--threshold", "0.85", "--reference", str(tmp_path / "py"), "-q")
    assert cli.returncode == 3 and "duplicate item id" in cli.stderr  # every id but one is in it already

    bad = bytearray(path.read_bytes())
    bad[len(bad) // 2] ^= 0x10
    (tmp_path / "bad.ndx").write_bytes(bytes(bad))
    with pytest.raises(ValueError, match="damaged"):
        neardup.Index.load(tmp_path / "bad.ndx")


def test_the_service_client_walks_the_seed_demonstration(tmp_path):
    import socket
    import time

    from neardup.client import Client, ServiceError

    admin_token = "python-client-admin-token-0123"
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = dict(os.environ, NEARDUP_ADMIN_TOKEN=admin_token)
    server = subprocess.Popen(
        [BIN, "serve", "--listen", f"127.0.0.1:{port}", "--data-dir", str(tmp_path / "data"), "--log-format", "text"],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    try:
        url = f"http://127.0.0.1:{port}"
        admin = Client(url, token=admin_token)
        deadline = time.time() + 30
        while not admin.ready():
            assert time.time() < deadline, "the service did not become ready"
            time.sleep(0.05)
        created = admin.create_tenant("t1", {"normalizer": "seed", "shingle_width": 2, "threshold": 0.75})
        key = created["api_key"]
        c = Client(url, token=key)
        assert c.upsert("t1", "A", "red fox runs very fast")["decision"] == "distinct"
        b = c.upsert("t1", "B", "red fox runs very fast today")
        assert b["decision"] == "near_duplicate"
        assert b["candidates"][0]["item_id"] == "A" and b["candidates"][0]["score"] == 0.8
        assert c.get("t1", "B", min_lsn=b["lsn"])["item_id"] == "B"
        assert c.decide("t1", "database backup completed nightly")["decision"] == "distinct"
        batch = c.upsert_many("t1", [{"item_id": "C", "content": "red fox runs very fast"}])
        assert batch["results"][0]["decision"] == "duplicate", batch
        # The review routes, as the console uses them.
        q = c.queue("t1")
        assert [i["item"]["item_id"] for i in q["items"]] == ["B"], q
        cmp = c.compare("t1", "B", "A")
        assert cmp["verification"]["score"] == 0.8
        assert [r["text"] for r in cmp["left"]["segments"] if r["shared"]] == ["red fox runs very fast"]
        assert c.label("t1", "B", "A", "near_duplicate", rationale="same sentence")["label"] == "near_duplicate"
        assert c.dashboard("t1")["labelled"]["true_positives"] == 1
        assert {m["item_id"] for m in c.neighbourhood("t1", "A")["members"]} >= {"B", "C"}
        c.tombstone("t1", "A", epoch=1)
        with pytest.raises(ServiceError) as e:
            c.get("t1", "A")
        assert e.value.status == 404 and e.value.code == "item_not_found"
        assert c.unfence("t1", "A")["epoch"] == 1
        with pytest.raises(ServiceError) as e:
            Client(url, token="wrong-token").tenant("t1")
        assert e.value.status == 401

        # A partitioned cluster's 307 (here from a stand-in node that
        # redirects everything to the real one) is followed with the same
        # method, body and token — to a node the client was given; a
        # redirect loop ends in an error.
        with _redirector(lambda path: url + path) as elsewhere:
            d = Client(elsewhere, token=key, nodes=[url]).upsert("t1", "D", "red fox runs very fast today")
            assert d["decision"] == "duplicate" and d["candidates"][0]["item_id"] == "B", d
        # A home redirect (`other_home`) is remembered: the tenant's next
        # writes go to its home first; a read still asks the first node.
        home = _redirector(lambda path: url + path, code="other_home")
        with home as home_url:
            c = Client(home_url, token=key, nodes=[url])
            c.upsert("t1", "F1", "green frog jumps into the cold pond")
            c.upsert("t1", "F2", "grey heron waits by the still water")
            assert len(home.seen) == 1, "the second write went to the home"
            c.tenant("t1")
            assert len(home.seen) == 2, "a read is not a write"
        # A redirect to a host the client was not given (a tampered node
        # registry) is refused before the token goes there.
        impostor = _redirector(lambda path: None)
        with impostor as impostor_url, _redirector(lambda path: impostor_url + path) as tampered:
            with pytest.raises(ServiceError) as e:
                Client(tampered, token=key).tenant("t1")
            assert e.value.code == "untrusted_redirect" and impostor_url in e.value.message, e.value
            assert impostor.seen == [], "the impostor got a request"
        # Failover: a node that refuses connections and one that answers
        # 503 are passed over, each once; the request lands once on the
        # node that takes it (the upsert carries an idempotency key).
        dead = f"http://127.0.0.1:{_free_port()}"
        with _answering(503) as busy:
            c = Client(dead, token=key, nodes=[busy.url, url])
            e1 = c.upsert("t1", "E", "blue owl sleeps in the old barn")
            assert e1["status"] == "inserted", e1
            assert len(busy.seen) == 1
            assert c.get("t1", "E")["item_id"] == "E"
            assert len(busy.seen) == 1, "the node that answered is asked first next time"
        with pytest.raises(ServiceError) as e:
            Client(dead, token=key, nodes=[f"http://127.0.0.1:{_free_port()}"]).tenant("t1")
        assert e.value.code == "unreachable", e.value
        with _redirector(lambda path: None) as loop:
            with pytest.raises(ServiceError) as e:
                Client(loop, token=key).tenant("t1")
            assert e.value.code == "too_many_redirects"
    finally:
        server.kill()
        server.wait()


def _free_port():
    import socket as _socket

    with _socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class _answering:
    """An HTTP server on loopback answering every request with ``status``
    and a service error body; ``seen`` counts the requests."""

    def __init__(self, status):
        import http.server

        outer = self
        self.seen = []

        class Handler(http.server.BaseHTTPRequestHandler):
            def _answer(self):
                outer.seen.append(self.path)
                length = int(self.headers.get("Content-Length") or 0)
                self.rfile.read(length)
                body = json.dumps({"error": {"code": "unavailable", "message": "busy"}}).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            do_GET = do_PUT = do_POST = do_DELETE = _answer

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def __enter__(self):
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()


class _redirector:
    """An HTTP server on loopback answering every request with a 307 to
    ``target(path)`` (``None``: to itself), with the service's error body
    when given its ``code``."""

    def __init__(self, target, code=None):
        import http.server

        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def _redirect(self):
                outer.seen.append(self.headers.get("Authorization"))
                length = int(self.headers.get("Content-Length") or 0)
                self.rfile.read(length)
                to = target(self.path) or f"{outer.url}{self.path}"
                body = json.dumps({"error": {"code": code, "message": "elsewhere"}}).encode() if code else b""
                self.send_response(307)
                self.send_header("Location", to)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            do_GET = do_PUT = do_POST = do_DELETE = _redirect

            def log_message(self, *args):
                pass

        self.seen = []  # each request's Authorization header
        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def __enter__(self):
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self.url

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()


def test_exact_pairs_is_the_all_pairs_oracle():
    import random

    rng = random.Random(7)
    base = [rng.sample(range(200), 40) for _ in range(30)]
    sets = base + [s[:36] + rng.sample(range(200, 260), 4) for s in base[:10]]
    want = []
    for i in range(len(sets)):
        for j in range(i + 1, len(sets)):
            a, b = set(sets[i]), set(sets[j])
            score = len(a & b) / len(a | b)
            if score >= 0.7:
                want.append((i, j, score))
    got = neardup.exact_pairs(sets, 0.7)
    assert len(want) >= 10
    assert [(i, j) for i, j, _ in got] == [(i, j) for i, j, _ in sorted(want)]
    assert all(abs(g[2] - w[2]) < 1e-12 for g, w in zip(got, sorted(want)))
    with pytest.raises(ValueError):
        neardup.exact_pairs(sets, 1.5)


def test_pair_score_is_the_verification_rule():
    f = neardup.Fingerprinter(shingle_width=2, normalizer="seed")
    a, b = f.fingerprint("red fox runs very fast"), f.fingerprint("red fox runs very fast today")
    assert neardup.pair_score(a.features.tolist(), a.content_hash, b.features.tolist(), b.content_hash) == 0.8
    # Signed 64-bit values (Spark's LongType) give the same score.
    signed = [x - (1 << 64) if x >= (1 << 63) else x for x in a.features.tolist()]
    assert neardup.pair_score(signed, a.content_hash, b.features.tolist(), b.content_hash) == 0.8
    # Equal content is 1.0 even without features; none on one side is 0.0.
    assert neardup.pair_score([], a.content_hash, [], a.content_hash) == 1.0
    assert neardup.pair_score([], a.content_hash, b.features.tolist(), b.content_hash) == 0.0
    with pytest.raises(ValueError):
        neardup.pair_score([], "zz", [], a.content_hash)
