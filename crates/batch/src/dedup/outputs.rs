//! What `neardup dedup` writes: kept (or annotated) rows, pairs and drops,
//! clusters — as JSONL or TSV (compressed by the path's extension) or
//! Parquet.

use std::io::{self, Write};

use crate::chunk::{Chunk, Input, Kind};
use crate::jsonl::Body;
use crate::output::{tsv_field, Sink};
use crate::parquet_io::{Annotation, RowWriter, Table, Value};
use crate::UsageError;

/// A text output: plain, or compressed by the path's extension.
pub(super) enum TextOut {
    Plain(Sink),
    Zstd(zstd::stream::write::Encoder<'static, Sink>),
    Gzip(flate2::write::GzEncoder<Sink>),
}

impl Write for TextOut {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            TextOut::Plain(w) => w.write(buf),
            TextOut::Zstd(w) => w.write(buf),
            TextOut::Gzip(w) => w.write(buf),
        }
    }
    fn flush(&mut self) -> io::Result<()> {
        match self {
            TextOut::Plain(w) => w.flush(),
            TextOut::Zstd(w) => w.flush(),
            TextOut::Gzip(w) => w.flush(),
        }
    }
}

impl TextOut {
    pub(super) fn finish(self) -> anyhow::Result<()> {
        match self {
            TextOut::Plain(w) => w.finish(),
            TextOut::Zstd(w) => w.finish()?.finish(),
            TextOut::Gzip(w) => w.finish()?.finish(),
        }
    }
}

/// A text writer for `path` (a file, `-` for stdout, or `s3://bucket/key`),
/// compressed when it ends in `.zst` or `.gz`.
pub(super) fn create(path: &str) -> anyhow::Result<TextOut> {
    let sink = Sink::create(path)?;
    Ok(if path.ends_with(".zst") || path.ends_with(".zstd") {
        TextOut::Zstd(zstd::stream::write::Encoder::new(sink, 3)?)
    } else if path.ends_with(".gz") {
        TextOut::Gzip(flate2::write::GzEncoder::new(sink, flate2::Compression::default()))
    } else {
        TextOut::Plain(sink)
    })
}

pub(super) fn is_parquet_path(path: &str) -> bool {
    path.ends_with(".parquet") || path.ends_with(".parq")
}

/// Kept (or, annotating, all) records being written.
pub(super) enum RowsOut {
    Jsonl(TextOut),
    Parquet(RowWriter),
}

impl RowsOut {
    /// Writes the chunk's lines `picks` names (indices into `chunk.lines`,
    /// in order), each with its annotation when annotating.
    pub(super) fn write(&mut self, chunk: &Chunk, picks: &[(usize, Option<Annotation>)]) -> anyhow::Result<()> {
        if picks.is_empty() {
            return Ok(());
        }
        let mut mask = Vec::new();
        if let Some(rows) = &chunk.rows {
            mask = vec![false; rows.num_rows()];
            for (i, _) in picks {
                if let Body::Row { row, .. } = chunk.lines[*i].body {
                    mask[row] = true;
                }
            }
        }
        match (self, &chunk.rows) {
            (RowsOut::Parquet(w), Some(rows)) => {
                let notes: Vec<Option<Annotation>> = picks.iter().map(|(_, a)| a.clone()).collect();
                w.write(rows, &notes, &mask)
            }
            (RowsOut::Parquet(_), None) => {
                anyhow::bail!("Parquet output needs Parquet inputs (checked before the run)")
            }
            (RowsOut::Jsonl(w), Some(rows)) => {
                let json = crate::parquet_io::rows_as_json(rows, &mask)?;
                let lines = json.split(|&b| b == b'\n').filter(|l| !l.is_empty());
                for (line, (_, note)) in lines.zip(picks) {
                    write_line(w, line, note.as_ref())?;
                }
                Ok(())
            }
            (RowsOut::Jsonl(w), None) => {
                for (i, note) in picks {
                    if let Body::Json(bytes) = &chunk.lines[*i].body {
                        write_line(w, bytes, note.as_ref())?;
                    }
                }
                Ok(())
            }
        }
    }

    pub(super) fn finish(self) -> anyhow::Result<()> {
        match self {
            RowsOut::Jsonl(w) => w.finish(),
            RowsOut::Parquet(w) => w.finish(),
        }
    }
}

