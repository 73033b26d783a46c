//! Power is cut at every I/O point of `create_session` and of `import_dsh` (a real DSH log,
//! written as one batch, and a generated session large enough to be staged over several
//! batches and segments). After the crash and a reopen, the model holds: the session is either
//! whole (equal to its source) or absent; it is present whenever the call returned `Ok`; when
//! absent its name is free (no stuck catalog entry, no staged stream left behind) and making it
//! again succeeds; and a session written before is untouched.

use std::path::Path;

use sessionlog::workload::{Workload, WorkloadConfig};
use sessionlog::{LogOptions, Store, StoreOptions};
use sessionlog_session::SessionHeader;
use sessionlog_testkit::{Fault, SimStorage};

const DIR: &str = "/store";

fn options(max_record_bytes: usize) -> StoreOptions {
    StoreOptions::default().with_log(
        LogOptions::default()
            .with_preallocate(false)
            .with_segment_size_bytes(64 << 10)
            .with_max_record_bytes(max_record_bytes),
    )
}

fn open(sim: &SimStorage, options: &StoreOptions) -> Store {
    Store::open_with(sim.as_storage(), Path::new(DIR), options.clone()).expect("store opens")
}

/// The session every schedule writes first, durably; it must come through every crash.
fn write_bystander(store: &Store) -> Vec<u8> {
    drop(
        store
            .create_session("bystander", SessionHeader::new("bystander", 1, None))
            .expect("create bystander"),
    );
    store.export_dsh("bystander").expect("export bystander")
}

/// What one operation under test makes and how a survivor is compared with its source.
trait Making {
    /// The session's name.
    fn name(&self) -> &str;
    /// Makes the session.
    fn make(&self, store: &Store) -> sessionlog::Result<()>;
    /// The session as it must read back when present.
    fn expected(&self) -> &[u8];
}

struct Create {
    expected: Vec<u8>,
}

impl Create {
    fn new() -> Create {
        // The export of the created session, from a fault-free store.
        let sim = SimStorage::new(0);
        let store = open(&sim, &options(16 << 20));
        drop(
            store
                .create_session("fresh", header())
                .expect("create without faults"),
        );
        Create {
            expected: store.export_dsh("fresh").expect("export"),
        }
    }
}

fn header() -> SessionHeader {
    SessionHeader::new("fresh", 1_700_000_000_000, None)
}

impl Making for Create {
    fn name(&self) -> &str {
        "fresh"
    }
    fn make(&self, store: &Store) -> sessionlog::Result<()> {
        store.create_session("fresh", header()).map(drop)
    }
    fn expected(&self) -> &[u8] {
        &self.expected
    }
}

struct Import {
    file: Vec<u8>,
}

impl Making for Import {
    fn name(&self) -> &str {
        "imported"
    }
    fn make(&self, store: &Store) -> sessionlog::Result<()> {
        store.import_dsh(&self.file, Some("imported")).map(drop)
    }
    fn expected(&self) -> &[u8] {
        &self.file
    }
}

/// Cuts the power after 0, 1, 2, … storage operations of `making` until it completes
/// untouched, crashing `seeds` ways at each point (a seeded subset of unsynced writes
/// survives, one may tear) and reopening after each. Returns (schedules, present after the
/// crash, absent after it).
fn crash_at_every_point(
    making: &dyn Making,
    options: &StoreOptions,
    seeds: u64,
) -> (u64, u64, u64) {
    let (mut schedules, mut present, mut absent) = (0, 0, 0);
    for point in 0..100_000u64 {
        let mut finished = false;
        for seed in 0..seeds {
            schedules += 1;
            let outcome = crash_once(making, options, point, point * seeds + seed);
            finished |= outcome.finished_untouched;
            match outcome.present {
                true => present += 1,
                false => absent += 1,
            }
        }
        if finished {
            return (schedules, present, absent);
        }
    }
    panic!("the operation never completed without reaching the power cut");
}

struct Outcome {
    finished_untouched: bool,
    present: bool,
}

/// Staged imports that reopening deleted, over every schedule of this process.
static DISCARDED: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

fn same(a: &[u8], b: &[u8]) -> bool {
    a == b
}

