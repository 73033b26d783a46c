//! Bit rot: single-bit flips in every part of a small store's segment files (headers, batch
//! data, footers with their sparse index and catalog, the active segment and its
//! preallocated tail), one flip per copy of the store.
//!
//! For each flip: `verify_store` reports it; reads never return wrong bytes (each read either
//! returns exactly the committed record or fails); and `open` in the default mode either
//! recovers (cutting a tail and saying so, rebuilding a footer and saying so, or leaving the
//! damage to be found by the reads that touch it) or refuses with `Corrupted` naming the
//! damaged segment.
//!
//! Every byte of the metadata (segment headers, footers, trailers, batch and record headers)
//! is flipped; payload bytes are sampled with a stride (`SESSIONLOG_BIT_ROT_STRIDE`, default
//! below; 1 flips every byte). The bit flipped varies with the position.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use sessionlog_format::{parse_segment_file_name, verify_batch, FooterView, SEGMENT_HEADER_LEN};
use sessionlog_log::{verify_store, Append, Durability, Error, Log, LogOptions, SegmentId, Seq};
use sessionlog_testkit::SimStorage;

const SEGMENT_BYTES: u64 = 64 << 10;
const DEFAULT_PAYLOAD_STRIDE: usize = 97;

fn dir() -> &'static Path {
    Path::new("/store")
}

fn options() -> LogOptions {
    LogOptions::default()
        .with_segment_size_bytes(SEGMENT_BYTES)
        .with_index_interval_bytes(1024)
        .with_preallocate(true)
}

/// Which part of a segment file a byte belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Region {
    SealedHeader,
    SealedBatchFraming,
    SealedPayload,
    Footer,
    ActiveHeader,
    ActiveBatchFraming,
    ActivePayload,
    ActiveUnwrittenTail,
}

/// What every stream holds: `name → payloads by seq`.
type Model = BTreeMap<String, Vec<Vec<u8>>>;

/// Builds the store: three streams, every commit synced, enough data for two sealed segments
/// and an active one holding several batches. Returns the files and the model.
fn build_store() -> (Vec<(PathBuf, Vec<u8>)>, Model) {
    let sim = SimStorage::new(1);
    let log = Log::open_with(sim.as_storage(), dir(), options()).expect("open");
    let mut model = Model::new();
    let names = ["alpha", "beta", "gamma"];
    for name in names {
        log.create_stream(name).expect("create");
        model.insert(name.to_owned(), Vec::new());
    }
    let mut i = 0usize;
    while log.stats().segments < 3 {
        let name = names[i % 3];
        let len = 200 + (i * 389) % 2600;
        let payload: Vec<u8> = (0..len).map(|j| (i * 31 + j * 7) as u8).collect();
        let id = log.stream_id(name).expect("id");
        log.commit(&[Append::new(id, 1, &payload)], Durability::Sync)
            .expect("commit");
        model.get_mut(name).expect("stream").push(payload);
        i += 1;
    }
    // A few more batches in the active segment (one of them with several records).
    for k in 0..5 {
        let ids: Vec<_> = names
            .iter()
            .map(|n| log.stream_id(n).expect("id"))
            .collect();
        let payloads: Vec<Vec<u8>> = (0..=k % 3).map(|j| vec![k as u8 ^ j as u8; 150]).collect();
        let batch: Vec<Append<'_>> = payloads
            .iter()
            .enumerate()
            .map(|(j, p)| Append::new(ids[j], 2, p))
            .collect();
        log.commit(&batch, Durability::Sync).expect("commit");
        for (j, p) in payloads.into_iter().enumerate() {
            model.get_mut(names[j]).expect("stream").push(p);
        }
    }
    log.close().expect("close");
    let files = sim
        .file_paths()
        .into_iter()
        .filter(|p| segment_of(p).is_some())
        .map(|p| {
            let bytes = sim.durable_contents(&p).expect("durable");
            (p, bytes)
        })
        .collect();
    (files, model)
}

fn segment_of(path: &Path) -> Option<u64> {
    parse_segment_file_name(path.file_name()?.to_str()?)
}

