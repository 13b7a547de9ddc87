//! Network namespaces, veth pairs and the commands that configure them:
//! the testkit's (`tern_testkit::netns`, shared with `tern lab` and the
//! tests), with the tester's errors and what only the tester needs (NAPI
//! threads, CPU pinning and isolation, drop counters).
//!
//! Everything is done with iproute2 (`ip`), `ethtool`, `nft` and `sysctl`
//! run as child processes, so a failure prints the exact command the user
//! can rerun by hand. Namespaces delete themselves when dropped, which also
//! destroys their veths, so a failed run leaves nothing behind.

use nix::sched::{CpuSet, sched_setaffinity};
use nix::unistd::Pid;
use tern_testkit::netns as kit;

use crate::error::{BenchError, Result};

pub use tern_testkit::netns::parse_mac;

impl From<kit::CmdError> for BenchError {
    fn from(e: kit::CmdError) -> Self {
        BenchError::Command { cmd: e.cmd, detail: e.detail }
    }
}

/// Runs a command, returns its stdout, or an error quoting it and its stderr.
pub fn run_cmd(program: &str, args: &[&str]) -> Result<String> {
    Ok(kit::run(program, args)?)
}

/// Whether a program can be found on PATH (for optional DUTs and tools).
pub fn have_program(program: &str) -> bool {
    kit::on_path(program)
}

/// A network namespace owned by this run; deleted on drop.
#[derive(Debug)]
pub struct Netns(kit::Netns);

impl Netns {
    /// Creates the namespace `name` (which must not exist yet) with its
    /// loopback up.
    pub fn create(name: &str) -> Result<Self> {
        Ok(Netns(kit::Netns::create(name)?))
    }

    /// The namespace's name (as `ip netns` knows it).
    pub fn name(&self) -> &str {
        &self.0.name
    }

    /// `ip -n NAME args...`
    pub fn ip(&self, args: &[&str]) -> Result<String> {
        Ok(self.0.try_ip(args)?)
    }

    /// Runs a program inside the namespace (`ip netns exec`), which also
    /// mounts the namespace's own /sys for it.
    pub fn exec(&self, program: &str, args: &[&str]) -> Result<String> {
        let mut all = vec![program];
        all.extend_from_slice(args);
        Ok(self.0.try_exec_must(&all)?)
    }

    /// Sets a sysctl inside the namespace.
    pub fn sysctl(&self, key: &str, value: &str) -> Result<()> {
        Ok(self.0.try_sysctl(key, value)?)
    }

    /// Moves the calling thread into this namespace. Only the calling
    /// thread changes: use it in a thread spawned for the purpose.
    pub fn enter_current_thread(&self) -> Result<()> {
        self.0.try_enter().map_err(|e| BenchError::Dut(format!("setns into {}: {e}", self.name())))
    }

    /// Frames a device's transmit path dropped (`ip -s link`: TX dropped).
    /// On a veth these are the frames its peer's receive ring refused,
    /// whether an XDP program redirected them or the stack sent them.
    pub fn tx_dropped(&self, dev: &str) -> Result<u64> {
        let out = self.ip(&["-s", "-j", "link", "show", "dev", dev])?;
        parse_tx_dropped(&out)
            .ok_or_else(|| BenchError::Dut(format!("no TX dropped counter for {dev} in {}", self.name())))
    }

    /// The index and MAC address of a device in this namespace.
    pub fn link_info(&self, dev: &str) -> Result<LinkInfo> {
        let out = self.ip(&["-j", "link", "show", "dev", dev])?;
        parse_link_json(&out).ok_or_else(|| BenchError::Dut(format!("no ifindex/address for {dev} in {}", self.name())))
    }

    /// Switches a device's NAPI to a kernel thread (`threaded` in sysfs)
    /// and pins that thread to `cpu`. Without this the receive processing
    /// of a veth runs in softirq on whichever CPU sent to it, which puts
    /// the device under test on the generator's CPU and hides its cost.
    pub fn thread_napi(&self, dev: &str, cpu: usize, rt_priority: u8) -> Result<()> {
        // Off first: a NAPI context created while the device was already
        // threaded got its thread before we could see it appear.
        self.exec("sh", &["-c", &format!("echo 0 > /sys/class/net/{dev}/threaded")])?;
        let before = napi_threads();
        self.exec("sh", &["-c", &format!("echo 1 > /sys/class/net/{dev}/threaded")])?;
        let new: Vec<i32> = napi_threads().into_iter().filter(|p| !before.contains(p)).collect();
        if new.is_empty() {
            return Err(BenchError::Dut(format!(
                "no NAPI thread appeared for {dev} in {} (is GRO or XDP enabled on it?)",
                self.name()
            )));
        }
        for pid in new {
            pin(pid, cpu)?;
            // One above the generator and the DUT's threads: receive
            // processing preempts them, as an interrupt would, and a
            // generator sharing the CPU cannot overflow the ring it fills.
            set_fifo(pid, rt_priority.saturating_add(1).min(99), false)?;
        }
        Ok(())
    }
}

