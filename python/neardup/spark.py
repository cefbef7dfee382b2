"""Dataset dedup on Apache Spark, with neardup's Rust code in the executors.

    python -m neardup.spark --input in.parquet --output out/ --threshold 0.85 \\
        --normalizer seed --shingle-width 5 --master local[2]

writes ``out/pairs/`` (Parquet: ``left``, ``right``, ``score``),
``out/clusters/`` (``id``, ``cluster``: the id of the cluster's first item)
and ``out/kept/`` (the input rows that are kept, every column).

Stages:

1. Fingerprint each partition in Rust (``neardup.Fingerprinter`` inside
   ``mapPartitions``): band keys and canonical shingle features per row.
2. Explode the band keys and group by (band, key): every bucket of two or
   more rows gives its candidate pairs; a bucket is read up to
   ``max_bucket`` rows (in input order), as the single-machine index reads a
   hot bucket partially.
3. Verify every distinct candidate pair exactly in Rust
   (``neardup.pair_score``: features joined to the pair; exact Jaccard, or
   1.0 for equal content hashes) and keep those at or above the threshold.
4. Connected components of the verified pairs by iterated minimum-label
   propagation in Spark SQL (each round a join and a group-by; rounds grow
   with the clusters' diameter).
5. The kept set by the command line's greedy rule — an item is dropped only
   when it verifies against an earlier *kept* item — computed on the driver
   from the verified pairs alone (not the texts): the rule is sequential in
   input order, so its memory grows with the number of verified pairs.

Where the workers get neardup: the Python workers of the executors import
it. On a local master (``local``, ``local[N]``, ``local-cluster[...]``) the
command runs them with its own interpreter (``sys.executable``), so a
virtual environment works without being activated; ``PYSPARK_PYTHON``, when
set, names the workers' interpreter instead. On a cluster the executors'
interpreter needs neardup too: install it there, or ship an environment
with the job, as Spark's "Python Package Management" guide describes::

    venv-pack -o env.tar.gz          # in the environment with neardup (or conda-pack)
    PYSPARK_PYTHON=./env/bin/python python -m neardup.spark \\
        --master spark://host:7077 --conf spark.archives=env.tar.gz#env ...

Before any work, a small probe job checks that the workers import
neardup; when they cannot, the command says so, with this advice, and exits
with status 1.

Where it differs from ``neardup dedup``: candidates are not capped per item
(the single-machine path verifies at most ``max_candidates`` per item,
ranked by estimated similarity); here every pair sharing a band is
verified, so on data where no query is capped the verified pairs are the
same (tested), and where some are, Spark finds a superset.
"""

import argparse
import os
import sys
from typing import Any, Dict, Iterator, Optional, Tuple

import neardup

_SIGNED = 1 << 63


def _signed(x: int) -> int:
    """A u64 as the signed 64-bit value Spark's LongType holds."""
    return x - (1 << 64) if x >= _SIGNED else x


def _fingerprint_partition(params: Dict[str, Any], text_col: str):
    def run(rows: Iterator[Any]) -> Iterator[Tuple[int, list, list, str]]:
        f = neardup.Fingerprinter(**params)
        batch = []
        for row in rows:
            batch.append(row)
            if len(batch) == 1024:
                yield from _emit(f, batch, text_col)
                batch = []
        if batch:
            yield from _emit(f, batch, text_col)

    return run


def _emit(f, batch, text_col):
    fps = f.fingerprint_many([r[text_col] or "" for r in batch])
    for r, fp in zip(batch, fps):
        yield (
            r["__pos"],
            [_signed(int(k)) for k in fp.band_keys],
            [_signed(int(x)) for x in fp.features],
            fp.content_hash,
        )


def _score(fa, ha, fb, hb) -> float:
    # Verified in Rust by the one rule of every neardup face.
    return neardup.pair_score(fa, ha, fb, hb)


