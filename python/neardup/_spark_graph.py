"""The Spark job's groups: connected components of the rows' links, with
lineage cut by checkpoints (``neardup.spark``)."""

from typing import Any, Callable, Optional


def _checkpointer(spark) -> Callable[[Any], Any]:
    """Cuts a DataFrame's lineage: a reliable checkpoint when the context has
    a checkpoint folder, else a local one (executors' local disks)."""
    from pyspark import StorageLevel

    if spark.sparkContext.getCheckpointDir():
        return lambda d: d.checkpoint(eager=True)
    # On disk, not in the executors' heap: a checkpoint held in memory there
    # leaves too little for reading the input again (a million documents
    # ran out of Spark's default 1 GiB heap reading their texts).
    return lambda d: d.localCheckpoint(eager=True, storageLevel=StorageLevel.DISK_ONLY)


def connected_components(edges, checkpoint: Optional[Callable[[Any], Any]] = None, stats: Optional[dict] = None):
    """Connected components of the undirected graph ``edges`` (columns ``a``,
    ``b``: longs): a DataFrame (``pos``, ``comp``) with a row per node of an
    edge, ``comp`` the smallest node of its component.

    Alternating large-star and small-star (Kiveris et al., "Connected
    Components in MapReduce and Beyond", 2014): O(log n) rounds of two
    shuffles each, whatever the components' diameter; each round's edges
    are checkpointed. Stops when the edges form stars around their smallest
    nodes. ``stats["rounds"]`` counts the rounds.
    """
    from pyspark.sql import functions as F

    a, b = F.col("a"), F.col("b")
    checkpoint = checkpoint or _checkpointer(edges.sparkSession)
    # Every undirected edge once, as (larger, smaller).
    e = checkpoint(edges.where(a != b).select(F.greatest(a, b).alias("a"), F.least(a, b).alias("b")).distinct())
    rounds = 0
    while True:
        rounds += 1
        # Large-star: each node links its larger neighbours to the smallest
        # node of its neighbourhood (itself included).
        both = e.unionByName(e.select(b.alias("a"), a.alias("b")))
        low = both.groupBy("a").agg(F.least(F.min("b"), F.col("a")).alias("m"))
        large = both.join(low, "a").where(b > a).select(b.alias("a"), F.col("m").alias("b")).distinct()
        # Small-star: each node links itself and its smaller neighbours to
        # the smallest of them.
        low = large.groupBy("a").agg(F.min("b").alias("m"))
        small = (
            large.join(low, "a").where(b != F.col("m")).select(b.alias("a"), F.col("m").alias("b"))
            .unionByName(low.select("a", F.col("m").alias("b")))
            .distinct()
        )
        e = checkpoint(small)
        # Done when no node is both a leaf and a centre: stars, each around
        # its component's smallest node.
        if e.join(e.select(b.alias("a")).distinct(), "a").isEmpty():
            break
    if stats is not None:
        stats["rounds"] = rounds
    return e.select(a.alias("pos"), b.alias("comp")).unionByName(
        e.select(b.alias("pos"), b.alias("comp")).distinct()
    )

