"""The Spark job against `neardup dedup` on real documents, on local[2].

Needs Java 17 and pyspark (scripts/test-python.sh installs pyspark; CI
installs Java).
"""

import json
import subprocess
import sys

from test_neardup import real_corpus, run_cli


def test_spark_job_gives_the_cli_pairs_and_kept_set(tmp_path):

    corpus, records = real_corpus(tmp_path, 1200)
    pairs_tsv, kept_jsonl = tmp_path / "pairs.tsv", tmp_path / "kept.jsonl"
    cli = run_cli("dedup", str(corpus), "--max-candidates", "10000", "--pairs", str(pairs_tsv), "-o", str(kept_jsonl),
                  "--json", "-q")
    assert cli.returncode == 0, cli.stderr
    assert json.loads(cli.stdout)["capped_queries"] == 0
    want = {tuple(l.split("\t")[:2]) + (float(l.split("\t")[2]),) for l in pairs_tsv.read_text().splitlines()}
    want_kept = [json.loads(l)["id"] for l in kept_jsonl.read_text().splitlines()]
    assert len(want) >= 50

    out = tmp_path / "out"
    run = subprocess.run(
        [sys.executable, "-m", "neardup.spark", "--input", str(corpus), "--output", str(out), "--master", "local[2]"],
        capture_output=True, text=True, timeout=600,
    )
    assert run.returncode == 0, run.stderr[-3000:]

    from pyspark.sql import SparkSession

    spark = SparkSession.builder.master("local[1]").appName("neardup-test-read").getOrCreate()
    try:
        got = {(r["left"], r["right"], r["score"]) for r in spark.read.parquet(str(out / "pairs")).collect()}
        kept = [r["id"] for r in spark.read.parquet(str(out / "kept")).collect()]
        clusters = {r["id"]: r["cluster"] for r in spark.read.parquet(str(out / "clusters")).collect()}
    finally:
        spark.stop()
    assert got == want, (len(got), len(want), sorted(got ^ want)[:5])
    assert sorted(kept) == sorted(want_kept)
    # Every pair's two items are in one cluster, named by an item of it.
    for left, right, _ in want:
        assert clusters[left] == clusters[right]
    assert set(clusters.values()) <= set(clusters)
