//! Parquet in and out: reading records from a Parquet file a batch of rows
//! at a time (never the whole file), and writing rows and result tables as
//! Parquet.
//!
//! A file is read as untrusted: its footer's schema is walked for its depth
//! before the `parquet` crate builds it (`thrift.rs`), and each row group's
//! page headers are checked against a budget before it is decoded, which
//! also sizes its batches (`limits.rs`).

mod limits;
mod source;
mod thrift;

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;

use anyhow::Context;
use arrow_array::builder::{Float64Builder, ListBuilder, StringBuilder, UInt64Builder};
use arrow_array::cast::AsArray;
use arrow_array::{Array, ArrayRef, BooleanArray, RecordBatch, StringArray, StructArray};
use arrow_schema::{DataType, Field, Schema, SchemaRef};
use bytes::Bytes;
use parquet::arrow::arrow_reader::{
    ArrowReaderMetadata, ArrowReaderOptions, ParquetRecordBatchReader, ParquetRecordBatchReaderBuilder,
};
use parquet::arrow::{ArrowWriter, ProjectionMask};
use parquet::basic::{Compression, ZstdLevel};
use parquet::file::metadata::ParquetMetaDataReader;
use parquet::file::properties::WriterProperties;

use crate::chunk::{Chunk, Input, ReadOptions};
use crate::jsonl::{Body, Line, Reject};
use crate::output::Sink;
use limits::{Budget, Plan};
use source::Source;

/// A row group being written is flushed at this many bytes.
const ROW_GROUP_BYTES: usize = 128 << 20;
/// Deepest schema read: columns at most this many levels below the root.
/// (The `parquet` crate builds, converts and drops a schema recursively.)
const MAX_SCHEMA_DEPTH: usize = 64;

/// A Parquet file being read.
pub struct ParquetInput {
    name: String,
    source: Source,
    file_len: u64,
    metadata: ArrowReaderMetadata,
    mask: ProjectionMask,
    budget: Budget,
    /// The row group to read next.
    next_group: usize,
    /// The row group being read: its number, reader and plan.
    group: Option<(usize, ParquetRecordBatchReader, Plan)>,
    /// The leaf column of the text, when it is one.
    text_leaf: Option<usize>,
    text_field: String,
    id_field: String,
    /// The keeper policy's column (`--keep max:FIELD`), when one is asked for.
    key_field: Option<String>,
    /// The id column is in the file (else records are named by row).
    has_id: bool,
    rows: u64,
    rows_read: u64,
    size: u64,
    reported: u64,
}

impl std::fmt::Debug for ParquetInput {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ParquetInput").field("name", &self.name).field("rows", &self.rows).finish()
    }
}

/// The top-level field a column path starts at: the field spelled exactly
/// so, else the one named by the part before the first dot.
fn root_of(schema: &Schema, path: &str) -> Option<usize> {
    schema.index_of(path).ok().or_else(|| schema.index_of(path.split('.').next()?).ok())
}

/// The arrays along `path` in `batch` (the last is the column), descending
/// into struct columns for a dotted path.
fn column_path(batch: &RecordBatch, path: &str) -> Option<Vec<ArrayRef>> {
    if let Some(c) = batch.column_by_name(path) {
        return Some(vec![Arc::clone(c)]);
    }
    let mut parts = path.split('.');
    let mut arrays = vec![Arc::clone(batch.column_by_name(parts.next()?)?)];
    for part in parts {
        let parent: &StructArray = arrays.last()?.as_struct_opt()?;
        let child = Arc::clone(parent.column_by_name(part)?);
        arrays.push(child);
    }
    Some(arrays)
}

fn is_null_along(arrays: &[ArrayRef], row: usize) -> bool {
    arrays.iter().any(|a| a.is_null(row))
}

/// The column's values as text, when it is a string column.
fn text_values(array: &ArrayRef, path: &str) -> anyhow::Result<ArrayRef> {
    match array.data_type() {
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => Ok(Arc::clone(array)),
        DataType::Dictionary(_, v) if matches!(**v, DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View) => {
            Ok(arrow_cast::cast(array, &DataType::Utf8)?)
        }
        other => anyhow::bail!("column {path:?} is {other}: the text column must hold strings"),
    }
}

