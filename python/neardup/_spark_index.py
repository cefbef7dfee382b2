"""The Spark job's saved index: every item of earlier runs as Parquet rows,
so a new run is deduplicated against them without recomputing them
(``python -m neardup.spark --index-in DIR --index-out DIR2``).

A row is what ``neardup dedup --index`` saves of an item (its file,
``index.ndx``, holds the same fields): its id, whether it was kept, its
cluster (the id of the cluster's first item), its content hash, its folded
band keys, its ranking sketch and its canonical features — plus where it
stands in the order of all runs (``run``, then ``order``, the keeper
policy's key, then ``file`` and ``pos``, the input order), and ``config``,
the settings its decisions were made under (a run under other settings is
refused, as the command line refuses an index made under others).
"""

import json
from typing import Any, Callable, Dict, Iterator

import neardup

# Each text's image (``Index._image_arrow``), as Arrow columns.
IMAGE_FIELDS = ("hash", "keys", "sketch", "features")


def schema():
    """The index rows' Spark schema."""
    from pyspark.sql import types as T

    return T.StructType([
        T.StructField("run", T.IntegerType(), False),
        T.StructField("order", T.LongType(), False),
        T.StructField("file", T.IntegerType(), False),
        T.StructField("pos", T.LongType(), False),
        T.StructField("id", T.StringType(), True),
        T.StructField("kept", T.BooleanType(), False),
        T.StructField("cluster", T.StringType(), True),
        T.StructField("hash", T.BinaryType(), False),
        T.StructField("keys", T.ArrayType(T.IntegerType(), False), False),
        T.StructField("sketch", T.BinaryType(), False),
        T.StructField("features", T.BinaryType(), False),
        T.StructField("config", T.StringType(), False),
    ])


def config_of(rule_params: Dict[str, Any], keep: str) -> str:
    """What a run's decisions depend on, as one string: the fingerprint
    version (normalizer, shingles, signature, bands, seed), the threshold,
    the candidate cap and bucket read, and the keeper policy."""
    f = neardup.Fingerprinter(**{k: v for k, v in rule_params.items()
                                 if k not in ("max_candidates", "max_bucket_read")})
    index = neardup.Index(**rule_params)
    return json.dumps({
        "fingerprint_version": f.fingerprint_version,
        "threshold": index.threshold,
        "max_candidates": rule_params.get("max_candidates", 100),
        "max_bucket_read": rule_params.get("max_bucket_read", 1000),
        "keep": keep,
    }, sort_keys=True)


def check_config(index_df, want: str) -> None:
    """Refuses an index whose rows were made under other settings."""
    found = [r["config"] for r in index_df.select("config").distinct().limit(3).collect()]
    if not found or found == [want]:
        return
    if len(found) > 1:
        raise ValueError("the index holds rows made under different settings")
    have, need = json.loads(found[0]), json.loads(want)
    differ = ", ".join(f"{k} {have.get(k)!r} (this run: {need.get(k)!r})" for k in sorted(need)
                       if have.get(k) != need.get(k))
    raise ValueError(f"the index was made under other settings: {differ}")


def _hashes_and_keys(table) -> tuple:
    """Index rows' content hashes (16 bytes each, flat) and folded band keys
    (``int32`` offsets, ``uint32`` keys)."""
    import numpy as np

    from neardup._arrow import buffers as binary

    hash_offsets, hashes = binary(table.column("hash"))
    if np.any(np.diff(hash_offsets) != 16):
        raise ValueError("an index row's content hash is not 16 bytes")
    keys = table.column("keys").combine_chunks()
    key_offsets = np.asarray(keys.offsets, dtype=np.int64)
    key_values = np.asarray(keys.values, dtype=np.int32)[key_offsets[0]:key_offsets[-1]].view(np.uint32)
    key_offsets = (key_offsets - key_offsets[0]).astype(np.int32)
    return hashes, key_offsets, np.ascontiguousarray(key_values)


