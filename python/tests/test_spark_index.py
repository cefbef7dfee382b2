"""The Spark job run against an earlier run's index (``--index-in``,
``--index-out``) against ``neardup dedup --index``, on real documents.

Needs Java 17 and pyspark, as test_spark.py.
"""

import json
import subprocess
import sys

import pytest

import neardup
from test_neardup import real_corpus
from test_spark import CAPPED, cli_results, spark_results


def spark_job(corpus, out, *args):
    run = subprocess.run(
        [sys.executable, "-m", "neardup.spark", "--input", str(corpus), "--format", "json", "--output", str(out),
         "--master", "local[2]", *args],
        capture_output=True, text=True, timeout=600,
    )
    return run


def test_a_run_against_an_earlier_runs_index_gives_the_cli_results(tmp_path):
    sub, records = real_corpus(tmp_path, 3000)
    lines = sub.read_text().splitlines(keepends=True)
    first, second = tmp_path / "first.jsonl", tmp_path / "second.jsonl"
    # Every other document: near copies fall on both sides.
    first.write_text("".join(lines[0::2]))
    second.write_text("".join(lines[1::2]))
    # A keeper policy, so the index must carry each row's place in its
    # run's order, not only its position.
    settings = [*CAPPED, "--keep", "longest"]
    cli_index = tmp_path / "cli-index"
    cli_results(tmp_path, first, *settings, "--index", str(cli_index))
    want, want_kept, want_clusters, summary = cli_results(tmp_path, second, *settings, "--index", str(cli_index))
    assert summary["capped_queries"] >= 50, summary
    assert summary["index"]["items_before"] == 1500, summary["index"]
    # The second run's rows match the first's: pairs and clusters cross runs.
    first_ids = {json.loads(line)["id"] for line in lines[0::2]}
    assert sum(left in first_ids for left, _, _ in want) >= 50, len(want)
    assert any(c in first_ids for c in want_clusters.values())

    one, two = tmp_path / "one", tmp_path / "two"
    run = spark_job(first, tmp_path / "out1", *settings, "--index-out", str(one))
    assert run.returncode == 0, run.stderr[-3000:]
    assert "index " + str(one) + ": 1500 rows" in run.stdout, run.stdout
    run = spark_job(second, tmp_path / "out2", *settings, "--index-in", str(one), "--index-out", str(two))
    assert run.returncode == 0, run.stderr[-3000:]
    assert "index " + str(two) + f": {len(records)} rows" in run.stdout, run.stdout

    from pyspark.sql import SparkSession

    spark = SparkSession.builder.master("local[1]").appName("neardup-test-read").getOrCreate()
    try:
        got, kept, clusters = spark_results(spark, tmp_path / "out2")
        index = {r["id"]: (r["run"], r["kept"], r["cluster"]) for r in spark.read.parquet(str(two)).collect()}
    finally:
        spark.stop()
    assert got == want, (len(got), len(want), sorted(got ^ want)[:5])
    assert kept == want_kept, (len(kept), len(want_kept))
    assert clusters == want_clusters, (len(clusters), len(want_clusters))
    # The index after two runs: every row once, this run's kept set, and
    # each clustered row's cluster as the command line now has it.
    assert len(index) == len(records)
    assert {i for i, (r, k, _) in index.items() if r == 1 and k} == set(want_kept)
    assert all(index[i][2] == c for i, c in want_clusters.items())

    # An index made under other settings is refused, with what differs.
    run = spark_job(second, tmp_path / "out3", *settings, "--threshold", "0.7", "--index-in", str(one))
    assert run.returncode == 2, run.stderr[-3000:]
    assert "made under other settings" in run.stderr and "threshold 0.8 (this run: 0.7)" in run.stderr, \
        run.stderr[-2000:]


def test_index_rows_go_back_into_the_rule_as_they_came_out_and_bad_ones_are_refused():
    """`Index._image_arrow`'s rows, given back to `_Dedup._add_prior`, make
    the same decisions as the texts themselves; rows that do not add up
    are a ValueError that names the row."""
    import numpy as np
    import pyarrow as pa

    from neardup._arrow import buffers as _text_buffers

    texts = ["the quick brown fox jumps over the lazy dog again and again",
             "the quick brown fox jumps over the lazy dog again and again!",
             "a completely different sentence about something else entirely", ""]
    later = ["the quick brown fox jumps over the lazy dog again and again.", "nothing like the others at all here"]
    index = neardup.Index(threshold=0.5)
    image = index._image_arrow(*_text_buffers(pa.array(texts)))
    kept = [True, False, True, True]

    whole = neardup._Dedup(neardup.Index(threshold=0.5))
    whole.add_many([(str(k), t) for k, t in enumerate(texts)])
    resumed = neardup._Dedup(neardup.Index(threshold=0.5))
    resumed._add_prior([str(k) for k in range(4)], kept, *image)
    items = [(str(4 + k), t) for k, t in enumerate(later)]
    assert resumed.add_many(items) == whole.add_many(items)
    assert resumed.add_many([("6", later[0])])[0][1] == "0"

    hashes, key_offsets, keys, sketch_offsets, sketches, feature_offsets, features = image
    ids = [str(k) for k in range(4)]

    def refused(*arrays, ids=ids, kept=kept):
        rule = neardup._Dedup(neardup.Index(threshold=0.5))
        with pytest.raises(ValueError) as e:
            rule._add_prior(ids, kept, *arrays)
        return str(e.value)

    assert "disagree on their number" in refused(hashes[:-1], *image[1:])
    swapped = features.copy()
    swapped[0], swapped[1] = features[1], features[0]
    assert "item 0: its features are not in increasing order" in refused(*image[:6], swapped)
    far = feature_offsets.copy()
    far[-1] += 1000
    assert "item 3: feature offsets" in refused(*image[:5], far, features)
    assert "an image row of 3 keys" in refused(hashes, np.array([0, 3, 3, 3, 3], np.int32), keys[:3], *image[3:])
    assert "3 ids and 3 verdicts for 4" in refused(*image, ids=ids[:3], kept=kept[:3])
    # After this run's first item, no earlier run's item goes in.
    rule = neardup._Dedup(neardup.Index(threshold=0.5))
    rule.add_many([("x", "some text")])
    with pytest.raises(ValueError, match="before any of this run's"):
        rule._add_prior(ids, kept, *image)
