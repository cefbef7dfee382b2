"""Dataset dedup on Apache Spark, with neardup's Rust code in the executors.

    python -m neardup.spark --input in.parquet --output out/ --threshold 0.85 \\
        --normalizer seed --shingle-width 5 --master local[2]

writes ``out/pairs/`` (Parquet: ``left``, ``right``, ``score``),
``out/clusters/`` (``id``, ``cluster``: the id of the cluster's first item)
and ``out/kept/`` (the input rows that are kept, every column, in input
order). They are ``neardup dedup``'s pairs, clusters and kept set with the
same settings, capped queries and hot buckets included: the decisions are
made by the command line's own batch rule (the core's ``Greedy``, as
``neardup.dedup`` calls it), over each group of rows that can see each other.

Stages:

1. Positions: rows are in input order by their file's name (a folder's
   files in name order, as the command line takes them), then by
   ``monotonically_increasing_id()`` (increasing in the order read).
2. Keys (``mapInArrow``, Rust): each row's LSH band keys and its content
   hash — the only keys a query of the single-machine index looks rows up
   by. Arrow batches in and out (the texts read from the Arrow buffers,
   with no Python object per row); the keys leave as one Arrow list column.
3. Groups: rows linked by a shared key (a band bucket, or equal content:
   each row to its bucket's first, in one window over the bucket), as
   connected components, computed by alternating large-star and
   small-star rounds (the rounds grow with the log of a component's size,
   not its diameter); each round's edges are checkpointed
   (``--checkpoint-dir``, else ``localCheckpoint`` on the executors'
   disks), so the plan stays one round long. A row that shares no key with
   another is kept and in no cluster, with no more work.
4. Decisions per group (``groupBy(...).applyInArrow``, Rust): the grouped
   rows' texts are read again (the input filtered where it is read by a
   broadcast join when at most ``BROADCAST_ROWS`` rows are grouped, else a
   shuffle join); a group's rows, in input order, go through the batch
   rule — candidates among the earlier rows sharing a band (each bucket
   read up to ``max_bucket_read``), ranked by the sketch estimate and
   capped at ``max_candidates``, verified exactly; the look further among
   kept rows where the cap cut close. Every row any query of a group's
   rows could read is in the group, so each decision is the one a run
   over the whole input makes — with one exception: the single-machine
   index files rows under 32-bit posting keys (band keys folded, the
   content hash's first four bytes), the groups are linked by 64-bit
   ones; two different keys of one band share a posting key with
   probability 2^-32, and only where that list is read partially or the
   cap cuts can the row outside the group change a decision. Linking by
   the 32-bit keys would remove it, but would join unrelated rows into
   one group at a few hundred million documents. Clusters
   (connected components of the verified pairs, named by their first row)
   lie within a group, and are found there too.
5. Output: the pairs and clusters from the groups' rows; the kept rows are
   the input less the dropped ones (a broadcast anti join under the same
   bound), sorted into input order.

The driver holds the configuration, counts and at most ``BROADCAST_ROWS``
positions of a broadcast join; everything proportional to the data stays on
the executors.

The limit: a group is decided in one task, sequentially (the greedy rule is
sequential). On templated data LSH buckets link rows far beyond their near
duplicates, so the largest group can hold a large share of the input (half
of bench/corpus/real.py's documents): that task's time and memory are the
command line's for those rows, and bound the job's.

Where the workers get neardup: the Python workers of the executors import
it. On a local master (``local``, ``local[N]``, ``local-cluster[...]``) the
command runs them with its own interpreter (``sys.executable``), so a
virtual environment works without being activated; ``PYSPARK_PYTHON``, when
set, names the workers' interpreter instead. On a cluster the executors'
interpreter needs neardup (with NumPy, pandas and PyArrow) too: install it
there, or ship an environment with the job, as Spark's "Python Package
Management" guide describes::

    venv-pack -o env.tar.gz          # in the environment with neardup (or conda-pack)
    PYSPARK_PYTHON=./env/bin/python python -m neardup.spark \\
        --master spark://host:7077 --conf spark.archives=env.tar.gz#env \\
        --checkpoint-dir hdfs:///tmp/neardup-checkpoints ...

Before any work, a small probe job checks that the workers import
neardup; when they cannot, the command says so, with this advice, and exits
with status 1.

Incremental runs (``--index-in``, ``--index-out``; ``dedup_with_index``):
an earlier run's index rows (``neardup._spark_index``) join the groups as
rows before every row of the input, already decided, linked by the
32-bit keys the single-machine index files items under (folded band keys,
the content hash's first four bytes) and each to its cluster's first row;
this run's rows are linked by the same keys, so each group holds every row
a query of the command line reads, and the decisions are its own. The new
index is the earlier rows (their clusters as they now are) and this run's
rows, fingerprinted again with their decisions.

Where it differs from ``neardup dedup``: rows whose text is missing are
deduplicated as empty text (the command line rejects them); ids are not
checked for uniqueness (the command line rejects a repeated id); and files
in nested folders are ordered by their paths as strings, which can differ
from the command line's order by path components.
"""