/// The keeper policy's column as numbers: numeric columns as they are,
/// dates and timestamps as seconds since 1970 (UTC), strings through
/// [`neardup_core::Keep::value_of_text`]; a value that is none of these is none.
fn key_values(array: &ArrayRef, path: &str) -> anyhow::Result<Vec<Option<f64>>> {
    use arrow_schema::TimeUnit;
    let as_f64 = |a: &ArrayRef, scale: f64| -> anyhow::Result<Vec<Option<f64>>> {
        let c = arrow_cast::cast(a, &DataType::Float64)?;
        let c = c.as_primitive::<arrow_array::types::Float64Type>();
        Ok((0..c.len())
            .map(|i| (!c.is_null(i)).then(|| c.value(i) * scale).and_then(neardup_core::Keep::value_of_number))
            .collect())
    };
    let seconds_of = |a: &ArrayRef, scale: f64| -> anyhow::Result<Vec<Option<f64>>> {
        as_f64(&arrow_cast::cast(a, &DataType::Int64)?, scale)
    };
    match array.data_type() {
        t if t.is_numeric() => as_f64(array, 1.0),
        DataType::Date32 => seconds_of(array, 86_400.0),
        DataType::Date64 | DataType::Timestamp(TimeUnit::Millisecond, _) => seconds_of(array, 1e-3),
        DataType::Timestamp(TimeUnit::Second, _) => seconds_of(array, 1.0),
        DataType::Timestamp(TimeUnit::Microsecond, _) => seconds_of(array, 1e-6),
        DataType::Timestamp(TimeUnit::Nanosecond, _) => seconds_of(array, 1e-9),
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => Ok((0..array.len())
            .map(|i| (!array.is_null(i)).then(|| string_at(array, i)).and_then(neardup_core::Keep::value_of_text))
            .collect()),
        DataType::Dictionary(_, v) if matches!(**v, DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View) => {
            key_values(&arrow_cast::cast(array, &DataType::Utf8)?, path)
        }
        other => anyhow::bail!("column {path:?} is {other}: --keep needs numbers, dates, timestamps or strings"),
    }
}

fn string_at(array: &ArrayRef, row: usize) -> &str {
    match array.data_type() {
        DataType::Utf8 => array.as_string::<i32>().value(row),
        DataType::LargeUtf8 => array.as_string::<i64>().value(row),
        _ => array.as_string_view().value(row),
    }
}

impl ParquetInput {
    /// Opens a Parquet file: reads its footer and checks the text column.
    pub fn open(input: &Input, opts: &ReadOptions) -> anyhow::Result<ParquetInput> {
        let name = input.name.clone();
        let (source, file_len, metadata) = open_footer(&name)?;
        let schema = Arc::clone(metadata.schema());
        let Some(text_root) = root_of(&schema, &opts.text_field) else {
            let names: Vec<&str> = schema.fields().iter().map(|f| f.name().as_str()).collect();
            anyhow::bail!("{name}: no column {:?} (--text-field); columns: {}", opts.text_field, names.join(", "));
        };
        let id_root = root_of(&schema, &opts.id_field);
        let key_root = match &opts.key_field {
            Some(key) => Some(root_of(&schema, key).ok_or_else(|| {
                let names: Vec<&str> = schema.fields().iter().map(|f| f.name().as_str()).collect();
                anyhow::anyhow!("{name}: no column {key:?} (--keep); columns: {}", names.join(", "))
            })?),
            None => None,
        };
        let mask = if opts.all_columns {
            ProjectionMask::all()
        } else {
            let mut roots = vec![text_root];
            roots.extend(id_root.filter(|&i| i != text_root));
            roots.extend(key_root.filter(|i| !roots.contains(i)));
            ProjectionMask::roots(metadata.parquet_schema(), roots)
        };
        let rows = u64::try_from(metadata.metadata().file_metadata().num_rows()).unwrap_or(0);
        let text_leaf = metadata.parquet_schema().columns().iter().position(|c| c.path().string() == opts.text_field);
        Ok(ParquetInput {
            name,
            source,
            file_len,
            metadata,
            mask,
            budget: Budget::new(opts.max_line),
            next_group: 0,
            group: None,
            text_leaf,
            text_field: opts.text_field.clone(),
            id_field: opts.id_field.clone(),
            key_field: opts.key_field.clone(),
            has_id: id_root.is_some(),
            rows,
            rows_read: 0,
            size: input.size.unwrap_or(0),
            reported: 0,
        })
    }

