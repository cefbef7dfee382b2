//! Cells of the migration matrix (`release/migrations.md`, issue 49 item
//! 3) that no other test proves: what this build does with a command log,
//! a snapshot or a checkpoint of a version or a sealing it was not written
//! in. Each test is one cell or a few of one row, small and fast; the
//! matrix names the other cells' tests.

use std::path::{Path, PathBuf};

use neardup_core::Config;
use neardup_index::{Engine, EngineOptions, FsyncPolicy, Item, Proposer, StoreKind, TenantConfig};

fn opts(store: StoreKind) -> EngineOptions {
    EngineOptions { fsync: FsyncPolicy::Os, store, ..EngineOptions::default() }
}

fn keyed(store: StoreKind, key: Option<[u8; 32]>) -> EngineOptions {
    EngineOptions { snapshot_key: key, ..opts(store) }
}

fn seed_tenant() -> TenantConfig {
    TenantConfig::new(Config::seed_example())
}

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures").join(name)
}

/// The files of `dir`, sorted by name.
fn files(dir: &Path) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = std::fs::read_dir(dir).unwrap().flatten().map(|e| e.path()).collect();
    out.sort();
    out
}

/// A segment whose whole, checksummed header names another format version
/// (a newer build's log) refuses to open, naming the version, and the log is
/// left exactly as it was: the commands in it are acknowledged writes, so a
/// downgrade over a newer log must not cut them.
#[test]
fn a_log_segment_of_another_format_version_refuses_to_open() {
    let dir = tempfile::tempdir().unwrap();
    {
        let e = Engine::open(dir.path(), opts(StoreKind::Memory)).unwrap();
        e.create_tenant("t", seed_tenant()).unwrap();
        e.upsert("t", Item::text("A", "red fox runs very fast")).unwrap();
        e.sync().unwrap();
    }
    let segs = files(&dir.path().join("wal"));
    let last = segs.last().unwrap();
    let mut bytes = std::fs::read(last).unwrap();
    bytes[8..12].copy_from_slice(&2u32.to_le_bytes());
    // The header's CRC-32 covers the version: recompute it, as a newer
    // build would have written it.
    let crc = crc32(&bytes[..20]);
    bytes[20..24].copy_from_slice(&crc.to_le_bytes());
    std::fs::write(last, &bytes).unwrap();
    let Err(err) = Engine::open(dir.path(), opts(StoreKind::Memory)) else { panic!("a newer log must not open") };
    assert_eq!(err.code(), "unsupported_format", "{err}");
    assert!(err.to_string().contains("command log segment format version 2"), "{err}");
    // Nothing was cut or removed.
    assert_eq!(files(&dir.path().join("wal")), segs);
    assert_eq!(std::fs::read(last).unwrap(), bytes);
    // A segment whose header is torn (a crash before it was written) is
    // still the damaged tail it always was: cut and reported.
    let mut torn = bytes.clone();
    torn[20] ^= 0xff;
    std::fs::write(last, &torn).unwrap();
    let e = Engine::open(dir.path(), opts(StoreKind::Memory)).unwrap();
    let r = e.recovery_report();
    assert_eq!(r.log.cuts.len(), 1, "{r:?}");
    assert!(r.log.cuts[0].contains("bad segment header"), "{r:?}");
}

/// A whole, checksummed record holding a command this build does not know
/// (a variant a newer build added) refuses to open, naming the log: replay
/// never skips a command, since the log is the truth.
#[test]
fn a_command_this_build_does_not_know_refuses_to_open() {
    let dir = tempfile::tempdir().unwrap();
    {
        let e = Engine::open(dir.path(), opts(StoreKind::Memory)).unwrap();
        e.create_tenant("t", seed_tenant()).unwrap();
        e.upsert("t", Item::text("A", "red fox runs very fast")).unwrap();
        e.sync().unwrap();
    }
    let last = files(&dir.path().join("wal")).pop().unwrap();
    let mut bytes = std::fs::read(&last).unwrap();
    // Variant 100 (a one-byte varint), then the tenant's name.
    let payload = [&[100u8, 1][..], b"t"].concat();
    let lsn = 1_000u64.to_le_bytes();
    let crc = crc32(&[&lsn[..], &payload].concat());
    bytes.extend_from_slice(&(payload.len() as u32).to_le_bytes());
    bytes.extend_from_slice(&crc.to_le_bytes());
    bytes.extend_from_slice(&lsn);
    bytes.extend_from_slice(&payload);
    std::fs::write(&last, &bytes).unwrap();
    match Engine::open(dir.path(), opts(StoreKind::Memory)) {
        Err(err) => {
            assert_eq!(err.code(), "corrupt", "{err}");
            assert!(err.to_string().contains("log"), "{err}");
        }
        Ok(e) => panic!("opened past an unknown command: {:?}", e.recovery_report()),
    }
}

/// IEEE CRC-32, bit by bit (the log's header checksum).
fn crc32(bytes: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &b in bytes {
        crc ^= u32::from(b);
        for _ in 0..8 {
            crc = if crc & 1 == 1 { (crc >> 1) ^ 0xEDB8_8320 } else { crc >> 1 };
        }
    }
    !crc
}