impl Netns {
    /// Whether a veth here can take frames redirected by XDP: it has a NAPI
    /// context when it has an XDP program or GRO on.
    pub fn has_rx_napi(&self, dev: &str) -> Result<bool> {
        let link = self.ip(&["-j", "link", "show", "dev", dev])?;
        if link.contains("\"xdp\"") {
            return Ok(true);
        }
        let features = self.exec("ethtool", &["-k", dev])?;
        Ok(features.lines().any(|l| l.trim() == "generic-receive-offload: on"))
    }
}

/// What the kernel says about a device.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LinkInfo {
    /// The device's index inside its namespace.
    pub ifindex: u32,
    /// Its MAC address.
    pub mac: [u8; 6],
}

fn parse_link_json(out: &str) -> Option<LinkInfo> {
    let v: serde_json::Value = serde_json::from_str(out).ok()?;
    let l = v.as_array()?.first()?;
    let ifindex = u32::try_from(l.get("ifindex")?.as_u64()?).ok()?;
    let mac = parse_mac(l.get("address")?.as_str()?)?;
    Some(LinkInfo { ifindex, mac })
}

/// Formats a MAC the way iproute2 does.
pub fn fmt_mac(mac: &[u8; 6]) -> String {
    kit::mac_str(*mac)
}

/// Creates a veth pair with one end in each namespace, both up.
pub fn veth_pair(a: &Netns, a_dev: &str, b: &Netns, b_dev: &str) -> Result<()> {
    Ok(kit::try_veth(&a.0, a_dev, &b.0, b_dev)?)
}

/// Pins a thread (or process) to one CPU.
pub fn pin(pid: i32, cpu: usize) -> Result<()> {
    let mut set = CpuSet::new();
    set.set(cpu).map_err(|e| BenchError::Config(format!("cpu {cpu}: {e}")))?;
    sched_setaffinity(Pid::from_raw(pid), &set).map_err(|e| BenchError::Dut(format!("pin pid {pid} to cpu {cpu}: {e}")))
}

/// Gives a thread (or with `all`, every thread of a process) the
/// real-time policy SCHED_FIFO at `priority` (`chrt`), so the data path
/// of the generator, sink and DUT is not time-shared with whatever else
/// runs on the machine. Priority 0 leaves the thread as it is.
pub fn set_fifo(pid: i32, priority: u8, all: bool) -> Result<()> {
    if priority == 0 {
        return Ok(());
    }
    let (p, id) = (priority.to_string(), pid.to_string());
    let mut args = vec!["-f"];
    if all {
        args.push("-a");
    }
    args.extend(["-p", p.as_str(), id.as_str()]);
    run_cmd("chrt", &args).map(|_| ())
}

/// Keeps one CPU out of its idle states while alive (its PM QoS resume
/// latency set to "n/a" in sysfs: the cpuidle governor then only polls),
/// and puts the old limit back when dropped.
///
/// Why: on a VM whose idle state halts the vCPU (haltpoll with no guest
/// polling, as on this rig's Firecracker hosts), a NAPI thread woken on an
/// idle CPU waits for the hypervisor to run the vCPU again; on the rig 97 %
/// of the generator's failed sends into the DUT's 256-frame veth ring came
/// while the DUT's CPU sat idle. Testers on real hardware do the same
/// (no deep C-states on the DUT's cores).
pub struct NoIdle {
    cpu: usize,
}

/// Per CPU: holders in this process, and the limit found by the first.
/// Runs in parallel (the tests) share the setting; the last one out puts
/// back what the first one found, not the "n/a" another run had written.
static NO_IDLE: std::sync::Mutex<Vec<(usize, usize, String)>> = std::sync::Mutex::new(Vec::new());

fn qos_path(cpu: usize) -> String {
    format!("/sys/devices/system/cpu/cpu{cpu}/power/pm_qos_resume_latency_us")
}