    /// The next batch of rows as records numbered from `next + 1`; `None`
    /// at the end of the file. A null or over-long text is a reject; a
    /// damaged file is an error naming the file and the first row not read.
    pub fn next_chunk(&mut self, input: usize, next: &mut u64, max_len: usize) -> anyhow::Result<Option<Chunk>> {
        let first_row = self.rows_read + 1;
        let batch = loop {
            let Some((_, reader, _)) = &mut self.group else {
                if self.next_group == self.metadata.metadata().num_row_groups() {
                    return Ok(None);
                }
                self.group = Some(self.open_group(self.next_group)?);
                self.next_group += 1;
                continue;
            };
            match caught(|| reader.next()) {
                Ok(None) => self.group = None,
                Ok(Some(Ok(b))) => break b,
                Ok(Some(Err(e))) => anyhow::bail!("{}: row {first_row}: {e}", self.name),
                Err(e) => anyhow::bail!("{}: row {first_row}: {e}", self.name),
            }
        };
        let name = &self.name;
        let text_path = column_path(&batch, &self.text_field)
            .with_context(|| format!("{name}: no column {:?} (--text-field)", self.text_field))?;
        self.check_decoded(text_path.last().expect("a path has a column"))?;
        let id_path = if self.has_id { column_path(&batch, &self.id_field) } else { None };
        let text = text_values(text_path.last().expect("a path has a column"), &self.text_field)
            .with_context(|| name.clone())?;
        let ids = match &id_path {
            Some(p) => Some(
                arrow_cast::display::ArrayFormatter::try_new(
                    p.last().expect("a path has a column").as_ref(),
                    &arrow_cast::display::FormatOptions::default(),
                )
                .with_context(|| format!("{name}: column {:?} (--id-field)", self.id_field))?,
            ),
            None => None,
        };
        let keys = match &self.key_field {
            Some(key) => {
                let path = column_path(&batch, key).with_context(|| format!("{name}: no column {key:?} (--keep)"))?;
                Some((key_values(path.last().expect("a path has a column"), key).with_context(|| name.clone())?, path))
            }
            None => None,
        };
        let (mut lines, mut rejects) = (Vec::with_capacity(batch.num_rows()), Vec::new());
        for row in 0..batch.num_rows() {
            *next += 1;
            if is_null_along(&text_path, row) {
                rejects.push(Reject::at(*next, format!("text column {:?} is null", self.text_field)));
                continue;
            }
            let value = string_at(&text, row);
            if value.len() > max_len {
                rejects.push(Reject::at(
                    *next,
                    format!("text longer than the {max_len}-byte limit (--max-line-bytes); skipped"),
                ));
                continue;
            }
            let id = match (&ids, &id_path) {
                (Some(f), Some(p)) if !is_null_along(p, row) => Some(f.value(row).to_string()),
                _ => None,
            };
            let key = match &keys {
                Some((values, path)) if !is_null_along(path, row) => values[row],
                _ => None,
            };
            lines.push(Line { number: *next, body: Body::Row { row, id, text: value.to_owned(), key } });
        }
        self.rows_read += batch.num_rows() as u64;
        let read = u128::from(self.rows_read.min(self.rows));
        let done = (u128::from(self.size) * read).checked_div(u128::from(self.rows)).map_or(self.size, |d| d as u64);
        let progress = done - self.reported;
        self.reported = done;
        Ok(Some(Chunk { lines, rejects, rows: Some(batch), input, progress }))
    }

    /// A reader of row group `group`, once its pages are checked against
    /// the budget, decoding as many rows at a time as the budget allows.
    fn open_group(&self, group: usize) -> anyhow::Result<(usize, ParquetRecordBatchReader, Plan)> {
        let name = &self.name;
        // The last row group's held column chunks are read.
        self.source.release();
        let plan = limits::plan(&self.source, self.file_len, self.metadata.metadata(), group, &self.mask, self.budget)
            .map_err(|why| anyhow::anyhow!("{name}: {why}"))?;
        let reader = ParquetRecordBatchReaderBuilder::new_with_metadata(self.source.clone(), self.metadata.clone())
            .with_row_groups(vec![group])
            .with_batch_size(plan.batch_rows)
            .with_projection(self.mask.clone())
            .build()
            .with_context(|| format!("{name}: cannot read its rows"))?;
        Ok((group, reader, plan))
    }

