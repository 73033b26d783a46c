//! The power-loss model, pinned down: what a crash must keep, what it may lose, and how.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rand::rngs::StdRng;
use rand::SeedableRng;
use sessionlog_log::{OpenMode, Storage, StorageFile};

use crate::{CrashPolicy, Fault, FaultError, OpKind, SimConfig, SimStorage, Survival, Tear};

const SEEDS: u64 = 400;

fn dir() -> PathBuf {
    PathBuf::from("/store")
}

fn file_path() -> PathBuf {
    dir().join("00000001.seg")
}

/// A storage with the store directory created.
fn storage(seed: u64) -> SimStorage {
    let sim = SimStorage::new(seed);
    sim.create_dir_all(&dir()).unwrap();
    sim
}

/// Creates the test file and makes its directory entry durable.
fn durable_file(sim: &SimStorage) -> Arc<dyn StorageFile> {
    let file = sim.open_file(&file_path(), OpenMode::CreateNew).unwrap();
    sim.sync_dir(&dir()).unwrap();
    file
}

fn pattern(len: usize, salt: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31) ^ salt)
        .collect()
}

fn policy(file_changes: Survival, tear: f64, zero_fill: f64) -> CrashPolicy {
    CrashPolicy {
        file_changes,
        dir_changes: Survival::KeepAll,
        tear_probability: tear,
        zero_fill_probability: zero_fill,
    }
}

fn contents(sim: &SimStorage) -> Option<Vec<u8>> {
    sim.file_contents(&file_path())
}

#[test]
fn synced_data_survives_every_crash() {
    for seed in 0..SEEDS {
        let sim = storage(seed);
        let file = durable_file(&sim);
        let synced = pattern(3000, 1);
        file.write_all_at(&synced, 0).unwrap();
        file.sync_data().unwrap();
        file.write_all_at(&pattern(2000, 2), 3000).unwrap();
        file.write_all_at(&pattern(700, 3), 5000).unwrap();

        sim.crash(seed);

        let after = contents(&sim).expect("a synced entry survives");
        assert!(
            after.len() >= synced.len(),
            "seed {seed}: synced size shrank"
        );
        assert_eq!(after[..synced.len()], synced[..], "seed {seed}");
    }
}

#[test]
fn unsynced_data_may_vanish_or_survive() {
    let (mut vanished, mut survived) = (false, false);
    for seed in 0..SEEDS {
        let sim = storage(seed);
        let file = durable_file(&sim);
        file.write_all_at(&pattern(100, 1), 0).unwrap();
        file.sync_data().unwrap();
        file.write_all_at(&pattern(100, 2), 100).unwrap();
        sim.crash(seed);
        match contents(&sim).unwrap().len() {
            100 => vanished = true,
            200 => survived = true,
            other => panic!("seed {seed}: a 100-byte write inside one sector left {other} bytes"),
        }
    }
    assert!(vanished && survived);
}

#[test]
fn losing_everything_unsynced_leaves_exactly_the_durable_image() {
    let sim = storage(7);
    let file = durable_file(&sim);
    file.write_all_at(&pattern(1000, 1), 0).unwrap();
    file.sync_all().unwrap();
    file.write_all_at(&pattern(1000, 2), 500).unwrap();
    file.set_len(4096).unwrap();
    let durable = sim.durable_contents(&file_path()).unwrap();

    sim.crash_with(
        &mut StdRng::seed_from_u64(7),
        &CrashPolicy::lose_everything_unsynced(),
    );

    assert_eq!(contents(&sim).unwrap(), durable);
    assert_eq!(durable, pattern(1000, 1));
}

#[test]
fn keeping_everything_written_leaves_exactly_the_written_image() {
    let sim = storage(7);
    let file = durable_file(&sim);
    file.write_all_at(&pattern(5000, 1), 0).unwrap();
    file.set_len(3000).unwrap();
    file.write_all_at(&pattern(10, 2), 4000).unwrap();
    let written = contents(&sim).unwrap();

    let report = sim.crash_with(
        &mut StdRng::seed_from_u64(7),
        &CrashPolicy::keep_everything_written(),
    );

    assert_eq!(contents(&sim).unwrap(), written);
    assert!(!report.lost_anything());
}