impl NoIdle {
    /// Holds `cpu` out of idle states; `None` when the kernel has no such
    /// control for it.
    pub fn hold(cpu: usize) -> Result<Option<Self>> {
        let path = qos_path(cpu);
        let mut held = NO_IDLE.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(h) = held.iter_mut().find(|h| h.0 == cpu) {
            h.1 += 1;
            return Ok(Some(NoIdle { cpu }));
        }
        let old = match std::fs::read_to_string(&path) {
            Ok(s) => s.trim().to_string(),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(BenchError::io(format!("read {path}"), e)),
        };
        std::fs::write(&path, "n/a").map_err(|e| BenchError::io(format!("write {path}"), e))?;
        held.push((cpu, 1, old));
        Ok(Some(NoIdle { cpu }))
    }
}

impl Drop for NoIdle {
    fn drop(&mut self) {
        let mut held = NO_IDLE.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(i) = held.iter().position(|h| h.0 == self.cpu) {
            held[i].1 -= 1;
            if held[i].1 == 0 {
                let (_, _, old) = held.swap_remove(i);
                // "n/a" reads back as such; no limit reads as 0 and is written so.
                let _ = std::fs::write(qos_path(self.cpu), old);
            }
        }
    }
}

#[cfg(test)]
mod no_idle_tests {
    use super::*;

    /// Overlapping holders of one CPU put back what was there before the
    /// first, whatever order they end in.
    #[test]
    fn overlapping_holders_restore_the_first_value() {
        if !nix::unistd::geteuid().is_root() {
            return;
        }
        let cpu = 0;
        let before = std::fs::read_to_string(qos_path(cpu)).map(|s| s.trim().to_string());
        let Ok(before) = before else { return };
        let a = NoIdle::hold(cpu).expect("hold").expect("sysfs control");
        assert_eq!(std::fs::read_to_string(qos_path(cpu)).expect("read").trim(), "n/a");
        let b = NoIdle::hold(cpu).expect("hold").expect("sysfs control");
        drop(a);
        assert_eq!(std::fs::read_to_string(qos_path(cpu)).expect("read").trim(), "n/a", "b still holds");
        drop(b);
        assert_eq!(std::fs::read_to_string(qos_path(cpu)).expect("read").trim(), before);
    }
}

/// Every other task moved off some CPUs for as long as this lives: the
/// DUT's CPU, so that nothing but the DUT (and per-CPU kernel threads)
/// runs there during a trial, as testers isolate the DUT's cores
/// (`isolcpus`, `cset shield`). Why it matters here: this VM's kernel runs
/// with `preempt=none`, so a SCHED_FIFO NAPI thread woken while another
/// task is in the kernel on its CPU waits until that task reaches a
/// preemption point. On the rig, the VM agent's threads (a guest-stats
/// poller, a DAMON region reader, its async workers) and kernel threads
/// (kdamond, kcompactd) held the DUT's CPU for about 1 ms every second,
/// and every DUT lost 150-250 frames each time at 0.3 Mpps; with them
/// moved, none at that rate.
///
/// Tasks whose affinity cannot change (per-CPU kernel threads) stay, and
/// so do this process and its children (the DUT). Tasks started during the
/// run are moved at the next trial ([`Isolation::refresh`]). Each moved
/// task gets its old affinity back when the last holder in this process
/// drops.
pub struct Isolation {
    moved: usize,
}

/// Holders in this process and the tasks moved, with their old masks.
struct Isolated {
    /// Holders in this process.
    holders: usize,
    /// The CPUs held free.
    cpus: Vec<usize>,
    /// Tasks moved, with their old masks.
    moved: Vec<(i32, nix::sched::CpuSet)>,
}

static ISOLATION: std::sync::Mutex<Isolated> =
    std::sync::Mutex::new(Isolated { holders: 0, cpus: Vec::new(), moved: Vec::new() });

/// Moves what may move off `held.cpus`; returns how many tasks moved.
fn move_off(held: &mut Isolated) -> usize {
    use nix::sched::{sched_getaffinity, sched_setaffinity};
    use nix::unistd::Pid;
    let me = std::process::id() as i32;
    let mut moved = 0;
    for (tid, pid, ppid) in all_tasks() {
        // Every thread of this process stays (not only its main thread:
        // a thread moved off the CPU passes the narrower affinity on to
        // the threads and processes it starts, and a second run in this
        // process then saw one CPU), and so do its children.
        if pid == me || ppid == me {
            continue;
        }
        let pid = Pid::from_raw(tid);
        let Ok(old) = sched_getaffinity(pid) else { continue };
        let mut new = old;
        for &c in &held.cpus {
            if old.is_set(c).unwrap_or(false) {
                let _ = new.unset(c);
            }
        }
        let others = (0..nix::sched::CpuSet::count()).any(|c| new.is_set(c).unwrap_or(false));
        if new == old || !others {
            continue;
        }
        // Per-CPU kernel threads refuse (EINVAL); tasks may exit (ESRCH).
        if sched_setaffinity(pid, &new).is_ok() {
            if !held.moved.iter().any(|(t, _)| *t == tid) {
                held.moved.push((tid, old));
            }
            moved += 1;
        }
    }
    moved
}

