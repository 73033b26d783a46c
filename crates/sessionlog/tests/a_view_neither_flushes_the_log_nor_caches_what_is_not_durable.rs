//! `Store::view` only reads: with events still buffered it makes nothing durable (no write,
//! no sync), shows them, and writes no cache that a crash could contradict; once they are
//! durable, a view writes the cache.

use sessionlog::session::{EventInput, SessionHeader};
use sessionlog::{CacheUse, Store, StoreOptions};

#[test]
fn a_view_neither_flushes_the_log_nor_caches_what_is_not_durable() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = Store::open(dir.path(), StoreOptions::default()).expect("open");
    let mut handle = store
        .create_session("s", SessionHeader::new("s", 1, None))
        .expect("create");
    handle
        .append(EventInput::new("turn/start", 1, r#"{"turn":1}"#))
        .expect("append");
    let durable = store.log_reader().durable_lsn();
    let view = store.view("s").expect("view");
    assert_eq!(view.events, 1, "the buffered event is visible");
    assert!(
        matches!(view.cache, CacheUse::Rebuilt(_)),
        "{:?}",
        view.cache
    );
    assert_eq!(
        store.log_reader().durable_lsn(),
        durable,
        "the view made the log durable"
    );
    let cache = dir.path().join("cache");
    let cached = |d: &std::path::Path| std::fs::read_dir(d).map_or(0, |r| r.count());
    assert_eq!(cached(&cache), 0, "a cache of records that are not durable");

    handle.commit().expect("commit");
    assert!(store.log_reader().durable_lsn() > durable);
    store.view("s").expect("view");
    assert_eq!(cached(&cache), 1, "no cache once the records are durable");
    let again = store.view("s").expect("view");
    assert_eq!(again.cache, CacheUse::Hit { folded: 0 });
    drop(handle);
    store.close().expect("close");
}
