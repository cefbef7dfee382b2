//! Cells of the migration matrix (`release/migrations.md`, issue 49 item
//! 3) for snapshot sets: what a node does with a set whose manifest is of
//! another format, claims a position the stream has not reached, or names
//! a snapshot whose digest differs. One NATS server on loopback; a set
//! written by a node, then sets made by hand beside it.

use std::sync::Arc;

use neardup_cluster::partition::Partition;
use neardup_cluster::snapshots::{self, Manifest};
use neardup_cluster::testkit::NatsCluster;
use neardup_cluster::{ClusterOptions, Node};
use neardup_core::Config;
use neardup_index::{EngineOptions, FsyncPolicy, Item, StoreKind, TenantConfig};
use tokio::io::AsyncReadExt;

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap()
}

/// Puts `bytes` at `name` in the set bucket.
async fn put(bucket: &snapshots::SetBucket, name: &str, bytes: &[u8]) {
    bucket.objects().put(name, &mut &bytes[..]).await.unwrap();
}

async fn get(bucket: &snapshots::SetBucket, name: &str) -> Vec<u8> {
    let mut object = bucket.objects().get(name).await.unwrap();
    let mut out = Vec::new();
    object.read_to_end(&mut out).await.unwrap();
    out
}

fn manifest_name(position: u64, node: &str) -> String {
    format!("sets/{position:020}-{node}/manifest.json")
}

#[test]
fn untrusted_manifests_are_passed_over_and_a_wrong_digest_refused() {
    let rt = runtime();
    let nats = NatsCluster::start(1).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let mut options = ClusterOptions::new(&nats.urls(), "a").unwrap();
    options.snapshot_interval = None;
    let engine_opts = EngineOptions { fsync: FsyncPolicy::Os, store: StoreKind::Memory, ..EngineOptions::default() };
    let a = rt.block_on(Node::start(dir.path(), engine_opts, options)).unwrap();
    let ea = Arc::clone(&a.engine);
    ea.create_tenant("t", TenantConfig::new(Config::seed_example())).unwrap();
    for i in 0..20 {
        ea.upsert("t", Item::text(format!("i{i}"), format!("the red fox number {i} runs very fast"))).unwrap();
    }
    let first = rt.block_on(a.publish_snapshot()).unwrap();
    assert_eq!(first.format, 1);
    let p = first.position;

    let client = rt.block_on(async_nats::connect(nats.urls().split(',').next().unwrap().to_string())).unwrap();
    let js = async_nats::jetstream::new(client);
    let bucket = rt.block_on(snapshots::bucket(&js, 1, Partition::ONLY, Default::default())).unwrap();
    let latest = || rt.block_on(snapshots::latest(&bucket)).unwrap();
    assert_eq!(latest().as_ref(), Some(&first));

    // A manifest of another format, at the same position and sorting
    // after the good one: not trusted, so the good one is still the latest.
    let other_format = Manifest { format: 2, node: "x".into(), ..first.clone() };
    rt.block_on(put(&bucket, &manifest_name(p, "x"), &serde_json::to_vec(&other_format).unwrap()));
    assert_eq!(latest().as_ref(), Some(&first), "a format-2 manifest was trusted");

    // A manifest claiming a position the stream has not reached.
    let ahead = Manifest { position: p + 1000, node: "y".into(), ..first.clone() };
    rt.block_on(put(&bucket, &manifest_name(p + 1000, "y"), &serde_json::to_vec(&ahead).unwrap()));
    assert_eq!(latest().as_ref(), Some(&first), "a manifest past the stream's end was trusted");

    // A trusted manifest whose snapshot's digest differs: seeding from it
    // fails as corrupt; nothing is installed.
    let mut wrong = Manifest { node: "z".into(), ..first.clone() };
    for t in &mut wrong.tenants {
        let bytes = rt.block_on(get(&bucket, &format!("sets/{p:020}-a/{}", t.tenant)));
        rt.block_on(put(&bucket, &format!("sets/{p:020}-z/{}", t.tenant), &bytes));
        t.blake3 = Some("00".repeat(32));
    }
    rt.block_on(put(&bucket, &manifest_name(p, "z"), &serde_json::to_vec(&wrong).unwrap()));
    assert_eq!(latest().map(|m| m.node), Some("z".to_string()));
    let seed_dir = tempfile::tempdir().unwrap();
    let err = rt.block_on(snapshots::seed_from_latest(&bucket, seed_dir.path())).unwrap_err();
    assert!(err.to_string().contains("does not match the digest its manifest gives"), "{err}");
    drop(a);
}
