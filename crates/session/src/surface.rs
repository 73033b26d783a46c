//! The surface: the ordered list of event seqs that currently stand for the model history.
//!
//! Stored as a doubly linked list keyed by seq, so a replace costs O(shadowed nodes) and
//! an append O(1), whatever the surface length. Each node also carries an order key:
//! appends take a fresh, larger key and a replacement inherits the key of the first node
//! it shadows. Keys therefore always increase along the list, which answers "is `start`
//! before `end`?" in O(1) without walking.
//!
//! A node also records what readers need of its event without the event itself: whether it
//! contributes a derived message and, when tokens are measured, its cached estimate. Undo
//! restores shadowed links whole, so these facts come back with them.

use crate::event::Seq;
use crate::seq_hash::SeqMap;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Link {
    pub(crate) prev: Option<u64>,
    pub(crate) next: Option<u64>,
    pub(crate) key: u64,
    pub(crate) node: NodeFacts,
}

/// What the surface keeps about one node's event.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct NodeFacts {
    /// Whether the event contributes a message to the derived model history.
    pub(crate) message: bool,
    /// The cached token estimate of that message (0 when tokens are not measured).
    pub(crate) estimate: u32,
}

/// Why a replace range was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum RangeError {
    NotOnSurface(u64),
    Reversed { start: u64, end: u64 },
    MissingSource(u64),
}

/// What [`Surface::apply_replace`] removed, so [`Surface::undo_replace`] can put it back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ShadowedLinks(Vec<(u64, Link)>);

/// The current surface and the replace counter.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Surface {
    /// Keyed by seq with [`SeqMap`]'s one-multiply hash: a checkpoint walks every link.
    links: SeqMap<Link>,
    head: Option<u64>,
    tail: Option<u64>,
    next_key: u64,
    replace_generation: u64,
}

impl Surface {
    /// Number of nodes.
    pub fn len(&self) -> usize {
        self.links.len()
    }

    /// Whether there are no nodes.
    pub fn is_empty(&self) -> bool {
        self.links.is_empty()
    }

    /// Whether `seq` is currently a node.
    pub fn contains(&self, seq: Seq) -> bool {
        self.links.contains_key(&seq.get())
    }

    /// How many replacements have been applied.
    pub fn replace_generation(&self) -> u64 {
        self.replace_generation
    }

