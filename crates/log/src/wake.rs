//! Where the committers of one group wait for it to become durable.
//!
//! A group's committers sleep on one word that every wake changes. A durable group is woken
//! with a single call that wakes all of them (one `FUTEX_WAKE` on Linux), and each returns
//! without taking the log's lock when the group's number says its bytes are durable. A
//! condition variable on the log's mutex would instead hand them that lock one at a time,
//! each hand-over a wake-up of its own, while the next group's committers queue for the same
//! lock to append.

use std::sync::atomic::{AtomicU32, Ordering};

use parking_lot::{Condvar, Mutex};

/// One group's wait word and the number of committers asleep on it (or about to be).
#[derive(Debug, Default)]
pub(crate) struct GroupWaiters {
    word: AtomicU32,
    asleep: AtomicU32,
    /// Where they sleep off Linux.
    #[cfg(not(any(target_os = "linux", target_os = "android")))]
    portable: Portable,
}

impl GroupWaiters {
    /// The word's value now, counting the caller as a sleeper. Call it under the log's lock,
    /// then release the lock and pass the value to [`wait`](Self::wait): a wake made after
    /// (always after a [`change`](Self::change) under the lock) cannot be missed.
    pub(crate) fn enter(&self) -> u32 {
        self.asleep.fetch_add(1, Ordering::Relaxed);
        self.word.load(Ordering::Acquire)
    }

    /// Sleeps until the word differs from `seen` (the value [`enter`](Self::enter) returned).
    pub(crate) fn wait(&self, seen: u32) {
        while self.word.load(Ordering::Acquire) == seen {
            self.sleep_while(seen);
        }
        self.asleep.fetch_sub(1, Ordering::Relaxed);
    }

    /// Whether a committer has entered and not yet woken.
    pub(crate) fn any(&self) -> bool {
        self.asleep.load(Ordering::Relaxed) > 0
    }

    /// Wakes every committer of the group.
    pub(crate) fn wake_all(&self) {
        self.change();
        self.wake_sleepers();
    }

    /// Changes the word (under the log's lock), so that no committer that entered before
    /// goes on sleeping past a [`wake_sleepers`](Self::wake_sleepers) made afterwards, with
    /// or without the lock.
    pub(crate) fn change(&self) {
        self.word.fetch_add(1, Ordering::Release);
    }

    /// Wakes every committer asleep on the word, after [`change`](Self::change).
    pub(crate) fn wake_sleepers(&self) {
        if self.any() {
            self.wake(ALL);
        }
    }

    /// Wakes one committer asleep on the word, after [`change`](Self::change) (the others
    /// see a changed word only if they had not yet gone to sleep, and then check again under
    /// the lock).
    pub(crate) fn wake_one_sleeper(&self) {
        if self.any() {
            self.wake(1);
        }
    }

    #[cfg(any(target_os = "linux", target_os = "android"))]
    fn sleep_while(&self, seen: u32) {
        use rustix::thread::futex;
        // Returns at once if the word has changed; an interruption returns too, and the
        // caller checks the word again.
        let _ = futex::wait(&self.word, futex::Flags::PRIVATE, seen, None);
    }

    #[cfg(any(target_os = "linux", target_os = "android"))]
    fn wake(&self, n: u32) {
        use rustix::thread::futex;
        let _ = futex::wake(&self.word, futex::Flags::PRIVATE, n);
    }

    #[cfg(not(any(target_os = "linux", target_os = "android")))]
    fn sleep_while(&self, seen: u32) {
        self.portable.sleep_while(&self.word, seen);
    }

    #[cfg(not(any(target_os = "linux", target_os = "android")))]
    fn wake(&self, n: u32) {
        self.portable.wake(n);
    }
}

/// "Every sleeper", as a futex wake count: the kernel reads the count as a signed int, so
/// `u32::MAX` would wake one.
const ALL: u32 = i32::MAX as u32;

/// Sleeping on the word without a futex: a mutex and a condition variable of the group's
/// own (not the log's). A sleeper checks the word under this mutex and a waker takes it after
/// changing the word, so the change is seen or the wake is.
#[derive(Debug, Default)]
#[cfg_attr(any(target_os = "linux", target_os = "android"), allow(dead_code))]
struct Portable {
    lock: Mutex<()>,
    changed: Condvar,
}

#[cfg_attr(any(target_os = "linux", target_os = "android"), allow(dead_code))]
impl Portable {
    fn sleep_while(&self, word: &AtomicU32, seen: u32) {
        let mut held = self.lock.lock();
        if word.load(Ordering::Acquire) == seen {
            self.changed.wait(&mut held);
        }
    }

