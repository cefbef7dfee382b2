//! Progress bars on a terminal, nothing when stderr is not one.

use std::io::IsTerminal;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// A bar over `total` units (bytes when `bytes`), hidden unless stderr is a
/// terminal and `enabled`.
pub fn bar(total: Option<u64>, bytes: bool, prefix: &str, enabled: bool) -> ProgressBar {
    let pb = match total {
        Some(t) => ProgressBar::new(t),
        None => ProgressBar::new_spinner(),
    };
    if !enabled || !std::io::stderr().is_terminal() {
        pb.set_draw_target(ProgressDrawTarget::hidden());
        return pb;
    }
    let template = match (total.is_some(), bytes) {
        (true, true) => "{prefix:>8} [{bar:30}] {bytes}/{total_bytes} {bytes_per_sec} eta {eta}",
        (true, false) => "{prefix:>8} [{bar:30}] {pos}/{len} {per_sec} eta {eta}",
        (false, true) => "{prefix:>8} {spinner} {bytes} {bytes_per_sec}",
        (false, false) => "{prefix:>8} {spinner} {pos} {per_sec}",
    };
    pb.set_style(ProgressStyle::with_template(template).expect("static template").progress_chars("=> "));
    pb.set_prefix(prefix.to_owned());
    pb
}
