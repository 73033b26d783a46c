//! A background reclaim of a store (`Store::start_background_reclaim`) gives back the space of
//! the sessions a retention list deleted, and the session kept reads whole.

use std::time::Duration;

use sessionlog::build::{TurnEnd, TurnStart};
use sessionlog::{Retention, SessionHeader, Store, StoreOptions};

const NOW_MS: u64 = 1_800_000_000_000;
const HOUR_MS: i64 = 3_600_000;

#[test]
fn a_background_reclaim_of_the_store_gives_back_what_retention_deleted() {
    let dir = tempfile::tempdir().expect("tempdir");
    let options = StoreOptions::default().with_log(
        sessionlog::LogOptions::default()
            .with_segment_size_bytes(64 << 10)
            .with_preallocate(false),
    );
    let store = Store::open(dir.path(), options).expect("open");
    let now = NOW_MS as i64;
    for i in 0..6 {
        let name = format!("s{i}");
        let mut s = store
            .create_session(&name, SessionHeader::new(&name, now - 10 * HOUR_MS, None))
            .expect("create");
        for turn in 0..300i64 {
            s.append(TurnStart::new().at(now - 10 * HOUR_MS + turn))
                .expect("turn start");
            s.append(TurnEnd::completed().at(now - i * HOUR_MS))
                .expect("turn end");
        }
        s.commit().expect("commit");
    }
    let list = Retention::Sessions((1..6).map(|i| format!("s{i}")).collect());
    let deleted = store
        .apply_retention(&list, &mut |_, _| {})
        .expect("retention");
    assert_eq!(deleted.deleted.len(), 5);
    let reclaim = store
        .start_background_reclaim(Duration::from_secs(3600))
        .expect("start");
    let start = std::time::Instant::now();
    while reclaim.report().runs < 1 {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "reclaim never ran"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    let report = reclaim.stop();
    assert!(report.error.is_none(), "{report:?}");
    assert!(report.bytes_freed > 0, "{report:?}");
    assert_eq!(
        store
            .raw_events("s0", sessionlog::Seq(0))
            .expect("events")
            .len(),
        600
    );
    store.close().expect("close");
}
