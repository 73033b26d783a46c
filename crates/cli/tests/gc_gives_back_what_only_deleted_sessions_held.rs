//! `sessionlog delete` frees a session's name at once and `sessionlog gc` gives its space
//! back: the segments that held only deleted sessions are removed, the one that held mostly
//! deleted events is rewritten, the report says how many and the bytes before and after, and every live session reads and verifies as before.
//! `sessionlog log delete` does the same for a raw stream.

mod common;

use common::{describe, sessionlog, text};
use sessionlog::build::{TurnEnd, TurnStart};
use sessionlog::{LogOptions, SessionHandle, SessionHeader, Store, StoreOptions};

/// Store options with the smallest segments, so a few hundred events fill several.
fn small_segments() -> StoreOptions {
    StoreOptions::default().with_log(
        LogOptions::default()
            .with_segment_size_bytes(64 << 10)
            .with_preallocate(false),
    )
}

/// Appends empty turns `turns` (each a start and an end, at fixed times) to `s`, committing
/// every 50 turns and at the end.
fn append_turns(s: &mut SessionHandle, turns: std::ops::Range<i64>) {
    for turn in turns {
        s.append(TurnStart::new().at(turn * 2)).expect("turn start");
        s.append(TurnEnd::completed().at(turn * 2 + 1))
            .expect("turn end");
        if turn % 50 == 49 {
            s.commit().expect("commit");
        }
    }
    s.commit().expect("commit");
}

/// A store with small segments: two sessions that fill the first segments, then `kept`.
fn build(dir: &std::path::Path) {
    let store = Store::open(dir, small_segments()).expect("open");
    for name in ["doomed-0", "doomed-1", "kept"] {
        let mut s = store
            .create_session(name, SessionHeader::new(name, 1_700_000_000_000, None))
            .expect("create");
        append_turns(&mut s, 0..400);
    }
    store.close().expect("close");
}

/// A temporary directory holding a store `build` made, and the store's path.
fn built() -> (tempfile::TempDir, String) {
    let dir = tempfile::tempdir().expect("tempdir");
    let store_dir = dir.path().join("s");
    build(&store_dir);
    let store = store_dir.to_str().expect("utf8").to_owned();
    (dir, store)
}

/// `sessionlog gc --store STORE --json` with `flags`, which must succeed; its report.
fn gc_report(store: &str, flags: &[&str]) -> serde_json::Value {
    let mut args = vec!["gc", "--store", store, "--json"];
    args.extend_from_slice(flags);
    let gc = sessionlog(&args, b"");
    assert_eq!(gc.status.code(), Some(0), "{}", describe(&gc));
    serde_json::from_slice(&gc.stdout).expect("json")
}

#[test]
fn gc_removes_what_only_deleted_sessions_held_and_keeps_every_live_event() {
    let (_dir, store) = built();
    let store = store.as_str();
    let events_before = sessionlog(&["events", "--store", store, "--session", "kept"], b"");
    assert_eq!(
        events_before.status.code(),
        Some(0),
        "{}",
        describe(&events_before)
    );

    for name in ["doomed-0", "doomed-1"] {
        let out = sessionlog(&["delete", "--store", store, "--session", name], b"");
        assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
        assert!(text(&out.stdout).contains(&format!("deleted {name}")));
    }
    let missing = sessionlog(&["delete", "--store", store, "--session", "doomed-0"], b"");
    assert_eq!(missing.status.code(), Some(2), "{}", describe(&missing));
    assert_eq!(text(&missing.stderr).lines().count(), 1, "one line");

    let report = gc_report(store, &[]);
    let removed = report["segmentsRemoved"].as_u64().expect("segmentsRemoved");
    let before = report["bytesBefore"].as_u64().expect("bytesBefore");
    let after = report["bytesAfter"].as_u64().expect("bytesAfter");
    assert!(removed >= 1, "{report}");
    assert!(after < before, "{report}");
    // The segment where the deleted sessions end and `kept` begins is mostly dead: it is
    // rewritten with only kept's events.
    assert_eq!(report["segmentsRewritten"].as_u64(), Some(1), "{report}");
    assert!(report["liveBytesCopied"].as_u64() > Some(0), "{report}");

    let events_after = sessionlog(&["events", "--store", store, "--session", "kept"], b"");
    assert_eq!(
        events_after.stdout, events_before.stdout,
        "kept reads as before"
    );
    let verify = sessionlog(&["verify", "--store", store], b"");
    assert_eq!(verify.status.code(), Some(0), "{}", describe(&verify));
    let sessions = sessionlog(&["sessions", "--store", store], b"");
    assert_eq!(
        text(&sessions.stdout).trim(),
        "kept\t800 events",
        "{}",
        describe(&sessions)
    );

    // A second gc has nothing left to remove and says so in text.
    let again = sessionlog(&["gc", "--store", store], b"");
    assert_eq!(again.status.code(), Some(0), "{}", describe(&again));
    let out = text(&again.stdout);
    assert!(out.contains("segments removed: 0"), "{out}");
    assert!(out.contains("segments rewritten: 0"), "{out}");
    assert!(
        out.contains("bytes before:") && out.contains("bytes after:"),
        "{out}"
    );
}

