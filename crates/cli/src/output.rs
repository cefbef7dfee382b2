//! Writing results: standard output that tolerates a closed pipe.

/// Writes `text` and a newline to stdout; a closed pipe (`| head`) is not an error.
pub fn print_stdout(text: &str) -> anyhow::Result<()> {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    match writeln!(out, "{text}").and_then(|_| out.flush()) {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        other => Ok(other?),
    }
}
