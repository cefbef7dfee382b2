//! Per-tenant token buckets: one for requests, one for body bytes.
//!
//! A request is admitted when both buckets hold enough; otherwise nothing is
//! taken and the caller gets `429` with `Retry-After` (whole seconds until
//! the emptier bucket refills enough). Buckets are per tenant, so one
//! tenant's load never throttles another.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Instant;

use crate::error::{ApiError, ApiResult, GatewayKind};

/// Quota settings (the same for every tenant).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct QuotaConfig {
    /// Sustained requests per second per tenant.
    pub requests_per_sec: f64,
    /// Burst of requests.
    pub request_burst: f64,
    /// Sustained body bytes per second per tenant.
    pub bytes_per_sec: f64,
    /// Burst of body bytes (at least the largest body allowed).
    pub byte_burst: f64,
}

impl Default for QuotaConfig {
    fn default() -> Self {
        QuotaConfig {
            requests_per_sec: 5_000.0,
            request_burst: 10_000.0,
            bytes_per_sec: 64.0 * 1024.0 * 1024.0,
            byte_burst: 128.0 * 1024.0 * 1024.0,
        }
    }
}

#[derive(Debug)]
struct Bucket {
    level: f64,
    capacity: f64,
    rate: f64,
}

impl Bucket {
    fn new(rate: f64, capacity: f64) -> Bucket {
        Bucket { level: capacity, capacity, rate }
    }

    fn refill(&mut self, dt: f64) {
        self.level = (self.level + dt * self.rate).min(self.capacity);
    }

    /// Seconds until `n` would be available (0 when it is now).
    fn wait_for(&self, n: f64) -> f64 {
        if self.level >= n {
            0.0
        } else if self.rate <= 0.0 {
            f64::INFINITY
        } else {
            (n.min(self.capacity) - self.level) / self.rate
        }
    }
}

#[derive(Debug)]
struct TenantBuckets {
    requests: Bucket,
    bytes: Bucket,
    last: Instant,
}

/// The quota keeper.
#[derive(Debug)]
pub struct Quotas {
    config: QuotaConfig,
    tenants: Mutex<HashMap<String, TenantBuckets>>,
}

impl Quotas {
    /// Quotas with `config`.
    pub fn new(config: QuotaConfig) -> Quotas {
        Quotas { config, tenants: Mutex::new(HashMap::new()) }
    }

    /// Admits one request of `bytes` body bytes for `tenant`, or says how long to wait.
    pub fn admit(&self, tenant: &str, bytes: u64) -> ApiResult<()> {
        self.admit_at(tenant, bytes, Instant::now())
    }

    fn admit_at(&self, tenant: &str, bytes: u64, now: Instant) -> ApiResult<()> {
        let c = self.config;
        let mut map = self.tenants.lock().map_err(|_| ApiError::internal("quota lock poisoned"))?;
        let b = map.entry(tenant.to_string()).or_insert_with(|| TenantBuckets {
            requests: Bucket::new(c.requests_per_sec, c.request_burst),
            bytes: Bucket::new(c.bytes_per_sec, c.byte_burst),
            last: now,
        });
        let dt = now.saturating_duration_since(b.last).as_secs_f64();
        b.last = now;
        b.requests.refill(dt);
        b.bytes.refill(dt);
        let n = bytes as f64;
        let (wr, wb) = (b.requests.wait_for(1.0), b.bytes.wait_for(n));
        if wr > 0.0 || wb > 0.0 {
            let (quota, wait) = if wr >= wb { ("requests", wr) } else { ("bytes", wb) };
            let retry_after_secs = if wait.is_finite() { wait.ceil().max(1.0) as u64 } else { 3600 };
            return Err(ApiError::gateway(GatewayKind::RateLimited { quota, retry_after_secs }));
        }
        b.requests.level -= 1.0;
        // A body larger than the burst can never fit; it is admitted against
        // an empty bucket (the body limit bounds it) rather than starved.
        b.bytes.level = (b.bytes.level - n).max(-b.bytes.capacity);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn bucket_refuses_then_refills() {
        let q =
            Quotas::new(QuotaConfig { requests_per_sec: 1.0, request_burst: 2.0, bytes_per_sec: 1e9, byte_burst: 1e9 });
        let t0 = Instant::now();
        assert!(q.admit_at("a", 10, t0).is_ok());
        assert!(q.admit_at("a", 10, t0).is_ok());
        let e = q.admit_at("a", 10, t0).unwrap_err();
        assert_eq!(e.parts().1, "rate_limited");
        // Another tenant is not affected.
        assert!(q.admit_at("b", 10, t0).is_ok());
        assert!(q.admit_at("a", 10, t0 + Duration::from_millis(1100)).is_ok());
    }

    #[test]
    fn byte_quota_says_how_long() {
        let q = Quotas::new(QuotaConfig {
            requests_per_sec: 1e6,
            request_burst: 1e6,
            bytes_per_sec: 100.0,
            byte_burst: 100.0,
        });
        let t0 = Instant::now();
        assert!(q.admit_at("a", 100, t0).is_ok());
        match q.admit_at("a", 50, t0).unwrap_err().kind() {
            crate::error::ApiErrorKind::Gateway(GatewayKind::RateLimited { quota, retry_after_secs }) => {
                assert_eq!((*quota, *retry_after_secs), ("bytes", 1));
            }
            other => panic!("{other:?}"),
        }
    }
}
