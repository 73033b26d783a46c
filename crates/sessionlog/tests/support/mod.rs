//! The reference the store's incremental state is checked against: a session folded whole,
//! every event held in memory, from the envelopes the store hands out.

use sessionlog::session::{FormatVersion, Seq, Session};
use sessionlog::Store;

/// Session `name` of `store` (opened with the default format version) rebuilt by
/// [`Session::from_events`] from all its stored events.
pub fn whole_session(store: &Store, name: &str) -> Session {
    let header = store.session_state(name).expect("state").header().clone();
    let events = store.raw_events(name, Seq(0)).expect("events");
    Session::from_events(header, FormatVersion::current(), events).expect("whole fold")
}