import argparse
import os
import sys
import time
from typing import Any, Callable, Dict, Iterator, Optional

import neardup
from neardup._arrow import buffers
from neardup._spark_graph import _checkpointer, connected_components  # noqa: F401 (public here)

# The most rows of positions (a long or two each) that a join broadcasts
# by default: ~50 MB on the driver and on each executor, whatever the
# input's size (``--broadcast-rows``).
BROADCAST_ROWS = 2_000_000


def _key_batches(params: Dict[str, Any], posting: bool = False) -> Callable[[Iterator[Any]], Iterator[Any]]:
    """``mapInArrow``'s function: (``pos``, text) batches to (``pos``, ``keys``:
    the band keys, ``hkey``: 64 bits of the content hash), in Rust; with
    ``posting``, the 32-bit keys the single-machine index files rows under
    (what an earlier run's index rows hold)."""

    def run(batches):
        import numpy as np
        import pyarrow as pa

        f = neardup.Fingerprinter(**params)
        for batch in batches:
            offsets, data = buffers(batch.column(1))
            key_offsets, keys, hkeys = f._band_keys_arrow(offsets, data, posting)
            # The band keys and hashes are u64: their bits, as Spark's signed longs.
            yield pa.RecordBatch.from_arrays(
                [batch.column(0),
                 pa.ListArray.from_arrays(pa.array(key_offsets), pa.array(keys.view(np.int64))),
                 pa.array(hkeys.view(np.int64))],
                names=["pos", "keys", "hkey"],
            )

    return run


