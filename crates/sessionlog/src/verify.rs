//! The session half of `verify`: every session event decoded and folded under the
//! session's rules, so damage the log's checksums cannot see (a record that is intact but
//! is not a valid event of its session) is found and named.

use sessionlog_log::Seq as LogSeq;
use sessionlog_session::{decode_event, decode_header, kind_tag, Error as SessionError, Session};

use crate::error::{Error, Result};
use crate::store::{Store, KIND_SESSION_HEADER};

/// One broken session invariant, as [`Store::verify_sessions`] reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionDamage {
    /// The session.
    pub session: String,
    /// The event seq where the session breaks; `None` for the header record.
    pub seq: Option<u64>,
    /// The invariant broken (`header`, `decode`, `kind tag`, `gap-free seq`, or the name of
    /// the validation rule the fold refused the event under).
    pub rule: String,
    /// What exactly is wrong.
    pub detail: String,
}

/// What [`Store::verify_sessions`] checked and found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SessionsCheck {
    /// Sessions checked.
    pub sessions: u64,
    /// Events decoded and folded.
    pub events: u64,
    /// The first broken invariant of each damaged session (later events of a session
    /// cannot be judged once its fold has stopped).
    pub damages: Vec<SessionDamage>,
}

impl Store {
    /// Checks every session: record 0 is a session header, every later record decodes to
    /// an event whose seq is its record's seq minus one and whose kind tag matches it, and
    /// the events fold under the session's rules. Damage is reported, never repaired.
    pub fn verify_sessions(&self) -> Result<SessionsCheck> {
        let mut check = SessionsCheck::default();
        for name in self.session_names() {
            check.sessions += 1;
            match self.verify_session(&name, &mut check.events) {
                Ok(None) => {}
                Ok(Some(damage)) => check.damages.push(damage),
                Err(e) => return Err(e),
            }
        }
        Ok(check)
    }

    fn verify_session(
        &self,
        name: &str,
        events_checked: &mut u64,
    ) -> Result<Option<SessionDamage>> {
        let log = self.log();
        let damage = |seq: Option<u64>, rule: &str, detail: String| {
            Ok(Some(SessionDamage {
                session: name.to_owned(),
                seq,
                rule: rule.to_owned(),
                detail,
            }))
        };
        let Some(next) = log
            .stream_id(name)
            .and_then(|id| log.stream_info(id))
            .map(|info| (info.id, info.next_seq))
        else {
            return Err(Error::NoSuchSession(name.to_owned()));
        };
        let (stream, end) = next;
        let mut records = log.iter(stream, LogSeq(0), end);
        let header = match records.next() {
            None => return damage(None, "header", "no header record".into()),
            Some(Err(e)) => return damage(None, "read", e.to_string()),
            Some(Ok(r)) if r.kind != KIND_SESSION_HEADER => {
                return damage(
                    None,
                    "header",
                    format!("record 0 has kind {:#04x}, not a session header", r.kind),
                )
            }
            Some(Ok(r)) => match decode_header(&r.payload) {
                Ok(h) => h,
                Err(e) => return damage(None, "header", e.to_string()),
            },
        };
        let mut events = Vec::with_capacity(end.0.saturating_sub(1) as usize);
        for record in records {
            let r = match record {
                Ok(r) => r,
                Err(e) => return damage(None, "read", e.to_string()),
            };
            let seq = r.seq.0.saturating_sub(1);
            let event = match decode_event(&r.payload) {
                Ok(event) => event,
                Err(e) => return damage(Some(seq), "decode", e.to_string()),
            };
            if event.seq().get() != seq {
                return damage(
                    Some(seq),
                    "gap-free seq",
                    format!(
                        "record {} holds event seq {}, expected {seq}",
                        r.seq.0,
                        event.seq().get()
                    ),
                );
            }
            let tag = kind_tag(&event);
            if tag != r.kind {
                return damage(
                    Some(seq),
                    "kind tag",
                    format!(
                        "record kind {:#04x} but a {} event has kind {tag:#04x}",
                        r.kind,
                        event.event_type()
                    ),
                );
            }
            events.push(event);
        }
        *events_checked += events.len() as u64;
        match Session::from_events(header, self.options().version.clone(), events) {
            Ok(_) => Ok(None),
            Err(e) => {
                let (seq, rule) = rule_of(&e);
                damage(seq, &rule, e.to_string())
            }
        }
    }
}

/// The event seq and the rule a fold refusal names.
fn rule_of(e: &SessionError) -> (Option<u64>, String) {
    match e {
        SessionError::Invalid { seq, rule, .. } => (Some(seq.get()), rule.to_string()),
        SessionError::UnknownEventType { seq, .. } => (Some(seq.get()), "known event type".into()),
        SessionError::Legacy { seq, .. } => (Some(seq.get()), "legacy shape".into()),
        SessionError::SeqMismatch { got, .. } => (Some(got.get()), "gap-free seq".into()),
        _ => (None, "fold".into()),
    }
}
