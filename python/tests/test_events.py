"""The event feed through the Python client, against `neardup serve`:
every event validates against the published JSON Schema (the
`jsonschema` package), a consumer stopped anywhere resumes from its saved
point and sees every event once and in order, across restarts of the
service, and long-polls for the next event.

Needs the `neardup` binary (NEARDUP_BIN, or target/debug/neardup).
"""

import json
import os
import pathlib
import signal
import socket
import subprocess
import threading
import time

import jsonschema
import pytest

from neardup.client import Client, ServiceError

ROOT = pathlib.Path(__file__).resolve().parents[2]
BIN = os.environ.get("NEARDUP_BIN", str(ROOT / "target" / "debug" / "neardup"))
ADMIN = "python-events-admin-token-0123"
SCHEMA_DIR = ROOT / "schemas" / "events" / "v1"


class Service:
    """`neardup serve` on a loopback port over a data directory that
    outlives it, so it can be restarted."""

    def __init__(self, data):
        self.data = data
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc = None

    def start(self):
        env = dict(os.environ, NEARDUP_ADMIN_TOKEN=ADMIN)
        self.proc = subprocess.Popen(
            [BIN, "serve", "--listen", f"127.0.0.1:{self.port}", "--data-dir", str(self.data),
             "--log-format", "text"],
            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        admin = Client(self.url, token=ADMIN)
        deadline = time.time() + 60  # guards against a hang only
        while not admin.ready():
            assert self.proc.poll() is None, "the service exited"
            assert time.time() < deadline, "the service did not become ready"
            time.sleep(0.05)

    def stop(self, sig):
        self.proc.send_signal(sig)
        self.proc.wait(timeout=60)


@pytest.fixture
def service(tmp_path):
    s = Service(tmp_path / "data")
    s.start()
    yield s
    if s.proc.poll() is None:
        s.proc.kill()
        s.proc.wait()


def every_kind_of_event(url):
    """One of every event type; returns the tenant's key."""
    key = Client(url, token=ADMIN).create_tenant("t1", {"normalizer": "seed", "shingle_width": 2, "threshold": 0.75})
    c = Client(url, token=key["api_key"])
    c.upsert("t1", "A", "red fox runs very fast")
    c.upsert("t1", "B", "red fox runs very fast today")
    c.upsert_many("t1", [
        {"item_id": "C", "content": "database backup completed nightly"},
        {"item_id": "D", "content": "quarterly revenue grew in every region"},
        {"item_id": "E", "content": "the ferry leaves at noon on sundays"},
    ])
    assert c.upsert("t1", "A", "a fox that is red runs", epoch=2)["status"] == "replaced"
    c.tombstone("t1", "C", epoch=1)
    c.label("t1", "A", "B", "distinct", rationale="reworded")
    c._call("POST", "/v1/tenants/t1/rebuild", {"config": {"threshold": 0.9}})
    c._call("POST", "/v1/tenants/t1/rollback")
    return key["api_key"]


def read_all(c, **point):
    return list(c.events("t1", follow=False, **point))


def test_every_event_validates_against_the_published_schema(service):
    c = Client(service.url, token=every_kind_of_event(service.url))
    served = Client(service.url)._call("GET", "/v1/schemas/events.json")
    assert served == json.loads((SCHEMA_DIR / "events.json").read_text())
    validator = jsonschema.Draft202012Validator(served, format_checker=jsonschema.FormatChecker())
    jsonschema.Draft202012Validator.check_schema(served)
    events = read_all(c)
    assert {e["type"] for e in events} == {
        "item_inserted", "item_replaced", "item_tombstoned", "label_added", "rebuilt", "rolled_back"}
    for ev in events:
        validator.validate(ev)
    # A frozen example per type, each valid; breaking one fails.
    for name in served["$defs"]:
        example = json.loads((SCHEMA_DIR / "examples" / f"{name}.json").read_text())
        assert example["type"] == name
        validator.validate(example)
        with pytest.raises(jsonschema.ValidationError):
            validator.validate({**example, "lsn": "7"})
    b = next(e for e in events if e.get("item_id") == "B")
    assert (b["state"], b["closest"]["item_id"], b["closest"]["score"]) == ("near_duplicate", "A", 0.8)


def test_a_consumer_stopped_anywhere_resumes_once_and_in_order_across_restarts(service):
    key = every_kind_of_event(service.url)
    c = Client(service.url, token=key)
    everything = read_all(c)
    # Stopped after k events (a crash, a cut connection), resumed from the
    # point saved after the last event handled: every event once, in order.
    for k in range(1, len(everything)):
        seen, point = [], {"after": 0, "after_i": None}
        for ev in c.events("t1", follow=False, limit=3, **point):
            seen.append(ev)
            point = Client.resume_point(ev)
            if len(seen) == k:
                break
        seen += read_all(c, **point)
        assert seen == everything, k

    # A killed service replays its log: the same feed.
    service.stop(signal.SIGKILL)
    service.start()
    assert read_all(c) == everything
    # A graceful stop checkpoints, which trims the log: from the start the
    # feed answers 410 with where it resumes; a consumer resuming from its
    # own last point loses nothing and goes on.
    service.stop(signal.SIGTERM)
    service.start()
    with pytest.raises(ServiceError) as e:
        read_all(c)
    assert e.value.status == 410 and e.value.code == "events_trimmed"
    assert e.value.oldest_after >= everything[-1]["lsn"]
    last = Client.resume_point(everything[-1])
    assert read_all(c, **last) == []
    c.upsert("t1", "F", "a brand new sentence here")
    new = read_all(c, **last)
    assert [(e["type"], e["item_id"]) for e in new] == [("item_inserted", "F")]


def test_following_the_feed_waits_for_the_next_event(service):
    key = every_kind_of_event(service.url)
    c = Client(service.url, token=key)
    last = Client.resume_point(read_all(c)[-1])
    got = []

    def follow():
        for ev in Client(service.url, token=key).events("t1", wait=20, **last):
            got.append(ev)
            return

    t = threading.Thread(target=follow)
    t.start()
    time.sleep(0.2)
    c.upsert("t1", "G", "green frog jumps into the cold pond")
    t.join(timeout=60)  # guards against a hang only
    assert not t.is_alive()
    assert [(e["type"], e["item_id"]) for e in got] == [("item_inserted", "G")]