def _decide_group(params: Dict[str, Any], keep: str = "first", run_no: int = 0,
                  incremental: bool = False) -> Callable[[Any], Any]:
    """``applyInArrow``'s function: one group's rows (``pos``, ``id``,
    ``text``, ``keyval``, an Arrow table) through the batch rule, in input
    order (under a keeper policy, in its order, ties in input order); returns
    the rows in a cluster (every dropped row is), with their cluster (the id
    of its first row) and their matches (``left``: the earlier ids,
    ``score``). With ``incremental``, rows with ``prior`` set are an earlier
    run's index rows: they go first, in their order, already decided, as
    ``neardup dedup --index`` loads them; those whose cluster gains a row of
    this run are returned too (``prior`` set), with their cluster now. An
    earlier row's ``pos`` is its node in the groups, ``at`` its position in
    its run."""

    def run(table):
        import pyarrow as pa
        import pyarrow.compute as pc

        prior = None
        if incremental:
            is_prior = table.column("prior")
            prior = table.filter(is_prior)
            table = table.filter(pc.invert(is_prior))
            prior = prior.take(pc.sort_indices(prior, sort_keys=[
                ("run", "ascending"), ("order", "ascending"), ("file", "ascending"), ("at", "ascending")]))
        sort_keys = [("file", "ascending"), ("pos", "ascending")]
        policy = neardup._Keep(keep)
        if not policy.is_first:
            texts = [t if t is not None else "" for t in table.column("text").to_pylist()]
            values = table.column("keyval").to_pylist() if policy.field is not None else [None] * len(texts)
            orders = pa.array([policy.order(t, v) for t, v in zip(texts, values)], pa.uint64())
            table = table.append_column("policy_order", orders)
            sort_keys.insert(0, ("policy_order", "ascending"))
        table = table.take(pc.sort_indices(table, sort_keys=sort_keys))
        pos, ids = table.column("pos").to_pylist(), table.column("id").to_pylist()
        file = table.column("file").to_pylist()
        texts = [t if t is not None else "" for t in table.column("text").to_pylist()]
        # Named by their place in the group (earlier runs' rows first): ids
        # need not be unique.
        rule = neardup._Dedup(neardup.Index(**params))
        p = prior.num_rows if prior is not None else 0
        order = [0] * (p + len(ids))
        prior_kept, prior_cluster, prior_run = [], [], []
        if p:
            from neardup._spark_index import image_columns

            prior_kept = prior.column("kept").to_pylist()
            prior_cluster = prior.column("cluster").to_pylist()
            prior_run = prior.column("run").to_pylist()
            rule._add_prior([str(k) for k in range(p)], prior_kept, *image_columns(prior))
            pos = prior.column("pos").to_pylist() + pos
            ids = prior.column("id").to_pylist() + ids
            file = prior.column("file").to_pylist() + file
            order = prior.column("order").to_pylist() + [0] * (len(ids) - p)
        outcomes = rule.add_many([(str(p + k), t) for k, t in enumerate(texts)])
        del texts
        n = p + len(outcomes)
        parent = list(range(n))

        def find(x: int) -> int:
            while parent[x] != x:
                parent[x] = parent[parent[x]]
                x = parent[x]
            return x

        def union(x: int, y: int) -> None:
            a, b = find(x), find(y)
            if a != b:
                parent[max(a, b)] = min(a, b)

        # Earlier runs' clusters, as the saved index records them (each row
        # names its cluster's first row, which is in the group: rows of a
        # cluster are linked).
        first_of = {ids[k]: k for k in range(p) if prior_cluster[k] == ids[k]}
        for k in range(p):
            if prior_cluster[k] is not None and prior_cluster[k] in first_of:
                union(k, first_of[prior_cluster[k]])
        for k, (_, _, _, matches) in enumerate(outcomes):
            for j, _ in matches:
                union(p + k, int(j))
        # The root of a component is its smallest member: its first row.
        roots = [find(k) for k in range(n)]
        size: Dict[int, int] = {}
        fresh: Dict[int, bool] = {}
        for k, r in enumerate(roots):
            size[r] = size.get(r, 0) + 1
            fresh[r] = fresh.get(r, False) or k >= p
        # This run's rows in a cluster, and earlier rows whose cluster has one.
        rows = [k for k in range(n) if size[roots[k]] > 1 and fresh[roots[k]]]
        kept = prior_kept + [o[0] for o in outcomes]
        matches = [[]] * p + [o[3] for o in outcomes]
        return pa.table({
            "pos": pa.array([pos[k] for k in rows], pa.int64()),
            "file": pa.array([file[k] for k in rows], pa.int32()),
            "id": pa.array([ids[k] for k in rows], pa.string()),
            "kept": pa.array([kept[k] for k in rows], pa.bool_()),
            "cluster": pa.array([ids[roots[k]] for k in rows], pa.string()),
            "left": pa.array([[ids[int(j)] for j, _ in matches[k]] for k in rows], pa.list_(pa.string())),
            "score": pa.array([[s for _, s in matches[k]] for k in rows], pa.list_(pa.float64())),
            "prior": pa.array([k < p for k in rows], pa.bool_()),
            "run": pa.array([prior_run[k] if k < p else run_no for k in rows], pa.int32()),
            "order": pa.array([order[k] for k in rows], pa.int64()),
        })

    return run


def _key_column(df, field: str):
    """The keeper policy's column as the command line reads it: numbers as
    doubles, dates and timestamps as seconds since 1970 (UTC), strings as
    they are (parsed by the policy: numbers or ISO 8601 dates)."""
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    try:
        kind = df.select(F.col(field)).schema.fields[0].dataType
    except Exception as e:  # AnalysisException: no such column
        raise ValueError(f"no column {field!r} (--keep); columns: {', '.join(df.columns)}") from e
    col = F.col(field)
    if isinstance(kind, T.NumericType):
        return col.cast("double")
    if isinstance(kind, T.DateType):
        return (F.datediff(col, F.lit("1970-01-01").cast("date")) * 86400).cast("double")
    if isinstance(kind, T.TimestampType):
        return col.cast("double")
    if isinstance(kind, T.StringType):
        return col
    raise ValueError(f"column {field!r} is {kind.simpleString()}: --keep needs numbers, dates, timestamps or strings")


