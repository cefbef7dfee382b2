"""The review console in a real headless Chromium (Debian's `chromium` and
`chromium-driver`, driven by Selenium), against the real `neardup serve`
on loopback.

Run by scripts/test-browser.sh. With NEARDUP_CONSOLE_SCREENSHOTS=DIR it also
saves a screenshot of each page there (docs/console/ holds the committed ones).
"""

import json
import os
import re
import socket
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

import pytest
from selenium import webdriver
from selenium.common.exceptions import NoAlertPresentException, StaleElementReferenceException
from selenium.webdriver.chrome.options import Options
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.support import expected_conditions as EC
from selenium.webdriver.support.ui import WebDriverWait

ROOT = Path(__file__).resolve().parents[2]
BIN = os.environ.get("NEARDUP_BIN", str(ROOT / "target" / "debug" / "neardup"))
ADMIN = "console-test-operator-token-0123"
SHOTS = os.environ.get("NEARDUP_CONSOLE_SCREENSHOTS")
HOSTILE_ID = '<script>alert("id")</script>'
HOSTILE_MARKUP = '<script>alert("content")</script><b>bold</b><img src=x onerror=alert(1)> '


class Api:
    def __init__(self, url, token):
        self.url, self.token = url, token

    def call(self, method, path, body=None):
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.url + path, data=data, method=method)
        req.add_header("Authorization", f"Bearer {self.token}")
        if data is not None:
            req.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(req, timeout=30) as r:
                return r.status, json.loads(r.read() or b"null")
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read() or b"null")


def waiter(d, timeout):
    """A wait that reads the page again when the console re-rendered an
    element its condition was reading: a stale reference is not a failure."""
    return WebDriverWait(d, timeout, ignored_exceptions=(StaleElementReferenceException,))


def paragraphs():
    """Real text: paragraphs of this repository's own documentation."""
    out = []
    for name in ["runbook.md", "service.md", "cluster.md", "scan.md"]:
        text = (ROOT / "docs" / name).read_text(encoding="utf-8")
        for p in re.split(r"\n\s*\n", text):
            p = " ".join(p.split())
            if 300 <= len(p) <= 900 and not p.startswith(("|", "```", "#")):
                out.append(p)
    return out