fn crash_once(making: &dyn Making, options: &StoreOptions, point: u64, seed: u64) -> Outcome {
    {
        let sim = SimStorage::new(seed);
        let store = open(&sim, options);
        let bystander = write_bystander(&store);
        let fired_before = sim.stats().faults_fired;
        sim.inject(Fault::power_cut_after(point));
        let result = making.make(&store);
        let finished_untouched = sim.stats().faults_fired == fired_before;
        drop(store);
        sim.clear_faults();
        sim.crash(seed);

        let store = open(&sim, options);
        DISCARDED.fetch_add(
            store.discarded_imports(),
            std::sync::atomic::Ordering::Relaxed,
        );
        let name = making.name();
        assert!(
            same(
                &store.export_dsh("bystander").expect("bystander survives"),
                &bystander
            ),
            "point {point} seed {seed}: the session written before is untouched"
        );
        assert!(
            store
                .log_reader()
                .streams()
                .iter()
                .all(|s| !s.name.starts_with('\0')),
            "point {point} seed {seed}: no staged stream survives a write open"
        );
        let present = store.session_names().iter().any(|n| n == name);
        if present {
            let survivor = store.export_dsh(name).expect("export survivor");
            assert!(
                same(&survivor, making.expected()),
                "point {point} seed {seed}: a session that survives is whole, not {} of {} bytes",
                survivor.len(),
                making.expected().len()
            );
        } else {
            assert!(
                result.is_err(),
                "point {point} seed {seed}: the call returned Ok but the session is gone"
            );
            assert_eq!(
                store.log_reader().stream_id(name),
                None,
                "point {point} seed {seed}: an absent session leaves no name behind"
            );
            making
                .make(&store)
                .unwrap_or_else(|e| panic!("point {point} seed {seed}: making it again: {e}"));
            assert!(same(
                &store.export_dsh(name).expect("export"),
                making.expected()
            ));
        }
        if finished_untouched {
            assert!(
                result.is_ok(),
                "point {point} seed {seed}: no fault fired, yet {result:?}"
            );
        }
        Outcome {
            finished_untouched,
            present,
        }
    }
}

fn assert_both_outcomes((schedules, present, absent): (u64, u64, u64)) {
    eprintln!("{schedules} crash schedules: present after {present}, absent after {absent}");
    assert!(
        present > 0 && absent > 0,
        "both outcomes must occur: {schedules} schedules, present {present}, absent {absent}"
    );
}

#[test]
fn a_crash_anywhere_in_create_session_leaves_it_whole_or_absent() {
    assert_both_outcomes(crash_at_every_point(&Create::new(), &options(16 << 20), 16));
}

#[test]
fn a_crash_anywhere_in_a_one_batch_import_of_a_dsh_log_leaves_it_whole_or_absent() {
    let Some(corpus) = sessionlog_testkit::dsh_corpus(
        "a_crash_anywhere_in_a_one_batch_import_of_a_dsh_log_leaves_it_whole_or_absent",
    ) else {
        return;
    };
    let path = corpus
        .join("logs/examples/headless-agent/tests/snapshots/compaction-recovery/session.jsonl");
    let file = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let import = Import { file };
    // The store's own export of this file reproduces it byte for byte (checked by
    // every_fixture_round_trips_through_the_store), so it is the source to compare with.
    assert_both_outcomes(crash_at_every_point(&import, &options(16 << 20), 4));
}

/// A generated session of a few hundred KiB as DSH JSONL.
fn generated_log() -> Vec<u8> {
    let sim = SimStorage::new(0);
    let store = open(&sim, &options(16 << 20));
    let mut h = store
        .create_session("gen", SessionHeader::new("gen", 1, None))
        .expect("create");
    let mut w = Workload::new(
        5,
        WorkloadConfig::default()
            .with_compact_every_turns(None)
            .with_tool_result_bytes((256, 4096)),
    );
    for e in w.session_start(1) {
        h.append(e).expect("start");
    }
    for _ in 0..40 {
        let next = h.next_seq().get();
        for e in w.turn(next, 2, None) {
            h.append(e).expect("turn event");
        }
    }
    h.commit().expect("commit");
    drop(h);
    store.export_dsh("gen").expect("export")
}

#[test]
fn a_crash_anywhere_in_a_staged_import_over_many_batches_leaves_it_whole_or_absent() {
    let file = generated_log();
    // Records of at most 16 KiB make the largest batch 64 KiB, the segment size: the session
    // cannot go in one batch, so it is staged and renamed, and its batches roll segments.
    let options = options(16 << 10);
    assert!(
        file.len() > 4 * (64 << 10),
        "the generated log ({} bytes) must need several batches",
        file.len()
    );
    let import = Import { file };
    let (schedules, present, absent) = crash_at_every_point(&import, &options, 1);
    assert!(
        schedules > 20,
        "a multi-segment import does many I/O operations, not {schedules}"
    );
    assert_both_outcomes((schedules, present, absent));
    assert!(
        DISCARDED.load(std::sync::atomic::Ordering::Relaxed) > 0,
        "some crash left a staged import for the reopen to delete"
    );
}
