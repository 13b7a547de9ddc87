//! Where a test's thread runs.
//!
//! Per-CPU state of the dataplane (the XDP lane's caches and their miss
//! rates, its scratch) is filled by the packets that CPU handles. A
//! socket's transmit on a veth runs the peer's receive (and its XDP
//! program) in the sender's softirq, on the sender's CPU. A test that
//! counts which path per-CPU state sent its packets down pins its sender
//! with [`pin_to_first_cpu`]: every round of the test then meets the same
//! CPU's state, however the scheduler of a loaded machine would have
//! spread the rounds (or one round) over several CPUs.

use rustix::thread::{CpuSet, sched_getaffinity, sched_setaffinity};

/// The CPUs the calling thread may run on, lowest first.
pub fn allowed_cpus() -> std::io::Result<Vec<usize>> {
    let set = sched_getaffinity(None)?;
    Ok((0..CpuSet::MAX_CPU).filter(|&c| set.is_set(c)).collect())
}

/// Pins the calling thread to CPU `cpu`.
pub fn pin_to(cpu: usize) -> std::io::Result<()> {
    let mut set = CpuSet::new();
    set.set(cpu);
    Ok(sched_setaffinity(None, &set)?)
}

/// Pins the calling thread to the lowest CPU it may run on (the same one
/// for every thread of a test that has not been pinned elsewhere); that
/// CPU.
pub fn pin_to_first_cpu() -> std::io::Result<usize> {
    let cpu = allowed_cpus()?.first().copied().ok_or_else(|| std::io::Error::other("the thread may run on no CPU"))?;
    pin_to(cpu)?;
    Ok(cpu)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pinned_thread_runs_on_its_cpu_only() {
        let first = allowed_cpus().expect("sched_getaffinity")[0];
        std::thread::spawn(move || {
            assert_eq!(pin_to_first_cpu().expect("sched_setaffinity"), first);
            assert_eq!(allowed_cpus().expect("sched_getaffinity"), vec![first]);
            for _ in 0..100 {
                std::thread::yield_now();
                assert_eq!(rustix::thread::sched_getcpu(), first);
            }
        })
        .join()
        .expect("the pinned thread");
    }
}
