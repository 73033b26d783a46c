//! The in-memory store: sessions as folded [`Session`]s in a sorted map. Nothing is durable;
//! `commit` only checks that the session exists. For tests and ephemeral agents.

use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::{Arc, Mutex};

use sessionlog_session::store_trait::{append_validated, check_name, lock};
use sessionlog_session::{
    Event, FormatVersion, NewEvent, Session, SessionHeader, SessionStore, StoreError, StoreResult,
};

type Slot = Arc<Mutex<Session>>;

/// Sessions in memory.
#[derive(Debug)]
pub struct MemoryStore {
    version: FormatVersion,
    sessions: Mutex<BTreeMap<String, Slot>>,
}

impl Default for MemoryStore {
    fn default() -> Self {
        MemoryStore::new(FormatVersion::current())
    }
}

impl MemoryStore {
    /// An empty store validating with `version`.
    pub fn new(version: FormatVersion) -> MemoryStore {
        MemoryStore {
            version,
            sessions: Mutex::new(BTreeMap::new()),
        }
    }

    fn slot(&self, name: &str) -> StoreResult<Slot> {
        lock(&self.sessions)
            .get(name)
            .cloned()
            .ok_or_else(|| StoreError::NoSuchSession(name.to_owned()))
    }
}

impl SessionStore for MemoryStore {
    fn create(&self, name: &str, header: &SessionHeader) -> StoreResult<()> {
        check_name(name)?;
        let mut sessions = lock(&self.sessions);
        if sessions.contains_key(name) {
            return Err(StoreError::Exists(name.to_owned()));
        }
        let session = Session::new(header.clone(), self.version.clone());
        sessions.insert(name.to_owned(), Arc::new(Mutex::new(session)));
        Ok(())
    }

    fn append(&self, name: &str, events: &[NewEvent<'_>], expected: u64) -> StoreResult<u64> {
        let slot = self.slot(name)?;
        let mut session = lock(&slot);
        append_validated(name, &mut session, events, expected)?;
        Ok(session.next_seq().get())
    }

    fn commit(&self, name: &str) -> StoreResult<()> {
        self.slot(name).map(drop)
    }

    fn read_from(&self, name: &str, from: u64, limit: usize) -> StoreResult<Vec<Event>> {
        let slot = self.slot(name)?;
        let session = lock(&slot);
        let start = usize::try_from(from).unwrap_or(usize::MAX);
        Ok(session
            .events()
            .get(start..)
            .unwrap_or_default()
            .iter()
            .take(limit)
            .cloned()
            .collect())
    }

    fn load_header(&self, name: &str) -> StoreResult<SessionHeader> {
        let slot = self.slot(name)?;
        let header = lock(&slot).header().clone();
        Ok(header)
    }

    fn next_seq(&self, name: &str) -> StoreResult<u64> {
        let slot = self.slot(name)?;
        let next = lock(&slot).next_seq().get();
        Ok(next)
    }

    fn list(&self, after: Option<&str>, limit: usize) -> StoreResult<Vec<String>> {
        let sessions = lock(&self.sessions);
        let lower = after.map_or(Bound::Unbounded, Bound::Excluded);
        Ok(sessions
            .range::<str, _>((lower, Bound::Unbounded))
            .take(limit)
            .map(|(name, _)| name.clone())
            .collect())
    }

    fn delete(&self, name: &str) -> StoreResult<()> {
        lock(&self.sessions)
            .remove(name)
            .map(drop)
            .ok_or_else(|| StoreError::NoSuchSession(name.to_owned()))
    }
}