def variant(p):
    """A near duplicate: a word changed and two added."""
    return p.replace(" the ", " this ", 1) + " Edited copy."


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("console")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = dict(os.environ, NEARDUP_ADMIN_TOKEN=ADMIN)
    proc = subprocess.Popen(
        [BIN, "serve", "--listen", f"127.0.0.1:{port}", "--data-dir", str(tmp / "data"), "--log-format", "text"],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.time() + 60
    while True:
        try:
            with urllib.request.urlopen(url + "/readyz", timeout=2) as r:
                if r.status == 200:
                    break
        except OSError:
            pass
        assert time.time() < deadline, "the service did not become ready"
        time.sleep(0.05)
    admin = Api(url, ADMIN)
    status, created = admin.call("POST", "/v1/tenants", {
        "tenant_id": "demo", "config": {"normalizer": "seed", "shingle_width": 2, "threshold": 0.75}})
    assert status == 201, created
    key = created["api_key"]
    api = Api(url, key)
    items = [{"item_id": "A", "content": "red fox runs very fast"}]
    paras = paragraphs()[:16]
    assert len(paras) >= 8, "too few paragraphs in docs/"
    for i, p in enumerate(paras):
        items.append({"item_id": f"doc-{i:02}", "content": p})
    for i, p in enumerate(paras[:6]):
        items.append({"item_id": f"doc-{i:02}-edited", "content": variant(p)})
    # A cluster of three: another copy of doc-01, edited elsewhere.
    items.append({"item_id": "doc-01-quoted", "content": "As the runbook says: " + paras[1].replace(" a ", " one ", 1)})
    # Hostile markup in an id and in content (a near duplicate of a
    # paragraph, so it is in the queue).
    items.append({"item_id": HOSTILE_ID, "content": HOSTILE_MARKUP + paras[7]})
    status, out = api.call("POST", "/v1/tenants/demo/items", {"items": items})
    assert status == 200, out
    status, b = api.call("PUT", "/v1/tenants/demo/items/B", {"content": "red fox runs very fast today"})
    assert status == 201 and b["decision"] == "near_duplicate", b
    yield {"url": url, "key": key, "api": api, "admin": admin}
    proc.kill()
    proc.wait()


@pytest.fixture(scope="module")
def browser():
    opts = Options()
    opts.binary_location = os.environ.get("CHROMIUM_BIN", "/usr/bin/chromium")
    for a in ["--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1400,1000",
              "--disable-gpu", "--no-first-run", "--disable-extensions"]:
        opts.add_argument(a)
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    service = Service(executable_path=os.environ.get("CHROMEDRIVER_BIN", "/usr/bin/chromedriver"))
    d = webdriver.Chrome(service=service, options=opts)
    d.set_page_load_timeout(30)
    yield d
    d.quit()


def wait(d, css, timeout=15):
    return waiter(d, timeout).until(EC.presence_of_element_located((By.CSS_SELECTOR, css)))


def settled(d, timeout=15):
    waiter(d, timeout).until(lambda d: d.execute_script("return !document.body.dataset.loading"))


def shot(d, name):
    """Saves the whole page (the window grown to its height) when asked."""
    if SHOTS:
        Path(SHOTS).mkdir(parents=True, exist_ok=True)
        height = d.execute_script("return Math.max(document.body.scrollHeight, 700)")
        d.set_window_size(1400, min(height + 160, 3000))
        d.save_screenshot(str(Path(SHOTS) / f"{name}.png"))
        d.set_window_size(1400, 1000)


def no_alert(d):
    try:
        text = d.switch_to.alert.text
    except NoAlertPresentException:
        return
    raise AssertionError(f"a script ran: alert {text!r}")


def csp_violations(d):
    return [e["message"] for e in d.get_log("browser") if "Content Security Policy" in e["message"]]


def sign_in(d, url, tenant, key):
    """Signs in with the form (a key never goes in a URL): as ``tenant``'s
    key holder, or as the operator when ``tenant`` is empty."""
    d.get(url + "/console/")
    d.execute_script("sessionStorage.clear()")
    d.refresh()
    wait(d, "#login-form")
    for field, value in (("login-tenant", tenant), ("login-key", key)):
        e = d.find_element(By.ID, field)
        e.clear()
        e.send_keys(value)
    d.find_element(By.ID, "login-submit").click()


def test_review_the_seed_pair_and_label_it(server, browser):
    d = browser
    d.get(server["url"] + "/console/")
    wait(d, "#login-form")
    shot(d, "login")
    # A link carrying a key is not used: the key leaves the URL, nothing is
    # stored, and the form asks for it (the browser keeps such links).
    d.get(server["url"] + f"/console/#tenant=demo&key={server['key']}")
    waiter(d, 10).until(lambda d: "not used" in d.find_element(By.ID, "status").text)
    assert "key=" not in d.current_url
    assert d.execute_script("return sessionStorage.getItem('neardup.key')") is None
    assert d.find_element(By.ID, "login").is_displayed()
    assert d.find_element(By.ID, "login-tenant").get_attribute("value") == "demo"
    sign_in(d, server["url"], "demo", server["key"])
    wait(d, '#queue-table tr[data-item="B"]')
    settled(d)
    assert "key=" not in d.current_url
    rows = [r.get_attribute("data-item") for r in d.find_elements(By.CSS_SELECTOR, "#queue-table tbody tr")]
    assert rows[0] == "B", rows  # newest first
    assert "doc-00-edited" in rows and "A" not in rows
    shot(d, "queue")

    d.find_element(By.CSS_SELECTOR, '#queue-table tr[data-item="B"]').click()
    wait(d, "#score")
    settled(d)
    assert d.find_element(By.ID, "score").text == "0.8000"
    sides = d.find_elements(By.CSS_SELECTOR, ".side")
    assert sides[0].find_element(By.CSS_SELECTOR, ".item-id").text == "B"
    assert sides[1].find_element(By.CSS_SELECTOR, ".item-id").text == "A"
    marks = [m.text for m in sides[0].find_elements(By.CSS_SELECTOR, "mark.shared")]
    assert marks == ["red fox runs very fast"], marks
    assert "today" in sides[0].find_element(By.CSS_SELECTOR, ".text").text
    assert "similar" in d.find_element(By.ID, "explanation").text

    # Label it from the keyboard, with a rationale.
    box = d.find_element(By.ID, "rationale")
    box.send_keys("same sentence, one word added")
    box.send_keys(Keys.ESCAPE)
    d.find_element(By.TAG_NAME, "body").send_keys("n")
    waiter(d, 10).until(lambda d: "Saved" in d.find_element(By.ID, "label-result").text)
    status, labels = server["api"].call("GET", "/v1/tenants/demo/labels")
    assert status == 200
    mine = [l for l in labels["labels"] if (l["left"], l["right"]) == ("B", "A")]
    assert [(l["label"], l["rationale"]) for l in mine] == [("near_duplicate", "same sentence, one word added")], labels
    assert "near duplicate" in d.find_element(By.ID, "pair-labels").text
    shot(d, "compare")
    assert not csp_violations(d)


def test_a_hostile_item_renders_as_text(server, browser):
    d = browser
    sign_in(d, server["url"], "demo", server["key"])
    wait(d, "#queue-table tbody tr")
    settled(d)
    ids = [e.text for e in d.find_elements(By.CSS_SELECTOR, "#queue-table tbody td.id")]
    assert HOSTILE_ID in ids, ids
    rows = d.find_elements(By.CSS_SELECTOR, "#queue-table tbody tr")
    next(r for r in rows if r.get_attribute("data-item") == HOSTILE_ID).click()
    wait(d, "#score")
    settled(d)
    no_alert(d)
    side = d.find_elements(By.CSS_SELECTOR, ".side")[0]
    assert side.find_element(By.CSS_SELECTOR, ".item-id").text == HOSTILE_ID
    text = side.find_element(By.CSS_SELECTOR, ".text").text
    assert HOSTILE_MARKUP.strip() in text, text
    # Nothing from the data became an element.
    assert len(d.find_elements(By.TAG_NAME, "script")) == 1
    assert not d.find_elements(By.CSS_SELECTOR, ".side b, .side img, .side script")
    assert not csp_violations(d)


def test_compare_says_why_a_tenant_without_content_shows_no_text(server, browser):
    """A tenant with retain_content: false keeps no text; the compare view
    shows the service's content_note for each side (sent inline: nothing
    to read again) instead of text."""
    status, created = server["admin"].call("POST", "/v1/tenants", {
        "tenant_id": "private",
        "config": {"normalizer": "seed", "shingle_width": 2, "threshold": 0.75, "retain_content": False}})
    assert status == 201, created
    api = Api(server["url"], created["api_key"])
    for item_id, content in [("p-a", "red fox runs very fast"), ("p-b", "red fox runs very fast today")]:
        status, out = api.call("PUT", f"/v1/tenants/private/items/{item_id}", {"content": content})
        assert status in (200, 201), out
    d = browser
    sign_in(d, server["url"], "private", created["api_key"])
    d.get(server["url"] + "/console/#tenant=private&view=compare&left=p-b&right=p-a")

    def shown(d):
        if d.execute_script("return !!document.body.dataset.loading"):
            return False
        return [e.text for e in d.find_elements(By.CSS_SELECTOR, ".side .item-id")] == ["p-b", "p-a"]

    waiter(d, 30).until(shown)
    notes = [e.text for e in d.find_elements(By.CSS_SELECTOR, ".side .content-note")]
    assert notes == ["the tenant does not retain content, and the item was sent inline"] * 2, notes
    assert not d.find_elements(By.CSS_SELECTOR, ".side mark"), "no text, so nothing marked"
    no_alert(d)
    assert not csp_violations(d)


@pytest.fixture(scope="module")
def triage(server):
    """A tenant of its own for the queue and the compare view's other
    candidates: a pair with no other candidate, a cluster of three (one
    other) and one of four (two others), edited by different amounts so the
    closest-match scores differ, and written in an order the scores do not
    follow."""
    status, created = server["admin"].call("POST", "/v1/tenants", {
        "tenant_id": "triage", "config": {"normalizer": "seed", "shingle_width": 2, "threshold": 0.75}})
    assert status == 201, created
    api = Api(server["url"], created["api_key"])
    paras = paragraphs()
    three, four = paras[8], paras[9]
    items = [
        {"item_id": "four-0", "content": four},
        {"item_id": "solo-a", "content": "red fox runs very fast"},
        {"item_id": "three-0", "content": three},
        {"item_id": "four-1", "content": four + " See also the runbook for the details of this step."},
        {"item_id": "three-1", "content": variant(three)},
        {"item_id": "solo-b", "content": "red fox runs very fast today"},
        {"item_id": "four-2", "content": variant(four)},
        {"item_id": "three-2", "content": "As the runbook says: " + three.replace(" a ", " one ", 1)},
        {"item_id": "four-3", "content": "Quoted: " + four},
    ]
    status, out = api.call("POST", "/v1/tenants/triage/items", {"items": items})
    assert status == 200, out
    return {"key": created["api_key"], "api": api}


def candidates(api, item, limit=10):
    status, c = api.call("GET", f"/v1/tenants/triage/items/{urllib.parse.quote(item, safe='')}/candidates?limit={limit}")
    assert status == 200, c
    return c["candidates"]


def open_compare(d, server, triage, left, right=None, expect_right=None):
    """Opens the compare view of a pair and waits until it shows that pair."""
    if d.execute_script("return sessionStorage.getItem('neardup.tenant')") != "triage":
        sign_in(d, server["url"], "triage", triage["key"])
    route = f"tenant=triage&view=compare&left={left}" + (f"&right={right}" if right else "")
    d.get(server["url"] + "/console/#" + route)

    def shown(d):
        if d.execute_script("return !!document.body.dataset.loading"):
            return False
        ids = [e.text for e in d.find_elements(By.CSS_SELECTOR, ".side .item-id")]
        return ids == [left, right or expect_right]

    waiter(d, 30).until(shown)


def other_candidates(d):
    """The texts of the verification card's paragraphs other than the
    explanation (where the other candidates are listed), and its links."""
    card = d.find_element(By.ID, "verification")
    texts = [p.text for p in card.find_elements(By.CSS_SELECTOR, ":scope > p") if p.get_attribute("id") != "explanation"]
    links = [a.text for a in card.find_elements(By.CSS_SELECTOR, "a")]
    return texts, links


def test_compare_lists_the_other_candidates_as_links(server, triage, browser):
    d = browser
    api = triage["api"]
    # No other candidate: nothing is listed, and no stray separator or URL.
    assert [c["item_id"] for c in candidates(api, "solo-b")] == ["solo-a"]
    open_compare(d, server, triage, "solo-b", expect_right="solo-a")
    texts, links = other_candidates(d)
    assert texts == [] and links == [], (texts, links)
    assert "Other candidates" not in d.find_element(By.ID, "verification").text
    assert "http" not in d.find_element(By.ID, "verification").text

    # One other candidate: its id as a link, its score beside it.
    others = [c for c in candidates(api, "three-0") if c["item_id"] != "three-1"]
    assert [c["item_id"] for c in others] == ["three-2"], others
    open_compare(d, server, triage, "three-0", "three-1")
    texts, links = other_candidates(d)
    assert texts == [f"Other candidates: three-2 ({others[0]['score']:.3f})"], texts
    assert links == ["three-2"], links
    assert "http" not in d.find_element(By.ID, "verification").text

    # Two: links in the API's order (best first), separated by a comma.
    others = [c for c in candidates(api, "four-0") if c["item_id"] != "four-1"]
    assert sorted(c["item_id"] for c in others) == ["four-2", "four-3"], others
    open_compare(d, server, triage, "four-0", "four-1")
    texts, links = other_candidates(d)
    assert texts == ["Other candidates: " + ", ".join(f"{c['item_id']} ({c['score']:.3f})" for c in others)], texts
    assert links == [c["item_id"] for c in others], links
    assert "http" not in d.find_element(By.ID, "verification").text
    # A link opens that pair.
    d.find_element(By.CSS_SELECTOR, f'#verification a[data-item="{others[0]["item_id"]}"]').click()
    waiter(d, 30).until(lambda d: [e.text for e in d.find_elements(By.CSS_SELECTOR, ".side .item-id")] == ["four-0", others[0]["item_id"]])
    assert not csp_violations(d)


def queue_rows(d):
    """(item, closest match, score) of each row of the queue, in order."""
    out = []
    for r in d.find_elements(By.CSS_SELECTOR, "#queue-table tbody tr[data-item]"):
        closest = r.find_elements(By.CSS_SELECTOR, "td.closest")
        score = r.find_elements(By.CSS_SELECTOR, "td.score")
        out.append((r.get_attribute("data-item"), closest[0].text if closest else None, score[0].text if score else None))
    return out


def test_queue_shows_the_closest_match_and_sorts_by_its_score(server, triage, browser):
    d = browser
    api = triage["api"]
    status, page = api.call("GET", "/v1/tenants/triage/queue?limit=100")
    assert status == 200, page
    newest = [q["item"]["item_id"] for q in page["items"]]
    # What the reviewer triages by, as the candidates route tells it.
    best = {i: candidates(api, i, 1)[0] for i in newest}
    expected = [(i, best[i]["item_id"], f"{best[i]['score']:.4f}") for i in newest]
    by_score = sorted(newest, key=lambda i: -best[i]["score"])  # stable: ties stay newest first
    assert len(set(e[2] for e in expected)) >= 3 and by_score != newest, expected

    sign_in(d, server["url"], "triage", triage["key"])
    waiter(d, 30).until(lambda d: len(d.find_elements(By.CSS_SELECTOR, "#queue-table tbody tr[data-item]")) == len(newest))
    settled(d, 30)
    assert queue_rows(d) == expected

    def order(d):
        return [r[0] for r in queue_rows(d)]

    head = d.find_element(By.ID, "queue-sort-score")
    head.click()
    waiter(d, 30).until(lambda d: head.find_element(By.XPATH, "..").get_attribute("aria-sort") == "descending")
    assert order(d) == by_score
    scores = [float(r[2]) for r in queue_rows(d)]
    assert scores == sorted(scores, reverse=True), scores
    assert "sort=score-desc" in d.current_url
    head.click()
    waiter(d, 30).until(lambda d: head.find_element(By.XPATH, "..").get_attribute("aria-sort") == "ascending")
    scores = [float(r[2]) for r in queue_rows(d)]
    assert scores == sorted(scores), scores
    d.find_element(By.ID, "queue-sort-newest").click()
    waiter(d, 30).until(lambda d: head.find_element(By.XPATH, "..").get_attribute("aria-sort") == "none")
    assert order(d) == newest
    # A skip in the compare view follows the order shown.
    head.click()
    waiter(d, 30).until(lambda d: order(d) == by_score)
    assert d.execute_script("return JSON.parse(sessionStorage.getItem('neardup.queue'))") == by_score
    assert not csp_violations(d)


def test_dashboards_plot_the_ingest(server, browser):
    d = browser
    sign_in(d, server["url"], "demo", server["key"])
    d.get(server["url"] + "/console/#tenant=demo&view=dashboard")
    wait(d, "#charts svg.chart")
    settled(d)
    charts = {c.get_attribute("aria-label"): c for c in d.find_elements(By.CSS_SELECTOR, "#charts svg.chart")}
    for title in ["Candidates per query", "Band bucket sizes", "Decisions by state", "Ingest rate", "Ingest latency"]:
        bars = [float(b.get_attribute("data-value")) for b in charts[title].find_elements(By.CSS_SELECTOR, "rect.bar")]
        assert sum(bars) > 0, (title, bars)
    curve = [k for k in charts if k.startswith("S-curve")]
    assert curve and charts[curve[0]].find_element(By.CSS_SELECTOR, "path.line").get_attribute("d").count("L") == 100
    assert "labelled pairs" in d.find_element(By.ID, "labelled-counts").text
    figures = d.find_element(By.ID, "figures").text
    assert "live items" in figures
    shot(d, "dashboard")
    assert not csp_violations(d)


def test_neighbourhood_and_a_confirmed_tombstone(server, browser):
    d = browser
    sign_in(d, server["url"], "demo", server["key"])
    d.get(server["url"] + "/console/#tenant=demo&view=neighbourhood&item=doc-01")
    wait(d, '#neighbourhood-table tr[data-item="doc-01-edited"]')
    settled(d)
    members = [r.get_attribute("data-item") for r in d.find_elements(By.CSS_SELECTOR, "#neighbourhood-table tbody tr")]
    assert set(members) == {"doc-01", "doc-01-edited", "doc-01-quoted"}, members
    assert len(d.find_elements(By.CSS_SELECTOR, "svg.graph circle.node")) == 3
    shot(d, "neighbourhood")
    row = d.find_element(By.CSS_SELECTOR, '#neighbourhood-table tr[data-item="doc-01-edited"]')
    # Dismissed: nothing happens.
    row.find_element(By.CSS_SELECTOR, "button.danger").click()
    waiter(d, 10).until(EC.alert_is_present())
    assert "epoch 1" in d.switch_to.alert.text
    d.switch_to.alert.dismiss()
    assert server["api"].call("GET", "/v1/tenants/demo/items/doc-01-edited")[0] == 200
    row.find_element(By.CSS_SELECTOR, "button.danger").click()
    waiter(d, 10).until(EC.alert_is_present())
    d.switch_to.alert.accept()
    waiter(d, 10).until(lambda d: "Tombstoned" in d.find_element(By.ID, "status").text)
    assert server["api"].call("GET", "/v1/tenants/demo/items/doc-01-edited")[0] == 404


def test_operators_view(server, browser):
    d = browser
    sign_in(d, server["url"], "", ADMIN)
    wait(d, '#tenants-table tr[data-tenant="demo"]')
    settled(d)
    cells = d.find_element(By.CSS_SELECTOR, '#tenants-table tr[data-tenant="demo"]').text
    assert "demo" in cells
    shot(d, "operators")
    d.find_element(By.ID, "logout").click()
    wait(d, "#login-form")
    assert d.execute_script("return sessionStorage.getItem('neardup.key')") is None
    # A wrong key gets a clear message and the sign-in form back.
    sign_in(d, server["url"], "demo", "not-a-real-key")
    waiter(d, 10).until(lambda d: "401" in d.find_element(By.ID, "status").text)
    assert d.find_element(By.ID, "login").is_displayed()
