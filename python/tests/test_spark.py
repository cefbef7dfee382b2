"""The Spark job against `neardup dedup` on real documents, on local[2].

Needs Java 17 and pyspark (scripts/test-python.sh installs pyspark; CI
installs Java).
"""

import json
import subprocess
import sys

from test_neardup import real_corpus, run_cli


def test_spark_job_gives_the_cli_pairs_and_kept_set(tmp_path):

    corpus, records = real_corpus(tmp_path, 3000)
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


def _free_port():
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_spark_job_on_a_standalone_cluster_of_a_master_and_two_workers(tmp_path):
    """A Spark standalone cluster started on loopback (pyspark's own jars):
    the job gives the same pairs there as neardup dedup."""
    import os
    import time

    import pyspark

    home = os.path.dirname(pyspark.__file__)
    spark_class = os.path.join(home, "bin", "spark-class")
    env = dict(os.environ, SPARK_HOME=home, SPARK_LOCAL_IP="127.0.0.1", PYSPARK_PYTHON=sys.executable,
               SPARK_LOG_DIR=str(tmp_path / "logs"), SPARK_WORKER_DIR=str(tmp_path / "work"))
    port, ui = _free_port(), _free_port()
    master_url = f"spark://127.0.0.1:{port}"
    logs = open(tmp_path / "cluster.log", "w")
    procs = [subprocess.Popen([spark_class, "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                               "--port", str(port), "--webui-port", str(ui)], env=env, stdout=logs, stderr=logs)]
    try:
        for _ in range(2):
            procs.append(subprocess.Popen(
                [spark_class, "org.apache.spark.deploy.worker.Worker", master_url, "--host", "127.0.0.1",
                 "--cores", "1", "--memory", "1g", "--webui-port", str(_free_port())],
                env=env, stdout=logs, stderr=logs))
        # Both workers registered with the master.
        deadline = time.time() + 120
        while (tmp_path / "cluster.log").read_text().count("Registering worker") < 2:
            assert time.time() < deadline, (tmp_path / "cluster.log").read_text()[-3000:]
            assert all(p.poll() is None for p in procs), (tmp_path / "cluster.log").read_text()[-3000:]
            time.sleep(0.5)

        corpus, _ = real_corpus(tmp_path, 600)
        pairs_tsv = tmp_path / "pairs.tsv"
        cli = run_cli("dedup", str(corpus), "--max-candidates", "10000", "--pairs", str(pairs_tsv), "--json", "-q")
        assert cli.returncode == 0 and json.loads(cli.stdout)["capped_queries"] == 0
        want = {tuple(l.split("\t")[:2]) + (float(l.split("\t")[2]),) for l in pairs_tsv.read_text().splitlines()}
        assert len(want) >= 20
        out = tmp_path / "out"
        run = subprocess.run(
            [sys.executable, "-m", "neardup.spark", "--input", str(corpus), "--output", str(out),
             "--master", master_url],
            capture_output=True, text=True, timeout=600, env=env,
        )
        assert run.returncode == 0, run.stderr[-3000:]
        from pyspark.sql import SparkSession

        spark = SparkSession.builder.master("local[1]").appName("neardup-test-read").getOrCreate()
        try:
            got = {(r["left"], r["right"], r["score"]) for r in spark.read.parquet(str(out / "pairs")).collect()}
        finally:
            spark.stop()
        assert got == want, (len(got), len(want))
        # The work ran on the workers: their executor folders exist.
        assert any((tmp_path / "work").iterdir())
    finally:
        for p in procs:
            p.kill()
            p.wait()
        logs.close()