impl Isolation {
    /// Moves every task of the machine that may run on one of `cpus` and
    /// on some other CPU to its other CPUs; this process's own threads
    /// stay (the tester pins the ones that matter).
    pub fn hold(cpus: &[usize]) -> Result<Self> {
        let mut held = ISOLATION.lock().unwrap_or_else(|e| e.into_inner());
        held.holders += 1;
        for &c in cpus {
            if !held.cpus.contains(&c) {
                held.cpus.push(c);
            }
        }
        Ok(Isolation { moved: move_off(&mut held) })
    }

    /// Moves the tasks started since off the held CPUs too (none held:
    /// nothing to do); returns how many moved.
    pub fn refresh() -> usize {
        let mut held = ISOLATION.lock().unwrap_or_else(|e| e.into_inner());
        if held.holders == 0 { 0 } else { move_off(&mut held) }
    }

    /// Tasks this holder moved.
    pub fn moved(&self) -> usize {
        self.moved
    }
}

impl Drop for Isolation {
    fn drop(&mut self) {
        let mut held = ISOLATION.lock().unwrap_or_else(|e| e.into_inner());
        held.holders = held.holders.saturating_sub(1);
        if held.holders == 0 {
            held.cpus.clear();
            for (tid, old) in held.moved.drain(..) {
                let _ = nix::sched::sched_setaffinity(nix::unistd::Pid::from_raw(tid), &old);
            }
        }
    }
}

/// TX dropped of the one device in `ip -s -j link show` output.
fn parse_tx_dropped(json: &str) -> Option<u64> {
    let v: serde_json::Value = serde_json::from_str(json).ok()?;
    v.get(0)?.get("stats64")?.get("tx")?.get("dropped")?.as_u64()
}

#[cfg(test)]
mod tx_dropped_tests {
    #[test]
    fn reads_tx_dropped_from_ip_json() {
        let json = r#"[{"ifindex":4,"ifname":"tb-gen","stats64":{"rx":{"bytes":1,"packets":2,"errors":0,"dropped":5},"tx":{"bytes":3,"packets":4,"errors":0,"dropped":1234567890123}}}]"#;
        assert_eq!(super::parse_tx_dropped(json), Some(1_234_567_890_123));
        assert_eq!(super::parse_tx_dropped("[]"), None);
        assert_eq!(super::parse_tx_dropped("not json"), None);
    }
}

/// Every task (thread) id of the machine with its process's parent.
fn all_tasks() -> Vec<(i32, i32, i32)> {
    let mut out = Vec::new();
    let Ok(procs) = std::fs::read_dir("/proc") else { return out };
    for p in procs.flatten() {
        let Some(pid) = p.file_name().to_str().and_then(|n| n.parse::<i32>().ok()) else {
            continue;
        };
        let ppid = std::fs::read_to_string(p.path().join("stat"))
            .ok()
            .and_then(|st| st.rsplit_once(')').and_then(|(_, rest)| rest.split_whitespace().nth(1)?.parse().ok()))
            .unwrap_or(0);
        let Ok(tasks) = std::fs::read_dir(p.path().join("task")) else { continue };
        out.extend(
            tasks
                .flatten()
                .filter_map(|t| t.file_name().to_str().and_then(|n| n.parse::<i32>().ok()))
                .map(|t| (t, pid, ppid)),
        );
    }
    out
}

#[cfg(test)]
mod isolation_tests {
    use super::*;

    /// Isolation is process-wide: a test holding it while another counts
    /// what its own hold moved sees nothing moved. One at a time.
    static ONE: std::sync::Mutex<()> = std::sync::Mutex::new(());

    fn one() -> std::sync::MutexGuard<'static, ()> {
        ONE.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// A `sleep` that is not this process's child (the DUT's are left
    /// alone): its pid.
    fn orphan_sleep() -> nix::unistd::Pid {
        let out = std::process::Command::new("sh")
            .args(["-c", "sleep 30 >/dev/null 2>&1 & echo $!"])
            .output()
            .expect("spawn sleep");
        let pid: i32 = String::from_utf8_lossy(&out.stdout).trim().parse().expect("pid");
        nix::unistd::Pid::from_raw(pid)
    }