/// Log records written before a snapshot key was set still replay under
/// one; records sealed with a key refuse to open without it, or with
/// another, and open again with it.
#[test]
fn sealed_log_records_need_their_key_and_plain_ones_replay_under_one() {
    let dir = tempfile::tempdir().unwrap();
    {
        let e = Engine::open(dir.path(), keyed(StoreKind::Memory, None)).unwrap();
        e.create_tenant("t", seed_tenant()).unwrap();
        e.upsert("t", Item::text("A", "red fox runs very fast")).unwrap();
        e.sync().unwrap();
    }
    {
        let e = Engine::open(dir.path(), keyed(StoreKind::Memory, Some([7; 32]))).unwrap();
        assert_eq!(e.live_ids("t").unwrap(), ["A"], "plain records replay under a key");
        e.upsert("t", Item::text("B", "database backup completed nightly")).unwrap();
        e.sync().unwrap();
    }
    for wrong in [None, Some([8; 32])] {
        let Err(err) = Engine::open(dir.path(), keyed(StoreKind::Memory, wrong)) else {
            panic!("a sealed log opened with key {wrong:?}")
        };
        assert!(err.to_string().contains("key"), "{err}");
    }
    let e = Engine::open(dir.path(), keyed(StoreKind::Memory, Some([7; 32]))).unwrap();
    assert_eq!(e.live_ids("t").unwrap(), ["A", "B"]);
}

/// A snapshot whose prefix names a format this build does not know (a
/// newer build's) is refused with `unsupported_format` and the version,
/// on restore, and stops recovery rather than drop the tenant.
#[test]
fn a_snapshot_of_a_newer_format_is_refused() {
    let mut bytes = std::fs::read(fixture("seed-v3.snap")).unwrap();
    let newer = neardup_index::SNAPSHOT_VERSION + 1;
    bytes[8..12].copy_from_slice(&newer.to_le_bytes());
    let dir = tempfile::tempdir().unwrap();
    let e = Engine::open(dir.path(), opts(StoreKind::Memory)).unwrap();
    let err = e.restore("seed", &bytes).unwrap_err();
    assert_eq!(err.code(), "unsupported_format", "{err}");
    assert!(err.to_string().contains(&format!("snapshot format version {newer}")), "{err}");
    assert!(e.live_ids("seed").is_err(), "nothing restored");
    drop(e);

    // The same file as a tenant's newest snapshot on disk.
    let dir = tempfile::tempdir().unwrap();
    {
        let e = Engine::open(dir.path(), opts(StoreKind::Memory)).unwrap();
        e.restore("seed", &std::fs::read(fixture("seed-v3.snap")).unwrap()).unwrap();
        e.checkpoint().unwrap();
    }
    for snap in files(&dir.path().join("snapshots").join("seed")) {
        let mut b = std::fs::read(&snap).unwrap();
        b[8..12].copy_from_slice(&newer.to_le_bytes());
        std::fs::write(&snap, b).unwrap();
    }
    match Engine::open(dir.path(), opts(StoreKind::Memory)) {
        Err(err) => assert!(err.to_string().contains("seed"), "{err}"),
        Ok(e) => panic!("opened over an unreadable snapshot: {:?}", e.recovery_report()),
    }
}

/// A checkpoint of an engine with a persistent store holds no records: it
/// cannot be restored into another engine, and it refuses to open without
/// the store it was written over.
#[test]
fn a_store_checkpoint_needs_its_own_store() {
    let dir = tempfile::tempdir().unwrap();
    {
        let e = Engine::open(dir.path(), opts(StoreKind::Fjall)).unwrap();
        e.create_tenant("t", seed_tenant()).unwrap();
        e.upsert("t", Item::text("A", "red fox runs very fast")).unwrap();
        e.checkpoint().unwrap();
    }
    let checkpoint = files(&dir.path().join("snapshots").join("t")).pop().unwrap();
    let bytes = std::fs::read(&checkpoint).unwrap();
    let other = tempfile::tempdir().unwrap();
    let e = Engine::open(other.path(), opts(StoreKind::Fjall)).unwrap();
    let err = e.restore("t", &bytes).unwrap_err();
    assert_eq!(err.code(), "snapshot_auth", "{err}");
    assert!(err.to_string().contains("store checkpoint"), "{err}");
    drop(e);

    std::fs::remove_dir_all(dir.path().join("store")).unwrap();
    match Engine::open(dir.path(), opts(StoreKind::Fjall)) {
        Err(err) => assert!(err.to_string().contains("the store is missing"), "{err}"),
        Ok(e) => panic!("opened a store checkpoint without its store: {:?}", e.recovery_report()),
    }
}

/// A replicated log that takes nothing: the test below never gets as far
/// as proposing.
struct NoLog;

impl Proposer for NoLog {
    fn propose(&self, _tenant: &str, _after: u64, _payload: &[u8]) -> neardup_index::Result<u64> {
        Err(neardup_index::Error::unavailable("no log in this test"))
    }
}

/// A single-node data directory, command log included, is refused by a
/// cluster node: its state comes from the replicated log and its own
/// checkpoints, never from a single-node log it would silently diverge from.
#[test]
fn a_single_node_command_log_refuses_a_cluster_node() {
    let dir = tempfile::tempdir().unwrap();
    {
        let e = Engine::open(dir.path(), opts(StoreKind::Memory)).unwrap();
        e.create_tenant("t", seed_tenant()).unwrap();
        e.upsert("t", Item::text("A", "red fox runs very fast")).unwrap();
        e.sync().unwrap();
    }
    match Engine::open_replica(dir.path(), opts(StoreKind::Memory), std::sync::Arc::new(NoLog)) {
        Err(err) => assert!(err.to_string().contains("single-node command log"), "{err}"),
        Ok(_) => panic!("a cluster node opened over a single-node command log"),
    }
}
