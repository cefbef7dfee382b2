"""The Spark job against `neardup dedup` on real documents, on local[2].

Needs Java 17 and pyspark (scripts/test-python.sh installs pyspark; CI
installs Java).
"""

import json
import os
import subprocess
import sys

import pytest

import neardup

from test_neardup import real_corpus, run_cli


def python3_without_neardup(tmp_path):
    """A folder holding a `python3` that is this interpreter without its
    site-packages, so without neardup (but with pyspark from the PYTHONPATH
    Spark gives its workers): the `python3` on PATH when the job runs from
    a virtual environment that is not activated."""
    folder = tmp_path / "bin"
    folder.mkdir(exist_ok=True)
    shim = folder / "python3"
    shim.write_text(f'#!/bin/sh\nexec "{sys.executable}" -S "$@"\n')
    shim.chmod(0o755)
    if subprocess.run([str(shim), "-c", "import neardup"], capture_output=True).returncode == 0:
        pytest.skip("neardup is importable here without site-packages (PYTHONPATH?)")
    return folder


# Settings under which neardup dedup caps queries on a few thousand real
# documents: the candidate cap and hot buckets read partially.
CAPPED = ["--max-candidates", "5", "--max-bucket-read", "20"]


def cli_results(tmp_path, corpus, *args):
    """neardup dedup's pairs (set), kept ids (in order), cluster of each
    clustered id (its first member) and summary."""
    pairs_tsv, kept_jsonl, clusters_jsonl = tmp_path / "pairs.tsv", tmp_path / "kept.jsonl", tmp_path / "c.jsonl"
    cli = run_cli("dedup", str(corpus), *args, "--pairs", str(pairs_tsv), "-o", str(kept_jsonl),
                  "--clusters", str(clusters_jsonl), "--json", "-q")
    assert cli.returncode == 0, cli.stderr
    pairs = {tuple(l.split("\t")[:2]) + (float(l.split("\t")[2]),) for l in pairs_tsv.read_text().splitlines()}
    kept = [json.loads(l)["id"] for l in kept_jsonl.read_text().splitlines()]
    clusters = {}
    for line in clusters_jsonl.read_text().splitlines():
        members = json.loads(line)["members"]
        clusters.update((m, members[0]) for m in members)
    return pairs, kept, clusters, json.loads(cli.stdout)


def spark_results(spark, out):
    """The job's pairs (set), kept ids (in the order written) and clusters."""
    import pyarrow.parquet as pq

    got = {(r["left"], r["right"], r["score"]) for r in spark.read.parquet(str(out / "pairs")).collect()}
    # Part files in name order (Spark reads a folder's files largest first).
    kept = pq.read_table(str(out / "kept")).column("id").to_pylist()
    clusters = {r["id"]: r["cluster"] for r in spark.read.parquet(str(out / "clusters")).collect()}
    return got, kept, clusters


def test_key_stage_reads_arrow_buffers_as_fingerprint_many_reads_strings(tmp_path):
    """The key stage's band keys and content hashes, read from an Arrow
    column's buffers (sliced, with nulls, wide offsets, non-ASCII), equal
    `Fingerprinter.fingerprint_many`'s; bad buffers are a ValueError."""
    import numpy as np
    import pyarrow as pa
    from neardup._arrow import buffers as _text_buffers

    texts = [d["text"] for d in real_corpus(tmp_path, 60)[1]]
    texts += ["", "Grüße aus Köln — 東京の天気", None, "a b"]
    f = neardup.Fingerprinter(threshold=0.8)
    want = f.fingerprint_many([t or "" for t in texts])
    for column in (pa.array(texts, pa.string()), pa.array(texts, pa.large_string())):
        for part in (column, column.slice(7, 50), column.slice(58)):
            offsets, data = _text_buffers(part)
            key_offsets, keys, hashes = f._band_keys_arrow(offsets, data)
            start = 0 if part is column else (7 if len(part) == 50 else 58)
            assert len(key_offsets) == len(part) + 1 and len(hashes) == len(part)
            for i in range(len(part)):
                fp = want[start + i]
                assert list(keys[key_offsets[i]:key_offsets[i + 1]]) == list(fp.band_keys)
                assert int(hashes[i]) == int(fp.content_hash[:16], 16)
    ok = np.array([0, 3], dtype=np.int64)
    with pytest.raises(ValueError, match="outside"):
        f._band_keys_arrow(np.array([0, 9], dtype=np.int64), np.frombuffer(b"abc", dtype=np.uint8))
    with pytest.raises(ValueError, match="outside"):
        f._band_keys_arrow(np.array([2, 1], dtype=np.int64), np.frombuffer(b"abc", dtype=np.uint8))
    with pytest.raises(ValueError, match="UTF-8"):
        f._band_keys_arrow(ok, np.frombuffer(b"a\xffc", dtype=np.uint8))
    assert [len(a) for a in f._band_keys_arrow(np.zeros(1, dtype=np.int64), np.empty(0, dtype=np.uint8))] == [1, 0, 0]


