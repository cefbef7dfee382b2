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

/// A field for a TSV row: backslash, tab, newline and carriage return
/// escaped as `\\`, `\t`, `\n`, `\r`, so an id holding them cannot break
/// a row (the convention of PostgreSQL's text COPY format).
pub fn tsv_field(s: &str) -> std::borrow::Cow<'_, str> {
    if !s.contains(['\\', '\t', '\n', '\r']) {
        return std::borrow::Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\t' => out.push_str("\\t"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            c => out.push(c),
        }
    }
    std::borrow::Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    #[test]
    fn tsv_fields_are_escaped() {
        assert_eq!(super::tsv_field("plain id"), "plain id");
        assert_eq!(super::tsv_field("a\tb\nc\rd\\e"), "a\\tb\\nc\\rd\\\\e");
    }
}
