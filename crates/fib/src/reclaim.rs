//! Deferred reuse of memory that readers may still be looking at.
//!
//! The writer unlinks something (a next-hop slot, a trie node block), keeps
//! it in limbo, publishes the change, then starts a grace period on the
//! [`tern_rcu::Domain`]. Once every reader that was online has passed a
//! quiescent state, the memory goes back to its free list. The writer never
//! waits: it polls tokens on its next call, and allocates fresh memory
//! meanwhile; an offline reader does not hold anything up.

use std::collections::VecDeque;

use tern_rcu::{Domain, GraceToken};

use crate::types::NhId;

/// Something to give back once no reader can see it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Garbage {
    Nh(NhId),
    Members {
        base: u32,
        count: u32,
    },
    /// A block of trie nodes (family 4 or 6, first node, count).
    Nodes {
        v6: bool,
        base: u32,
        count: u32,
    },
}

pub(crate) struct Reclaimer {
    domain: Domain,
    limbo: Vec<Garbage>,
    waiting: VecDeque<(GraceToken, Vec<Garbage>)>,
}

impl Reclaimer {
    pub(crate) fn new(domain: Domain) -> Reclaimer {
        Reclaimer { domain, limbo: Vec::new(), waiting: VecDeque::new() }
    }

    /// Where callers put what they unlinked during the current operation.
    pub(crate) fn limbo(&mut self) -> &mut Vec<Garbage> {
        &mut self.limbo
    }

    /// Call after the unlinking stores were published: starts the grace
    /// period covering everything in limbo, unless one is still running (at
    /// most one at a time: a later start only makes the wait safer, and it
    /// bounds the tokens kept when a reader is slow to pass a quiescent
    /// state, and the calls into the domain during churn).
    pub(crate) fn seal(&mut self) {
        if self.limbo.is_empty() || !self.waiting.is_empty() {
            return;
        }
        let token = self.domain.start_grace();
        self.waiting.push_back((token, std::mem::take(&mut self.limbo)));
    }

    /// Everything whose grace period has elapsed, oldest first.
    pub(crate) fn collect(&mut self, out: &mut Vec<Garbage>) {
        while let Some((token, _)) = self.waiting.front_mut() {
            if !token.elapsed() {
                break;
            }
            if let Some((_, g)) = self.waiting.pop_front() {
                out.extend(g);
            }
        }
    }

    pub(crate) fn pending(&self) -> usize {
        self.limbo.len() + self.waiting.iter().map(|(_, g)| g.len()).sum::<usize>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn garbage_waits_for_online_readers_only() {
        let d = Domain::new();
        let r = d.register();
        let mut rc = Reclaimer::new(d.clone());
        rc.limbo().push(Garbage::Nh(5));
        rc.seal();
        let mut out = Vec::new();
        rc.collect(&mut out);
        assert!(out.is_empty(), "reader has not been quiescent");
        r.quiescent();
        rc.collect(&mut out);
        assert_eq!(out, vec![Garbage::Nh(5)]);
        r.offline();
        rc.limbo().push(Garbage::Nh(6));
        rc.seal();
        rc.collect(&mut out);
        assert_eq!(out.len(), 2, "an offline reader holds nothing up");
        assert_eq!(rc.pending(), 0);
    }

    #[test]
    fn one_grace_period_at_a_time() {
        let d = Domain::new();
        let r = d.register();
        let mut rc = Reclaimer::new(d.clone());
        let mut out = Vec::new();
        rc.limbo().push(Garbage::Nh(1));
        rc.seal();
        rc.limbo().push(Garbage::Nh(2));
        rc.seal();
        assert_eq!(rc.waiting.len(), 1, "the second batch waits in limbo");
        r.quiescent();
        rc.collect(&mut out);
        assert_eq!(out, vec![Garbage::Nh(1)]);
        rc.seal();
        rc.collect(&mut out);
        assert_eq!(out.len(), 1, "the second batch needs its own grace period");
        r.quiescent();
        rc.collect(&mut out);
        assert_eq!(out, vec![Garbage::Nh(1), Garbage::Nh(2)]);
    }
}