def test_a_local_master_gets_a_share_of_the_machine_unless_memory_was_chosen(tmp_path, monkeypatch):
    """The driver's heap on a local master: a quarter of the machine's
    memory within 1-8 GiB, unless the user chose it by --conf, Spark's
    environment or a spark-defaults.conf."""
    from neardup import spark as job

    for var in ("SPARK_DRIVER_MEMORY", "PYSPARK_SUBMIT_ARGS", "SPARK_CONF_DIR", "SPARK_HOME"):
        monkeypatch.delenv(var, raising=False)
    assert not job._driver_memory_set([("spark.executor.memory", "2g")])
    assert job._driver_memory_set([("spark.driver.memory", "2g")])
    monkeypatch.setenv("PYSPARK_SUBMIT_ARGS", "--driver-memory 3g pyspark-shell")
    assert job._driver_memory_set([])
    monkeypatch.delenv("PYSPARK_SUBMIT_ARGS")
    monkeypatch.setenv("SPARK_CONF_DIR", str(tmp_path))
    (tmp_path / "spark-defaults.conf").write_text("spark.executor.memory 2g\n")
    assert not job._driver_memory_set([])
    for form in ("spark.driver.memory   5g", "spark.driver.memory=5g", "  spark.driver.memory: 5g"):
        (tmp_path / "spark-defaults.conf").write_text(f"# heap\n{form}\n")
        assert job._driver_memory_set([]), form
    (tmp_path / "spark-defaults.conf").unlink()
    monkeypatch.setenv("PYSPARK_SUBMIT_ARGS", "--properties-file /etc/spark.conf pyspark-shell")
    assert job._driver_memory_set([])
    # A quarter of what this process may use, within 1-8 GiB.
    gib = 1 << 30
    for memory, heap in ((64 * gib, "8192m"), (16 * gib, "4096m"), (2 * gib, "1024m"), (None, "1g")):
        monkeypatch.setattr(job, "_memory_limit", lambda m=memory: m)
        assert job._local_heap() == heap, memory
    monkeypatch.undo()
    assert 0 < job._memory_limit() <= os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


def test_broadcast_rows_chooses_the_join(tmp_path):
    """Under --broadcast-rows the dropped rows are taken out of the input by
    a broadcast join; at 0 (and with Spark's own broadcasts off) by a
    shuffle join. Both give the same kept rows."""
    from pyspark.sql import SparkSession

    import neardup.spark

    corpus, _ = real_corpus(tmp_path, 120)
    spark = (SparkSession.builder.master("local[2]").appName("neardup-test-broadcast")
             .config("spark.sql.shuffle.partitions", "4").getOrCreate())
    try:
        df = spark.read.json(str(corpus))
        kept = {}
        for rows in (neardup.spark.BROADCAST_ROWS, 0):
            spark.conf.set("spark.sql.autoBroadcastJoinThreshold", "10485760" if rows else "-1")
            _, _, kept_df = neardup.spark.dedup(df, threshold=0.5, broadcast_rows=rows)
            plan = kept_df._jdf.queryExecution().executedPlan().toString()
            join = "BroadcastHashJoin" if rows else "SortMergeJoin"
            assert any(join in line and "LeftAnti" in line for line in plan.splitlines()), plan
            kept[rows] = [r["id"] for r in kept_df.collect()]
    finally:
        spark.stop()
    assert kept[0] == kept[neardup.spark.BROADCAST_ROWS] and len(kept[0]) < 120