    fn wake(&self, n: u32) {
        let _held = self.lock.lock();
        if n == 1 {
            self.changed.notify_one();
        } else {
            self.changed.notify_all();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::time::Duration;

    #[test]
    fn a_wake_after_the_word_is_read_is_not_missed() {
        let g = Arc::new(GroupWaiters::default());
        // Read, then woken before sleeping: the wait returns at once.
        let seen = g.enter();
        g.wake_all();
        g.wait(seen);
        assert!(!g.any());
        // Asleep, then woken from another thread.
        let seen = g.enter();
        let waker = {
            let g = Arc::clone(&g);
            std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(20));
                g.wake_all();
            })
        };
        g.wait(seen);
        waker.join().unwrap();
        assert!(!g.any());
    }

    #[test]
    fn every_sleeper_is_woken_by_one_wake_all_and_one_by_wake_one_sleeper() {
        let g = Arc::new(GroupWaiters::default());
        let woken = Arc::new(AtomicU32::new(0));
        let seen = {
            let seens: Vec<u32> = (0..4).map(|_| g.enter()).collect();
            seens[0]
        };
        let sleepers: Vec<_> = (0..4)
            .map(|_| {
                let (g, woken) = (Arc::clone(&g), Arc::clone(&woken));
                std::thread::spawn(move || {
                    g.wait(seen);
                    woken.fetch_add(1, Ordering::SeqCst);
                })
            })
            .collect();
        std::thread::sleep(Duration::from_millis(20));
        assert_eq!(woken.load(Ordering::SeqCst), 0, "no one wakes unbidden");
        g.wake_all();
        for s in sleepers {
            s.join().unwrap();
        }
        assert_eq!(woken.load(Ordering::SeqCst), 4);
        assert!(!g.any());

        // wake_one_sleeper wakes one sleeper; the word moved for both, so a later check under the
        // lock decides for the other.
        let a = g.enter();
        let b = g.enter();
        let first = {
            let g = Arc::clone(&g);
            std::thread::spawn(move || g.wait(a))
        };
        std::thread::sleep(Duration::from_millis(20));
        g.change();
        g.wake_one_sleeper();
        first.join().unwrap();
        g.wait(b);
        assert!(!g.any());
    }

    /// Sleeps on `word` while it holds `seen`, as a group's `sleep_while` does.
    type Sleep<'a> = &'a (dyn Fn(&AtomicU32, u32) + Sync);
    /// Wakes `n` sleepers, as a group's `wake` does.
    type Wake<'a> = &'a (dyn Fn(&AtomicU32, u32) + Sync);

    /// The contract both ways of sleeping keep, on `word` (0 to start with): a sleep
    /// returns at once on a changed word, a wake of one wakes a sleeper, and a wake of `ALL`
    /// wakes every sleeper.
    fn sleeping_and_waking(word: &AtomicU32, sleep: Sleep<'_>, wake: Wake<'_>) {
        sleep(word, 1); // not the word's value: returns at once
        let woken = AtomicU32::new(0);
        std::thread::scope(|scope| {
            for _ in 0..3 {
                scope.spawn(|| {
                    while word.load(Ordering::Acquire) == 0 {
                        sleep(word, 0);
                    }
                    woken.fetch_add(1, Ordering::SeqCst);
                });
            }
            std::thread::sleep(Duration::from_millis(30));
            assert_eq!(woken.load(Ordering::SeqCst), 0, "no one wakes unbidden");
            word.store(1, Ordering::Release);
            wake(word, 1);
            let deadline = std::time::Instant::now() + Duration::from_secs(10);
            while woken.load(Ordering::SeqCst) == 0 {
                assert!(
                    std::time::Instant::now() < deadline,
                    "a wake of one woke none"
                );
                std::thread::sleep(Duration::from_millis(1));
            }
            wake(word, ALL);
        });
        assert_eq!(woken.load(Ordering::SeqCst), 3);
    }

    #[test]
    fn this_platform_s_sleep_and_wake_keep_the_contract() {
        let g = GroupWaiters::default();
        sleeping_and_waking(&g.word, &|_, seen| g.sleep_while(seen), &|_, n| g.wake(n));
    }

    #[test]
    fn the_portable_sleep_and_wake_keep_the_contract() {
        let p = Portable::default();
        let word = AtomicU32::new(0);
        sleeping_and_waking(&word, &|w, seen| p.sleep_while(w, seen), &|_, n| p.wake(n));
    }
}
