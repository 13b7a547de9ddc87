//! Bounded connection tables for the API socket and the metrics endpoint:
//! at most `max` connections at once (each served by its own thread), at
//! most `per_client` from one client (a uid on the unix socket, an address
//! for metrics), and a rule for who makes room when they are full.
//!
//! A connection is *idle* while it waits for (the rest of) a request and
//! *working* while its request runs and its answer is written. Only idle
//! connections are ever closed to make room, so a request that was read is
//! always answered.

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

/// Who may take a place when the table is full.
#[derive(Clone, Copy, Debug)]
pub struct Policy {
    /// Connections at once for ordinary clients.
    pub max: usize,
    /// Extra places only privileged clients may take.
    pub reserved: usize,
    /// Connections one client may hold; at that limit a new connection of
    /// the client replaces its own oldest idle one, or is refused.
    pub per_client: usize,
    /// When full, any client may close the oldest idle connection of
    /// another (metrics: a connection idle for long is a slow scraper);
    /// otherwise only privileged clients may.
    pub evict_any: bool,
}

struct Slot<K> {
    id: u64,
    key: K,
    /// Since when it waits for a request; None while working.
    idle_since: Option<Instant>,
    close: Box<dyn Fn() + Send>,
}

/// The table.
pub struct Slots<K> {
    policy: Policy,
    slots: Mutex<Vec<Slot<K>>>,
    next: AtomicU64,
    evicted: AtomicU64,
    refused: AtomicU64,
}

/// A connection's place; dropping it frees the place.
pub struct Place<'a, K: PartialEq + Copy> {
    table: &'a Slots<K>,
    id: u64,
}

impl<K: PartialEq + Copy> Slots<K> {
    pub fn new(policy: Policy) -> Slots<K> {
        Slots {
            policy,
            slots: Mutex::new(Vec::new()),
            next: AtomicU64::new(1),
            evicted: AtomicU64::new(0),
            refused: AtomicU64::new(0),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Slot<K>>> {
        self.slots.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Connections open now.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Connections closed to make room, and refused, since the start.
    pub fn counts(&self) -> (u64, u64) {
        (self.evicted.load(Ordering::Relaxed), self.refused.load(Ordering::Relaxed))
    }

    /// Admits a new (idle) connection of `key`, closing another idle one if
    /// the policy allows and it is needed; Err says why it was refused.
    /// `close` shuts the connection down (it wakes the thread serving it).
    pub fn admit(&self, key: K, privileged: bool, close: Box<dyn Fn() + Send>) -> Result<u64, String> {
        let p = self.policy;
        let mut slots = self.lock();
        let oldest_idle = |slots: &[Slot<K>], only: Option<K>| {
            slots
                .iter()
                .enumerate()
                .filter(|(_, s)| only.is_none_or(|k| s.key == k))
                .filter_map(|(i, s)| s.idle_since.map(|t| (t, i)))
                .min()
                .map(|(_, i)| i)
        };
        let refuse = |why: String| {
            self.refused.fetch_add(1, Ordering::Relaxed);
            Err(why)
        };
        if slots.iter().filter(|s| s.key == key).count() >= p.per_client {
            match oldest_idle(&slots, Some(key)) {
                Some(i) => self.evict(&mut slots, i),
                None => return refuse(format!("{} connections of this client are busy", p.per_client)),
            }
        }
        let room = if privileged { p.max + p.reserved } else { p.max };
        if slots.len() >= room {
            let victim = if privileged || p.evict_any { oldest_idle(&slots, None) } else { None };
            match victim {
                Some(i) => self.evict(&mut slots, i),
                None => return refuse(format!("{} connections already open", slots.len())),
            }
        }
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        slots.push(Slot { id, key, idle_since: Some(Instant::now()), close });
        Ok(id)
    }

    fn evict(&self, slots: &mut Vec<Slot<K>>, i: usize) {
        let s = slots.swap_remove(i);
        (s.close)();
        self.evicted.fetch_add(1, Ordering::Relaxed);
    }

    /// The place of admitted connection `id`, freed on drop.
    pub fn place(&self, id: u64) -> Place<'_, K> {
        Place { table: self, id }
    }

    /// Closes every connection (shutdown).
    pub fn close_all(&self) {
        for s in self.lock().drain(..) {
            (s.close)();
        }
    }
}

impl<K: PartialEq + Copy> Place<'_, K> {
    /// Marks the connection working (a request was read). False if it was
    /// closed to make room meanwhile: then the request must not run.
    pub fn working(&self) -> bool {
        let mut slots = self.table.lock();
        match slots.iter_mut().find(|s| s.id == self.id) {
            Some(s) => {
                s.idle_since = None;
                true
            }
            None => false,
        }
    }

    /// Marks the connection idle again (its answer was written).
    pub fn idle(&self) {
        if let Some(s) = self.table.lock().iter_mut().find(|s| s.id == self.id) {
            s.idle_since = Some(Instant::now());
        }
    }
}

impl<K: PartialEq + Copy> Drop for Place<'_, K> {
    fn drop(&mut self) {
        self.table.lock().retain(|s| s.id != self.id);
    }
}