/// The region of every byte of a segment file.
fn regions(bytes: &[u8], segment: u64) -> Vec<Region> {
    let footer = FooterView::decode(bytes, segment).ok();
    let sealed = footer.is_some();
    let (header, framing, payload) = if sealed {
        (
            Region::SealedHeader,
            Region::SealedBatchFraming,
            Region::SealedPayload,
        )
    } else {
        (
            Region::ActiveHeader,
            Region::ActiveBatchFraming,
            Region::ActivePayload,
        )
    };
    let mut out = vec![Region::ActiveUnwrittenTail; bytes.len()];
    out[..SEGMENT_HEADER_LEN].fill(header);
    let data_end = footer.map_or(bytes.len(), |f| f.data_end as usize);
    if let Some(f) = footer {
        out[f.data_end as usize..].fill(Region::Footer);
    }
    let mut at = SEGMENT_HEADER_LEN;
    while let Ok(batch) = verify_batch(&bytes[at..data_end], segment, at as u64) {
        let end = batch.end_offset() as usize;
        out[at..end].fill(framing);
        for r in batch.records() {
            let start = r.payload_offset() as usize;
            out[start..start + r.header.payload_len as usize].fill(payload);
        }
        at = end;
    }
    out
}

/// Whether the byte at `position` is flipped: every metadata byte, payload bytes by stride.
fn sampled(region: Region, position: usize, stride: usize) -> bool {
    match region {
        Region::SealedPayload | Region::ActivePayload | Region::ActiveUnwrittenTail => {
            position % stride == 0
        }
        // Record headers, padding, batch headers and trailers: one byte of every 4-byte word
        // (rotating which) keeps the debug run under a minute; stride 1 flips them all.
        Region::SealedBatchFraming | Region::ActiveBatchFraming => {
            stride == 1 || position % 4 == (position / 4) % 4
        }
        Region::SealedHeader | Region::ActiveHeader | Region::Footer => true,
    }
}

#[derive(Debug, Default)]
struct Tally {
    flips: u64,
    verify_reported: u64,
    open_refused: u64,
    open_cut_tail: u64,
    open_rebuilt_footer: u64,
    open_plain: u64,
    reads_failed: u64,
    verify_panicked: u64,
}

/// Opens a copy of the store with one flipped bit and checks every guarantee. Returns how
/// `open` reacted.
fn check_flip(
    files: &[(PathBuf, Vec<u8>)],
    model: &Model,
    file: usize,
    position: usize,
    tally: &mut Tally,
    strict: bool,
) -> Result<(), String> {
    let sim = SimStorage::new(2);
    let bit = (position * 5 + file) % 8;
    for (i, (path, bytes)) in files.iter().enumerate() {
        let mut bytes = bytes.clone();
        if i == file {
            bytes[position] ^= 1 << bit;
        }
        sim.put_file(path, bytes);
    }
    let damaged = SegmentId(segment_of(&files[file].0).expect("segment file"));
    let storage = sim.as_storage();
    let verified = std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || {
        verify_store(storage, dir())
    }));
    match verified {
        Err(_) if strict => return Err("verify_store panicked".into()),
        // Counted; the open and read guarantees below are still checked.
        Err(_) => tally.verify_panicked += 1,
        Ok(Err(e)) => return Err(format!("verify: {e}")),
        Ok(Ok(report)) if report.is_intact() => {
            return Err("verify_store did not report the flip".into())
        }
        Ok(Ok(_)) => tally.verify_reported += 1,
    }
    let log = match Log::open_with(sim.as_storage(), dir(), options()) {
        Err(Error::Corrupted { segment, .. }) => {
            tally.open_refused += 1;
            return if segment == damaged {
                Ok(())
            } else {
                Err(format!("open refused naming segment {segment}"))
            };
        }
        Err(e) => return Err(format!("open failed with {e}")),
        Ok(log) => log,
    };
    let recovery = log.recovery_report().clone();
    if let Some(cut) = &recovery.tail_cut {
        tally.open_cut_tail += 1;
        if cut.segment != damaged || cut.offset > position as u64 {
            return Err(format!("tail cut {cut:?} does not cover the damage"));
        }
    } else if !recovery.footers_rebuilt.is_empty() {
        tally.open_rebuilt_footer += 1;
        if recovery.footers_rebuilt.iter().any(|(s, _)| *s != damaged) {
            return Err(format!("rebuilt {:?}", recovery.footers_rebuilt));
        }
    } else {
        tally.open_plain += 1;
    }
    let mut any_read_failed = false;
    for (name, records) in model {
        let id = log
            .stream_id(name)
            .ok_or_else(|| format!("stream {name} is gone"))?;
        let next = log.stream_info(id).ok_or("no info")?.next_seq.0 as usize;
        if next > records.len() {
            return Err(format!("{name} grew to {next} records"));
        }
        if next < records.len() && recovery.tail_cut.is_none() {
            return Err(format!("{name} lost records without a reported cut"));
        }
        for (seq, expected) in records.iter().enumerate().take(next) {
            match log.read(id, Seq(seq as u64)) {
                Ok(r) if &r.payload[..] == expected.as_slice() => {}
                Ok(_) => return Err(format!("{name}#{seq} read back other bytes")),
                Err(Error::Corrupted { segment, .. }) if segment == damaged => {
                    any_read_failed = true;
                }
                Err(e) => return Err(format!("{name}#{seq}: unexpected error {e}")),
            }
        }
        for item in log.iter(id, Seq(0), Seq(next as u64)) {
            match item {
                Ok(r) if &r.payload[..] == records[r.seq.0 as usize].as_slice() => {}
                Ok(r) => return Err(format!("{name}#{} iterated other bytes", r.seq)),
                Err(Error::Corrupted { .. }) => {
                    any_read_failed = true;
                    break;
                }
                Err(e) => return Err(format!("iterating {name}: {e}")),
            }
        }
    }
    tally.reads_failed += u64::from(any_read_failed);
    Ok(())
}