#[test]
fn unsynced_writes_that_survive_land_in_their_original_order() {
    for seed in 0..SEEDS {
        let sim = storage(seed);
        let file = durable_file(&sim);
        file.write_all_at(&[1; 10], 0).unwrap();
        file.write_all_at(&[2; 10], 0).unwrap();
        sim.crash_with(
            &mut StdRng::seed_from_u64(seed),
            &policy(Survival::Random, 0.0, 0.0),
        );
        let after = contents(&sim).unwrap();
        assert!(
            after.is_empty() || after == [1; 10] || after == [2; 10],
            "seed {seed}: {after:?}"
        );
    }
}

#[test]
fn torn_write_keeps_only_a_sector_aligned_prefix() {
    let offset = 100;
    let data = vec![0xAB; 4000];
    let mut real_tears = 0;
    for seed in 0..SEEDS {
        let sim = storage(seed);
        let file = durable_file(&sim);
        file.write_all_at(&data, offset).unwrap();

        let report = sim.crash_with(
            &mut StdRng::seed_from_u64(seed),
            &policy(Survival::KeepAll, 1.0, 0.0),
        );

        let after = contents(&sim).unwrap();
        let Some(Tear::SectorPrefix { kept, .. }) = report.files[0].tear else {
            panic!("seed {seed}: expected a sector tear, got {report}");
        };
        let end = after.len() as u64;
        assert_eq!(end % 512, 0, "seed {seed}: cut at {end}");
        if kept == 0 {
            assert_eq!(
                end, 0,
                "seed {seed}: a write that did not land grew the file"
            );
        } else {
            assert_eq!(end, offset + kept);
            assert!(after[..offset as usize].iter().all(|b| *b == 0));
            assert!(after[offset as usize..].iter().all(|b| *b == 0xAB));
        }
        if end > offset && end < offset + data.len() as u64 {
            real_tears += 1;
        }
    }
    assert!(
        real_tears > SEEDS / 2,
        "only {real_tears} writes were torn mid-way"
    );
}

#[test]
fn torn_write_cuts_at_the_configured_sector_size() {
    for seed in 0..100 {
        let sim = SimStorage::with_config(
            seed,
            SimConfig {
                sector_size: 4096,
                ..SimConfig::default()
            },
        );
        sim.create_dir_all(&dir()).unwrap();
        let file = durable_file(&sim);
        file.write_all_at(&vec![7; 20_000], 1000).unwrap();
        sim.crash_with(
            &mut StdRng::seed_from_u64(seed),
            &policy(Survival::KeepAll, 1.0, 0.0),
        );
        let len = contents(&sim).unwrap().len();
        assert_eq!(len % 4096, 0, "seed {seed}: cut at {len}");
    }
}

#[test]
fn write_within_one_sector_never_tears() {
    for seed in 0..100 {
        let sim = storage(seed);
        let file = durable_file(&sim);
        file.write_all_at(&[9; 300], 600).unwrap();
        sim.crash_with(
            &mut StdRng::seed_from_u64(seed),
            &policy(Survival::KeepAll, 1.0, 0.0),
        );
        assert_eq!(contents(&sim).unwrap()[600..], [9; 300]);
    }
}

#[test]
fn zero_filled_tear_grows_the_file_with_zeros_but_keeps_old_bytes() {
    let sim = storage(3);
    let file = durable_file(&sim);
    file.write_all_at(&[5; 1000], 0).unwrap();
    file.sync_data().unwrap();
    file.write_all_at(&[6; 2000], 500).unwrap();

    let report = sim.crash_with(
        &mut StdRng::seed_from_u64(3),
        &policy(Survival::KeepAll, 1.0, 1.0),
    );

    assert!(matches!(
        report.files[0].tear,
        Some(Tear::ZeroFilled {
            offset: 500,
            len: 2000
        })
    ));
    let after = contents(&sim).unwrap();
    assert_eq!(after.len(), 2500);
    assert!(after[..1000].iter().all(|b| *b == 5));
    assert!(after[1000..].iter().all(|b| *b == 0));
}