def dedup(
    df,
    id_col: str = "id",
    text_col: str = "text",
    threshold: float = 0.8,
    stats: Optional[dict] = None,
    keep: str = "first",
    broadcast_rows: int = BROADCAST_ROWS,
    **params: Any,
):
    """Deduplicates DataFrame ``df`` as ``neardup dedup`` does; returns
    ``(pairs_df, clusters_df, kept_df)``. See :func:`dedup_with_index` for
    a run against earlier runs' items.

    ``params`` are ``neardup.Index``'s (``shingle_width``, ``normalizer``,
    ``num_perm``, ``max_candidates``, ``max_bucket_read``, ...). Rows are
    ordered by their file's name (when ``df`` reads several), then by
    their position as read; ``pairs_df`` has ``left``
    (the earlier), ``right``, ``score``; ``clusters_df`` has ``id`` and
    ``cluster`` (the id of the cluster's first item) for rows with a near
    duplicate; ``kept_df`` is ``df``'s kept rows with every column, in input
    order. ``stats``, when given, gets ``rounds`` (of connected components).
    ``keep`` is ``neardup dedup --keep``'s keeper policy (``first``,
    ``longest``, ``max:COLUMN``, ``min:COLUMN``; a dotted path reaches into
    struct columns; numbers, numeric or ISO 8601 strings, dates and
    timestamps), each group decided in its order.
    ``broadcast_rows`` bounds the positions a broadcast join may hold (on
    the driver and each executor); past it, and at 0, the job asks for no
    broadcast (Spark may still broadcast a side smaller than its
    ``spark.sql.autoBroadcastJoinThreshold``).
    ``df`` is read more than once (positions, texts, kept rows) and must
    give the same rows in the same partitions each time, as a file scan
    does; checkpoint a DataFrame that comes out of a shuffle first.
    The result DataFrames share a checkpointed decision table: write or
    count them, in any order.
    """
    pairs_df, clusters_df, kept_df, _ = _dedup(df, id_col, text_col, threshold, stats, keep, broadcast_rows,
                                               None, False, params)
    return pairs_df, clusters_df, kept_df


def dedup_with_index(
    df,
    index=None,
    id_col: str = "id",
    text_col: str = "text",
    threshold: float = 0.8,
    stats: Optional[dict] = None,
    keep: str = "first",
    broadcast_rows: int = BROADCAST_ROWS,
    **params: Any,
):
    """:func:`dedup` against the items of earlier runs, as ``neardup dedup
    --index`` runs: returns ``(pairs_df, clusters_df, kept_df, index_df)``.

    ``index`` is an earlier run's ``index_df`` (read back from Parquet), or
    None for the first run. Its rows go before every row of ``df``, already
    decided: a row of ``df`` is dropped when it verifies against a kept row
    of any run. ``pairs_df`` and ``kept_df`` are this run's;
    ``clusters_df`` holds the clusters with a row of this run, earlier
    members included; ``index_df`` is every row of every run so far (earlier
    rows with their clusters as they are now), to write for the next run.
    Rows are grouped by the 32-bit keys the single-machine index files them
    under, so the decisions are the command line's exactly. ``index`` must
    have been made under the same settings (refused otherwise).
    """
    return _dedup(df, id_col, text_col, threshold, stats, keep, broadcast_rows, index, True, params)


