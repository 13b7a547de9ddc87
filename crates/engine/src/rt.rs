//! Real-time throttling: a check made once when a worker starts.
//!
//! A worker that runs under SCHED_FIFO or SCHED_RR (e.g. started with
//! `chrt -f 50 tern run ...`) and never sleeps while traffic flows is what
//! the kernel's real-time bandwidth limit exists to stop: with the default
//! `kernel.sched_rt_runtime_us` = 950000 of `sched_rt_period_us` = 1000000,
//! such a thread is taken off its CPU for up to 50 ms every second. Measured
//! on the 2-vCPU test machine: a pinned SCHED_FIFO worker spent only 89-97 %
//! of the time on its CPU and stopped for 10-56 ms a few times a second
//! (the performance journal in git history, `git show
//! fdbc271:docs/PERFORMANCE.md`, "Linux as the control plane"). A forwarding
//! plane must not stall for that long, so the worker says so in the log.

use std::fs;

/// The scheduling policy field of `/proc/.../stat` (the 41st field).
const SCHED_FIFO: u32 = 1;
const SCHED_RR: u32 = 2;

/// The scheduling policy in a `/proc/<pid>/task/<tid>/stat` line, if it
/// parses. The second field (the command) is in parentheses and may hold
/// spaces and parentheses itself, so fields are counted after the last `)`.
pub fn policy_from_stat(stat: &str) -> Option<u32> {
    let rest = &stat[stat.rfind(')')? + 1..];
    // Fields after the command start with field 3 (state); policy is 41.
    rest.split_whitespace().nth(41 - 3)?.parse().ok()
}

/// The warning for a thread with scheduling `policy` under the real-time
/// limit `runtime_us` of every `period_us` (`runtime_us` < 0: no limit),
/// or `None` when the thread cannot be throttled.
pub fn throttle_warning(policy: u32, runtime_us: i64, period_us: i64) -> Option<String> {
    if policy != SCHED_FIFO && policy != SCHED_RR {
        return None;
    }
    if runtime_us < 0 || period_us <= 0 || runtime_us >= period_us {
        return None;
    }
    let off_ms = (period_us - runtime_us) as f64 / 1000.0;
    let period_ms = period_us as f64 / 1000.0;
    Some(format!(
        "runs under a real-time policy ({}) while the kernel limits real-time threads to {runtime_us} us of every \
         {period_us} us: a busy worker is taken off its CPU for up to {off_ms:.0} ms every {period_ms:.0} ms; \
         set kernel.sched_rt_runtime_us=-1 (sysctl) or run tern at normal priority on an isolated CPU",
        if policy == SCHED_FIFO { "SCHED_FIFO" } else { "SCHED_RR" },
    ))
}

/// The warning for the calling thread, read from /proc; `None` when it is
/// not throttled or /proc cannot tell.
pub fn current_thread_warning() -> Option<String> {
    let stat = fs::read_to_string("/proc/thread-self/stat").ok()?;
    let policy = policy_from_stat(&stat)?;
    let read = |p: &str| fs::read_to_string(p).ok()?.trim().parse::<i64>().ok();
    let runtime = read("/proc/sys/kernel/sched_rt_runtime_us")?;
    let period = read("/proc/sys/kernel/sched_rt_period_us")?;
    throttle_warning(policy, runtime, period)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stat_line(comm: &str, policy: u32) -> String {
        // pid (comm) state, then fields 4..=52; field 41 is the policy.
        let mut fields: Vec<String> = (4..=52).map(|i| i.to_string()).collect();
        fields[41 - 4] = policy.to_string();
        format!("1234 ({comm}) R {}", fields.join(" "))
    }

    #[test]
    fn the_policy_is_found_whatever_the_command_holds() {
        assert_eq!(policy_from_stat(&stat_line("tern-w0", 1)), Some(1));
        assert_eq!(policy_from_stat(&stat_line("a) b (c", 2)), Some(2));
        assert_eq!(policy_from_stat(&stat_line("x", 0)), Some(0));
        assert_eq!(policy_from_stat("1234 (x) R 1 2"), None);
        assert_eq!(policy_from_stat("no parenthesis"), None);
        assert_eq!(policy_from_stat(""), None);
    }

    #[test]
    fn only_throttled_real_time_threads_are_warned_about() {
        let w = throttle_warning(SCHED_FIFO, 950_000, 1_000_000).expect("FIFO under the default limit");
        assert!(w.contains("SCHED_FIFO") && w.contains("50 ms every 1000 ms"), "{w}");
        assert!(throttle_warning(SCHED_RR, 950_000, 1_000_000).is_some());
        // Normal, batch and idle policies are never throttled.
        for p in [0, 3, 5, 6] {
            assert_eq!(throttle_warning(p, 950_000, 1_000_000), None, "policy {p}");
        }
        // No limit, or a limit that is the whole period.
        assert_eq!(throttle_warning(SCHED_FIFO, -1, 1_000_000), None);
        assert_eq!(throttle_warning(SCHED_FIFO, 1_000_000, 1_000_000), None);
        assert_eq!(throttle_warning(SCHED_FIFO, 0, 0), None);
    }

    #[test]
    fn this_thread_reads_without_error() {
        // The test runs at whatever policy the harness gave it; the point is
        // that reading /proc neither fails loudly nor warns for a normal one.
        let stat = fs::read_to_string("/proc/thread-self/stat").expect("/proc");
        let policy = policy_from_stat(&stat).expect("policy field");
        if policy == 0 {
            assert_eq!(current_thread_warning(), None);
        }
    }
}
