"""A small client for ``neardup serve`` (standard library only).

    >>> from neardup.client import Client
    >>> admin = Client("http://127.0.0.1:8080", token=ADMIN_TOKEN)
    >>> key = admin.create_tenant("docs", config={"threshold": 0.85})["api_key"]
    >>> docs = Client("http://127.0.0.1:8080", token=key)
    >>> docs.upsert("docs", "a", "the red fox runs very fast")["decision"]
    'distinct'

Every method returns the service's JSON answer as a dict. An error answer
raises ``ServiceError`` with the HTTP status, the stable ``code`` and the
message (``docs/service.md`` lists the codes). In cluster mode pass a
write's ``lsn`` as ``min_lsn`` to a read on another node; in a
partitioned cluster, a redirect to the node serving a tenant is followed
with the same method, body and token — only to the client's own URL and
the other ``nodes`` it was given: a redirect anywhere else raises
``ServiceError`` (``untrusted_redirect``) before the token is sent, so a
tampered registry cannot collect it.

Several nodes of a cluster (``Client(url, token, nodes=[url2, url3])``)
also give failover: a request that cannot connect, times out, or is
answered ``503`` is sent again, unchanged, to the next node, each node at
most once; the node that answered is used first next time. An upsert is
given an ``idempotency_key`` (a random one) when it has none, so a write
sent again after a timeout whose first try did land is answered as a
replay, never applied twice. docs/cluster.md says which answers are safe
to retry and why.

A cluster with home redirects (``--home-redirects true``) answers a write
that reaches a node other than its tenant's home with ``307 other_home``;
the client follows it and sends that tenant's next writes to the home
first, until the home stops answering.

``events(tenant, after=lsn)`` follows a tenant's event feed: every item
inserted or replaced with its decision, tombstone, label, rebuild and
rollback, once and in log order, long-polling when caught up. Save
``Client.resume_point(ev)`` after handling ``ev`` and pass it back
(``events(tenant, **point)``) to resume exactly after it, a restart of
the consumer or the service between; a point the feed no longer holds
raises ``ServiceError`` ``410 events_trimmed`` whose ``oldest_after`` says
where the feed resumes.
"""

import json
import socket
import urllib.error
import uuid
import urllib.parse
import urllib.request
from typing import Any, Dict, Iterable, Iterator, Mapping, Optional

__all__ = ["Client", "ServiceError"]

_MAX_REDIRECTS = 3


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """Redirects come back as errors; ``Client._call`` follows them itself,
    keeping the method, body and token (urllib would refuse a PUT's)."""

    def redirect_request(self, req, fp, code, msg, headers, newurl):  # noqa: D102
        return None


_OPENER = urllib.request.build_opener(_NoRedirect)


def _origin(url: str) -> tuple:
    """(scheme, host, port) of ``url``, the port defaulted by scheme."""
    p = urllib.parse.urlsplit(url)
    port = p.port or {"http": 80, "https": 443}.get(p.scheme)
    return (p.scheme, (p.hostname or "").lower(), port)


def _error(status: int, raw: bytes) -> "ServiceError":
    """The ``ServiceError`` of an error answer's body."""
    try:
        err = json.loads(raw)["error"]
        return ServiceError(status, err["code"], err["message"])
    except (ValueError, KeyError, TypeError):
        return ServiceError(status, "http_error", raw.decode(errors="replace"))


def _written_tenant(method: str, path: str) -> Optional[str]:
    """The tenant whose items a request writes (``PUT``/``DELETE``
    ``…/items/{id}``, ``POST …/items``), else ``None``."""
    parts = path.split("/")
    if len(parts) < 5 or parts[1:3] != ["v1", "tenants"] or parts[4] != "items":
        return None
    writes = (method == "POST" and len(parts) == 5) or (method in ("PUT", "DELETE") and len(parts) == 6)
    return urllib.parse.unquote(parts[3]) if writes else None


class _Unreachable(Exception):
    """A node could not take a request; ``cause`` says why."""

    def __init__(self, cause: Exception):
        super().__init__(str(cause))
        self.cause = cause


class ServiceError(Exception):
    """An error answer from the service."""

    def __init__(self, status: int, code: str, message: str, oldest_after: Optional[int] = None):
        super().__init__(f"{status} {code}: {message}")
        self.status = status
        self.code = code
        self.message = message
        # `410 events_trimmed`: the oldest position the event feed resumes after.
        self.oldest_after = oldest_after