def _dedup(df, id_col, text_col, threshold, stats, keep, broadcast_rows, index, want_index, params):
    from pyspark.sql import functions as F
    from pyspark.sql import types as T
    from pyspark.sql.window import Window

    from neardup import _spark_index

    spark = df.sparkSession
    # Validate the configuration once, on the driver, with neardup's message.
    rule_params = dict(params, threshold=threshold)
    neardup.Index(**rule_params)
    policy = neardup._Keep(keep)
    incremental = want_index
    config = _spark_index.config_of(rule_params, keep) if incremental else ""
    run_no = 0
    prior = None
    if index is not None:
        _spark_index.check_config(index, config)
        last = index.agg(F.max("run")).first()[0]
        run_no = 0 if last is None else last + 1
    keyval = _key_column(df, policy.field) if policy.field is not None else F.lit(None).cast("double")
    fp_params = {k: v for k, v in rule_params.items() if k not in ("max_candidates", "max_bucket_read")}
    checkpoint = _checkpointer(spark)

    # Input order: files by name (as the command line takes a folder's),
    # then the order read. Spark reads a folder's files largest first, so
    # the position it gives (monotonically_increasing_id: increasing in
    # the order read, unique) orders rows within a file only.
    base = df.withColumn("__pos", F.monotonically_increasing_id())
    files = sorted(df.inputFiles())
    if len(files) > 1:
        ranks = spark.createDataFrame(list(enumerate(files)), "__file int, __name string")
        base = base.withColumn("__name", F.input_file_name()).join(F.broadcast(ranks), "__name", "left")
        base = base.withColumn("__file", F.coalesce("__file", F.lit(-1))).drop("__name")
    else:
        base = base.withColumn("__file", F.lit(0))
    texts = base.select(F.col("__pos").alias("pos"), F.col(text_col).cast("string").alias("text"))
    key_schema = T.StructType([
        T.StructField("pos", T.LongType(), False),
        T.StructField("keys", T.ArrayType(T.LongType()), False),
        T.StructField("hkey", T.LongType(), False),
    ])
    keys = checkpoint(texts.mapInArrow(_key_batches(fp_params, posting=incremental), key_schema))

    # Each bucket (band, key) and each content links its rows to its first.
    exploded = keys.select("pos", F.posexplode("keys").alias("band", "key")).unionByName(
        keys.select("pos", F.lit(-1).alias("band"), F.col("hkey").alias("key"))
    )
    if index is not None:
        # An earlier run's rows, as nodes numbered below this run's, linked
        # by the same 32-bit keys, and each to its cluster's first row.
        prior = checkpoint(index.withColumn("node", -1 - F.monotonically_increasing_id()))
        link_schema = T.StructType([
            T.StructField("node", T.LongType(), False),
            T.StructField("keys", T.ArrayType(T.LongType()), False),
            T.StructField("hkey", T.LongType(), False),
        ])
        links = prior.select("node", "hash", "keys").mapInArrow(
            _spark_index.link_batches(), link_schema)
        exploded = exploded.unionByName(
            links.select(F.col("node").alias("pos"), F.posexplode("keys").alias("band", "key"))
        ).unionByName(
            links.select(F.col("node").alias("pos"), F.lit(-1).alias("band"), F.col("hkey").alias("key"))
        ).unionByName(
            prior.where(F.col("cluster").isNotNull())
            .select(F.col("node").alias("pos"), F.lit(-2).alias("band"), F.xxhash64("cluster").alias("key"))
        )
    # One shuffle: each row of a bucket with the bucket's first row and size.
    bucket = Window.partitionBy("band", "key")
    edges = (
        exploded.select("pos", F.min("pos").over(bucket).alias("first"), F.count(F.lit(1)).over(bucket).alias("n"))
        .where(F.col("n") > 1)
        .select(F.col("pos").alias("a"), F.col("first").alias("b"))
    )
    groups = checkpoint(connected_components(edges, checkpoint, stats))

    # The grouped rows' texts: when the groups are few enough, the input is
    # filtered where it is read (a broadcast join), else both are shuffled.
    rows = base.select(F.col("__pos").alias("pos"), F.col("__file").alias("file"),
                       F.col(id_col).cast("string").alias("id"),
                       F.col(text_col).cast("string").alias("text"),
                       keyval.alias("keyval"))
    members = rows.join(_small(groups, broadcast_rows), "pos")
    if prior is not None:
        # The earlier rows of the groups with a row of this run.
        active = groups.where(F.col("pos") >= 0).select("comp").distinct()
        earlier = (
            prior.join(groups.withColumnRenamed("pos", "node"), "node")
            .join(active, "comp", "left_semi")
            .select(F.col("node").alias("pos"), F.col("pos").alias("at"), "file", "id", "comp", "run", "order",
                    "kept", "cluster",
                    "hash", "keys", "sketch", "features", F.lit(True).alias("prior"))
        )
        members = members.withColumn("prior", F.lit(False)).unionByName(earlier, allowMissingColumns=True)
    decided_schema = T.StructType([
        T.StructField("pos", T.LongType(), False),
        T.StructField("file", T.IntegerType(), False),
        T.StructField("id", T.StringType(), True),
        T.StructField("kept", T.BooleanType(), False),
        T.StructField("cluster", T.StringType(), True),
        T.StructField("left", T.ArrayType(T.StringType()), False),
        T.StructField("score", T.ArrayType(T.DoubleType()), False),
        T.StructField("prior", T.BooleanType(), False),
        T.StructField("run", T.IntegerType(), False),
        T.StructField("order", T.LongType(), False),
    ])
    decide = _decide_group(rule_params, keep, run_no, incremental=prior is not None)
    decided = checkpoint(members.groupBy("comp").applyInArrow(decide, decided_schema))

    pairs_df = decided.select(F.explode(F.arrays_zip("left", "score")).alias("m"), F.col("id").alias("right")).select(
        F.col("m.left").alias("left"), "right", F.col("m.score").alias("score")
    )
    clusters_df = decided.orderBy("run", "order", "file", "pos").select("id", "cluster")
    dropped = decided.where(~F.col("kept") & ~F.col("prior")).select(F.col("pos").alias("__pos"))
    kept_df = (
        base.join(_small(dropped, broadcast_rows), "__pos", "left_anti")
        .orderBy("__file", "__pos")
        .select(*df.columns)
    )
    if not want_index:
        return pairs_df, clusters_df, kept_df, None
    # Every row of every run so far: this run's with their images and
    # decisions, earlier ones with their clusters as they now are.
    fresh = rows.mapInArrow(_spark_index.image_batches(fp_params, keep, run_no, config), _spark_index.schema())
    this_run = decided.where(~F.col("prior")).select("pos", F.col("kept").alias("k"), F.col("cluster").alias("c"))
    columns = [f.name for f in _spark_index.schema().fields]
    index_df = fresh.join(this_run, "pos", "left").select(
        *[F.coalesce("k", "kept").alias("kept") if c == "kept" else F.col("c").alias("cluster") if c == "cluster"
          else c for c in columns])
    if prior is not None:
        now = decided.where(F.col("prior")).select(F.col("pos").alias("node"), F.col("cluster").alias("c"))
        index_df = prior.join(now, "node", "left").select(
            *[F.coalesce("c", "cluster").alias("cluster") if c == "cluster" else c for c in columns]
        ).unionByName(index_df)
    return pairs_df, clusters_df, kept_df, index_df