    /// The nodes in surface order.
    pub fn iter(&self) -> impl Iterator<Item = Seq> + '_ {
        self.seqs().map(Seq)
    }

    /// The nodes in surface order, as the numbers the links are keyed by.
    pub(crate) fn seqs(&self) -> impl Iterator<Item = u64> + '_ {
        self.nodes().map(|(seq, _, _)| seq)
    }

    /// The nodes from the newest to the oldest. Reading the newest `n` costs O(`n`), so a
    /// reader that wants only the end of a long surface never walks its start.
    pub fn iter_rev(&self) -> impl Iterator<Item = Seq> + '_ {
        let mut cursor = self.tail;
        std::iter::from_fn(move || {
            let current = cursor?;
            cursor = self.links.get(&current).and_then(|l| l.prev);
            Some(Seq(current))
        })
    }

    /// The nodes in surface order, collected.
    pub fn to_vec(&self) -> Vec<Seq> {
        self.iter().collect()
    }

    /// The nodes that contribute a derived message, in surface order: reading these events
    /// by seq and taking each one's message gives the model history.
    pub fn message_nodes(&self) -> impl Iterator<Item = Seq> + '_ {
        self.iter().filter(|seq| self.has_message(*seq))
    }

    /// Whether `seq` is a current node that contributes a derived message.
    pub fn has_message(&self, seq: Seq) -> bool {
        self.links.get(&seq.get()).is_some_and(|l| l.node.message)
    }

    /// What is kept about a current node.
    pub(crate) fn facts(&self, seq: u64) -> Option<NodeFacts> {
        self.links.get(&seq).map(|l| l.node)
    }

    /// The order-key counter: every node's key is below it.
    pub(crate) fn next_key(&self) -> u64 {
        self.next_key
    }

    /// The nodes in surface order with their order keys and facts: one lookup per node.
    pub(crate) fn nodes(&self) -> impl Iterator<Item = (u64, u64, NodeFacts)> + '_ {
        let mut cursor = self.head;
        std::iter::from_fn(move || {
            let seq = cursor?;
            let link = self.links.get(&seq)?;
            cursor = link.next;
            Some((seq, link.key, link.node))
        })
    }

    /// The surface made of `nodes` (seq, order key, facts) in order. The caller has
    /// checked that seqs are distinct and keys strictly increasing and below `next_key`,
    /// which is what every surface the fold builds satisfies.
    pub(crate) fn from_nodes(
        nodes: &[(u64, u64, NodeFacts)],
        next_key: u64,
        replace_generation: u64,
    ) -> Surface {
        let mut links = SeqMap::with_capacity_and_hasher(nodes.len(), Default::default());
        for (i, &(seq, key, node)) in nodes.iter().enumerate() {
            let prev = i.checked_sub(1).and_then(|p| nodes.get(p)).map(|n| n.0);
            let next = nodes.get(i + 1).map(|n| n.0);
            links.insert(
                seq,
                Link {
                    prev,
                    next,
                    key,
                    node,
                },
            );
        }
        Surface {
            links,
            head: nodes.first().map(|n| n.0),
            tail: nodes.last().map(|n| n.0),
            next_key,
            replace_generation,
        }
    }

    /// Appends `seq` as the new last node.
    pub(crate) fn append(&mut self, seq: u64, node: NodeFacts) {
        let link = Link {
            prev: self.tail,
            next: None,
            key: self.next_key,
            node,
        };
        self.next_key += 1;
        if let Some(tail) = self.tail.and_then(|t| self.links.get_mut(&t)) {
            tail.next = Some(seq);
        } else {
            self.head = Some(seq);
        }
        self.tail = Some(seq);
        self.links.insert(seq, link);
    }

    /// The nodes a replace `start..=end` would shadow, after checking that both are
    /// current nodes in order and that `sources` cites each one. Changes nothing.
    pub(crate) fn plan_replace(
        &self,
        start: u64,
        end: u64,
        sources: &[Seq],
    ) -> Result<Vec<u64>, RangeError> {
        let first = self
            .links
            .get(&start)
            .ok_or(RangeError::NotOnSurface(start))?;
        let last = self.links.get(&end).ok_or(RangeError::NotOnSurface(end))?;
        if first.key > last.key {
            return Err(RangeError::Reversed { start, end });
        }
        let mut shadowed = Vec::new();
        let mut cursor = Some(start);
        while let Some(seq) = cursor {
            shadowed.push(seq);
            if seq == end {
                break;
            }
            cursor = self.links.get(&seq).and_then(|l| l.next);
        }
        // Sources are short in practice; sort once when they are not.
        if sources.len() > 32 {
            let mut sorted = sources.to_vec();
            sorted.sort_unstable();
            if let Some(missing) = shadowed
                .iter()
                .find(|s| sorted.binary_search(&Seq(**s)).is_err())
            {
                return Err(RangeError::MissingSource(*missing));
            }
        } else if let Some(missing) = shadowed.iter().find(|s| !sources.contains(&Seq(**s))) {
            return Err(RangeError::MissingSource(*missing));
        }
        Ok(shadowed)
    }

    /// Applies a replace planned by [`Surface::plan_replace`] on this same state. Returns the
    /// links it removed, for [`Surface::undo_replace`].
    pub(crate) fn apply_replace(
        &mut self,
        shadowed: &[u64],
        seq: u64,
        node: NodeFacts,
    ) -> ShadowedLinks {
        let (Some(first), Some(last)) = (shadowed.first(), shadowed.last()) else {
            return ShadowedLinks(Vec::new());
        };
        let (Some(first_link), Some(last_link)) = (
            self.links.get(first).copied(),
            self.links.get(last).copied(),
        ) else {
            return ShadowedLinks(Vec::new());
        };
        let removed = shadowed
            .iter()
            .filter_map(|s| self.links.remove(s).map(|link| (*s, link)))
            .collect();
        let link = Link {
            prev: first_link.prev,
            next: last_link.next,
            key: first_link.key,
            node,
        };
        self.relink(link, seq);
        self.links.insert(seq, link);
        self.replace_generation += 1;
        ShadowedLinks(removed)
    }

    /// Points the neighbours of `link` (or head and tail) at `seq`.
    fn relink(&mut self, link: Link, seq: u64) {
        match link.prev.and_then(|p| self.links.get_mut(&p)) {
            Some(prev) => prev.next = Some(seq),
            None => self.head = Some(seq),
        }
        match link.next.and_then(|n| self.links.get_mut(&n)) {
            Some(next) => next.prev = Some(seq),
            None => self.tail = Some(seq),
        }
    }

    /// Takes back the last [`Surface::append`], of `seq`. Undo steps run newest first, so
    /// `seq` is the tail.
    pub(crate) fn undo_append(&mut self, seq: u64) {
        let Some(link) = self.links.remove(&seq) else {
            return;
        };
        self.next_key = link.key;
        self.tail = link.prev;
        match link.prev.and_then(|p| self.links.get_mut(&p)) {
            Some(prev) => prev.next = None,
            None => self.head = None,
        }
    }

    /// Takes back the last [`Surface::apply_replace`] made by `seq`, restoring the nodes it
    /// shadowed exactly (links, order keys, generation).
    pub(crate) fn undo_replace(&mut self, seq: u64, removed: ShadowedLinks) {
        let Some(link) = self.links.remove(&seq) else {
            return;
        };
        let (Some(&(first, _)), Some(&(last, _))) = (removed.0.first(), removed.0.last()) else {
            return;
        };
        match link.prev.and_then(|p| self.links.get_mut(&p)) {
            Some(prev) => prev.next = Some(first),
            None => self.head = Some(first),
        }
        match link.next.and_then(|n| self.links.get_mut(&n)) {
            Some(next) => next.prev = Some(last),
            None => self.tail = Some(last),
        }
        self.links.extend(removed.0);
        self.replace_generation -= 1;
    }
}
