//! `Store::apply_retention` deletes the sessions a policy names: by the time of their last
//! event against a given present, or by a list. A session a writer holds open is left alone
//! and reported as busy; a listed name the store does not hold is reported as missing.

use std::time::Duration;

use sessionlog::build::{TurnEnd, TurnStart};
use sessionlog::{Retention, SessionHeader, Store, StoreOptions};

const NOW_MS: u64 = 1_800_000_000_000;
const HOUR_MS: i64 = 3_600_000;

fn session(store: &Store, name: &str, last_event_ms: i64) {
    let mut s = store
        .create_session(
            name,
            SessionHeader::new(name, last_event_ms - HOUR_MS, None),
        )
        .expect("create");
    s.append(TurnStart::new().at(last_event_ms - HOUR_MS))
        .expect("turn start");
    s.append(TurnEnd::completed().at(last_event_ms))
        .expect("turn end");
    s.commit().expect("commit");
}

#[test]
fn retention_by_age_and_by_list_deletes_what_it_names_and_leaves_open_sessions() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = Store::open(dir.path(), StoreOptions::default()).expect("open");
    let now = NOW_MS as i64;
    session(&store, "idle-3h", now - 3 * HOUR_MS);
    session(&store, "idle-1h", now - HOUR_MS);
    session(&store, "idle-5h-open", now - 5 * HOUR_MS);
    // An empty session's activity is its creation time.
    let empty = store
        .create_session(
            "empty-4h",
            SessionHeader::new("empty-4h", now - 4 * HOUR_MS, None),
        )
        .expect("create");
    drop(empty);
    assert_eq!(
        store.last_activity_unix_ms("idle-3h").expect("activity"),
        now - 3 * HOUR_MS
    );
    assert_eq!(
        store.last_activity_unix_ms("empty-4h").expect("activity"),
        now - 4 * HOUR_MS
    );
    let (writer, _) = store
        .open_session("idle-5h-open")
        .expect("open for writing");

    let policy = Retention::OlderThan {
        max_age: Duration::from_secs(2 * 3600),
        now_unix_ms: NOW_MS,
    };
    let mut calls = Vec::new();
    let report = store
        .apply_retention(&policy, &mut |done, total| calls.push((done, total)))
        .expect("retention");
    assert_eq!(
        report.deleted,
        vec!["empty-4h".to_owned(), "idle-3h".to_owned()]
    );
    assert_eq!(report.busy, vec!["idle-5h-open".to_owned()]);
    assert!(report.missing.is_empty());
    assert_eq!(calls.last(), Some(&(4, 4)), "progress over every session");
    drop(writer);

    let list = Retention::Sessions(vec!["idle-1h".into(), "never-was".into()]);
    let report = store
        .apply_retention(&list, &mut |_, _| {})
        .expect("retention");
    assert_eq!(report.deleted, vec!["idle-1h".to_owned()]);
    assert_eq!(report.missing, vec!["never-was".to_owned()]);
    assert_eq!(store.session_names(), vec!["idle-5h-open".to_owned()]);
    store.close().expect("close");
}