def image_columns(table) -> tuple:
    """``_Dedup._add_prior``'s arrays from index rows (an Arrow table)."""
    import numpy as np

    from neardup._arrow import buffers as binary

    hashes, key_offsets, key_values = _hashes_and_keys(table)
    sketch_offsets, sketches = binary(table.column("sketch"))
    feature_offsets, feature_bytes = binary(table.column("features"))
    if np.any(feature_offsets % 8):
        raise ValueError("an index row's features are not whole 8-byte values")
    features = np.frombuffer(feature_bytes.tobytes(), dtype="<u8")
    return (hashes, key_offsets, key_values, sketch_offsets.astype(np.int32), sketches, feature_offsets // 8,
            features)


def image_batches(params: Dict[str, Any], keep: str, run: int, config: str) -> Callable[[Iterator[Any]], Iterator[Any]]:
    """``mapInArrow``'s function: this run's rows (``pos``, ``file``, ``id``,
    ``text``, ``keyval``) to index rows, ``kept`` true and no ``cluster``
    (the decisions are joined in after)."""
    from neardup._arrow import buffers

    def run_batches(batches):
        import numpy as np
        import pyarrow as pa

        index = neardup.Index(**params)
        policy = neardup._Keep(keep)
        for batch in batches:
            n = batch.num_rows
            text = batch.column(batch.schema.get_field_index("text"))
            offsets, data = buffers(text)
            hashes, key_offsets, keys, sketch_offsets, sketches, feature_offsets, features = \
                index._image_arrow(offsets, data)
            if policy.is_first:
                order = np.zeros(n, dtype=np.int64)
            else:
                texts = [t if t is not None else "" for t in text.to_pylist()]
                values = batch.column(batch.schema.get_field_index("keyval")).to_pylist()
                # The policy's u64 keys as signed longs that sort alike.
                order = (np.array([policy.order(t, v) for t, v in zip(texts, values)], dtype=np.uint64)
                         ^ np.uint64(1 << 63)).view(np.int64)
            yield pa.RecordBatch.from_arrays(
                [pa.array(np.full(n, run, dtype=np.int32)), pa.array(order),
                 batch.column(batch.schema.get_field_index("file")), batch.column(batch.schema.get_field_index("pos")),
                 batch.column(batch.schema.get_field_index("id")), pa.array(np.ones(n, dtype=bool)),
                 pa.nulls(n, pa.string()),
                 pa.FixedSizeBinaryArray.from_buffers(pa.binary(16), n, [None, pa.py_buffer(hashes)]).cast(pa.binary()),
                 pa.ListArray.from_arrays(pa.array(key_offsets), pa.array(keys.view(np.int32))),
                 pa.BinaryArray.from_buffers(pa.binary(), n, [None, pa.py_buffer(sketch_offsets),
                                                              pa.py_buffer(sketches)]),
                 pa.LargeBinaryArray.from_buffers(pa.large_binary(), n, [None, pa.py_buffer(feature_offsets * 8),
                                                                        pa.py_buffer(features)]).cast(pa.binary()),
                 pa.array([config] * n, pa.string())],
                names=[f.name for f in schema().fields],
            )

    return run_batches


def link_batches() -> Callable[[Iterator[Any]], Iterator[Any]]:
    """``mapInArrow``'s function: index rows (``node``, ``hash``, ``keys``)
    to the keys the single-machine index files them under (``node``,
    ``keys``: the folded band keys, ``hkey``: the content hash's first four
    bytes, little-endian), as the key stage gives this run's rows."""

    def run(batches):
        import numpy as np
        import pyarrow as pa

        for batch in batches:
            # Only what links rows: their sketches and features stay unread.
            hashes, key_offsets, keys = _hashes_and_keys(pa.Table.from_batches([batch]))
            hkey = hashes.reshape(-1, 16)[:, :4].copy().view("<u4").reshape(-1).astype(np.int64)
            yield pa.RecordBatch.from_arrays(
                [batch.column(batch.schema.get_field_index("node")),
                 pa.ListArray.from_arrays(pa.array(key_offsets), pa.array(keys.astype(np.int64))),
                 pa.array(hkey)],
                names=["node", "keys", "hkey"],
            )

    return run
