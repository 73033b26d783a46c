//! `sessionlog dump`: batches and records with their headers, for operators. Reads segment
//! files directly and read-only, so it works on a store that is open elsewhere.

use std::io::{self, Write};
use std::path::Path;

use sessionlog_format::{
    parse_segment_file_name, segment_file_name, verify_batch, FooterView, SegmentHeader,
    RECORD_ALIGN, SEGMENT_HEADER_LEN,
};

use crate::{out, Failure};

pub(crate) fn dump(store: &Path, only: Option<u64>) -> Result<u8, Failure> {
    let found = sessionlog_log::classify_dir(&sessionlog_log::RealStorage, store)?;
    if let Some(why) = found.why_not_a_store() {
        return Err(sessionlog_log::Error::NotAStore {
            dir: store.to_owned(),
            why,
        }
        .into());
    }
    let mut ids: Vec<u64> = std::fs::read_dir(store)
        .map_err(|e| Failure::new(2, format!("listing {}: {e}", store.display())))?
        .filter_map(|e| {
            e.ok()?
                .file_name()
                .to_str()
                .and_then(parse_segment_file_name)
        })
        .collect();
    ids.sort_unstable();
    if let Some(n) = only {
        if !ids.contains(&n) {
            return Err(Failure::new(
                2,
                format!("no segment {n} in {}", store.display()),
            ));
        }
        ids.retain(|&i| i == n);
    }
    let stdout = io::stdout();
    let mut w = io::BufWriter::new(stdout.lock());
    for id in ids {
        let path = store.join(segment_file_name(id));
        let bytes = std::fs::read(&path)
            .map_err(|e| Failure::new(2, format!("reading {}: {e}", path.display())))?;
        // A compressed segment is shown as the segment it stands for (its logical image),
        // offsets included. spec: segment.md#compressed-segments
        match sessionlog_log::logical_image(&bytes, sessionlog_log::SegmentId(id)) {
            Ok(image) => {
                if matches!(image, std::borrow::Cow::Owned(_)) {
                    let line = format!(
                        "segment {id}: compressed, {} bytes on disk; its uncompressed image:\n",
                        bytes.len()
                    );
                    out(&mut w, line.as_bytes())?;
                }
                dump_segment(&mut w, id, &image)?;
            }
            Err(e) => {
                let line = format!("segment {id}: {} bytes, compressed: {e}\n", bytes.len());
                out(&mut w, line.as_bytes())?;
            }
        }
    }
    w.flush()?;
    Ok(0)
}

fn dump_segment(w: &mut impl Write, id: u64, seg: &[u8]) -> Result<(), Failure> {
    match SegmentHeader::decode(seg) {
        Ok(h) => out(
            w,
            format!(
                "segment {id}: {} bytes, format header ok, created_unix_ms {}\n",
                seg.len(),
                h.created_unix_ms
            )
            .as_bytes(),
        )?,
        Err(e) => out(
            w,
            format!("segment {id}: {} bytes, header: {e}\n", seg.len()).as_bytes(),
        )?,
    }
    let footer = FooterView::decode(seg, id).ok();
    let end = footer.map_or(seg.len(), |f| f.data_end as usize);
    let mut at = SEGMENT_HEADER_LEN;
    while at < end {
        match verify_batch(&seg[at..end], id, at as u64) {
            Ok(b) => {
                let line = format!(
                    "  batch @{at} len={} records={} synced_through={}\n",
                    b.header.batch_len, b.header.record_count, b.header.synced_through
                );
                out(w, line.as_bytes())?;
                for r in b.records() {
                    let h = r.header;
                    let line = format!(
                        "    record @{} stream={} seq={} kind={:#04x} flags={:#04x} len={} prev={}\n",
                        r.offset, h.stream_id, h.seq, h.kind, h.flags, h.payload_len, h.prev_offset
                    );
                    out(w, line.as_bytes())?;
                }
                at = b.end_offset() as usize;
            }
            Err(e) => {
                if seg[at..end].iter().all(|&b| b == 0) {
                    out(
                        w,
                        format!("  zero fill from @{at} ({} bytes)\n", end - at).as_bytes(),
                    )?;
                } else {
                    out(w, format!("  no valid batch at @{at}: {e}\n").as_bytes())?;
                }
                at = sessionlog_log::recovery::next_valid_batch(&seg[..end], id, at + RECORD_ALIGN)
                    .map_or(end, |b| b.offset() as usize);
            }
        }
    }
    if let Some(f) = footer {
        out(
            w,
            format!(
                "  footer @{}: {} streams, {} index entries, {} catalog entries\n",
                f.data_end, f.stream_count, f.index_entry_count, f.catalog_count
            )
            .as_bytes(),
        )?;
        for i in 0..f.stream_count {
            if let Some(s) = f.stream(seg, i) {
                let line = format!(
                    "    stream {} seqs {}..={} bytes={} index entries={}\n",
                    s.stream_id, s.first_seq, s.last_seq, s.data_bytes, s.index_count
                );
                out(w, line.as_bytes())?;
            }
        }
    }
    Ok(())
}
