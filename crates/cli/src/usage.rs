//! Usage errors (exit status 2) and the flags every subcommand shares.

pub use neardup_batch::UsageError;

/// Sets the rayon pool size once.
pub fn init_threads(threads: Option<usize>) -> anyhow::Result<()> {
    if let Some(n) = threads {
        if n == 0 {
            return Err(UsageError("--threads must be at least 1".into()).into());
        }
        rayon::ThreadPoolBuilder::new().num_threads(n).build_global()?;
    }
    Ok(())
}
