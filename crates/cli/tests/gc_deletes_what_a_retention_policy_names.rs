//! `sessionlog gc --older-than DURATION` deletes every session whose last event is older than
//! that, `--sessions-from FILE` deletes the sessions a file lists (names it does not hold are
//! reported, not fatal), and then `gc` reclaims as usual; a duration it cannot read, or both
//! policies at once, is a usage error (exit 2, one line).

mod common;

use common::{describe, sessionlog, text};
use sessionlog::build::{TurnEnd, TurnStart};
use sessionlog::{LogOptions, SessionHeader, Store, StoreOptions};

const DAY_MS: i64 = 86_400_000;

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock")
        .as_millis() as i64
}

/// `old-*` sessions whose last event is 40 days ago (their first is 60), `new-*` ones active
/// an hour ago.
fn build(dir: &std::path::Path) {
    let options = StoreOptions::default().with_log(
        LogOptions::default()
            .with_segment_size_bytes(64 << 10)
            .with_preallocate(false),
    );
    let store = Store::open(dir, options).expect("open");
    let now = now_ms();
    for (name, first, last) in [
        ("old-a", now - 60 * DAY_MS, now - 40 * DAY_MS),
        ("new-a", now - 60 * DAY_MS, now - 3_600_000),
        ("old-b", now - 50 * DAY_MS, now - 40 * DAY_MS),
        ("new-b", now - 2 * DAY_MS, now - 3_600_000),
    ] {
        let mut s = store
            .create_session(name, SessionHeader::new(name, first, None))
            .expect("create");
        for turn in 0..200i64 {
            let at = first + (last - first) * turn / 199;
            s.append(TurnStart::new().at(at)).expect("turn start");
            s.append(TurnEnd::completed().at(at)).expect("turn end");
        }
        s.commit().expect("commit");
    }
    store.close().expect("close");
}

fn sessions(store: &str) -> String {
    let out = sessionlog(&["sessions", "--store", store], b"");
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    text(&out.stdout)
}

#[test]
fn older_than_deletes_the_sessions_idle_for_longer_and_reclaims_their_space() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store_dir = dir.path().join("s");
    build(&store_dir);
    let store = store_dir.to_str().expect("utf8");
    let kept_before = sessionlog(&["events", "--store", store, "--session", "new-a"], b"");

    let gc = sessionlog(
        &["gc", "--store", store, "--older-than", "30d", "--json"],
        b"",
    );
    assert_eq!(gc.status.code(), Some(0), "{}", describe(&gc));
    let report: serde_json::Value = serde_json::from_slice(&gc.stdout).expect("json");
    assert_eq!(report["sessionsDeleted"].as_u64(), Some(2), "{report}");
    assert!(
        report["bytesAfter"].as_u64() < report["bytesBefore"].as_u64(),
        "{report}"
    );
    let listed = sessions(store);
    assert!(!listed.contains("old-"), "{listed}");
    assert!(
        listed.contains("new-a") && listed.contains("new-b"),
        "{listed}"
    );
    let kept_after = sessionlog(&["events", "--store", store, "--session", "new-a"], b"");
    assert_eq!(
        kept_after.stdout, kept_before.stdout,
        "new-a reads as before"
    );

    // Nothing is older than 30 days any more; 1 hour is still too young for the rest.
    let again = sessionlog(&["gc", "--store", store, "--older-than", "2h"], b"");
    assert_eq!(again.status.code(), Some(0), "{}", describe(&again));
    assert!(
        text(&again.stdout).contains("sessions deleted: 0"),
        "{}",
        describe(&again)
    );
    let verify = sessionlog(&["verify", "--store", store], b"");
    assert_eq!(verify.status.code(), Some(0), "{}", describe(&verify));
}

#[test]
fn sessions_from_deletes_the_listed_sessions_and_reports_the_names_it_does_not_hold() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store_dir = dir.path().join("s");
    build(&store_dir);
    let store = store_dir.to_str().expect("utf8");
    let list = dir.path().join("doomed.txt");
    std::fs::write(&list, "new-b\n\n  old-a  \nnever-was\n").expect("write list");

    let gc = sessionlog(
        &[
            "gc",
            "--store",
            store,
            "--sessions-from",
            list.to_str().expect("utf8"),
        ],
        b"",
    );
    assert_eq!(gc.status.code(), Some(0), "{}", describe(&gc));
    let out = text(&gc.stdout);
    assert!(out.contains("sessions deleted: 2"), "{out}");
    assert!(out.contains("not in the store: never-was"), "{out}");
    assert!(out.contains("segments rewritten:"), "{out}");
    let listed = sessions(store);
    assert!(
        !listed.contains("new-b") && !listed.contains("old-a"),
        "{listed}"
    );
    assert!(
        listed.contains("new-a") && listed.contains("old-b"),
        "{listed}"
    );

    // The list may come on stdin.
    let gc = sessionlog(
        &["gc", "--store", store, "--sessions-from", "-"],
        b"old-b\n",
    );
    assert_eq!(gc.status.code(), Some(0), "{}", describe(&gc));
    assert!(text(&gc.stdout).contains("sessions deleted: 1"));
    assert_eq!(sessions(store).trim(), "new-a\t400 events");
}

#[test]
fn an_unreadable_duration_or_two_policies_are_usage_errors() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store_dir = dir.path().join("s");
    build(&store_dir);
    let store = store_dir.to_str().expect("utf8");
    for args in [
        vec!["gc", "--store", store, "--older-than", "30"],
        vec!["gc", "--store", store, "--older-than", "d"],
        vec!["gc", "--store", store, "--older-than", "3 days"],
        vec![
            "gc",
            "--store",
            store,
            "--older-than",
            "1d",
            "--sessions-from",
            "-",
        ],
    ] {
        let out = sessionlog(&args, b"");
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", describe(&out));
        assert_eq!(text(&out.stderr).lines().count(), 1, "{args:?}: one line");
    }
    assert_eq!(sessions(store).lines().count(), 4, "nothing was deleted");
}