#[test]
fn unsynced_size_changes_may_or_may_not_survive() {
    let (mut grown, mut not_grown) = (false, false);
    for seed in 0..SEEDS {
        let sim = storage(seed);
        let file = durable_file(&sim);
        file.allocate(1 << 16).unwrap();
        sim.crash(seed);
        match contents(&sim).unwrap().len() {
            0 => not_grown = true,
            65536 => grown = true,
            other => panic!("seed {seed}: size {other}"),
        }
    }
    assert!(grown && not_grown);
}

#[test]
fn sync_data_makes_the_size_durable() {
    let sim = storage(1);
    let file = durable_file(&sim);
    file.allocate(8192).unwrap();
    file.write_all_at(&[1; 100], 0).unwrap();
    file.sync_data().unwrap();
    sim.crash_with(
        &mut StdRng::seed_from_u64(1),
        &CrashPolicy::lose_everything_unsynced(),
    );
    let after = contents(&sim).unwrap();
    assert_eq!(after.len(), 8192);
    assert_eq!(after[..100], [1; 100]);
}

#[test]
fn unsynced_file_creation_can_revert_even_with_synced_data() {
    let (mut kept, mut reverted) = (false, false);
    for seed in 0..SEEDS {
        let sim = storage(seed);
        let file = sim.open_file(&file_path(), OpenMode::CreateNew).unwrap();
        file.write_all_at(b"header", 0).unwrap();
        file.sync_all().unwrap();
        let report = sim.crash(seed);
        match contents(&sim) {
            Some(bytes) => {
                assert_eq!(bytes, b"header");
                kept = true;
            }
            None => {
                assert_eq!(report.vanished, vec![file_path()]);
                reverted = true;
            }
        }
    }
    assert!(kept && reverted);
}

#[test]
fn synced_directory_keeps_its_entries_through_a_crash() {
    let sim = storage(1);
    let file = durable_file(&sim);
    file.write_all_at(b"x", 0).unwrap();
    file.sync_data().unwrap();
    sim.crash_with(
        &mut StdRng::seed_from_u64(1),
        &CrashPolicy::lose_everything_unsynced(),
    );
    assert_eq!(contents(&sim).unwrap(), b"x");
}

#[test]
fn unsynced_removal_can_revert() {
    let (mut kept, mut removed) = (false, false);
    for seed in 0..SEEDS {
        let sim = storage(seed);
        let file = durable_file(&sim);
        file.write_all_at(b"data", 0).unwrap();
        file.sync_data().unwrap();
        sim.remove_file(&file_path()).unwrap();
        assert!(contents(&sim).is_none());
        sim.crash(seed);
        match contents(&sim) {
            Some(bytes) => {
                assert_eq!(bytes, b"data");
                kept = true;
            }
            None => removed = true,
        }
    }
    assert!(kept && removed);
}

#[test]
fn unsynced_rename_survives_whole_or_reverts_whole() {
    let renamed_path = dir().join("renamed");
    let (mut old_name, mut new_name) = (false, false);
    for seed in 0..SEEDS {
        let sim = storage(seed);
        let file = durable_file(&sim);
        file.write_all_at(b"footer", 0).unwrap();
        file.sync_data().unwrap();
        sim.rename(&file_path(), &renamed_path).unwrap();
        sim.crash(seed);
        let old = sim.file_contents(&file_path());
        let new = sim.file_contents(&renamed_path);
        match (old, new) {
            (Some(bytes), None) => {
                assert_eq!(bytes, b"footer");
                old_name = true;
            }
            (None, Some(bytes)) => {
                assert_eq!(bytes, b"footer");
                new_name = true;
            }
            other => panic!("seed {seed}: half a rename survived: {other:?}"),
        }
    }
    assert!(old_name && new_name);
}

