//! The node contract.

use crate::stats::Counter;
use crate::trace::Tracer;
use tern_packet::{PacketPool, PktIdx, flags};

/// Next index 0 of every node is the engine's `drop` node.
pub const NEXT_DROP: u16 = 0;

/// The node kept the packet (queued it for transmission, held it while a
/// neighbour resolves, freed it after copying): the engine must not move it.
pub const NEXT_TAKEN: u16 = u16::MAX;

/// Whether an error counter counts dropped packets or just events.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ErrorKind {
    /// The packet was dropped for this reason.
    Drop,
    /// Something worth counting happened (an ARP reply sent, ...).
    Info,
}

/// A named counter a node declares.
#[derive(Clone, Copy, Debug)]
pub struct ErrorDesc {
    pub name: &'static str,
    pub help: &'static str,
    pub kind: ErrorKind,
}

impl ErrorDesc {
    pub const fn drop(name: &'static str, help: &'static str) -> ErrorDesc {
        ErrorDesc { name, help, kind: ErrorKind::Drop }
    }
    pub const fn info(name: &'static str, help: &'static str) -> ErrorDesc {
        ErrorDesc { name, help, kind: ErrorKind::Info }
    }
}

/// A graph node. Its documentation follows one template: synopsis, next
/// nodes, counters, configuration, example.
pub trait Node: Send {
    /// Unique name in the graph, e.g. "ip4-input".
    fn name(&self) -> &'static str;

    /// Names of the next nodes, by next index. Entry 0 must be "drop".
    fn nexts(&self) -> &'static [&'static str];

    /// The counters this node keeps; a node refers to them by their index in
    /// this slice.
    fn errors(&self) -> &'static [ErrorDesc] {
        &[]
    }

    /// Processes `pkts` (at most `MAX_BATCH`), writing each packet's next
    /// index into `next[i]` (`next.len() == pkts.len()`). A packet whose next
    /// is [`NEXT_DROP`] must carry its reason (use [`Cx::drop`]); a packet the
    /// node keeps gets [`NEXT_TAKEN`]. `next` arrives filled with
    /// [`NEXT_DROP`], so a packet a node forgets is dropped, not leaked.
    fn process(&mut self, cx: &mut Cx<'_>, pkts: &[PktIdx], next: &mut [u16]);

    /// Whether the engine must call [`Node::poll`] every worker loop.
    fn wants_poll(&self) -> bool {
        false
    }

    /// Called once per worker loop before the graph runs: a node may emit
    /// packets it holds or creates (timers, queues, injected frames).
    fn poll(&mut self, _cx: &mut Cx<'_>, _emit: &mut Emit) {}

    /// Whether [`Node::poll`] has work that time alone brings due (retries,
    /// expiries): an idle worker then keeps its short sleep instead of the
    /// long one, so the timer fires on time.
    fn timers_pending(&self) -> bool {
        false
    }
}

/// Packets a node emits from `poll`, each with its next index.
#[derive(Default)]
pub struct Emit {
    pub(crate) pkts: Vec<(PktIdx, u16)>,
}

impl Emit {
    #[inline]
    pub fn push(&mut self, pkt: PktIdx, next: u16) {
        self.pkts.push((pkt, next));
    }
}

/// What a node sees of its worker while it runs.
pub struct Cx<'a> {
    /// The worker's packet buffers.
    pub pool: &'a mut PacketPool,
    /// Monotonic time of this loop (see [`crate::clock::now_ns`]).
    pub now_ns: u64,
    /// Worker number.
    pub worker: u16,
    /// Transmit queues, by port number: packets pushed here are sent by the
    /// worker after the graph run.
    pub tx: &'a mut [Vec<PktIdx>],
    pub(crate) counters: &'a [Counter],
    pub(crate) error_base: u16,
    pub(crate) tracer: &'a mut Tracer,
}

impl Cx<'_> {
    /// Marks `pkt` dropped for the node's error `err` and returns
    /// [`NEXT_DROP`], so a node writes `next[i] = cx.drop(p, E_BAD)`.
    #[inline(always)]
    pub fn drop(&mut self, pkt: PktIdx, err: impl Into<u16>) -> u16 {
        self.pool.meta_mut(pkt).error = self.error_base + err.into();
        NEXT_DROP
    }

    /// Adds `n` to the node's counter `err` (for [`ErrorKind::Info`]
    /// counters; drops are counted by the drop node).
    #[inline(always)]
    pub fn count(&self, err: impl Into<u16>, n: u64) {
        if let Some(c) = self.counters.get((self.error_base + err.into()) as usize) {
            c.add(n);
        }
    }

    /// True when `pkt` is being traced.
    #[inline(always)]
    pub fn traced(&self, pkt: PktIdx) -> bool {
        self.pool.meta(pkt).flags & flags::TRACED != 0
    }

    /// Whether this worker has a traced packet in flight, so that the
    /// batch may hold one: a fast path that does not note its work per
    /// packet asks this once per batch, and only then looks for traced
    /// packets to note (untraced traffic pays one test a batch).
    #[inline(always)]
    pub fn tracing(&self) -> bool {
        self.tracer.active()
    }

    /// Attaches a note to `pkt`'s trace (the closure runs only if traced).
    #[inline]
    pub fn trace_note(&mut self, pkt: PktIdx, note: impl FnOnce() -> String) {
        if self.traced(pkt) {
            let slot = self.pool.meta(pkt).trace;
            self.tracer.note(slot, note());
        }
    }

    /// Starts tracing a packet this node created, if tracing is armed.
    pub fn maybe_trace_new(&mut self, pkt: PktIdx, rx_if: u16) {
        if self.tracer.armed() {
            self.tracer.start(self.pool, pkt, rx_if, self.now_ns);
        }
    }
}