    /// Refuses a batch whose text decoded to more than the page headers of
    /// its row group allowed (they were checked before it was read).
    fn check_decoded(&self, text: &ArrayRef) -> anyhow::Result<()> {
        let (Some((group, _, plan)), Some(leaf)) = (&self.group, self.text_leaf) else { return Ok(()) };
        let (Some(bound), Some(bytes)) = (plan.bound(leaf), value_bytes(text)) else { return Ok(()) };
        if bytes > bound {
            anyhow::bail!(
                "{}: row group {group}, column {:?}: {} rows decoded to {bytes} bytes of text, more than its page \
                 headers allow ({bound}): the file is damaged",
                self.name,
                self.text_field,
                text.len()
            );
        }
        Ok(())
    }
}

/// The bytes of a string or binary array's values.
fn value_bytes(array: &ArrayRef) -> Option<u64> {
    fn span<O: arrow_array::OffsetSizeTrait>(o: &[O]) -> u64 {
        (o.last().map_or(0, |v| v.as_usize()) - o.first().map_or(0, |v| v.as_usize())) as u64
    }
    match array.data_type() {
        DataType::Utf8 => Some(span(array.as_string::<i32>().offsets())),
        DataType::LargeUtf8 => Some(span(array.as_string::<i64>().offsets())),
        DataType::Binary => Some(span(array.as_binary::<i32>().offsets())),
        DataType::LargeBinary => Some(span(array.as_binary::<i64>().offsets())),
        _ => None,
    }
}

/// Runs `f`, turning a panic in the Parquet decoder (a damaged file it did
/// not anticipate) into an error.
fn caught<T>(f: impl FnOnce() -> T) -> anyhow::Result<T> {
    catch_unwind(AssertUnwindSafe(f)).map_err(|p| {
        let why = p
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| p.downcast_ref::<&str>().copied())
            .unwrap_or("unknown");
        anyhow::anyhow!("the Parquet decoder failed on damaged data ({why})")
    })
}

/// The footer of a Parquet file (its Thrift `FileMetaData`), read as bytes.
fn read_footer(source: &Source, path: &str) -> anyhow::Result<(u64, Bytes)> {
    let len = source.size().with_context(|| format!("cannot open {path}"))?;
    let not = |why: String| anyhow::anyhow!("{path}: not a readable Parquet file ({why})");
    if len < 12 {
        return Err(not(format!("{len} bytes, too few for one")));
    }
    let tail = source.bytes(len - 8, 8).with_context(|| path.to_owned())?;
    match &tail[4..] {
        b"PAR1" => {}
        b"PARE" => return Err(not("its footer is encrypted, which this neardup does not read".into())),
        _ => return Err(not("no PAR1 at its end".into())),
    }
    let footer = u64::from(u32::from_le_bytes(tail[..4].try_into().expect("4 bytes")));
    if footer + 12 > len {
        return Err(not(format!("a footer of {footer} bytes in a file of {len}")));
    }
    let bytes = source.bytes(len - 8 - footer, footer as usize).with_context(|| path.to_owned())?;
    Ok((len, bytes))
}

/// Opens a Parquet file and reads its footer: the schema's depth is checked
/// before anything builds it, and a decoder panic on a damaged footer is an
/// error naming the file. Returns the file, its length and its metadata.
fn open_footer(path: &str) -> anyhow::Result<(Source, u64, ArrowReaderMetadata)> {
    let source = Source::open(path)?;
    let (len, footer) = read_footer(&source, path)?;
    thrift::check_footer(&footer, MAX_SCHEMA_DEPTH).map_err(|e| anyhow::anyhow!("{path}: cannot read it: {e}"))?;
    let metadata = caught(|| {
        let metadata = ParquetMetaDataReader::decode_metadata(&footer)?;
        ArrowReaderMetadata::try_new(Arc::new(metadata), ArrowReaderOptions::new())
    })
    .and_then(|r| r.map_err(anyhow::Error::from))
    .with_context(|| format!("{path}: not a readable Parquet file"))?;
    Ok((source, len, metadata))
}