#[test]
fn handles_from_before_a_crash_are_detached() {
    let sim = storage(1);
    let file = durable_file(&sim);
    file.write_all_at(b"before", 0).unwrap();
    file.sync_data().unwrap();

    sim.crash(1);

    assert!(file.write_all_at(b"after!", 0).is_err());
    assert!(file.set_len(0).is_err());
    assert!(file.sync_data().is_err());
    assert!(file.read_at(&mut [0; 6], 0).is_err());
    assert!(file.len().is_err());
    assert_eq!(contents(&sim).unwrap(), b"before");
    let reopened = sim.open_file(&file_path(), OpenMode::ReadWrite).unwrap();
    reopened.write_all_at(b"after", 0).unwrap();
    assert_eq!(contents(&sim).unwrap(), b"aftere");
}

#[test]
fn reads_see_the_written_image_and_map_readonly_copies_it() {
    let sim = storage(1);
    let file = durable_file(&sim);
    file.write_all_at(b"hello world", 0).unwrap();
    let mut buf = [0; 5];
    assert_eq!(file.read_at(&mut buf, 6).unwrap(), 5);
    assert_eq!(&buf, b"world");
    assert_eq!(file.read_at(&mut buf, 11).unwrap(), 0);
    let map = file.map_readonly().unwrap();
    file.write_all_at(b"J", 0).unwrap();
    assert_eq!(&map[..], b"hello world");
    assert_eq!(file.len().unwrap(), 11);
}

#[test]
fn read_only_handles_cannot_write() {
    let sim = storage(1);
    durable_file(&sim);
    let file = sim.open_file(&file_path(), OpenMode::ReadOnly).unwrap();
    assert!(file.write_all_at(b"x", 0).is_err());
    assert!(file.set_len(10).is_err());
}

#[test]
fn opening_follows_create_new_and_not_found_rules() {
    let sim = storage(1);
    durable_file(&sim);
    let exists = sim
        .open_file(&file_path(), OpenMode::CreateNew)
        .unwrap_err();
    assert_eq!(exists.kind(), io::ErrorKind::AlreadyExists);
    let missing = sim
        .open_file(&dir().join("missing"), OpenMode::ReadWrite)
        .unwrap_err();
    assert_eq!(missing.kind(), io::ErrorKind::NotFound);
    let no_dir = sim
        .open_file(Path::new("/nowhere/file"), OpenMode::CreateNew)
        .unwrap_err();
    assert_eq!(no_dir.kind(), io::ErrorKind::NotFound);
    assert_eq!(sim.list_dir(&dir()).unwrap(), vec!["00000001.seg"]);
}

#[test]
fn lock_has_one_holder_and_is_released_by_drop_and_by_crash() {
    let sim = storage(1);
    let lock_path = dir().join("LOCK");
    let first = sim.try_lock(&lock_path).unwrap().expect("free");
    assert!(sim.try_lock(&lock_path).unwrap().is_none());
    drop(first);
    let second = sim.try_lock(&lock_path).unwrap().expect("released by drop");

    sim.crash(1);
    let third = sim
        .try_lock(&lock_path)
        .unwrap()
        .expect("released by crash");
    drop(second);
    assert!(
        sim.try_lock(&lock_path).unwrap().is_none(),
        "a guard from before the crash released the new holder's lock"
    );
    drop(third);
}

#[test]
fn the_nth_write_fails_with_the_planned_error() {
    let sim = storage(1);
    let file = durable_file(&sim);
    sim.inject(
        Fault::on(OpKind::Write)
            .after(2)
            .with_error(FaultError::NoSpace),
    );
    file.write_all_at(b"a", 0).unwrap();
    file.write_all_at(b"b", 1).unwrap();
    let err = file.write_all_at(b"c", 2).unwrap_err();
    assert_eq!(err.kind(), io::ErrorKind::StorageFull);
    file.write_all_at(b"d", 2).unwrap();
    assert_eq!(contents(&sim).unwrap(), b"abd");
    assert_eq!(sim.stats().faults_fired, 1);
}