/// Declares a node's next nodes as an enum whose discriminants are their
/// next indices, and the table [`Node::nexts`] returns, from one list: a
/// position cannot drift from its name, and reordering the list reorders
/// both.
///
/// The first entry must be `Drop = "drop"` ([`NEXT_DROP`]). A node whose
/// next nodes depend on its address family or direction gives each entry
/// one name per table, `Pass = ["ip4-lookup", "ip6-lookup"]`, and picks
/// its table with `names(k)`.
///
/// ```
/// tern_engine::edges! {
///     /// `ethernet-input`'s next nodes.
///     pub enum EthNext {
///         Drop = "drop",
///         Ip4 = "ip4-input",
///         Ip6 = "ip6-input",
///     }
/// }
/// assert_eq!(EthNext::NAMES, ["drop", "ip4-input", "ip6-input"]);
/// assert_eq!(u16::from(EthNext::Ip6), 2);
///
/// tern_engine::edges! {
///     /// An ACL node's: the table by family.
///     pub enum AclNext {
///         Drop = ["drop", "drop"],
///         Pass = ["ip4-lookup", "ip6-lookup"],
///     }
/// }
/// assert_eq!(AclNext::names(1), ["drop", "ip6-lookup"]);
/// ```
#[macro_export]
macro_rules! edges {
    (
        $(#[$m:meta])*
        $vis:vis enum $name:ident {
            $(#[$dm:meta])* Drop = [$($dn:literal),+ $(,)?],
            $( $(#[$vm:meta])* $var:ident = [$($node:literal),+ $(,)?] ),* $(,)?
        }
    ) => {
        $(#[$m])*
        #[repr(u16)]
        #[derive(Clone, Copy, Debug, PartialEq, Eq)]
        $vis enum $name {
            $(#[$dm])*
            #[allow(dead_code)]
            Drop = 0,
            $( $(#[$vm])* $var ),*
        }
        impl $name {
            const TABLES: &'static [[&'static str; { [$(stringify!($var)),*].len() + 1 }]] = &$crate::node::transpose([
                [$($dn),+],
                $( [$($node),+] ),*
            ]);
            /// Table `k` of next-node names, by next index.
            #[allow(dead_code)]
            pub fn names(k: usize) -> &'static [&'static str] {
                match Self::TABLES.get(k) {
                    Some(t) => t,
                    None => &["drop"],
                }
            }
        }
        const _: () = {
            let mut k = 0;
            while k < $name::TABLES.len() {
                assert!($crate::node::str_eq($name::TABLES[k][0], "drop"), "next 0 must be \"drop\"");
                k += 1;
            }
        };
        impl ::core::convert::From<$name> for u16 {
            #[inline(always)]
            fn from(n: $name) -> u16 {
                n as u16
            }
        }
    };
    (
        $(#[$m:meta])*
        $vis:vis enum $name:ident {
            $(#[$dm:meta])* Drop = "drop",
            $( $(#[$vm:meta])* $var:ident = $node:literal ),* $(,)?
        }
    ) => {
        $(#[$m])*
        #[repr(u16)]
        #[derive(Clone, Copy, Debug, PartialEq, Eq)]
        $vis enum $name {
            $(#[$dm])*
            #[allow(dead_code)]
            Drop = 0,
            $( $(#[$vm])* $var ),*
        }
        impl $name {
            /// The next nodes' names, by next index: what `Node::nexts`
            /// returns.
            pub const NAMES: &'static [&'static str] = &["drop", $($node),*];
        }
        impl ::core::convert::From<$name> for u16 {
            #[inline(always)]
            fn from(n: $name) -> u16 {
                n as u16
            }
        }
    };
}

/// Declares a node's counters as an enum whose discriminants are their
/// indices, and the table [`Node::errors`] returns, from one list of
/// `Variant = drop("name", "help")` or `info(...)` ([`ErrorDesc::drop`],
/// [`ErrorDesc::info`]). Nodes of two families that share code give each
/// entry one counter per table, `Ttl = [info(..), info(..)]`, and pick
/// their table with `descs(k)`.
///
/// ```
/// tern_engine::errors! {
///     pub enum EthError {
///         TooShort = drop("too-short", "frame shorter than its Ethernet header"),
///         Sent = info("sent", "frames sent"),
///     }
/// }
/// assert_eq!(EthError::DESCS[1].name, "sent");
/// assert_eq!(u16::from(EthError::Sent), 1);
/// ```
#[macro_export]
macro_rules! errors {
    (
        $(#[$m:meta])*
        $vis:vis enum $name:ident {
            $( $(#[$vm:meta])* $var:ident = [$($kind:ident($n:literal, $h:literal)),+ $(,)?] ),+ $(,)?
        }
    ) => {
        $(#[$m])*
        #[repr(u16)]
        #[derive(Clone, Copy, Debug, PartialEq, Eq)]
        $vis enum $name {
            $( $(#[$vm])* $var ),+
        }
        impl $name {
            const TABLES: &'static [[$crate::ErrorDesc; { [$(stringify!($var)),+].len() }]] =
                &$crate::node::transpose([ $( [$($crate::ErrorDesc::$kind($n, $h)),+] ),+ ]);
            /// Table `k` of counters, by index.
            #[allow(dead_code)]
            pub fn descs(k: usize) -> &'static [$crate::ErrorDesc] {
                match Self::TABLES.get(k) {
                    Some(t) => t,
                    None => &[],
                }
            }
        }
        impl ::core::convert::From<$name> for u16 {
            #[inline(always)]
            fn from(e: $name) -> u16 {
                e as u16
            }
        }
    };
    (
        $(#[$m:meta])*
        $vis:vis enum $name:ident {
            $( $(#[$vm:meta])* $var:ident = $kind:ident($n:literal, $h:literal) ),+ $(,)?
        }
    ) => {
        $(#[$m])*
        #[repr(u16)]
        #[derive(Clone, Copy, Debug, PartialEq, Eq)]
        $vis enum $name {
            $( $(#[$vm])* $var ),+
        }
        impl $name {
            /// The counters, by index: what `Node::errors` returns.
            pub const DESCS: &'static [$crate::ErrorDesc] = &[$($crate::ErrorDesc::$kind($n, $h)),+];
        }
        impl ::core::convert::From<$name> for u16 {
            #[inline(always)]
            fn from(e: $name) -> u16 {
                e as u16
            }
        }
    };
}

/// Rows to columns: [`edges!`] and [`errors!`] take one row per entry
/// (its name in every table) and keep one column per table.
#[doc(hidden)]
pub const fn transpose<T: Copy, const A: usize, const B: usize>(rows: [[T; B]; A]) -> [[T; A]; B] {
    let mut out = [[rows[0][0]; A]; B];
    let mut i = 0;
    while i < A {
        let mut j = 0;
        while j < B {
            out[j][i] = rows[i][j];
            j += 1;
        }
        i += 1;
    }
    out
}

/// `a == b` in a constant.
#[doc(hidden)]
pub const fn str_eq(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    if a.len() != b.len() {
        return false;
    }
    let mut i = 0;
    while i < a.len() {
        if a[i] != b[i] {
            return false;
        }
        i += 1;
    }
    true
}

#[cfg(test)]
mod tests {
    crate::edges! {
        enum Plain {
            Drop = "drop",
            A = "a",
            B = "b",
        }
    }
    crate::edges! {
        enum ByFamily {
            Drop = ["drop", "drop"],
            Lookup = ["ip4-lookup", "ip6-lookup"],
            Out = ["interface-output", "interface-output"],
        }
    }
    crate::errors! {
        enum Errs {
            Short = drop("too-short", "short"),
            Sent = info("sent", "sent"),
        }
    }
    crate::errors! {
        enum FamErrs {
            NoIf = [drop("no-interface", "x"), drop("no-interface", "x")],
            Ttl = [info("ttl-expired", "v4"), info("hop-limit-expired", "v6")],
        }
    }

    #[test]
    fn edges_put_each_name_at_its_variant() {
        assert_eq!(Plain::NAMES, ["drop", "a", "b"]);
        assert_eq!(u16::from(Plain::A), 1);
        assert_eq!(Plain::B as usize, 2);
        assert_eq!(ByFamily::names(0), ["drop", "ip4-lookup", "interface-output"]);
        assert_eq!(ByFamily::names(1), ["drop", "ip6-lookup", "interface-output"]);
        assert_eq!(ByFamily::names(2), ["drop"]);
        assert_eq!(u16::from(ByFamily::Out), 2);
        assert_eq!(ByFamily::Lookup as u16, 1);
    }

    #[test]
    fn errors_put_each_counter_at_its_variant() {
        assert_eq!(Errs::DESCS.iter().map(|e| e.name).collect::<Vec<_>>(), ["too-short", "sent"]);
        assert_eq!(Errs::DESCS[usize::from(u16::from(Errs::Sent))].kind, super::ErrorKind::Info);
        assert_eq!(Errs::Short as u16, 0);
        assert_eq!(FamErrs::descs(0)[FamErrs::Ttl as usize].name, "ttl-expired");
        assert_eq!(FamErrs::descs(1)[FamErrs::Ttl as usize].name, "hop-limit-expired");
        assert_eq!(FamErrs::descs(1)[FamErrs::NoIf as usize].kind, super::ErrorKind::Drop);
        assert!(FamErrs::descs(2).is_empty());
    }
}
