//! What a transcript keeps beside its rows while it folds: the tool names of recent calls,
//! the surface events added since the checkpoint, and the shadowed events.

use std::collections::{BTreeMap, HashMap};

use super::stored::Stored;
use crate::projection::bytes::Reader;
use crate::projection::ProjectionError;

/// Tool names by call id, for the rows of results: the latest call with an id names its
/// tool. A result usually follows its call closely, so the calls folded last are looked
/// through first, newest first, in the checkpoint's list of calls (no copy of a name is
/// made for them); a result whose call is older has a map of every call built, once, then
/// extended by the calls folded since.
#[derive(Clone, Default)]
pub(super) struct ToolNames {
    /// Where the last [`RECENT_CALLS`] calls folded since the checkpoint begin in its list
    /// of calls, oldest first.
    pub(super) recent: std::collections::VecDeque<usize>,
    /// Every call's tool by id, the stored calls and those folded since up to `mapped`
    /// bytes of their list; built on the first look-up the recent calls do not answer.
    pub(super) map: Option<HashMap<String, String>>,
    pub(super) mapped: usize,
}

/// Calls [`ToolNames`] looks through before its map.
pub(super) const RECENT_CALLS: usize = 32;

impl ToolNames {
    /// A call was folded; its id and tool begin at `at` in the list of calls.
    pub(super) fn called(&mut self, at: usize) {
        if self.recent.len() == RECENT_CALLS {
            self.recent.pop_front();
        }
        self.recent.push_back(at);
    }

    /// The tool of the latest call with id `id`: `stored` holds the checkpoint's calls and
    /// `names` those folded since, each an id then a tool name.
    pub(super) fn find<'a>(
        &'a mut self,
        stored: &Stored,
        names: &'a [u8],
        id: &str,
    ) -> Result<Option<&'a str>, ProjectionError> {
        for &at in self.recent.iter().rev() {
            let mut r = Reader::new(names.get(at..).unwrap_or_default());
            if r.str_bytes()? == id.as_bytes() {
                let tool = std::str::from_utf8(r.str_bytes()?)
                    .map_err(|_| ProjectionError::Undecodable("text that is not UTF-8".into()))?;
                return Ok(Some(tool));
            }
        }
        if self.map.is_none() {
            self.mapped = 0;
            // In the order of the calls: a call id called again names the later call's
            // tool.
            self.map = Some(stored.name_pairs()?.into_iter().collect());
        }
        let map = self.map.get_or_insert_with(HashMap::new);
        let mut r = Reader::new(names.get(self.mapped..).unwrap_or_default());
        while !r.rest().is_empty() {
            let call = String::from_utf8_lossy(r.str_bytes()?).into_owned();
            let tool = String::from_utf8_lossy(r.str_bytes()?).into_owned();
            map.insert(call, tool);
        }
        self.mapped = names.len();
        Ok(map.get(id).map(String::as_str))
    }
}

/// Surface events added since the checkpoint, in seq order (a checkpoint lists them in
/// order, and they are folded in order): a list they are pushed onto, and a mark beside
/// each that left the surface since, the marked ones dropped from the list once they are
/// half of it, so that a replacement taking many of them off costs a search each, not a
/// shift of the list (nor a hash).
#[derive(Clone, Default)]
pub(super) struct AddedSurface {
    /// The seqs added, increasing.
    seqs: Vec<u64>,
    /// Whether each of `seqs` left the surface since.
    gone: Vec<bool>,
    /// How many did.
    left: usize,
}

impl AddedSurface {
    /// Adds `seq`, above every seq added before.
    pub(super) fn push(&mut self, seq: u64) {
        self.seqs.push(seq);
        self.gone.push(false);
    }

    /// Where `seq` is among the seqs still on the surface.
    fn find(&self, seq: u64) -> Option<usize> {
        let i = self.seqs.binary_search(&seq).ok()?;
        (self.gone.get(i) == Some(&false)).then_some(i)
    }

    pub(super) fn contains(&self, seq: u64) -> bool {
        self.find(seq).is_some()
    }

    /// Takes `seq` off; whether it was on.
    pub(super) fn remove(&mut self, seq: u64) -> bool {
        let Some(gone) = self.find(seq).and_then(|i| self.gone.get_mut(i)) else {
            return false;
        };
        *gone = true;
        self.left += 1;
        if self.left * 2 > self.seqs.len() {
            let mut gone = self.gone.iter();
            self.seqs.retain(|_| gone.next() == Some(&false));
            self.gone.clear();
            self.gone.resize(self.seqs.len(), false);
            self.left = 0;
        }
        true
    }

    pub(super) fn len(&self) -> usize {
        self.seqs.len() - self.left
    }

    /// The seqs on the surface, increasing.
    pub(super) fn iter(&self) -> impl Iterator<Item = u64> + '_ {
        self.seqs
            .iter()
            .zip(&self.gone)
            .filter(|(_, gone)| !**gone)
            .map(|(seq, _)| *seq)
    }
}

/// Shadowed seqs with the replacement that shadowed each, by seq. A replacement's sources
/// are mostly above every seq shadowed before (a summary cites the surface, which holds
/// nothing older than what earlier summaries shadowed), so most are appended to a sorted
/// list, costing a comparison where a tree costs a walk and a node; a seq below the list's
/// last that is not in it goes to a tree beside it, so no order of sources makes inserts
/// shift the list. Each seq is in one of the two.
#[derive(Clone, Default)]
pub(super) struct ShadowedBy {
    pub(super) appended: Vec<(u64, u64)>,
    pub(super) others: BTreeMap<u64, u64>,
}

impl ShadowedBy {
    pub(super) fn appended_at(&self, seq: u64) -> Option<usize> {
        match self.appended.last() {
            Some(&(last, _)) if last >= seq => {
                self.appended.binary_search_by_key(&seq, |&(s, _)| s).ok()
            }
            _ => None,
        }
    }

    pub(super) fn get(&self, seq: u64) -> Option<u64> {
        match self.appended_at(seq) {
            Some(i) => self.appended.get(i).map(|&(_, by)| by),
            None => self.others.get(&seq).copied(),
        }
    }

    /// Sets `seq`'s replacement; whether `seq` was not listed before.
    pub(super) fn insert(&mut self, seq: u64, by: u64) -> bool {
        if let Some(pair) = self.appended_at(seq).and_then(|i| self.appended.get_mut(i)) {
            pair.1 = by;
            return false;
        }
        // Every seq in the tree is below the list's last.
        if self.appended.last().is_none_or(|&(last, _)| last < seq) {
            self.appended.push((seq, by));
            return true;
        }
        self.others.insert(seq, by).is_none()
    }
}
