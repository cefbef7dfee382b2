//! Tenants spread over partitions: each partition is its own command
//! stream, snapshot bucket and engine, replicated by the nodes that serve
//! it. A tenant belongs to one partition, chosen by a hash of its id that
//! never changes between versions ([`partition_of`]); every node of a
//! cluster must be started with the same partition count.
//!
//! With one partition (the default) the names are those of the first
//! cluster release — stream `NEARDUP_LOG`, bucket `NEARDUP_SNAPSHOTS`, the
//! node's data directory itself — so existing clusters keep their data.

use std::path::{Path, PathBuf};

use crate::error::ClusterError;

/// The stream holding the command log (of the only partition; see
/// [`Partition::stream`]).
pub const STREAM: &str = "NEARDUP_LOG";
/// Subjects of the stream: one per tenant under this prefix (of the only
/// partition; see [`Partition::subject_prefix`]).
pub const SUBJECT_PREFIX: &str = "neardup.log.t.";

/// The snapshot bucket of the only partition (see [`Partition::bucket`]).
pub const SNAPSHOT_BUCKET: &str = "NEARDUP_SNAPSHOTS";

/// The most partitions a cluster may have.
pub const MAX_PARTITIONS: u32 = 256;

/// One partition of a cluster of `count`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Partition {
    /// 0-based.
    pub index: u32,
    /// How many the cluster has.
    pub count: u32,
}

impl Partition {
    /// The only partition of an unpartitioned cluster.
    pub const ONLY: Partition = Partition { index: 0, count: 1 };

    /// The JetStream stream holding this partition's commands.
    pub fn stream(&self) -> String {
        if self.count == 1 {
            STREAM.to_string()
        } else {
            format!("{STREAM}_P{}", self.index)
        }
    }

    /// The subject prefix of its tenants (one subject per tenant after it).
    pub fn subject_prefix(&self) -> String {
        if self.count == 1 {
            SUBJECT_PREFIX.to_string()
        } else {
            format!("neardup.log.p{}.t.", self.index)
        }
    }

    /// The object store bucket of its snapshot sets.
    pub fn bucket(&self) -> String {
        if self.count == 1 {
            SNAPSHOT_BUCKET.to_string()
        } else {
            format!("{SNAPSHOT_BUCKET}_P{}", self.index)
        }
    }

    /// The node's data directory for this partition, under `base`.
    pub fn dir(&self, base: &Path) -> PathBuf {
        if self.count == 1 {
            base.to_path_buf()
        } else {
            base.join(format!("partition-{}", self.index))
        }
    }
}

impl std::fmt::Display for Partition {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.index, self.count)
    }
}

/// The stream subject of `tenant` in partition `p`. Tenant ids are
/// `[A-Za-z0-9_.-]`; `.` separates subject tokens, so it is written `~`
/// (which ids never hold).
pub fn tenant_subject(p: Partition, tenant: &str) -> String {
    format!("{}{}", p.subject_prefix(), tenant.replace('.', "~"))
}

/// The tenant whose subject `subject` is, in partition `p` (`None`: not a
/// tenant subject of `p`). Tenant ids never hold `~`, so the mapping of
/// [`tenant_subject`] is undone exactly.
pub fn subject_tenant(p: Partition, subject: &str) -> Option<String> {
    subject.strip_prefix(&p.subject_prefix()).filter(|t| !t.is_empty()).map(|t| t.replace('~', "."))
}

/// 64-bit FNV-1a of `bytes`: small, and fixed forever (a tenant's
/// partition must not move when a hash library changes).
pub(crate) fn fnv1a(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in bytes {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

/// The partition of `tenant` in a cluster of `count` partitions.
pub fn partition_of(tenant: &str, count: u32) -> Partition {
    let count = count.max(1);
    Partition { index: (fnv1a(tenant.as_bytes()) % u64::from(count)) as u32, count }
}

/// Which partitions exist and which this node serves.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layout {
    /// Partitions in the cluster (the same on every node).
    pub count: u32,
    /// The ones this node replicates and answers for, ascending.
    pub served: Vec<u32>,
}

impl Default for Layout {
    fn default() -> Self {
        Layout { count: 1, served: vec![0] }
    }
}

impl Layout {
    /// `count` partitions, this node serving `served` (`None`: all).
    /// `served` is a list such as `0,2,5-7`.
    pub fn new(count: u32, served: Option<&str>) -> Result<Layout, ClusterError> {
        if count == 0 || count > MAX_PARTITIONS {
            return Err(ClusterError::option(
                "--partitions",
                format!("--partitions {count}: use 1..={MAX_PARTITIONS}"),
            ));
        }
        let Some(list) = served else { return Ok(Layout { count, served: (0..count).collect() }) };
        let bad =
            |why: String| ClusterError::option("--serve-partitions", format!("--serve-partitions {list:?}: {why}"));
        let mut out = Vec::new();
        for part in list.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (lo, hi) = match part.split_once('-') {
                Some((a, b)) => (a.trim(), b.trim()),
                None => (part, part),
            };
            let parse = |s: &str| s.parse::<u32>().map_err(|_| bad(format!("{s:?} is not a partition number")));
            let (lo, hi) = (parse(lo)?, parse(hi)?);
            if lo > hi || hi >= count {
                return Err(bad(format!("{part} is outside 0..{count}")));
            }
            out.extend(lo..=hi);
        }
        out.sort_unstable();
        out.dedup();
        if out.is_empty() {
            return Err(bad("names no partition".into()));
        }
        Ok(Layout { count, served: out })
    }

    /// The partitions this node serves.
    pub fn served(&self) -> impl Iterator<Item = Partition> + '_ {
        self.served.iter().map(|&index| Partition { index, count: self.count })
    }

    /// Whether this node serves `p`.
    pub fn serves(&self, p: Partition) -> bool {
        p.count == self.count && self.served.binary_search(&p.index).is_ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_hash_is_pinned() {
        // Changing these moves tenants between partitions: never.
        assert_eq!(fnv1a(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a(b"a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(fnv1a(b"foobar"), 0x8594_4171_f739_67e8);
        assert_eq!(partition_of("docs", 1), Partition::ONLY);
    }

    #[test]
    fn tenants_spread_over_partitions() {
        let mut seen = [0u32; 4];
        for i in 0..4000 {
            seen[partition_of(&format!("tenant-{i}"), 4).index as usize] += 1;
        }
        assert!(seen.iter().all(|&n| (800..1200).contains(&n)), "{seen:?}");
    }

    #[test]
    fn layouts_parse_and_refuse() {
        assert_eq!(Layout::new(4, None).unwrap().served, vec![0, 1, 2, 3]);
        assert_eq!(Layout::new(8, Some("0, 2,5-7,2")).unwrap().served, vec![0, 2, 5, 6, 7]);
        for bad in ["4", "x", "3-1", "", "1-9"] {
            assert!(Layout::new(4, Some(bad)).is_err(), "{bad}");
        }
        assert!(Layout::new(0, None).is_err());
        assert!(Layout::new(MAX_PARTITIONS + 1, None).is_err());
        let l = Layout::new(4, Some("1,3")).unwrap();
        assert!(l.serves(Partition { index: 3, count: 4 }));
        assert!(!l.serves(Partition { index: 2, count: 4 }));
        assert!(!l.serves(Partition { index: 1, count: 2 }));
        // One partition: the first release's names.
        assert_eq!(Partition::ONLY.stream(), STREAM);
        assert_eq!(Partition { index: 2, count: 4 }.stream(), "NEARDUP_LOG_P2");
        assert_eq!(Partition::ONLY.dir(Path::new("/d")), Path::new("/d"));
    }
}