/// Deletes both doomed sessions of a store `build` made, through the CLI.
fn delete_doomed(store: &str) {
    for name in ["doomed-0", "doomed-1"] {
        let out = sessionlog(&["delete", "--store", store, "--session", name], b"");
        assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    }
}

#[test]
fn gc_rewrite_below_sets_the_live_share_under_which_segments_are_rewritten() {
    let (_dir, store) = built();
    let store = store.as_str();
    delete_doomed(store);

    // 0 rewrites nothing: the mostly dead segment stays as it is.
    let report = gc_report(store, &["--rewrite-below", "0"]);
    assert!(report["segmentsRemoved"].as_u64() >= Some(1), "{report}");
    assert_eq!(report["segmentsRewritten"].as_u64(), Some(0), "{report}");
    assert_eq!(report["liveBytesCopied"].as_u64(), Some(0), "{report}");

    // The default (50) then rewrites it.
    let report = gc_report(store, &[]);
    assert_eq!(report["segmentsRewritten"].as_u64(), Some(1), "{report}");

    let verify = sessionlog(&["verify", "--store", store], b"");
    assert_eq!(verify.status.code(), Some(0), "{}", describe(&verify));
}

#[test]
fn gc_refuses_a_rewrite_threshold_above_100() {
    let (_dir, store) = built();
    let store = store.as_str();
    let gc = sessionlog(&["gc", "--store", store, "--rewrite-below", "101"], b"");
    assert_eq!(gc.status.code(), Some(2), "{}", describe(&gc));
}

#[test]
fn gc_compress_level_sets_the_zstd_level_and_is_checked() {
    let (dir, store) = built();
    let store = store.as_str();
    let events_before = sessionlog(&["events", "--store", store, "--session", "kept"], b"");
    for bad in [
        &["--compress", "--level", "0"][..],
        &["--compress", "--level", "20"],
        &["--level", "9"],
    ] {
        let mut args = vec!["gc", "--store", store];
        args.extend_from_slice(bad);
        let gc = sessionlog(&args, b"");
        assert_eq!(gc.status.code(), Some(2), "{bad:?}: {}", describe(&gc));
    }
    // A second store with the same events (`build` fixes every time in them).
    let copy = dir.path().join("copy");
    build(&copy);
    let copy = copy.to_str().expect("utf8");
    let fast = sessionlog(
        &[
            "gc",
            "--store",
            store,
            "--json",
            "--compress",
            "--level",
            "1",
        ],
        b"",
    );
    assert_eq!(fast.status.code(), Some(0), "{}", describe(&fast));
    let small = sessionlog(
        &[
            "gc",
            "--store",
            copy,
            "--json",
            "--compress",
            "--level",
            "19",
        ],
        b"",
    );
    assert_eq!(small.status.code(), Some(0), "{}", describe(&small));
    let after = |out: &std::process::Output| {
        let report: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
        report["bytesAfter"].as_u64().expect("bytesAfter")
    };
    assert!(
        after(&small) < after(&fast),
        "level 19 stores fewer bytes than level 1"
    );
    for s in [store, copy] {
        let events = sessionlog(&["events", "--store", s, "--session", "kept"], b"");
        assert_eq!(events.stdout, events_before.stdout, "kept reads as before");
    }
}