class Client:
    """One service endpoint and bearer token (the operator token or a tenant key)."""

    def __init__(
        self, url: str, token: Optional[str] = None, timeout: float = 30.0, nodes: Iterable[str] = ()
    ):
        self.url = url.rstrip("/")
        self.token = token
        self.timeout = timeout
        # The nodes to fail over to, this one first; where redirects may
        # lead: their origins.
        self._nodes = list(dict.fromkeys([self.url, *(n.rstrip("/") for n in nodes)]))
        self._trusted = {_origin(u) for u in self._nodes}
        # Where each tenant's writes were last redirected (`other_home`).
        self._homes: Dict[str, str] = {}

    def _call(
        self, method: str, path: str, body: Any = None, query: Optional[Mapping[str, Any]] = None, raw: bool = False
    ) -> Any:
        params = {k: v for k, v in (query or {}).items() if v is not None}
        suffix = path + ("?" + urllib.parse.urlencode(params) if params else "")
        data = None if body is None else json.dumps(body).encode()
        # A write of a tenant whose home is known goes there first.
        tenant = _written_tenant(method, path)
        home = self._homes.get(tenant) if tenant else None
        if home:
            try:
                return self._send(method, home + suffix, data, tenant, raw)
            except _Unreachable:
                self._homes.pop(tenant, None)
        # Each node at most once, starting with the one that answered last.
        last: Optional[Exception] = None
        for _ in range(len(self._nodes)):
            base = self._nodes[0]
            try:
                return self._send(method, base + suffix, data, tenant, raw)
            except _Unreachable as e:
                last = e.cause
                # This node goes last; the next one is tried.
                self._nodes.append(self._nodes.pop(0))
        if isinstance(last, ServiceError):
            raise last
        raise ServiceError(503, "unreachable", f"no node answered {method} {path}: {last}")

    def _send(
        self, method: str, url: str, data: Optional[bytes], tenant: Optional[str] = None, raw: bool = False
    ) -> Any:
        """One request to one node, following its redirects; ``_Unreachable``
        when the node cannot take it (no connection, a timeout, ``503``).
        A ``307 other_home`` for a write of ``tenant`` is remembered. The
        answer's JSON, or its bytes when ``raw``."""
        # A partitioned cluster answers 307 for a tenant served by another
        # node: the same request (method, body, token) goes there.
        for _hop in range(_MAX_REDIRECTS + 1):
            req = urllib.request.Request(url, data=data, method=method)
            if data is not None:
                req.add_header("Content-Type", "application/json")
            if self.token:
                req.add_header("Authorization", f"Bearer {self.token}")
            try:
                with _OPENER.open(req, timeout=self.timeout) as resp:
                    body = resp.read()
                if raw:
                    return body
                return json.loads(body) if body else None
            except urllib.error.HTTPError as e:
                body = e.read()
                if e.code == 503:
                    raise _Unreachable(_error(e.code, body)) from None
                location = e.headers.get("Location")
                if e.code in (307, 308) and location:
                    url = urllib.parse.urljoin(url, location)
                    if _origin(url) not in self._trusted:
                        raise ServiceError(
                            e.code,
                            "untrusted_redirect",
                            f"redirected to {url}, which is not one of this client's nodes "
                            f"(pass it in nodes=[...] to trust it); the token was not sent there",
                        ) from None
                    if tenant and _error(e.code, body).code == "other_home":
                        parts = urllib.parse.urlsplit(url)
                        self._homes[tenant] = f"{parts.scheme}://{parts.netloc}"
                    continue
                err = _error(e.code, body)
                oldest = e.headers.get("Neardup-Oldest-After")
                if oldest is not None and oldest.isdigit():
                    err.oldest_after = int(oldest)
                raise err from None
            except (urllib.error.URLError, socket.timeout, TimeoutError, ConnectionError) as e:
                raise _Unreachable(e) from None
        raise ServiceError(307, "too_many_redirects", f"more than {_MAX_REDIRECTS} redirects from {url}")

    @staticmethod
    def _seg(s: str) -> str:
        return urllib.parse.quote(s, safe="")

    # Tenants and keys.
    def create_tenant(self, tenant_id: str, config: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:
        body: Dict[str, Any] = {"tenant_id": tenant_id}
        if config is not None:
            body["config"] = config
        return self._call("POST", "/v1/tenants", body)

    def tenant(self, tenant: str) -> Dict[str, Any]:
        return self._call("GET", f"/v1/tenants/{self._seg(tenant)}")

    def create_key(self, tenant: str, scopes: Iterable[str]) -> Dict[str, Any]:
        return self._call("POST", f"/v1/tenants/{self._seg(tenant)}/keys", {"scopes": list(scopes)})

    # Items.
    def upsert(self, tenant: str, item_id: str, content: str, **fields: Any) -> Dict[str, Any]:
        """Inserts or replaces an item; ``fields`` are the request's other
        fields (``epoch``, ``idempotency_key``, ``metadata``)."""
        path = f"/v1/tenants/{self._seg(tenant)}/items/{self._seg(item_id)}"
        fields.setdefault("idempotency_key", uuid.uuid4().hex)
        return self._call("PUT", path, {"content": content, **fields})

    def upsert_many(self, tenant: str, items: Iterable[Mapping[str, Any]]) -> Dict[str, Any]:
        """A batch: items are ``{"item_id", "content", ...}``."""
        return self._call("POST", f"/v1/tenants/{self._seg(tenant)}/items", {"items": list(items)})

    def get(self, tenant: str, item_id: str, min_lsn: Optional[int] = None) -> Dict[str, Any]:
        path = f"/v1/tenants/{self._seg(tenant)}/items/{self._seg(item_id)}"
        return self._call("GET", path, query={"min_lsn": min_lsn})

    def tombstone(self, tenant: str, item_id: str, epoch: int) -> Dict[str, Any]:
        path = f"/v1/tenants/{self._seg(tenant)}/items/{self._seg(item_id)}"
        return self._call("DELETE", path, query={"epoch": epoch})

    # Queries.
    def decide(self, tenant: str, content: str, min_lsn: Optional[int] = None) -> Dict[str, Any]:
        return self._call("POST", f"/v1/tenants/{self._seg(tenant)}/decide", {"content": content}, {"min_lsn": min_lsn})

    def candidates(self, tenant: str, content: str, min_lsn: Optional[int] = None) -> Dict[str, Any]:
        path = f"/v1/tenants/{self._seg(tenant)}/candidates"
        return self._call("POST", path, {"content": content}, {"min_lsn": min_lsn})

    # Review (what the console at /console/ shows, for scripts).
    def queue(
        self, tenant: str, state: Optional[Iterable[str]] = None, before: Optional[str] = None, limit: int = 50
    ) -> Dict[str, Any]:
        """Flagged items, newest write first (``state`` defaults to review,
        near_duplicate and quarantined); pass ``next_before`` as ``before``
        for the next page. Needs the review scope."""
        states = None if state is None else ",".join(state)
        path = f"/v1/tenants/{self._seg(tenant)}/queue"
        return self._call("GET", path, query={"state": states, "before": before, "limit": limit})

    def compare(self, tenant: str, left: str, right: str) -> Dict[str, Any]:
        """Two items side by side: the verification, each text as runs
        marked ``shared`` where a shingle the other holds covers it, and the
        labels naming either item. Needs the review scope."""
        return self._call("POST", f"/v1/tenants/{self._seg(tenant)}/compare", {"left": left, "right": right})

    def label(
        self, tenant: str, left: str, right: str, label: str, rationale: str = "", actor: Optional[str] = None
    ) -> Dict[str, Any]:
        """Records a reviewer label (``duplicate``, ``near_duplicate`` or
        ``distinct``): an immutable event."""
        body: Dict[str, Any] = {"left": left, "right": right, "label": label, "rationale": rationale}
        if actor is not None:
            body["actor"] = actor
        return self._call("POST", f"/v1/tenants/{self._seg(tenant)}/labels", body)

    def neighbourhood(self, tenant: str, item_id: str, max_members: int = 50) -> Dict[str, Any]:
        """The items reachable from ``item_id`` through verified pairs at or
        above the similar threshold."""
        path = f"/v1/tenants/{self._seg(tenant)}/items/{self._seg(item_id)}/neighbourhood"
        return self._call("GET", path, query={"max": max_members})

    def dashboard(self, tenant: str) -> Dict[str, Any]:
        """The dashboards' figures: histograms, bucket sizes, ingest per
        minute, the S-curve, labelled precision and recall, the shadow report."""
        return self._call("GET", f"/v1/tenants/{self._seg(tenant)}/dashboard")

    def unfence(self, tenant: str, item_id: str) -> Dict[str, Any]:
        """Lifts a tombstone's epoch fence (admin scope; the id must not be live)."""
        return self._call("POST", f"/v1/tenants/{self._seg(tenant)}/items/{self._seg(item_id)}/unfence")

    # The event feed.
    def events(
        self,
        tenant: str,
        after: int = 0,
        after_i: Optional[int] = None,
        wait: int = 25,
        limit: int = 500,
        follow: bool = True,
    ) -> Iterator[Dict[str, Any]]:
        """The tenant's events after position ``after`` (and, within the
        batch entry at ``after``, after its event ``after_i``), each once,
        in log order (query scope). Caught up, it waits for the next event
        ``wait`` seconds at a time (at most 25, less than the client's
        timeout) and goes on; with ``follow=False`` it stops instead. See
        ``resume_point`` for where to resume."""
        wait = max(0, min(wait, 25, int(self.timeout) - 1))
        path = f"/v1/tenants/{self._seg(tenant)}/events"
        while True:
            query = {"after": after, "after_i": after_i, "wait": wait if follow else 0, "limit": limit}
            page = self._call("GET", path, query=query, raw=True) or b""
            lines = page.splitlines()
            for line in lines:
                ev = json.loads(line)
                point = self.resume_point(ev)
                after, after_i = point["after"], point["after_i"]
                yield ev
            if not lines and not follow:
                return

    @staticmethod
    def resume_point(ev: Mapping[str, Any]) -> Dict[str, Any]:
        """Where the feed resumes just after event ``ev``: the keyword
        arguments of ``events`` (``{"after": lsn, "after_i": i or None}``)."""
        last = ev["i"] + 1 == ev["n"]
        return {"after": ev["lsn"], "after_i": None if last else ev["i"]}

    def ready(self) -> bool:
        try:
            self._call("GET", "/readyz")
            return True
        except (ServiceError, OSError):
            return False
