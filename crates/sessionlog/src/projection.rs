//! Projections: pure folds over a session's events, with states a cache can persist.
//!
//! A projection says which record kinds it needs; the fold hands it only those events, so
//! structural events a projection ignores are never parsed (their kind tag is in the record
//! header). Each projection has a state version: a cached state of another version is not
//! trusted, it is rebuilt from the log. spec: format-spec/cache.md

use std::collections::HashMap;

use sessionlog_session::codec::kind;
use sessionlog_session::{
    derive_message, is_surface_kind, needs_upgrade, Event, FormatVersion, Session, SurfaceOp,
};

/// What a projection's `apply` says about an event written in an older in-file shape: the
/// caller folds the whole session instead (which upgrades legacy shapes in context).
pub const LEGACY_SHAPE: &str = "an event in an older in-file shape needs the full fold";

/// A fold over a session's events whose state can be saved and restored.
pub trait Projection: Send + Sync + std::fmt::Debug {
    /// Stable name, stored in the cache next to the state.
    fn name(&self) -> &'static str;
    /// Version of the state encoding and of the fold's meaning; bump on any change.
    fn state_version(&self) -> u32;
    /// Whether events with this record kind tag are needed.
    fn wants(&self, kind: u8) -> bool;
    /// Folds one event (its seq is the event seq). Events arrive in seq order.
    fn apply(&mut self, event: &Event) -> Result<(), String>;
    /// Appends the state's encoding to `out`.
    fn encode(&self, out: &mut Vec<u8>);
    /// Replaces the state with a decoded one.
    fn decode(&mut self, bytes: &[u8]) -> Result<(), String>;
}

/// The surface (current node seqs in order, replace generation) and the message each node
/// contributes, so deriving the model history needs no other event.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SurfaceProjection {
    version: FormatVersion,
    nodes: Vec<u64>,
    generation: u64,
    messages: HashMap<u64, Option<String>>,
}

impl SurfaceProjection {
    /// An empty surface under `version`'s message rules.
    pub fn new(version: FormatVersion) -> Self {
        SurfaceProjection {
            version,
            ..Default::default()
        }
    }

    /// The surface of a fully folded session (legacy shapes upgraded in context).
    pub fn from_session(session: &Session) -> Self {
        let nodes = session.surface();
        let messages = nodes
            .iter()
            .map(|&seq| {
                (
                    seq,
                    session
                        .event(sessionlog_session::Seq(seq))
                        .and_then(|e| derive_message(session.version(), e))
                        .map(str::to_owned),
                )
            })
            .collect();
        SurfaceProjection {
            version: session.version().clone(),
            nodes,
            generation: session.replace_generation(),
            messages,
        }
    }

    /// Current surface node seqs, in order.
    pub fn nodes(&self) -> &[u64] {
        &self.nodes
    }

    /// Replacements applied so far.
    pub fn replace_generation(&self) -> u64 {
        self.generation
    }

    /// The derived model messages, verbatim, as one JSON array.
    pub fn derive_messages_json(&self) -> String {
        let mut out = String::from("[");
        let mut first = true;
        for m in self
            .nodes
            .iter()
            .filter_map(|s| self.messages.get(s).and_then(|m| m.as_deref()))
        {
            if !first {
                out.push(',');
            }
            first = false;
            out.push_str(m);
        }
        out.push(']');
        out
    }

    /// The derived messages, verbatim.
    pub fn derive_messages(&self) -> Vec<&str> {
        self.nodes
            .iter()
            .filter_map(|s| self.messages.get(s).and_then(|m| m.as_deref()))
            .collect()
    }
}