#[test]
fn gc_compress_compresses_every_sealed_segment_and_every_event_reads_the_same() {
    let (_dir, store) = built();
    let store = store.as_str();
    let events_before = sessionlog(&["events", "--store", store, "--session", "kept"], b"");
    assert_eq!(
        events_before.status.code(),
        Some(0),
        "{}",
        describe(&events_before)
    );

    let report = gc_report(store, &["--compress"]);
    assert!(report["segmentsCompressed"].as_u64() >= Some(2), "{report}");
    let before = report["bytesBefore"].as_u64().expect("bytesBefore");
    let after = report["bytesAfter"].as_u64().expect("bytesAfter");
    assert!(after * 2 < before, "{report}");

    let events_after = sessionlog(&["events", "--store", store, "--session", "kept"], b"");
    assert_eq!(
        events_after.stdout, events_before.stdout,
        "kept reads as before"
    );
    let verify = sessionlog(&["verify", "--store", store], b"");
    assert_eq!(verify.status.code(), Some(0), "{}", describe(&verify));
    let dump = sessionlog(&["dump", "--store", store, "--segment", "1"], b"");
    assert_eq!(dump.status.code(), Some(0), "{}", describe(&dump));
    assert!(
        text(&dump.stdout).contains("compressed"),
        "{}",
        text(&dump.stdout)
    );
    assert!(
        text(&dump.stdout).contains("batch @64"),
        "{}",
        text(&dump.stdout)
    );

    // The active segment was sealed and compressed too: what is left uncompressed is the new
    // one, which holds no event, so a second run finds nothing to compress.
    let report = gc_report(store, &["--compress"]);
    assert_eq!(report["segmentsCompressed"].as_u64(), Some(0), "{report}");

    // A gc without the flag leaves compressed segments as they are.
    let report = gc_report(store, &[]);
    assert_eq!(report["segmentsRewritten"].as_u64(), Some(0), "{report}");
}

/// `sessionlog log delete` deletes a raw stream: its name is free at once (reading it is an
/// error, appending starts it anew), a name that is no raw stream exits 2 on one line (a
/// session's name included, whose session stays), and `gc` gives the records' space back.
#[test]
fn log_delete_frees_a_raw_stream_and_gc_gives_its_space_back() {
    let (_dir, store) = built();
    let store = store.as_str();
    // 400 KB of raw records in the store's 64 KiB segments, then more of `kept`, so every
    // segment holding them is sealed.
    {
        let s = Store::open(store, small_segments()).expect("open");
        let raw = s.raw_stream("blobs").expect("raw stream");
        let line = vec![b'x'; 2000];
        for _ in 0..200 {
            raw.append(&[&line], sessionlog::Durability::Sync)
                .expect("append");
        }
        drop(raw);
        let (mut kept, _closers) = s.open_session("kept").expect("open kept");
        append_turns(&mut kept, 400..500);
        drop(kept);
        s.close().expect("close");
    }
    let before = gc_report(store, &[])["bytesAfter"]
        .as_u64()
        .expect("bytesAfter");

    let out = sessionlog(
        &["log", "delete", "--store", store, "--stream", "blobs"],
        b"",
    );
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    assert!(
        text(&out.stdout).contains("deleted raw stream blobs"),
        "{}",
        describe(&out)
    );
    let read = sessionlog(&["log", "read", "--store", store, "--stream", "blobs"], b"");
    assert_eq!(read.status.code(), Some(2), "{}", describe(&read));
    for name in ["blobs", "kept"] {
        let again = sessionlog(&["log", "delete", "--store", store, "--stream", name], b"");
        assert_eq!(again.status.code(), Some(2), "{}", describe(&again));
        assert_eq!(
            text(&again.stderr).lines().count(),
            1,
            "{}",
            describe(&again)
        );
        assert!(
            text(&again.stderr).contains("no raw stream"),
            "{}",
            describe(&again)
        );
    }
    let sessions = sessionlog(&["sessions", "--store", store], b"");
    assert!(
        text(&sessions.stdout).contains("kept\t1000 events"),
        "{}",
        describe(&sessions)
    );

    let report = gc_report(store, &[]);
    let after = report["bytesAfter"].as_u64().expect("bytesAfter");
    assert!(after + 300_000 < before, "{before} -> {after}: {report}");

    let anew = sessionlog(
        &["log", "append", "--store", store, "--stream", "blobs"],
        b"fresh\n",
    );
    assert!(
        text(&anew.stdout).contains("\"seq\":0"),
        "{}",
        describe(&anew)
    );
    let verify = sessionlog(&["verify", "--store", store], b"");
    assert_eq!(verify.status.code(), Some(0), "{}", describe(&verify));
}
