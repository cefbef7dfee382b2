"""neardup: near-duplicate detection with a Rust core.

Candidates come from MinHash-LSH; every candidate is verified with exact
Jaccard on canonical shingle sets, so a reported score is the true
similarity, not an estimate. Parameters, names and defaults are those of the
``neardup`` command line (``neardup dedup --help``).

    >>> import neardup
    >>> idx = neardup.Index(threshold=0.75, shingle_width=2, normalizer="seed")
    >>> idx.add("A", "red fox runs very fast")
    []
    >>> idx.add("B", "red fox runs very fast today")
    [('A', 0.8)]
"""

from typing import Any, Iterable, Iterator, List, Mapping, NamedTuple, Optional, Tuple

# Fingerprints hand their arrays out as NumPy arrays: without NumPy the
# extension would fail only at the first array, with a Rust panic.
try:
    import numpy as _numpy  # noqa: F401
except ImportError as e:
    raise ImportError(
        f"neardup needs NumPy, which cannot be imported here ({e}); install it with "
        "`python -m pip install 'numpy>=1.21'` (pip installs it with neardup unless told not to, "
        "as with --no-deps)",
        name="numpy",
    ) from e

from ._neardup import DEFAULT_SEED, Fingerprint, Fingerprinter, Index, _Dedup, _Keep, exact_pairs, jaccard, pair_score

__all__ = ["DEFAULT_SEED", "Fingerprint", "Fingerprinter", "Index", "Outcome", "dedup", "exact_pairs", "jaccard", "pair_score"]


class Outcome(NamedTuple):
    """What ``dedup`` decided for one record."""

    #: The record's id (its ``id_key`` value, else its 1-based position).
    id: str
    #: False when it verifies at or above the threshold against an earlier kept record
    #: (earlier in the order of the keeper policy, ``keep``).
    kept: bool
    #: The best-scoring earlier kept record it duplicates, when dropped.
    duplicate_of: Optional[str]
    #: Its exact Jaccard score against ``duplicate_of``.
    score: Optional[float]
    #: Every earlier record it verifies against, ``(id, score)``: the first
    #: query's best first, then any found by looking further among kept records.
    matches: List[Tuple[str, float]]


def dedup(
    records: Iterable[Mapping[str, Any]],
    *,
    text_key: str = "text",
    id_key: str = "id",
    chunk: int = 1024,
    keep: str = "first",
    **params: Any,
) -> Iterator[Tuple[Mapping[str, Any], Outcome]]:
    """Deduplicates a stream of records as ``neardup dedup`` does, lazily.

    Yields ``(record, Outcome)`` for every record, in order. A record is
    dropped only when it verifies against an earlier *kept* record (the
    greedy rule of the command line), so every dropped record names the kept
    one it duplicates. ``params`` are ``Index``'s (``threshold``,
    ``shingle_width``, ``normalizer``, ...). Records are indexed ``chunk`` at
    a time with the GIL released; memory grows with the index, not the
    stream. A record without a string ``text_key`` raises ``ValueError``.

    ``keep`` is the keeper policy of ``neardup dedup --keep``: ``first``
    (the earliest record), ``longest`` (the most text), ``max:FIELD`` or
    ``min:FIELD`` (a number, a string holding one, or an ISO 8601 date; a
    dotted path reaches into nested mappings; records without a value come
    last). Records are decided in the order it induces, ties in input
    order, so a dropped record's kept duplicate is one the policy prefers.
    Other than ``first`` the whole stream is read before the first record
    is yielded (still in input order).
    """
    if chunk < 1:
        raise ValueError("chunk must be at least 1")
    policy = _Keep(keep)
    if not policy.is_first:
        yield from _dedup_ordered(list(records), policy, text_key, id_key, chunk, params)
        return
    # The command line's rule itself (greedy leaders, and the look further
    # among kept records when the cap cut close), from the Rust core.
    rule = _Dedup(Index(**params))
    position = 0
    batch: List[Mapping[str, Any]] = []

    def flush() -> Iterator[Tuple[Mapping[str, Any], Outcome]]:
        nonlocal position
        items = []
        for record in batch:
            position += 1
            text = record.get(text_key)
            if not isinstance(text, str):
                raise ValueError(f"record {position}: missing string field {text_key!r}")
            rid = record.get(id_key)
            items.append((str(rid) if rid is not None else str(position), text))
        for record, (rid, _), (kept, dup, score, matches) in zip(batch, items, rule.add_many(items)):
            yield record, Outcome(rid, kept, dup, score, matches)
        batch.clear()

    for record in records:
        batch.append(record)
        if len(batch) >= chunk:
            yield from flush()
    if batch:
        yield from flush()


def _field(record: Mapping[str, Any], path: str) -> Any:
    """A record's value at ``path``: the key spelled so, else the dotted
    path through nested mappings (as the command line reads JSON)."""
    if path in record:
        return record[path]
    value: Any = record
    for part in path.split("."):
        if not isinstance(value, Mapping) or part not in value:
            return None
        value = value[part]
    return value


def _dedup_ordered(
    records: List[Mapping[str, Any]],
    policy: "_Keep",
    text_key: str,
    id_key: str,
    chunk: int,
    params: Mapping[str, Any],
) -> Iterator[Tuple[Mapping[str, Any], Outcome]]:
    """``dedup`` under a keeper policy: every record is read, ordered by the
    policy's key (ties in input order), decided in that order, and yielded
    in input order."""
    rule = _Dedup(Index(**params))
    items = []
    for position, record in enumerate(records, 1):
        text = record.get(text_key)
        if not isinstance(text, str):
            raise ValueError(f"record {position}: missing string field {text_key!r}")
        rid = record.get(id_key)
        value = _field(record, policy.field) if policy.field is not None else None
        items.append((str(rid) if rid is not None else str(position), text, policy.order(text, value)))
    order = sorted(range(len(items)), key=lambda k: items[k][2])
    outcomes: List[Optional[Outcome]] = [None] * len(items)
    for start in range(0, len(order), chunk):
        block = order[start:start + chunk]
        decided = rule.add_many([(items[k][0], items[k][1]) for k in block])
        for k, (kept, dup, score, matches) in zip(block, decided):
            outcomes[k] = Outcome(items[k][0], kept, dup, score, matches)
    for record, outcome in zip(records, outcomes):
        assert outcome is not None
        yield record, outcome