def dedup(
    df,
    id_col: str = "id",
    text_col: str = "text",
    threshold: float = 0.8,
    max_bucket: int = 1000,
    **params: Any,
):
    """Deduplicates DataFrame ``df``; returns ``(pairs_df, clusters_df, kept_df)``.

    ``params`` are ``neardup.Index``'s (``shingle_width``, ``normalizer``,
    ``num_perm``, ...). Rows are ordered by their position in ``df`` (as
    read); ``pairs_df`` has ``left`` (the earlier), ``right``, ``score``;
    ``clusters_df`` has ``id`` and ``cluster`` (the id of the cluster's
    first item) for rows with a near duplicate; ``kept_df`` is ``df``'s kept
    rows with every column.
    """
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    spark = df.sparkSession
    # Validate the configuration once, on the driver, with neardup's message.
    neardup.Fingerprinter(threshold=threshold, **params)
    fp_params = dict(params, threshold=threshold)
    indexed = spark.createDataFrame(
        df.rdd.zipWithIndex().map(lambda ri: (ri[1], ri[0])),
        T.StructType([T.StructField("__pos", T.LongType(), False), T.StructField("__row", df.schema, False)]),
    )
    rows = indexed.select("__pos", F.col("__row." + id_col).cast("string").alias("id"), "__row")
    texts = rows.select("__pos", F.col("__row." + text_col).alias(text_col))
    schema = T.StructType([
        T.StructField("pos", T.LongType(), False),
        T.StructField("bands", T.ArrayType(T.LongType()), False),
        T.StructField("features", T.ArrayType(T.LongType()), False),
        T.StructField("hash", T.StringType(), False),
    ])
    fps = spark.createDataFrame(texts.rdd.mapPartitions(_fingerprint_partition(fp_params, text_col)), schema)
    fps = fps.cache()

    buckets = (
        fps.select("pos", F.posexplode("bands").alias("band", "key"))
        .groupBy("band", "key")
        .agg(F.sort_array(F.collect_list("pos")).alias("members"))
        .where(F.size("members") >= 2)
        .select(F.slice("members", 1, max_bucket).alias("members"))
    )

    def bucket_pairs(row):
        m = row["members"]
        for i in range(len(m)):
            for j in range(i + 1, len(m)):
                yield (m[i], m[j])

    pair_schema = T.StructType([T.StructField("a", T.LongType()), T.StructField("b", T.LongType())])
    # Equal content hashes are candidates too (text too short to shingle).
    by_hash = (
        fps.groupBy("hash").agg(F.sort_array(F.collect_list("pos")).alias("members"))
        .where(F.size("members") >= 2)
        .select(F.slice("members", 1, max_bucket).alias("members"))
    )
    candidates = spark.createDataFrame(
        buckets.unionByName(by_hash).rdd.flatMap(bucket_pairs), pair_schema
    ).distinct()

    score_udf = F.udf(_score, T.DoubleType())
    fa = fps.select(F.col("pos").alias("a"), F.col("features").alias("fa"), F.col("hash").alias("ha"))
    fb = fps.select(F.col("pos").alias("b"), F.col("features").alias("fb"), F.col("hash").alias("hb"))
    verified = (
        candidates.join(fa, "a").join(fb, "b")
        .select("a", "b", score_udf("fa", "ha", "fb", "hb").alias("score"))
        .where(F.col("score") >= threshold)
        .cache()
    )
    ids = rows.select(F.col("__pos").alias("pos"), "id")
    pairs_df = (
        verified.join(ids.withColumnRenamed("pos", "a").withColumnRenamed("id", "left"), "a")
        .join(ids.withColumnRenamed("pos", "b").withColumnRenamed("id", "right"), "b")
        .select("left", "right", "score", "a", "b")
    )

    # Connected components: every node takes the smallest label among itself
    # and its neighbours until nothing changes.
    edges = verified.select("a", "b").unionByName(verified.select(F.col("b").alias("a"), F.col("a").alias("b")))
    labels = edges.select(F.col("a").alias("pos")).distinct().withColumn("label", F.col("pos"))
    while True:
        spread = (
            edges.join(labels.withColumnRenamed("pos", "b").withColumnRenamed("label", "nl"), "b")
            .groupBy("a").agg(F.min("nl").alias("nl"))
        )
        updated = (
            labels.join(spread.withColumnRenamed("a", "pos"), "pos", "left")
            .select("pos", F.least("label", F.coalesce("nl", "label")).alias("label"))
            .cache()
        )
        changed = updated.join(labels.withColumnRenamed("label", "old"), "pos").where("label != old").count()
        labels = updated
        if changed == 0:
            break
    clusters_df = (
        labels.join(ids, "pos")
        .join(ids.withColumnRenamed("pos", "label").withColumnRenamed("id", "cluster"), "label")
        .select("id", "cluster", "pos")
    )

    # The greedy rule, on the driver, from the verified pairs in input order.
    dropped = set()
    kept_earlier = {}
    for a, b in sorted((r["a"], r["b"]) for r in verified.select("a", "b").collect()):
        kept_earlier.setdefault(b, []).append(a)
    for b in sorted(kept_earlier):
        if any(a not in dropped for a in kept_earlier[b]):
            dropped.add(b)
    dropped_df = spark.createDataFrame([(p,) for p in sorted(dropped)], T.StructType([T.StructField("pos", T.LongType())]))
    kept_df = (
        indexed.join(dropped_df.withColumnRenamed("pos", "__pos"), "__pos", "left_anti")
        .orderBy("__pos")
        .select("__row.*")
    )
    return pairs_df.drop("a", "b"), clusters_df.orderBy("pos").drop("pos"), kept_df