/// The Arrow schema of a Parquet file.
pub fn schema_of(path: &str) -> anyhow::Result<SchemaRef> {
    Ok(Arc::clone(open_footer(path)?.2.schema()))
}

/// Writer settings: zstd, row groups flushed at [`ROW_GROUP_BYTES`].
fn properties() -> WriterProperties {
    WriterProperties::builder()
        .set_compression(Compression::ZSTD(ZstdLevel::default()))
        .set_max_row_group_bytes(Some(ROW_GROUP_BYTES))
        .build()
}

/// The two columns `--annotate` adds.
pub const ANNOTATION_COLUMNS: [&str; 2] = ["cluster_id", "duplicate_of"];

/// What `--annotate` adds to a row: the id of its cluster's first item and
/// the kept item it duplicates (none when it is kept).
pub type Annotation = (String, Option<String>);

/// Rows written as Parquet, with the inputs' schema (and the annotation
/// columns when annotating).
pub struct RowWriter {
    writer: ArrowWriter<Sink>,
    schema: SchemaRef,
    annotate: bool,
}

impl std::fmt::Debug for RowWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RowWriter").field("annotate", &self.annotate).finish()
    }
}

impl RowWriter {
    /// A writer of rows of `input` schema; annotated rows gain the two
    /// [`ANNOTATION_COLUMNS`], which the input must not have.
    pub fn new(out: Sink, input: &Schema, annotate: bool) -> anyhow::Result<RowWriter> {
        let mut fields: Vec<Arc<Field>> = input.fields().iter().cloned().collect();
        if annotate {
            for name in ANNOTATION_COLUMNS {
                if input.index_of(name).is_ok() {
                    anyhow::bail!("the input already has a column {name:?}; --annotate would overwrite it");
                }
                fields.push(Arc::new(Field::new(name, DataType::Utf8, name == "duplicate_of")));
            }
        }
        let schema = Arc::new(Schema::new_with_metadata(fields, input.metadata().clone()));
        let writer = ArrowWriter::try_new(out, Arc::clone(&schema), Some(properties()))?;
        Ok(RowWriter { writer, schema, annotate })
    }

    /// Writes the rows of `rows` that `picked` selects (one entry per row,
    /// in order), with their annotations when annotating.
    pub fn write(&mut self, rows: &RecordBatch, picked: &[Option<Annotation>], mask: &[bool]) -> anyhow::Result<()> {
        let kept = arrow_select::filter::filter_record_batch(rows, &BooleanArray::from(mask.to_vec()))?;
        if kept.num_rows() == 0 {
            return Ok(());
        }
        let batch = if self.annotate {
            let cluster: StringArray = picked.iter().map(|a| a.as_ref().map(|a| a.0.as_str())).collect();
            let duplicate: StringArray = picked.iter().map(|a| a.as_ref().and_then(|a| a.1.as_deref())).collect();
            let mut columns = kept.columns().to_vec();
            columns.push(Arc::new(cluster));
            columns.push(Arc::new(duplicate));
            RecordBatch::try_new(Arc::clone(&self.schema), columns)?
        } else {
            RecordBatch::try_new(Arc::clone(&self.schema), kept.columns().to_vec())?
        };
        self.writer.write(&batch)?;
        Ok(())
    }

    pub fn finish(self) -> anyhow::Result<()> {
        self.writer.into_inner()?.finish()
    }
}

/// Rows of Parquet as JSON lines (for JSONL output of Parquet input).
pub fn rows_as_json(rows: &RecordBatch, mask: &[bool]) -> anyhow::Result<Vec<u8>> {
    let kept = arrow_select::filter::filter_record_batch(rows, &BooleanArray::from(mask.to_vec()))?;
    let mut out = Vec::new();
    let mut w = arrow_json::LineDelimitedWriter::new(&mut out);
    w.write_batches(&[&kept])?;
    w.finish()?;
    drop(w);
    Ok(out)
}

