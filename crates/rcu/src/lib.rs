//! Lock-free publication of tables to forwarding workers.
//!
//! Two tools, both built on the rule that a worker never blocks and never
//! takes a lock on its fast path:
//!
//! * [`Published`] / [`Snapshot`]: the control thread publishes a new
//!   immutable `Arc<T>`; each worker keeps its own `Snapshot` and refreshes it
//!   between batches with one atomic load (a generation number). Old versions
//!   are freed when the last worker lets go of them.
//! * [`Domain`] / [`Reader`]: quiescent-state-based grace periods (QSBR) for
//!   structures updated in place (the FIB's tables). A worker announces a
//!   quiescent state between batches; a writer that unlinked memory waits for a
//!   grace period (every online reader has passed a quiescent state) before it
//!   reuses that memory.
#![forbid(unsafe_code)]

mod published;
mod qsbr;

pub use published::{Published, Snapshot};
pub use qsbr::{Domain, GraceToken, Reader};