def test_spark_job_gives_the_cli_pairs_clusters_and_kept_set_with_capped_queries(tmp_path, capsys):
    sub, records = real_corpus(tmp_path, 3000)
    # A folder of two files, the larger second: the command line takes
    # them in name order, and Spark reads the larger first.
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    lines = sub.read_text().splitlines(keepends=True)
    (corpus / "part-0.jsonl").write_text("".join(lines[:700]))
    (corpus / "part-1.jsonl").write_text("".join(lines[700:]))
    want, want_kept, want_clusters, summary = cli_results(tmp_path, corpus, *CAPPED)
    # Hundreds of queries capped: the cap and the partial reads decide
    # which pairs are verified.
    assert summary["capped_queries"] >= 100, summary
    assert len(want) >= 500 and len(want_kept) < len(records) - 300, (len(want), len(want_kept))

    out = tmp_path / "out"
    run = subprocess.run(
        [sys.executable, "-m", "neardup.spark", "--input", str(corpus), "--format", "json", "--output", str(out),
         "--master", "local[2]", *CAPPED],
        capture_output=True, text=True, timeout=600,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    assert run.stdout.splitlines()[-1] == f"pairs {len(want)}, clustered rows {len(want_clusters)}, " \
        f"kept {len(want_kept)} of {len(records)}", run.stdout

    from pyspark.sql import SparkSession

    spark = SparkSession.builder.master("local[1]").appName("neardup-test-read").getOrCreate()
    try:
        got, kept, clusters = spark_results(spark, out)

        # Workers whose python cannot import neardup: the job's probe finds
        # it before any work, and the command says what to do and exits
        # with 1. (Run here, on this session, which main() then reuses and
        # stops; the session's workers get that python.)
        import neardup.spark

        spark.sparkContext.pythonExec = str(python3_without_neardup(tmp_path) / "python3")
        capsys.readouterr()
        assert neardup.spark.main(["--input", str(sub), "--output", str(tmp_path / "none"),
                                   "--master", "local[1]"]) == 1
        err = capsys.readouterr().err
        assert "the Spark workers cannot import neardup: ModuleNotFoundError: No module named 'neardup'" in err, err
        assert "spark.archives=env.tar.gz#env" in err and "venv-pack" in err, err
        assert not (tmp_path / "none").exists()
    finally:
        spark.stop()
    assert got == want, (len(got), len(want), sorted(got ^ want)[:5])
    # The kept rows, in input order.
    assert kept == want_kept, (len(kept), len(want_kept))
    assert clusters == want_clusters, (len(clusters), len(want_clusters))


def test_connected_components_take_few_rounds_on_a_long_path(tmp_path):
    """Large-star/small-star: rounds grow with the log of a component's
    size, not its diameter (label propagation needs ~n rounds on a path);
    each round is checkpointed in the context's checkpoint folder."""
    import math
    import random

    from pyspark.sql import SparkSession

    import neardup.spark

    rng = random.Random(42)
    names = rng.sample(range(1, 10**9), 1300)
    # A path of 1,000 nodes in random name order, a path of 200, a star
    # of 100 around its largest node.
    path, short, star = names[:1000], names[1000:1200], names[1200:]
    edges = list(zip(path, path[1:])) + list(zip(short, short[1:])) + [(max(star), x) for x in star if x != max(star)]
    rng.shuffle(edges)
    spark = (SparkSession.builder.master("local[2]").appName("neardup-test-cc")
             .config("spark.sql.shuffle.partitions", "4").getOrCreate())
    try:
        spark.sparkContext.setCheckpointDir(str(tmp_path / "checkpoints"))
        stats = {}
        comps = neardup.spark.connected_components(spark.createDataFrame(edges, "a long, b long"), stats=stats)
        got = {r["pos"]: r["comp"] for r in comps.collect()}
    finally:
        spark.stop()
    # A reliable checkpoint per round (and one of the input edges).
    written = [p for p in (tmp_path / "checkpoints").rglob("rdd-*") if p.is_dir()]
    assert len(written) == stats["rounds"] + 1, (written, stats)
    want = {x: min(group) for group in (path, short, star) for x in group}
    assert got == want
    assert 2 <= stats["rounds"] <= 2 * math.ceil(math.log2(1000)), stats


def test_spark_job_on_a_local_master_runs_its_workers_with_its_own_python(tmp_path):
    """Issue 39: the job started by an interpreter that is not the `python3`
    on PATH (a virtual environment's, not activated) used to fail in every
    task with ModuleNotFoundError: Spark ran its workers with `python3`."""
    corpus = tmp_path / "small.jsonl"
    texts = ["red fox runs very fast", "red fox runs very fast today", "database backup completed nightly",
             "the lazy dog sleeps all day"]
    corpus.write_text("".join(json.dumps({"id": f"r{i}", "text": t}) + "\n" for i, t in enumerate(texts)))
    env = {k: v for k, v in os.environ.items() if k not in ("PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON")}
    env["PATH"] = f"{python3_without_neardup(tmp_path)}{os.pathsep}{env['PATH']}"
    run = subprocess.run(
        [sys.executable, "-m", "neardup.spark", "--input", str(corpus), "--output", str(tmp_path / "out"),
         "--master", "local[2]", "--threshold", "0.75", "--shingle-width", "2", "--normalizer", "seed",
         "--conf", "spark.sql.shuffle.partitions=2"],
        capture_output=True, text=True, timeout=600, env=env,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    assert run.stdout.splitlines()[-1] == "pairs 1, clustered rows 2, kept 3 of 4", run.stdout


def _free_port():
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_spark_job_on_a_standalone_cluster_of_a_master_and_two_workers(tmp_path):
    """A Spark standalone cluster started on loopback (pyspark's own jars):
    the job gives neardup dedup's pairs, kept set and clusters there too,
    with capped queries and a keeper policy (each group decided in its
    order, not the input's), and with every join a shuffle join (the path
    past the broadcast bound)."""
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
        capped = ["--max-candidates", "3", "--max-bucket-read", "10", "--keep", "longest"]
        want, want_kept, want_clusters, summary = cli_results(tmp_path, corpus, *capped)
        assert summary["capped_queries"] >= 20, summary
        assert len(want) >= 20
        # The policy matters here: another kept set than in input order.
        first_kept = cli_results(tmp_path, corpus, *capped[:4])[1]
        assert want_kept != first_kept
        out = tmp_path / "out"
        run = subprocess.run(
            [sys.executable, "-m", "neardup.spark", "--input", str(corpus), "--output", str(out),
             "--master", master_url, *capped, "--broadcast-rows", "0",
             "--conf", "spark.sql.autoBroadcastJoinThreshold=-1"],
            capture_output=True, text=True, timeout=600, env=env,
        )
        assert run.returncode == 0, run.stderr[-3000:]
        from pyspark.sql import SparkSession

        spark = SparkSession.builder.master("local[1]").appName("neardup-test-read").getOrCreate()
        try:
            got, kept, clusters = spark_results(spark, out)
        finally:
            spark.stop()
        assert got == want, (len(got), len(want))
        assert kept == want_kept and clusters == want_clusters
        # The work ran on the workers: their executor folders exist.
        assert any((tmp_path / "work").iterdir())
    finally:
        for p in procs:
            p.kill()
            p.wait()
        logs.close()