/// A result table written as Parquet, a batch of rows at a time.
pub struct Table {
    writer: ArrowWriter<Sink>,
    schema: SchemaRef,
    columns: Vec<Column>,
    rows: usize,
}

impl std::fmt::Debug for Table {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Table").field("schema", &self.schema).finish()
    }
}

/// One column of a [`Table`] being filled.
pub enum Column {
    Text(StringBuilder),
    Score(Float64Builder),
    Count(UInt64Builder),
    Names(ListBuilder<StringBuilder>),
}

/// A value for a [`Table`] row.
#[derive(Debug)]
pub enum Value<'a> {
    Text(&'a str),
    Score(f64),
    Count(u64),
    Names(&'a [&'a str]),
}

/// Rows gathered before a batch is written.
const TABLE_BATCH: usize = 65_536;

impl Table {
    /// Pairs and dropped lists: two ids and a score.
    pub fn scored(out: Sink, names: [&str; 3]) -> anyhow::Result<Table> {
        let fields = vec![
            Field::new(names[0], DataType::Utf8, false),
            Field::new(names[1], DataType::Utf8, false),
            Field::new(names[2], DataType::Float64, false),
        ];
        let columns = vec![
            Column::Text(StringBuilder::new()),
            Column::Text(StringBuilder::new()),
            Column::Score(Float64Builder::new()),
        ];
        Table::new(out, fields, columns)
    }

    /// Clusters: number, size, members and kept members.
    pub fn clusters(out: Sink) -> anyhow::Result<Table> {
        let list = || DataType::List(Arc::new(Field::new("item", DataType::Utf8, true)));
        let fields = vec![
            Field::new("cluster", DataType::UInt64, false),
            Field::new("size", DataType::UInt64, false),
            Field::new("members", list(), false),
            Field::new("kept", list(), false),
        ];
        let columns = vec![
            Column::Count(UInt64Builder::new()),
            Column::Count(UInt64Builder::new()),
            Column::Names(ListBuilder::new(StringBuilder::new())),
            Column::Names(ListBuilder::new(StringBuilder::new())),
        ];
        Table::new(out, fields, columns)
    }

    fn new(out: Sink, fields: Vec<Field>, columns: Vec<Column>) -> anyhow::Result<Table> {
        let schema = Arc::new(Schema::new(fields));
        let writer = ArrowWriter::try_new(out, Arc::clone(&schema), Some(properties()))?;
        Ok(Table { writer, schema, columns, rows: 0 })
    }

    /// Adds a row: one value per column, of the column's kind.
    pub fn row(&mut self, values: &[Value<'_>]) -> anyhow::Result<()> {
        debug_assert_eq!(values.len(), self.columns.len());
        for (c, v) in self.columns.iter_mut().zip(values) {
            match (c, v) {
                (Column::Text(b), Value::Text(s)) => b.append_value(s),
                (Column::Score(b), Value::Score(x)) => b.append_value(*x),
                (Column::Count(b), Value::Count(x)) => b.append_value(*x),
                (Column::Names(b), Value::Names(names)) => {
                    for n in *names {
                        b.values().append_value(n);
                    }
                    b.append(true);
                }
                _ => anyhow::bail!("a value of the wrong kind for its column"),
            }
        }
        self.rows += 1;
        if self.rows >= TABLE_BATCH {
            self.write_batch()?;
        }
        Ok(())
    }

    fn write_batch(&mut self) -> anyhow::Result<()> {
        if self.rows == 0 {
            return Ok(());
        }
        let arrays: Vec<ArrayRef> = self
            .columns
            .iter_mut()
            .map(|c| -> ArrayRef {
                match c {
                    Column::Text(b) => Arc::new(b.finish()),
                    Column::Score(b) => Arc::new(b.finish()),
                    Column::Count(b) => Arc::new(b.finish()),
                    Column::Names(b) => Arc::new(b.finish()),
                }
            })
            .collect();
        let batch = RecordBatch::try_new(Arc::clone(&self.schema), arrays)?;
        self.writer.write(&batch)?;
        self.rows = 0;
        Ok(())
    }

    pub fn finish(mut self) -> anyhow::Result<()> {
        self.write_batch()?;
        self.writer.into_inner()?.finish()
    }
}
