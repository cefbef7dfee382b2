//! Reading the log back at open: every valid record in order, and the
//! repair of a torn or corrupt tail (see the parent module's doc).

use std::fs::{self, File, OpenOptions};
use std::io::{BufReader, Read};
use std::path::Path;

use super::{crc, segments, sync_dir, LogRepair, HEADER, MAGIC, MAX_RECORD, RECORD_HEADER, VERSION};
use crate::error::{Error, ErrorKind, Result};

/// Reads every valid record in order, calling `f(lsn, payload)`, and repairs
/// a torn or corrupt tail. Returns the last LSN seen (0 if none).
pub(crate) fn replay(dir: &Path, mut f: impl FnMut(u64, &[u8]) -> Result<()>) -> Result<(u64, LogRepair)> {
    let segs = segments(dir)?;
    let mut repair = LogRepair::default();
    let mut last = 0u64;
    let mut cut_at: Option<usize> = None;
    for (i, (first, path)) in segs.iter().enumerate() {
        let file = File::open(path).map_err(|e| Error::io(format!("opening {}", path.display()), e))?;
        let len = file.metadata().map(|m| m.len()).unwrap_or(0);
        let mut r = BufReader::with_capacity(1 << 20, file);
        let mut header = [0u8; HEADER];
        let whole = r.read_exact(&mut header).is_ok()
            && &header[..8] == MAGIC
            && u32::from_le_bytes(header[20..24].try_into().unwrap_or_default()) == crc(&[&header[..20]]);
        let version = u32::from_le_bytes(header[8..12].try_into().unwrap_or_default());
        if whole && version != VERSION {
            // A whole, checksummed header of another format (a newer
            // build's log): its commands cannot be read here, and cutting
            // them would lose acknowledged writes. Refuse to open, change
            // nothing.
            return Err(Error::new(ErrorKind::UnsupportedFormat { what: "command log segment", version }));
        }
        let header_ok = whole && u64::from_le_bytes(header[12..20].try_into().unwrap_or_default()) == *first;
        if !header_ok {
            repair.cuts.push(format!("{}: bad segment header", path.display()));
            repair.bytes_dropped += len;
            fs::remove_file(path).map_err(|e| Error::io("removing bad segment", e))?;
            cut_at = Some(i + 1);
            break;
        }
        let mut offset = HEADER as u64;
        let mut payload = Vec::new();
        let bad: Option<String> = loop {
            let mut rh = [0u8; RECORD_HEADER];
            match read_full(&mut r, &mut rh) {
                Ok(0) => break None,
                Ok(n) if n < RECORD_HEADER => break Some("torn record header".into()),
                Ok(_) => {}
                Err(e) => return Err(Error::io(format!("reading {}", path.display()), e)),
            }
            let n = u32::from_le_bytes(rh[0..4].try_into().unwrap_or_default());
            let want = u32::from_le_bytes(rh[4..8].try_into().unwrap_or_default());
            let lsn = u64::from_le_bytes(rh[8..16].try_into().unwrap_or_default());
            if n > MAX_RECORD {
                break Some(format!("record length {n} over the limit"));
            }
            payload.resize(n as usize, 0);
            match read_full(&mut r, &mut payload) {
                Ok(k) if k < n as usize => break Some("torn record payload".into()),
                Ok(_) => {}
                Err(e) => return Err(Error::io(format!("reading {}", path.display()), e)),
            }
            if crc(&[&rh[8..16], &payload]) != want {
                break Some("checksum mismatch".into());
            }
            if lsn <= last {
                break Some(format!("LSN {lsn} does not follow {last}"));
            }
            f(lsn, &payload)?;
            last = lsn;
            offset += (RECORD_HEADER + payload.len()) as u64;
        };
        if let Some(reason) = bad {
            repair
                .cuts
                .push(format!("{} at byte {offset}: {reason}; truncated to the last valid record", path.display()));
            repair.bytes_dropped += len.saturating_sub(offset);
            let file =
                OpenOptions::new().write(true).open(path).map_err(|e| Error::io("opening segment for repair", e))?;
            file.set_len(offset).and_then(|_| file.sync_all()).map_err(|e| Error::io("truncating segment", e))?;
            cut_at = Some(i + 1);
            break;
        }
    }
    if let Some(from) = cut_at {
        for (_, path) in &segs[from.min(segs.len())..] {
            repair.bytes_dropped += fs::metadata(path).map(|m| m.len()).unwrap_or(0);
            repair.segments_removed += 1;
            repair.cuts.push(format!("{}: removed, it follows a cut", path.display()));
            fs::remove_file(path).map_err(|e| Error::io("removing segment", e))?;
        }
        sync_dir(dir)?;
    }
    Ok((last, repair))
}

fn read_full(r: &mut impl Read, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut done = 0;
    while done < buf.len() {
        match r.read(&mut buf[done..]) {
            Ok(0) => break,
            Ok(k) => done += k,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(done)
}