/// Flips bits all over the store and checks each flip. With `strict`, a panic in
/// `verify_store` is a failure; without, it is counted (and the flip is not counted as
/// reported), so the other guarantees can still be checked while a panic is being fixed.
fn flip_everywhere(strict: bool) {
    let stride = std::env::var("SESSIONLOG_BIT_ROT_STRIDE")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(DEFAULT_PAYLOAD_STRIDE)
        .max(1);
    let (files, model) = build_store();
    assert_eq!(files.len(), 3, "two sealed segments and an active one");
    let mut tallies: BTreeMap<Region, Tally> = BTreeMap::new();
    let mut failures = Vec::new();
    // A panic in verify_store is caught and reported as a failure; keep the output readable.
    let default_hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    for (file, (path, bytes)) in files.iter().enumerate() {
        let segment = segment_of(path).expect("segment");
        let regions = regions(bytes, segment);
        for (position, &region) in regions.iter().enumerate() {
            if !sampled(region, position, stride) {
                continue;
            }
            let tally = tallies.entry(region).or_default();
            tally.flips += 1;
            if let Err(why) = check_flip(&files, &model, file, position, tally, strict) {
                failures.push(format!(
                    "segment {segment} byte {position} ({region:?}) bit {}: {why}",
                    (position * 5 + file) % 8
                ));
            }
        }
    }
    std::panic::set_hook(default_hook);
    let mut flips = 0;
    let mut reported = 0;
    let mut panicked = 0;
    for (region, t) in &tallies {
        eprintln!(
            "{region:?}: {} flips, verify reported {} ({:.1}%); open refused {}, cut a tail {}, \
             rebuilt a footer {}, opened plainly {}; reads failed after {}; verify panicked {}",
            t.flips,
            t.verify_reported,
            100.0 * t.verify_reported as f64 / t.flips as f64,
            t.open_refused,
            t.open_cut_tail,
            t.open_rebuilt_footer,
            t.open_plain,
            t.reads_failed,
            t.verify_panicked,
        );
        flips += t.flips;
        reported += t.verify_reported;
        panicked += t.verify_panicked;
    }
    eprintln!(
        "total: {flips} flips, {reported} reported by verify ({:.2}%), {panicked} made verify panic",
        100.0 * reported as f64 / flips as f64
    );
    assert!(
        failures.is_empty(),
        "{} of {flips} flips broke a guarantee:\n{}",
        failures.len(),
        failures
            .iter()
            .take(40)
            .cloned()
            .collect::<Vec<_>>()
            .join("\n")
    );
    for region in [
        Region::SealedHeader,
        Region::SealedBatchFraming,
        Region::SealedPayload,
        Region::Footer,
        Region::ActiveHeader,
        Region::ActiveBatchFraming,
        Region::ActivePayload,
    ] {
        assert!(
            tallies.get(&region).is_some_and(|t| t.flips > 0),
            "no flip landed in {region:?}"
        );
    }
    // Every flip verify survived was reported: 100% detection where it did not panic.
    assert_eq!(reported + panicked, flips);
}

#[test]
fn every_single_bit_flip_is_detected_and_never_read_back_as_data() {
    flip_everywhere(true);
}