#[test]
fn sticky_sync_fault_keeps_failing_and_syncs_nothing() {
    let sim = storage(1);
    let file = durable_file(&sim);
    file.write_all_at(b"data", 0).unwrap();
    sim.inject(Fault::on(OpKind::SyncData).sticky());
    assert!(file.sync_data().is_err());
    assert!(file.sync_data().is_err());
    assert_eq!(sim.durable_contents(&file_path()).unwrap(), b"");
    file.sync_all().unwrap();
    assert_eq!(sim.durable_contents(&file_path()).unwrap(), b"data");
}

#[test]
fn short_write_lands_a_strict_prefix_then_fails() {
    let mut shorter = false;
    for seed in 0..50 {
        let sim = storage(seed);
        let file = durable_file(&sim);
        sim.inject(Fault::on(OpKind::Write).short_write());
        let data = pattern(2000, 4);
        assert!(file.write_all_at(&data, 0).is_err());
        let after = contents(&sim).unwrap();
        assert!(after.len() < data.len());
        assert_eq!(after[..], data[..after.len()]);
        shorter |= !after.is_empty();
    }
    assert!(shorter, "no short write landed anything");
}

#[test]
fn power_cut_fails_every_operation_until_the_crash() {
    let sim = storage(1);
    let file = durable_file(&sim);
    sim.inject(Fault::power_cut_after(1));
    file.write_all_at(b"ok", 0).unwrap();
    assert!(file.sync_data().is_err());
    assert!(file.read_at(&mut [0; 2], 0).is_err());
    assert!(sim.list_dir(&dir()).is_err());
    sim.crash(1);
    assert_eq!(sim.armed_faults(), 0);
    assert!(sim.list_dir(&dir()).is_ok());
}

#[test]
fn same_seed_same_crash() {
    let run = |seed| {
        let sim = storage(seed);
        let file = durable_file(&sim);
        for i in 0..20u8 {
            file.write_all_at(&pattern(1500, i), u64::from(i) * 1000)
                .unwrap();
        }
        let report = sim.crash(seed);
        (report, contents(&sim))
    };
    for seed in 0..20 {
        assert_eq!(run(seed), run(seed));
    }
    assert_ne!(run(1), run(2));
}

#[test]
fn stats_count_syncs_and_bytes_written() {
    let sim = storage(1);
    let file = durable_file(&sim);
    file.write_all_at(&[0; 100], 0).unwrap();
    file.write_all_at(&[0; 50], 100).unwrap();
    file.sync_data().unwrap();
    file.sync_all().unwrap();
    let stats = sim.stats();
    assert_eq!(stats.writes, 2);
    assert_eq!(stats.bytes_written, 150);
    assert_eq!(stats.file_syncs(), 2);
    assert_eq!(stats.sync_dir, 1);
    assert_eq!(stats.namespace_ops, 1);
}

#[test]
fn short_reads_return_part_but_read_exact_gets_everything() {
    let sim = SimStorage::with_config(
        5,
        SimConfig {
            short_reads: true,
            ..SimConfig::default()
        },
    );
    sim.create_dir_all(&dir()).unwrap();
    let file = durable_file(&sim);
    let data = pattern(4000, 9);
    file.write_all_at(&data, 0).unwrap();
    let mut shortest = usize::MAX;
    for _ in 0..20 {
        let mut buf = vec![0; 4000];
        let n = file.read_at(&mut buf, 0).unwrap();
        assert!(n >= 1);
        assert_eq!(buf[..n], data[..n]);
        shortest = shortest.min(n);
    }
    assert!(shortest < 4000, "no read was short");
    let mut buf = vec![0; 4000];
    file.read_exact_at(&mut buf, 0).unwrap();
    assert_eq!(buf, data);
}