impl Projection for SurfaceProjection {
    fn name(&self) -> &'static str {
        "surface"
    }

    fn state_version(&self) -> u32 {
        1
    }

    fn wants(&self, kind: u8) -> bool {
        is_surface_kind(kind)
    }

    fn apply(&mut self, event: &Event) -> Result<(), String> {
        if needs_upgrade(event) {
            return Err(LEGACY_SHAPE.to_owned());
        }
        let seq = event.seq().get();
        let message = derive_message(&self.version, event).map(str::to_owned);
        match event.surface_op() {
            Some(SurfaceOp::Append) => self.nodes.push(seq),
            Some(SurfaceOp::Replace { start, end }) => {
                let i = self
                    .nodes
                    .iter()
                    .position(|&n| n == start)
                    .ok_or(format!("event {seq} replaces {start}, not on the surface"))?;
                let j = self.nodes.iter().position(|&n| n == end).ok_or(format!(
                    "event {seq} replaces up to {end}, not on the surface"
                ))?;
                if i > j {
                    return Err(format!("event {seq} replaces an inverted range"));
                }
                for shadowed in self.nodes.splice(i..=j, [seq]) {
                    self.messages.remove(&shadowed);
                }
                self.generation += 1;
            }
            None => return Err(format!("surface event {seq} has no surfaceOp")),
        }
        self.messages.insert(seq, message);
        Ok(())
    }

    fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.generation.to_le_bytes());
        out.extend_from_slice(&(self.nodes.len() as u64).to_le_bytes());
        for seq in &self.nodes {
            out.extend_from_slice(&seq.to_le_bytes());
            put_opt_str(out, self.messages.get(seq).and_then(|m| m.as_deref()));
        }
    }

    fn decode(&mut self, bytes: &[u8]) -> Result<(), String> {
        let mut r = Reader(bytes);
        let generation = r.u64()?;
        let n = r.u64()?;
        let mut nodes = Vec::with_capacity(n.min(1 << 20) as usize);
        let mut messages = HashMap::with_capacity(nodes.capacity());
        for _ in 0..n {
            let seq = r.u64()?;
            nodes.push(seq);
            messages.insert(seq, r.opt_str()?);
        }
        r.end()?;
        self.generation = generation;
        self.nodes = nodes;
        self.messages = messages;
        Ok(())
    }
}

/// The latest `request/header` and `request/context` payloads: the envelope and tool schemas
/// of the next provider request, and its context window.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RequestProjection {
    header: Option<String>,
    context: Option<String>,
}

impl RequestProjection {
    /// The latest `request/header` data, verbatim.
    pub fn header(&self) -> Option<&str> {
        self.header.as_deref()
    }

    /// The latest `request/context` data, verbatim.
    pub fn context(&self) -> Option<&str> {
        self.context.as_deref()
    }
}

impl Projection for RequestProjection {
    fn name(&self) -> &'static str {
        "request"
    }

    fn state_version(&self) -> u32 {
        1
    }

    fn wants(&self, k: u8) -> bool {
        k == kind::REQUEST_HEADER || k == kind::REQUEST_CONTEXT
    }

    fn apply(&mut self, event: &Event) -> Result<(), String> {
        let data = Some(event.data().raw().to_owned());
        match event.event_type() {
            "request/header" => self.header = data,
            "request/context" => self.context = data,
            _ => {}
        }
        Ok(())
    }

    fn encode(&self, out: &mut Vec<u8>) {
        put_opt_str(out, self.header.as_deref());
        put_opt_str(out, self.context.as_deref());
    }

    fn decode(&mut self, bytes: &[u8]) -> Result<(), String> {
        let mut r = Reader(bytes);
        let header = r.opt_str()?;
        let context = r.opt_str()?;
        r.end()?;
        *self = RequestProjection { header, context };
        Ok(())
    }
}

fn put_opt_str(out: &mut Vec<u8>, s: Option<&str>) {
    match s {
        None => out.push(0),
        Some(s) => {
            out.push(1);
            out.extend_from_slice(&(s.len() as u64).to_le_bytes());
            out.extend_from_slice(s.as_bytes());
        }
    }
}

/// A bounds-checked little-endian reader for state encodings.
pub(crate) struct Reader<'a>(pub &'a [u8]);

impl<'a> Reader<'a> {
    pub fn take(&mut self, n: usize) -> Result<&'a [u8], String> {
        if self.0.len() < n {
            return Err("state is truncated".into());
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Ok(head)
    }

    pub fn u64(&mut self) -> Result<u64, String> {
        let b = self.take(8)?;
        Ok(u64::from_le_bytes(
            b.try_into().map_err(|_| "state is truncated")?,
        ))
    }

    pub fn u32(&mut self) -> Result<u32, String> {
        let b = self.take(4)?;
        Ok(u32::from_le_bytes(
            b.try_into().map_err(|_| "state is truncated")?,
        ))
    }

    pub fn opt_str(&mut self) -> Result<Option<String>, String> {
        match self.take(1)?[0] {
            0 => Ok(None),
            1 => {
                let len = usize::try_from(self.u64()?).map_err(|_| "length overflows")?;
                let b = self.take(len)?;
                String::from_utf8(b.to_vec())
                    .map(Some)
                    .map_err(|_| "state string is not UTF-8".into())
            }
            t => Err(format!("bad option tag {t}")),
        }
    }

    pub fn end(&self) -> Result<(), String> {
        if self.0.is_empty() {
            Ok(())
        } else {
            Err(format!("{} trailing bytes in state", self.0.len()))
        }
    }
}