def _small(df, most: int):
    """``df`` marked for a broadcast join when it has at most ``most`` rows
    (counted: ``df`` should be checkpointed), else ``df`` as it is (a
    shuffle join)."""
    from pyspark.sql import functions as F

    if most > 0 and df.limit(most + 1).count() <= most:
        return F.broadcast(df)
    return df


def _is_local(master: str) -> bool:
    """Whether Spark master URL ``master`` runs the executors on this machine."""
    return master == "local" or master.startswith(("local[", "local-cluster["))


def _driver_memory_set(conf) -> bool:
    """Whether the user chose the driver's memory: ``--conf``, Spark's
    environment (``SPARK_DRIVER_MEMORY``, ``PYSPARK_SUBMIT_ARGS`` with
    ``--driver-memory`` or a ``--properties-file``), or a
    ``spark-defaults.conf`` (``SPARK_CONF_DIR``, ``SPARK_HOME/conf`` or
    pyspark's own ``conf``)."""
    import re

    if any(key == "spark.driver.memory" for key, _ in conf):
        return True
    submit = os.environ.get("PYSPARK_SUBMIT_ARGS", "")
    if os.environ.get("SPARK_DRIVER_MEMORY") or "--driver-memory" in submit or "--properties-file" in submit:
        return True
    folders = [os.environ.get("SPARK_CONF_DIR")]
    homes = [os.environ.get("SPARK_HOME")]
    try:
        import pyspark  # pip's pyspark is its own Spark home

        homes.append(os.path.dirname(pyspark.__file__))
    except ImportError:
        pass
    folders += [os.path.join(h, "conf") for h in homes if h]
    # Java properties: `key value`, `key=value` or `key: value`.
    line = re.compile(r"^\s*spark\.driver\.memory\s*[=:\s]")
    for folder in filter(None, folders):
        try:
            with open(os.path.join(folder, "spark-defaults.conf"), encoding="utf-8") as f:
                if any(line.match(text) for text in f):
                    return True
        except OSError:
            pass
    return False


def _memory_limit() -> Optional[int]:
    """This process's memory: the machine's, or its container's (cgroup v2
    ``memory.max``, v1 ``memory.limit_in_bytes``) when that is less."""
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return None
    for path in ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"):
        try:
            with open(path, encoding="ascii") as f:
                limit = f.read().strip()
        except OSError:
            continue
        if limit.isdigit():
            total = min(total, int(limit))
    return total


def _local_heap() -> str:
    """The heap for a local master's JVM (the driver and its executors in
    one): a quarter of the memory this process may use (the machine's, or
    its container's), between 1 and 8 GiB. Spark's own default, 1 GiB,
    runs out reading Parquet row groups of ~100 MB of text (two tasks each
    hold a whole column chunk) at a million documents."""
    total = _memory_limit()
    if total is None:
        return "1g"
    return f"{min(max(total // 4, 1 << 30), 8 << 30) >> 20}m"


