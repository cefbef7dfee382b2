//! Rebuilds: whether a change of parameters can be made from what the
//! store holds, and every record recomputed under the new parameters.

use std::ops::ControlFlow;

use neardup_core::Fingerprinter;

use crate::error::{Error, ErrorKind, Result};
use crate::item::FeaturesAt;
use crate::store::{Store, StoreBatch};
use crate::tenant_config::TenantConfig;

/// Whether moving from `old` to `new` needs content, and if so whether every
/// live record has it. Checked before a rebuild is logged.
pub(crate) fn check_rebuild(store: &dyn Store, tenant: &str, old: &TenantConfig, new: &TenantConfig) -> Result<()> {
    if old.same_features(new) {
        return Ok(());
    }
    let mut missing = 0u64;
    store.scan(tenant, None, &mut |r| {
        if r.is_live() && r.content.is_none() {
            missing += 1;
        }
        Ok(ControlFlow::Continue(()))
    })?;
    if missing > 0 {
        return Err(Error::new(ErrorKind::RebuildNeedsContent {
            reason: format!(
                "the normalizer, shingling, seed or shingle cap changes, so features must be \
                 recomputed, and {missing} live items were stored without content"
            ),
        }));
    }
    Ok(())
}

/// Every live record recomputed under `new`; tombstoned records deleted.
pub(super) fn recompute_all(
    store: &dyn Store,
    tenant: &str,
    old: &TenantConfig,
    new: &TenantConfig,
    fingerprinter: &mut Fingerprinter,
) -> Result<StoreBatch> {
    let same = old.same_features(new);
    let mut batch = StoreBatch::default();
    let mut failure = None;
    store.scan(tenant, None, &mut |mut r| {
        if !r.is_live() {
            batch.deletes.push(r.item_id);
            return Ok(ControlFlow::Continue(()));
        }
        if same {
            // Features stand; the index recomputes signatures from them.
            // Those the store left out are derived (the same under either
            // parameters) before the content they come from goes.
            r.signature = Vec::new();
            if !new.retain_content {
                r.derive_features(fingerprinter)?;
            }
        } else if let Some(content) = &r.content {
            let fp = fingerprinter.fingerprint(content);
            r.content_hash = fp.content_hash.0;
            r.tokens = fp.tokens;
            r.degraded_shingles = fp.degraded_shingles();
            r.features = fp.features;
            r.signature = Vec::new();
            r.features_at = FeaturesAt::Derivable;
        } else if failure.is_none() {
            failure = Some(r.item_id.clone());
        }
        if !new.retain_content {
            r.content = None;
            r.features_at = FeaturesAt::Here;
        }
        batch.puts.push(r);
        Ok(ControlFlow::Continue(()))
    })?;
    if let Some(id) = failure {
        return Err(Error::new(ErrorKind::RebuildNeedsContent {
            reason: format!("item {id:?} has no stored content"),
        }));
    }
    Ok(batch)
}