    /// A task that may run anywhere is moved off the isolated CPU and gets
    /// its affinity back when the last holder goes; one started later is
    /// moved by a refresh.
    #[test]
    fn a_movable_task_leaves_the_cpu_and_comes_back() {
        if !nix::unistd::geteuid().is_root() || cpu_count() < 2 {
            return;
        }
        let _one = one();
        use nix::sched::{CpuSet, sched_getaffinity, sched_setaffinity};
        use nix::sys::signal::{Signal, kill};
        let pid = orphan_sleep();
        let mut both = CpuSet::new();
        both.set(0).expect("cpu 0");
        both.set(1).expect("cpu 1");
        sched_setaffinity(pid, &both).expect("set");
        let a = Isolation::hold(&[1]).expect("isolate");
        assert!(a.moved() >= 1);
        let now = sched_getaffinity(pid).expect("get");
        assert!(!now.is_set(1).expect("bit"), "still allowed on the isolated cpu");
        assert!(now.is_set(0).expect("bit"));
        let b = Isolation::hold(&[1]).expect("isolate again");
        // Started during the run: moved by the next refresh.
        let late = orphan_sleep();
        sched_setaffinity(late, &both).expect("set");
        assert!(Isolation::refresh() >= 1);
        assert!(!sched_getaffinity(late).expect("get").is_set(1).expect("bit"));
        drop(a);
        assert!(!sched_getaffinity(pid).expect("get").is_set(1).expect("bit"), "b still holds");
        drop(b);
        assert_eq!(sched_getaffinity(pid).expect("get"), both, "the old affinity is back");
        assert_eq!(sched_getaffinity(late).expect("get"), both);
        assert_eq!(Isolation::refresh(), 0, "nothing held, nothing moved");
        // A task allowed only on the isolated CPU has nowhere to go: it stays.
        let mut only1 = CpuSet::new();
        only1.set(1).expect("cpu 1");
        sched_setaffinity(pid, &only1).expect("set");
        let c = Isolation::hold(&[1]).expect("isolate");
        assert_eq!(sched_getaffinity(pid).expect("get"), only1);
        drop(c);
        let _ = kill(pid, Signal::SIGKILL);
        let _ = kill(late, Signal::SIGKILL);
    }

    /// This process's threads stay where they may run, not only its main
    /// thread: a test thread moved off the DUT's CPU by a run beside it saw
    /// one CPU and refused `--dut-cpu 1`.
    #[test]
    fn this_process_keeps_every_thread() {
        if !nix::unistd::geteuid().is_root() || cpu_count() < 2 {
            return;
        }
        let _one = one();
        use nix::sched::sched_getaffinity;
        use nix::unistd::Pid;
        let (tx, rx) = std::sync::mpsc::channel();
        let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
        let t = std::thread::spawn(move || {
            tx.send(current_tid()).expect("tid");
            let _ = done_rx.recv();
        });
        let tid = Pid::from_raw(rx.recv().expect("tid"));
        let before = sched_getaffinity(tid).expect("get");
        let held = Isolation::hold(&[1]).expect("isolate");
        assert_eq!(sched_getaffinity(tid).expect("get"), before, "a thread of this process was moved");
        drop(held);
        done_tx.send(()).expect("done");
        t.join().expect("thread");
    }
}

/// The calling thread's id, for [`set_fifo`].
pub fn current_tid() -> i32 {
    nix::unistd::gettid().as_raw()
}

/// Pins the calling thread to one CPU.
pub fn pin_current_thread(cpu: usize) -> Result<()> {
    pin(0, cpu)
}

/// Number of CPUs this process may run on.
pub fn cpu_count() -> usize {
    std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1)
}

/// Pids of the kernel's NAPI threads (their comm starts with `napi/`).
fn napi_threads() -> Vec<i32> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(|e| e.ok())
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/comm")).map(|c| c.starts_with("napi/")).unwrap_or(false)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mac_round_trip() {
        let m = parse_mac("02:ab:00:10:ff:09");
        assert_eq!(m, Some([0x02, 0xab, 0x00, 0x10, 0xff, 0x09]));
        assert_eq!(fmt_mac(&[0x02, 0xab, 0, 0x10, 0xff, 9]), "02:ab:00:10:ff:09");
        assert_eq!(parse_mac("02:ab:00:10:ff"), None);
        assert_eq!(parse_mac("02:ab:00:10:ff:09:01"), None);
        assert_eq!(parse_mac("zz:ab:00:10:ff:09"), None);
    }

    #[test]
    fn link_json() {
        let j = r#"[{"ifindex":7,"ifname":"x","address":"02:00:00:00:00:01"}]"#;
        assert_eq!(parse_link_json(j), Some(LinkInfo { ifindex: 7, mac: [2, 0, 0, 0, 0, 1] }));
        assert_eq!(parse_link_json("[]"), None);
    }
}
