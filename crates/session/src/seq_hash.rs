//! Hashing for maps and sets keyed by event seq.
//!
//! Seqs are numbers the store assigns (0, 1, 2, … per session; a replacement's sources are
//! validated to be earlier events), never text a session chooses, so a multiplicative hash
//! spreads them well and cannot be driven into collisions by content. It costs one multiply
//! where the standard library's keyed SipHash costs tens of nanoseconds, which shows where
//! a map of seqs is walked whole: the surface at every state checkpoint, a projection's
//! checkpoint holding hundreds of thousands of seqs when it is decoded.

use std::collections::{HashMap, HashSet};
use std::hash::{BuildHasherDefault, Hasher};

/// The hasher of [`SeqMap`] and [`SeqSet`]: one rotate, xor and multiply per word.
#[derive(Debug, Clone, Copy, Default)]
pub struct SeqHasher(u64);

impl Hasher for SeqHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(u64::from(b));
        }
    }

    fn write_u64(&mut self, v: u64) {
        self.0 = (self.0.rotate_left(5) ^ v).wrapping_mul(0x517c_c1b7_2722_0a95);
    }
}

/// A map keyed by event seq.
pub type SeqMap<V> = HashMap<u64, V, BuildHasherDefault<SeqHasher>>;

/// A set of event seqs.
pub type SeqSet = HashSet<u64, BuildHasherDefault<SeqHasher>>;

#[cfg(test)]
mod tests {
    use super::*;

    /// Consecutive seqs, the keys a session's maps hold, land in distinct buckets of a
    /// table sized for them, and the map behaves as a map.
    #[test]
    fn consecutive_seqs_spread_over_the_buckets() {
        let buckets = 1u64 << 12;
        let mut used = HashSet::new();
        for seq in 0..buckets {
            let mut h = SeqHasher::default();
            h.write_u64(seq);
            used.insert(h.finish() & (buckets - 1));
        }
        assert!(
            used.len() as u64 > buckets * 9 / 10,
            "{} of {buckets}",
            used.len()
        );
        let mut map: SeqMap<u64> = SeqMap::default();
        for seq in 0..10_000 {
            map.insert(seq, seq * 2);
        }
        assert!((0..10_000).all(|seq| map.get(&seq) == Some(&(seq * 2))));
        assert_eq!(map.get(&10_000), None);
    }
}