_SHIP_ADVICE = """\
The workers run PYSPARK_PYTHON ({python}), which must import neardup (and NumPy, PyArrow).
On a local master this command runs them with its own interpreter unless PYSPARK_PYTHON is set.
On a cluster, install neardup for the executors' python, or ship an environment with the job
(Spark's "Python Package Management"):
    venv-pack -o env.tar.gz        # or conda-pack, in an environment with neardup installed
    PYSPARK_PYTHON=./env/bin/python python -m neardup.spark --master <url> \\
        --conf spark.archives=env.tar.gz#env ..."""


def _worker_problem(spark) -> Optional[str]:
    """None when the executors' Python workers import neardup and PyArrow,
    else what they cannot import, and why.

    Runs a task per default partition (a few executors on a cluster); the
    import is tried inside the task, so a missing package is an answer, not
    a failed (and retried) task.
    """
    sc = spark.sparkContext

    # Nested and naming no module global: pickled by value, so unpickling
    # it on a worker imports nothing of neardup's.
    def probe(_):
        import sys as worker_sys

        try:
            import neardup  # noqa: F401
        except Exception as e:  # an ImportError, or the package's own
            yield f"neardup: {type(e).__name__}: {e} (in {worker_sys.executable})"
            return
        try:
            import pyarrow  # noqa: F401
        except Exception as e:
            yield f"PyArrow (the job's exchange with Spark): {type(e).__name__}: {e} (in {worker_sys.executable})"

    n = max(1, min(sc.defaultParallelism, 64))
    try:
        found = sc.parallelize(range(n), n).mapPartitions(probe).collect()
    except Exception as e:  # no worker ran it: no such python, ...
        lines = [l.strip() for l in str(e).splitlines() if l.strip()]
        cause = next((l[l.index("Cannot run program"):] for l in lines if "Cannot run program" in l), None)
        cause = cause or " ".join(lines[:2])
        return f"neardup: the probe job failed: {cause[:500]}"
    return found[0] if found else None