def _is_local(master: str) -> bool:
    """Whether Spark master URL ``master`` runs the executors on this machine."""
    return master == "local" or master.startswith(("local[", "local-cluster["))


_SHIP_ADVICE = """\
The workers run PYSPARK_PYTHON ({python}), which must import neardup (and NumPy).
On a local master this command runs them with its own interpreter unless PYSPARK_PYTHON is set.
On a cluster, install neardup for the executors' python, or ship an environment with the job
(Spark's "Python Package Management"):
    venv-pack -o env.tar.gz        # or conda-pack, in an environment with neardup installed
    PYSPARK_PYTHON=./env/bin/python python -m neardup.spark --master <url> \\
        --conf spark.archives=env.tar.gz#env ..."""


def _worker_problem(spark) -> Optional[str]:
    """None when the executors' Python workers import neardup, else why not.

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
            yield f"{type(e).__name__}: {e} (in {worker_sys.executable})"

    n = max(1, min(sc.defaultParallelism, 64))
    try:
        found = sc.parallelize(range(n), n).mapPartitions(probe).collect()
    except Exception as e:  # no worker ran it: no such python, ...
        lines = [l.strip() for l in str(e).splitlines() if l.strip()]
        cause = next((l[l.index("Cannot run program"):] for l in lines if "Cannot run program" in l), None)
        cause = cause or " ".join(lines[:2])
        return f"the probe job failed: {cause[:500]}"
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
    p.add_argument("--num-perm", type=int, default=128)
    p.add_argument("--max-bucket", type=int, default=1000)
    p.add_argument("--format", choices=["auto", "parquet", "json"], default="auto")
    p.add_argument("--master", default=None, help="Spark master URL (default: Spark's own)")
    p.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE",
                   help="a Spark setting, e.g. spark.archives=env.tar.gz#env (repeatable)")
    a = p.parse_args(argv)
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
            print(f"neardup.spark: the Spark workers cannot import neardup: {problem}", file=sys.stderr)
            print(_SHIP_ADVICE.format(python=sc.pythonExec), file=sys.stderr)
            return 1
        fmt = a.format
        if fmt == "auto":
            fmt = "json" if a.input.endswith((".jsonl", ".json", ".jsonl.gz", ".json.gz")) else "parquet"
        df = spark.read.parquet(a.input) if fmt == "parquet" else spark.read.json(a.input)
        try:
            pairs, clusters, kept = dedup(
                df, a.id_column, a.text_column, threshold=a.threshold, max_bucket=a.max_bucket,
                normalizer=a.normalizer, shingle_width=a.shingle_width, num_perm=a.num_perm,
            )
        except ValueError as e:
            print(f"neardup.spark: {e}", file=sys.stderr)
            return 2
        pairs.write.mode("overwrite").parquet(f"{a.output}/pairs")
        clusters.write.mode("overwrite").parquet(f"{a.output}/clusters")
        kept.write.mode("overwrite").parquet(f"{a.output}/kept")
        print(f"pairs {pairs.count()}, clustered rows {clusters.count()}, kept {kept.count()} of {df.count()}")
    finally:
        spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