/// Writes a JSON object line, with the annotation's two fields added
/// before its closing brace.
pub(super) fn write_line(w: &mut impl Write, line: &[u8], note: Option<&Annotation>) -> anyhow::Result<()> {
    let Some((cluster, duplicate_of)) = note else {
        w.write_all(line)?;
        w.write_all(b"\n")?;
        return Ok(());
    };
    let line = line.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(line);
    let end = line.iter().rposition(|b| !b.is_ascii_whitespace()).map_or(0, |i| i + 1);
    let Some(body) = line[..end].strip_suffix(b"}") else {
        anyhow::bail!("a record read as a JSON object does not end with '}}'");
    };
    let empty = body.iter().all(|b| b.is_ascii_whitespace() || *b == b'{');
    w.write_all(body)?;
    w.write_all(if empty { b"\"cluster_id\":" } else { b",\"cluster_id\":" })?;
    serde_json::to_writer(&mut *w, cluster)?;
    w.write_all(b",\"duplicate_of\":")?;
    serde_json::to_writer(&mut *w, duplicate_of)?;
    w.write_all(b"}\n")?;
    Ok(())
}

/// Pairs or dropped items being written.
pub(super) enum ScoresOut {
    Tsv(TextOut),
    Parquet(Table),
}

impl ScoresOut {
    pub(super) fn create(path: &str, parquet: bool, names: [&str; 3]) -> anyhow::Result<ScoresOut> {
        Ok(if parquet {
            ScoresOut::Parquet(Table::scored(Sink::create(path)?, names)?)
        } else {
            ScoresOut::Tsv(create(path)?)
        })
    }

    pub(super) fn row(&mut self, a: &str, b: &str, score: f64) -> anyhow::Result<()> {
        match self {
            ScoresOut::Tsv(w) => writeln!(w, "{}\t{}\t{score}", tsv_field(a), tsv_field(b))?,
            ScoresOut::Parquet(t) => t.row(&[Value::Text(a), Value::Text(b), Value::Score(score)])?,
        }
        Ok(())
    }

    pub(super) fn finish(self) -> anyhow::Result<()> {
        match self {
            ScoresOut::Tsv(w) => w.finish(),
            ScoresOut::Parquet(t) => t.finish(),
        }
    }
}

/// Where the kept rows go, by the rules of `--output`: checks the inputs
/// suit it before anything is read.
pub(super) fn open_rows(path: &str, inputs: &[Input], annotate: bool) -> anyhow::Result<RowsOut> {
    let all_parquet = inputs.iter().all(|i| i.kind == Kind::Parquet);
    let jsonl_ext = [".jsonl", ".json", ".ndjson", ".zst", ".zstd", ".gz"].iter().any(|e| path.ends_with(e));
    let parquet = is_parquet_path(path) || (all_parquet && !jsonl_ext && path != "-");
    if !parquet {
        return Ok(RowsOut::Jsonl(create(path)?));
    }
    if let Some(j) = inputs.iter().find(|i| i.kind != Kind::Parquet) {
        return Err(UsageError(format!(
            "Parquet output keeps the inputs' columns, so every input must be Parquet; {} is JSONL (write JSONL \
             instead: -o FILE.jsonl)",
            j.name
        ))
        .into());
    }
    let schema = crate::parquet_io::schema_of(&inputs[0].name)?;
    for other in &inputs[1..] {
        let s = crate::parquet_io::schema_of(&other.name)?;
        if s.fields() != schema.fields() {
            return Err(UsageError(format!(
                "Parquet output needs one schema, and {} has other columns than {}",
                other.name, inputs[0].name
            ))
            .into());
        }
    }
    Ok(RowsOut::Parquet(RowWriter::new(Sink::create(path)?, &schema, annotate)?))
}

/// Clusters being written: JSONL or Parquet rows of `cluster`, `size`,
/// `members`, `kept`.
pub(super) enum ClustersOut {
    Text(TextOut),
    Parquet(Table),
}

impl ClustersOut {
    pub(super) fn create(path: &str, parquet: bool) -> anyhow::Result<ClustersOut> {
        Ok(if parquet {
            ClustersOut::Parquet(Table::clusters(Sink::create(path)?)?)
        } else {
            ClustersOut::Text(create(path)?)
        })
    }

    pub(super) fn row(&mut self, n: u64, members: &[&str], kept: &[&str]) -> anyhow::Result<()> {
        match self {
            ClustersOut::Parquet(t) => t.row(&[
                Value::Count(n),
                Value::Count(members.len() as u64),
                Value::Names(members),
                Value::Names(kept),
            ])?,
            ClustersOut::Text(w) => {
                let row = serde_json::json!({ "cluster": n, "size": members.len(), "members": members, "kept": kept });
                serde_json::to_writer(&mut *w, &row)?;
                w.write_all(b"\n")?;
            }
        }
        Ok(())
    }

    pub(super) fn finish(self) -> anyhow::Result<()> {
        match self {
            ClustersOut::Text(w) => w.finish(),
            ClustersOut::Parquet(t) => t.finish(),
        }
    }
}