/// Writes all of `data` by `deadline` at the latest, however slowly the
/// peer reads: `set_timeout` bounds each write by the time left.
pub fn write_by<W: std::io::Write>(
    w: &mut W,
    mut data: &[u8],
    deadline: Instant,
    set_timeout: impl Fn(&W, std::time::Duration) -> std::io::Result<()>,
) -> std::io::Result<()> {
    use std::io::ErrorKind;
    while !data.is_empty() {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(std::io::Error::new(ErrorKind::TimedOut, "the peer did not read the answer in time"));
        }
        set_timeout(w, left)?;
        match w.write(data) {
            Ok(0) => return Err(ErrorKind::WriteZero.into()),
            Ok(n) => data = &data[n..],
            Err(e) if matches!(e.kind(), ErrorKind::Interrupted | ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
            Err(e) => return Err(e),
        }
    }
    w.flush()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::AtomicUsize;

    fn closer(n: &Arc<AtomicUsize>) -> Box<dyn Fn() + Send> {
        let n = Arc::clone(n);
        Box::new(move || {
            n.fetch_add(1, Ordering::Relaxed);
        })
    }

    #[test]
    fn ordinary_clients_are_refused_when_full_privileged_ones_make_room() {
        let t = Slots::new(Policy { max: 2, reserved: 1, per_client: 8, evict_any: false });
        let closed = Arc::new(AtomicUsize::new(0));
        let a = t.admit(1000u32, false, closer(&closed)).expect("a");
        let b = t.admit(1001, false, closer(&closed)).expect("b");
        assert!(t.admit(1002, false, closer(&closed)).is_err(), "full for ordinary clients");
        let r = t.admit(0, true, closer(&closed)).expect("the reserved place");
        assert_eq!(closed.load(Ordering::Relaxed), 0);
        let (pb, pr) = (t.place(b), t.place(r));
        assert!(pb.working() && pr.working());
        // Full even for root now: the oldest idle connection (a) goes.
        let r2 = t.admit(0, true, closer(&closed)).expect("room made");
        assert_eq!(closed.load(Ordering::Relaxed), 1);
        assert!(!t.place(a).working(), "a was closed: its request must not run");
        assert_eq!(t.len(), 3);
        let pr2 = t.place(r2);
        assert!(pr2.working());
        assert!(t.admit(0, true, closer(&closed)).is_err(), "no idle connection to close");
        assert_eq!(t.counts(), (1, 2));
    }

    #[test]
    fn one_client_at_its_limit_replaces_its_own_idle_connection() {
        let t = Slots::new(Policy { max: 100, reserved: 0, per_client: 2, evict_any: false });
        let closed = Arc::new(AtomicUsize::new(0));
        let a = t.admit(7u32, false, closer(&closed)).expect("a");
        let b = t.admit(7, false, closer(&closed)).expect("b");
        let c = t.admit(7, false, closer(&closed)).expect("a goes");
        assert_eq!(closed.load(Ordering::Relaxed), 1);
        assert!(!t.place(a).working(), "a was closed: its request must not run");
        let (pb, pc) = (t.place(b), t.place(c));
        assert!(pb.working() && pc.working());
        assert!(t.admit(7, false, closer(&closed)).is_err(), "both busy");
        assert!(t.admit(8, false, closer(&closed)).is_ok(), "another client is not limited by 7");
        drop(pb);
        assert!(t.admit(7, false, closer(&closed)).is_ok(), "a freed place");
    }
}