def main(argv: Optional[list] = None) -> int:
    p = argparse.ArgumentParser(prog="python -m neardup.spark", description=__doc__.split("\n\n")[0])
    p.add_argument("--input", required=True, help="Parquet or JSONL (file or folder)")
    p.add_argument("--output", required=True, help="folder for pairs/, clusters/ and kept/ (Parquet)")
    p.add_argument("--id-column", default="id")
    p.add_argument("--text-column", default="text")
    p.add_argument("--threshold", type=float, default=0.8)
    p.add_argument("--normalizer", default="default", choices=["default", "seed"])
    p.add_argument("--shingle-width", type=int, default=5)
    p.add_argument("--num-perm", type=int, default=None)
    p.add_argument("--char-shingles", action="store_true")
    p.add_argument("--bands", type=int, default=None)
    p.add_argument("--rows", type=int, default=None)
    p.add_argument("--signature", default="oph")
    p.add_argument("--seed", type=int, default=neardup.DEFAULT_SEED)
    p.add_argument("--max-candidates", type=int, default=100,
                   help="candidates verified per item, best estimated first (as neardup dedup)")
    p.add_argument("--max-bucket-read", type=int, default=1000,
                   help="entries of one LSH bucket a query reads (as neardup dedup)")
    p.add_argument("--keep", default="first", metavar="POLICY",
                   help="which copy of a group is kept, as neardup dedup --keep: first, longest, "
                        "max:COLUMN or min:COLUMN (default: first)")
    p.add_argument("--broadcast-rows", type=int, default=BROADCAST_ROWS, metavar="N",
                   help="most row positions a broadcast join may hold on the driver and each executor "
                        f"(~24 bytes each; default {BROADCAST_ROWS:,}); past it, or at 0, none is asked for")
    p.add_argument("--checkpoint-dir", default=None,
                   help="reliable storage for checkpoints (HDFS, S3, ...; default: the executors' local disks)")
    p.add_argument("--index-in", default=None, metavar="DIR",
                   help="an earlier run's --index-out: deduplicate against every row of the runs before")
    p.add_argument("--index-out", default=None, metavar="DIR",
                   help="write every row of this run and the earlier ones (Parquet), for the next --index-in")
    p.add_argument("--format", choices=["auto", "parquet", "json"], default="auto")
    p.add_argument("--master", default=None, help="Spark master URL (default: Spark's own)")
    p.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE",
                   help="a Spark setting, e.g. spark.archives=env.tar.gz#env (repeatable)")
    a = p.parse_args(argv)
    if a.index_in and a.index_out and os.path.abspath(a.index_in) == os.path.abspath(a.index_out):
        p.error("--index-out must be another folder than --index-in (the run reads one while it writes the other)")
    conf = []
    for kv in a.conf:
        key, eq, value = kv.partition("=")
        if not eq or not key:
            p.error(f"--conf takes KEY=VALUE, got {kv!r}")
        conf.append((key, value))

    from pyspark.sql import SparkSession

    builder = SparkSession.builder.appName("neardup-dedup").config("spark.ui.showConsoleProgress", "false")
    for key, value in conf:
        builder = builder.config(key, value)
    if a.master:
        builder = builder.master(a.master)
    # PySpark runs its workers with PYSPARK_PYTHON, else `python3` from
    # PATH — not this interpreter when it is a virtual environment's that is
    # not activated. On a local master the workers are on this machine: run
    # them with this interpreter. (PySpark reads the variable when the
    # context starts, so it is set before.)
    master = a.master or next((value for key, value in conf if key == "spark.master"), None)
    if master and _is_local(master) and not _driver_memory_set(conf):
        heap = _local_heap()
        builder = builder.config("spark.driver.memory", heap)
        print(f"neardup.spark: Spark's heap on this machine: {heap} (a quarter of the memory, 1-8 GiB; "
              "--conf spark.driver.memory=SIZE to choose)", file=sys.stderr)
    own_python = "PYSPARK_PYTHON" not in os.environ
    if own_python and a.master and _is_local(a.master):
        os.environ["PYSPARK_PYTHON"] = sys.executable
        try:
            spark = builder.getOrCreate()
        finally:
            del os.environ["PYSPARK_PYTHON"]
    else:
        spark = builder.getOrCreate()
    try:
        sc = spark.sparkContext
        if own_python and not a.master and _is_local(sc.master):
            # Spark's default master, known only now: the same rule.
            sc.pythonExec = sys.executable
        problem = _worker_problem(spark)
        if problem:
            print(f"neardup.spark: the Spark workers cannot import {problem}", file=sys.stderr)
            print(_SHIP_ADVICE.format(python=sc.pythonExec), file=sys.stderr)
            return 1
        fmt = a.format
        if fmt == "auto":
            fmt = "json" if a.input.endswith((".jsonl", ".json", ".jsonl.gz", ".json.gz")) else "parquet"
        df = spark.read.parquet(a.input) if fmt == "parquet" else spark.read.json(a.input)
        if a.checkpoint_dir:
            sc.setCheckpointDir(a.checkpoint_dir)
        stats: Dict[str, Any] = {}
        started = time.monotonic()
        settings = dict(
            threshold=a.threshold, stats=stats, normalizer=a.normalizer, shingle_width=a.shingle_width,
            num_perm=a.num_perm, char_shingles=a.char_shingles, bands=a.bands, rows=a.rows, signature=a.signature,
            seed=a.seed, max_candidates=a.max_candidates, max_bucket_read=a.max_bucket_read, keep=a.keep,
            broadcast_rows=a.broadcast_rows,
        )
        outputs = {}
        try:
            if a.index_in or a.index_out:
                from neardup import _spark_index

                earlier = spark.read.schema(_spark_index.schema()).parquet(a.index_in) if a.index_in else None
                pairs, clusters, kept, index = dedup_with_index(df, earlier, a.id_column, a.text_column, **settings)
                if a.index_out:
                    outputs[a.index_out] = index
            else:
                pairs, clusters, kept = dedup(df, a.id_column, a.text_column, **settings)
        except ValueError as e:
            print(f"neardup.spark: {e}", file=sys.stderr)
            return 2
        decided_s = time.monotonic() - started
        counts = {}
        outputs.update((f"{a.output}/{name}", table)
                       for name, table in (("pairs", pairs), ("clusters", clusters), ("kept", kept)))
        for path, table in outputs.items():
            table.write.mode("overwrite").parquet(path)
            # Counted from what was written (Parquet footers), not recomputed.
            counts[path] = spark.read.parquet(path).count()
        print(f"connected components: {stats.get('rounds', 0)} rounds; decided in {decided_s:.1f} s, "
              f"written in {time.monotonic() - started - decided_s:.1f} s")
        if a.index_out:
            print(f"index {a.index_out}: {counts[a.index_out]} rows")
        counts.update((name, counts[f"{a.output}/{name}"]) for name in ("pairs", "clusters", "kept"))
        print(f"pairs {counts['pairs']}, clustered rows {counts['clusters']}, kept {counts['kept']} of {df.count()}")
    finally:
        spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
