//! Writing results: standard output that tolerates a closed pipe, and the
//! place a result file goes.

use std::fs::File;
use std::io::{self, BufWriter, Write};

use anyhow::Context;

use crate::remote::{self, Upload};

/// Where a result goes: a file, standard output (`-`) or an object
/// (`s3://bucket/key`, appearing whole at [`Sink::finish`]).
pub enum Sink {
    File(BufWriter<File>),
    Stdout(BufWriter<io::Stdout>),
    Object(Upload),
}

impl std::fmt::Debug for Sink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Sink::File(_) => "Sink::File",
            Sink::Stdout(_) => "Sink::Stdout",
            Sink::Object(_) => "Sink::Object",
        })
    }
}

impl Sink {
    /// The sink `path` names.
    pub fn create(path: &str) -> anyhow::Result<Sink> {
        Ok(if path == "-" {
            Sink::Stdout(BufWriter::new(io::stdout()))
        } else if remote::is_remote(path) {
            Sink::Object(Upload::create(path)?)
        } else {
            Sink::File(BufWriter::new(File::create(path).with_context(|| format!("cannot create {path}"))?))
        })
    }

    /// Writes out what is buffered; an object is completed.
    pub fn finish(self) -> anyhow::Result<()> {
        match self {
            Sink::File(mut w) => w.flush()?,
            Sink::Stdout(mut w) => w.flush()?,
            Sink::Object(u) => u.finish()?,
        }
        Ok(())
    }
}

impl Write for Sink {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Sink::File(w) => w.write(buf),
            Sink::Stdout(w) => w.write(buf),
            Sink::Object(u) => u.write(buf),
        }
    }
    fn flush(&mut self) -> io::Result<()> {
        match self {
            Sink::File(w) => w.flush(),
            Sink::Stdout(w) => w.flush(),
            Sink::Object(u) => u.flush(),
        }
    }
}

/// Writes `text` and a newline to stdout; a closed pipe (`| head`) is not an error.
pub fn print_stdout(text: &str) -> anyhow::Result<()> {
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
