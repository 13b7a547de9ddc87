//! The host settings tern changes, kept where a crash cannot lose them.
//!
//! Taking a device over changes it: sysctls (`quiet_kernel`, Linux mode's
//! `host::take_over`, the TAP path's `rp_filter`, `ipv6/conf/all/forwarding`),
//! offloads (GRO, LRO, TSO, GSO off), the link (set up), and with AF_XDP
//! busy polling the device's NAPI settings in sysfs. The guards that
//! change them restore them when tern stops cleanly; a `kill -9` runs no
//! guard, and the next start would read the changed values as the
//! originals. So before the first change [`SavedHost::record`] writes what
//! every device had to a state file (one per tern process, named after the
//! network namespace: `DIR/netns-INODE-pid-PID.json`, written to a
//! temporary file and renamed into place), and:
//!
//! * a clean stop puts back every recorded value that differs, then
//!   removes the file ([`SavedHost::restore`]);
//! * a start first restores the files left in its namespace by a tern that
//!   is gone ([`restore_leftovers`]), so the values it then records are the
//!   real originals, not the ones the crashed process set;
//! * `tern cleanup` does the same by hand (the daemon gone for good).
//!
//! Devices are matched by name and ifindex: a device recreated since (a
//! new ifindex) starts from its own defaults and is left alone. XDP
//! programs are attached through bpf_link and TAP devices are not
//! persistent, so the kernel removes both when the process dies; a tern
//! XDP program still attached through plain netlink (older kernels) is
//! detached by the restore. tern pins nothing in bpffs.

use serde::{Deserialize, Serialize};
use std::io::Write;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use tern_io::netdev::{self, Offload};

/// Where state files live unless `TERN_STATE_DIR` says otherwise
/// (`RuntimeDirectory=tern` in the systemd unit).
pub const DEFAULT_DIR: &str = "/run/tern/host";

/// The state directory: `TERN_STATE_DIR`, else [`DEFAULT_DIR`].
pub fn state_dir() -> PathBuf {
    std::env::var_os("TERN_STATE_DIR").map_or_else(|| PathBuf::from(DEFAULT_DIR), PathBuf::from)
}

/// Per-device sysctls any mode may change (relative to /proc/sys/net;
/// `{}` is the device).
const DEV_SYSCTLS: [&str; 8] = [
    "ipv4/conf/{}/forwarding",
    "ipv4/conf/{}/arp_ignore",
    "ipv4/conf/{}/arp_accept",
    "ipv4/conf/{}/rp_filter",
    "ipv6/conf/{}/disable_ipv6",
    "ipv6/conf/{}/accept_ra",
    "ipv6/conf/{}/accept_untracked_na",
    "ipv6/conf/{}/forwarding",
];

/// Namespace-wide sysctls (Linux mode turns IPv6 forwarding off).
const NS_SYSCTLS: [&str; 1] = ["ipv6/conf/all/forwarding"];

/// NAPI settings AF_XDP busy polling changes (/sys/class/net/DEV/KEY).
const NAPI_KEYS: [&str; 3] = ["threaded", "napi_defer_hard_irqs", "gro_flush_timeout"];

const OFFLOADS: [(&str, Offload); 4] =
    [("gro", Offload::Gro), ("lro", Offload::Lro), ("tso", Offload::Tso), ("gso", Offload::Gso)];

/// What one device had before tern changed it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeviceOriginals {
    pub name: String,
    pub ifindex: u32,
    /// Administratively up.
    pub up: bool,
    /// (path below /proc/sys/net, value).
    pub sysctls: Vec<(String, String)>,
    /// (offload, on).
    pub offloads: Vec<(String, bool)>,
    /// (key below /sys/class/net/DEV, value).
    pub sysfs: Vec<(String, String)>,
}

/// The contents of a state file.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StateFile {
    pub version: u32,
    /// The tern process that wrote it, and its start time (clock ticks
    /// after boot, field 22 of /proc/PID/stat: a reused pid differs).
    pub pid: u32,
    pub start_time: u64,
    /// Inode of the network namespace the devices are in.
    pub netns: u64,
    pub namespace: Vec<(String, String)>,
    pub devices: Vec<DeviceOriginals>,
}

/// Inode of the calling thread's network namespace.
pub fn netns_inode() -> std::io::Result<u64> {
    std::fs::metadata("/proc/thread-self/ns/net").map(|m| m.ino())
}

fn start_time(pid: u32) -> Option<u64> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // After the command name in parentheses (which may hold spaces):
    // state is field 3, start time field 22.
    let rest = &s[s.rfind(')')? + 1..];
    rest.split_whitespace().nth(19)?.parse().ok()
}

impl StateFile {
    /// True while the process that wrote the file still runs.
    pub fn owner_alive(&self) -> bool {
        start_time(self.pid).is_some_and(|t| t == self.start_time)
    }
}

fn sysfs_ours(dev: &str, ifindex: u32) -> bool {
    // sysfs shows the namespace it was mounted in, which a thread that
    // entered another namespace with setns(2) does not change.
    std::fs::read_to_string(format!("/sys/class/net/{dev}/ifindex")).is_ok_and(|s| s.trim() == ifindex.to_string())
        && netdev::mac(dev).is_ok_and(|m| {
            let want = m.iter().map(|b| format!("{b:02x}")).collect::<Vec<_>>().join(":");
            std::fs::read_to_string(format!("/sys/class/net/{dev}/address")).is_ok_and(|s| s.trim() == want)
        })
}

/// Reads what `dev` has now (everything tern may change there).
pub fn snapshot(dev: &str) -> Result<DeviceOriginals, String> {
    let ifindex = netdev::ifindex(dev).map_err(|e| e.to_string())?;
    let up = netdev::flags(dev).map_err(|e| e.to_string())?.up;
    let mut d = DeviceOriginals { name: dev.to_string(), ifindex, up, ..Default::default() };
    for k in DEV_SYSCTLS {
        let rel = k.replace("{}", dev);
        if let Ok(v) = netdev::sysctl_read(&rel) {
            d.sysctls.push((rel, v));
        }
    }
    for (n, o) in OFFLOADS {
        if let Ok(v) = netdev::offload(dev, o) {
            d.offloads.push((n.to_string(), v));
        }
    }
    if sysfs_ours(dev, ifindex) {
        for k in NAPI_KEYS {
            if let Ok(v) = std::fs::read_to_string(format!("/sys/class/net/{dev}/{k}")) {
                d.sysfs.push((k.to_string(), v.trim().to_string()));
            }
        }
    }
    Ok(d)
}

/// Puts back every value of `d` that differs now. A device gone or
/// recreated (another ifindex) is skipped. Returns the changes made and
/// the failures.
pub fn restore_device(d: &DeviceOriginals) -> (Vec<String>, Vec<String>) {
    let (mut done, mut failed) = (Vec::new(), Vec::new());
    match netdev::ifindex(&d.name) {
        Ok(i) if i == d.ifindex => {}
        Ok(i) => {
            log::info!(
                "device {}: ifindex {i}, not the {} tern changed: recreated since, nothing to restore",
                d.name,
                d.ifindex
            );
            return (done, failed);
        }
        Err(_) => {
            log::info!("device {}: gone, nothing to restore", d.name);
            return (done, failed);
        }
    }
    let dev = d.name.as_str();
    // XDP programs of a tern that died: gone with its bpf_link; a netlink
    // attachment (older kernels) stays and is removed here.
    if let Ok(ids) = tern_xdp::remove_stale(dev, false)
        && !ids.is_empty()
    {
        done.push(format!("{dev}: detached tern XDP program(s) {ids:?}"));
    }
    for (rel, v) in &d.sysctls {
        if netdev::sysctl_read(rel).is_ok_and(|now| now != *v) {
            match netdev::sysctl_write(rel, v) {
                Ok(()) => done.push(format!("{rel} = {v}")),
                Err(e) => failed.push(e.to_string()),
            }
        }
    }
    for (n, on) in &d.offloads {
        let Some((_, o)) = OFFLOADS.iter().find(|(k, _)| k == n) else { continue };
        if netdev::offload(dev, *o).is_ok_and(|now| now != *on) {
            match netdev::set_offload(dev, *o, *on) {
                Ok(()) => done.push(format!("{dev}: {n} {}", if *on { "on" } else { "off" })),
                Err(e) => failed.push(e.to_string()),
            }
        }
    }
    if !d.sysfs.is_empty() && sysfs_ours(dev, d.ifindex) {
        for (k, v) in &d.sysfs {
            let path = format!("/sys/class/net/{dev}/{k}");
            if std::fs::read_to_string(&path).is_ok_and(|now| now.trim() != v) {
                match std::fs::write(&path, v) {
                    Ok(()) => done.push(format!("{dev}: {k} = {v}")),
                    Err(e) => failed.push(format!("{path}: {e}")),
                }
            }
        }
    }
    if netdev::flags(dev).is_ok_and(|f| f.up != d.up) {
        match netdev::set_up(dev, d.up) {
            Ok(()) => done.push(format!("{dev}: link {}", if d.up { "up" } else { "down" })),
            Err(e) => failed.push(e.to_string()),
        }
    }
    (done, failed)
}

fn restore_file(s: &StateFile) -> (Vec<String>, Vec<String>) {
    let (mut done, mut failed) = (Vec::new(), Vec::new());
    // Devices in reverse order of recording, the namespace's settings last
    // (as the guards undo them).
    for d in s.devices.iter().rev() {
        let (a, b) = restore_device(d);
        done.extend(a);
        failed.extend(b);
    }
    for (rel, v) in &s.namespace {
        if netdev::sysctl_read(rel).is_ok_and(|now| now != *v) {
            match netdev::sysctl_write(rel, v) {
                Ok(()) => done.push(format!("{rel} = {v}")),
                Err(e) => failed.push(e.to_string()),
            }
        }
    }
    (done, failed)
}

/// Writes `bytes` to `path` atomically (a temporary file beside it,
/// synced, renamed over it).
fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let tmp = path.with_extension("tmp");
    let mut f = std::fs::File::create(&tmp)?;
    f.write_all(bytes)?;
    f.sync_all()?;
    drop(f);
    std::fs::rename(&tmp, path)?;
    if let Some(dir) = path.parent()
        && let Ok(d) = std::fs::File::open(dir)
    {
        let _ = d.sync_all();
    }
    Ok(())
}

/// What a restore of left-over state files found and did.
#[derive(Debug, Default)]
pub struct Cleanup {
    /// Files restored and removed.
    pub files: Vec<PathBuf>,
    /// Settings put back.
    pub restored: Vec<String>,
    /// Settings that could not be put back (the file is kept).
    pub failed: Vec<String>,
    /// Files of tern processes still running (left alone): (file, pid).
    pub running: Vec<(PathBuf, u32)>,
}

/// The state files of namespace `netns` in `dir`.
fn files_of(dir: &Path, netns: u64) -> Vec<PathBuf> {
    let prefix = format!("netns-{netns}-pid-");
    // (`netns-1-pid-` must not take `netns-12-pid-`: the prefix ends at
    // "-pid-".)
    let Ok(rd) = std::fs::read_dir(dir) else { return Vec::new() };
    let mut v: Vec<PathBuf> = rd
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| {
            p.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.starts_with(&prefix) && n.ends_with(".json"))
        })
        .collect();
    v.sort();
    v
}

/// Restores what tern processes that are gone left in the calling
/// thread's network namespace (the files in `dir`), and removes their
/// files. Files of running tern processes are left alone.
pub fn restore_leftovers(dir: &Path) -> Result<Cleanup, String> {
    let netns = netns_inode().map_err(|e| format!("network namespace: {e}"))?;
    let mut c = Cleanup::default();
    for path in files_of(dir, netns) {
        let text = match std::fs::read(&path) {
            Ok(t) => t,
            Err(e) => {
                c.failed.push(format!("{}: {e}", path.display()));
                continue;
            }
        };
        let s: StateFile = match serde_json::from_slice(&text) {
            Ok(s) => s,
            Err(e) => {
                c.failed.push(format!("{}: not a tern state file ({e}); remove it by hand", path.display()));
                continue;
            }
        };
        if s.pid == std::process::id() {
            continue;
        }
        if s.owner_alive() {
            c.running.push((path, s.pid));
            continue;
        }
        let (done, failed) = restore_file(&s);
        for d in &done {
            log::info!("host state of tern pid {} (gone): restored {d}", s.pid);
        }
        c.restored.extend(done);
        if failed.is_empty() {
            if let Err(e) = std::fs::remove_file(&path) {
                c.failed.push(format!("{}: {e}", path.display()));
            }
            c.files.push(path);
        } else {
            c.failed.extend(failed);
        }
    }
    Ok(c)
}

/// The originals of the devices this process changes, in its state file.
/// Dropping it puts them back (after the guards restored theirs: offloads
/// and the link would stay otherwise) and removes the file.
#[derive(Debug)]
pub struct SavedHost {
    path: PathBuf,
    state: StateFile,
}

/// Routers started by this process (a state file each).
static OPENED: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);

impl SavedHost {
    /// A record for this process in `dir` (created), after restoring what
    /// a crashed tern left in this namespace. Nothing is written until a
    /// device is recorded.
    pub fn open(dir: &Path) -> Result<SavedHost, String> {
        let netns = netns_inode().map_err(|e| format!("network namespace: {e}"))?;
        let c = restore_leftovers(dir)?;
        if !c.files.is_empty() {
            log::warn!(
                "restored the host settings a tern that did not stop cleanly left ({} setting(s) from {})",
                c.restored.len(),
                c.files.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", ")
            );
        }
        for f in &c.failed {
            log::warn!("restoring a crashed tern's host settings: {f}");
        }
        for (p, pid) in &c.running {
            log::info!("{}: tern pid {pid} still runs in this namespace; its devices are its own", p.display());
        }
        let pid = std::process::id();
        let n = OPENED.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let path = dir.join(format!("netns-{netns}-pid-{pid}-{n}.json"));
        let state =
            StateFile { version: 1, pid, start_time: start_time(pid).unwrap_or(0), netns, ..Default::default() };
        Ok(SavedHost { path, state })
    }

    /// The state file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Records `dev`'s current settings (once per device) and the
    /// namespace's, and writes the file, before tern changes anything
    /// there.
    pub fn record(&mut self, dev: &str) -> Result<(), String> {
        let d = snapshot(dev)?;
        match self.state.devices.iter_mut().find(|x| x.name == dev) {
            Some(x) if x.ifindex == d.ifindex => return Ok(()),
            // Re-created under the same name: the old device is gone, the
            // new one's settings are the originals now.
            Some(x) => *x = d,
            None => self.state.devices.push(d),
        }
        if self.state.namespace.is_empty() {
            for rel in NS_SYSCTLS {
                if let Ok(v) = netdev::sysctl_read(rel) {
                    self.state.namespace.push((rel.to_string(), v));
                }
            }
        }
        self.write()
    }

    fn write(&mut self) -> Result<(), String> {
        let bytes = serde_json::to_vec_pretty(&self.state).map_err(|e| e.to_string())?;
        let r =
            self.path.parent().map_or(Ok(()), std::fs::create_dir_all).and_then(|()| write_atomic(&self.path, &bytes));
        match r {
            Ok(()) => Ok(()),
            Err(e) => Err(format!(
                "cannot save the devices' settings to {} ({e}): a crash could not be undone; set TERN_STATE_DIR to a writable directory",
                self.path.display()
            )),
        }
    }

    /// Puts back what differs from the recorded originals and removes the
    /// file. Failures are logged; the file then stays for `tern cleanup`.
    pub fn restore(self) {
        drop(self);
    }
}

impl Drop for SavedHost {
    fn drop(&mut self) {
        if self.state.devices.is_empty() {
            return;
        }
        let (done, failed) = restore_file(&self.state);
        for d in &done {
            log::info!("restored {d}");
        }
        for f in &failed {
            log::warn!("restoring host settings: {f} (kept in {} for `tern cleanup`)", self.path.display());
        }
        if failed.is_empty() {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_state_file_round_trips_and_names_its_namespace() {
        let dir = std::env::temp_dir().join(format!("tern-saved-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let mut s = SavedHost::open(&dir).expect("open");
        assert!(!s.path().exists(), "nothing written before a device is recorded");
        s.record("lo").expect("record lo");
        let text = std::fs::read(s.path()).expect("written");
        let f: StateFile = serde_json::from_slice(&text).expect("parses");
        assert_eq!(f.pid, std::process::id());
        assert!(f.owner_alive());
        assert_eq!(f.netns, netns_inode().expect("netns"));
        assert_eq!(f.devices[0].name, "lo");
        assert_eq!(f.devices[0].ifindex, 1);
        assert!(f.devices[0].sysctls.iter().any(|(k, _)| k == "ipv4/conf/lo/forwarding"));
        // Its own file is not a left-over.
        let c = restore_leftovers(&dir).expect("scan");
        assert!(c.files.is_empty() && c.running.is_empty(), "{c:?}");
        s.restore();
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_dead_owners_file_is_restored_and_removed_a_live_ones_kept() {
        let dir = std::env::temp_dir().join(format!("tern-saved-dead-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("dir");
        let netns = netns_inode().expect("netns");
        // A device that does not exist: nothing to write, the file goes.
        let gone = StateFile {
            version: 1,
            pid: 1,
            start_time: u64::MAX,
            netns,
            namespace: Vec::new(),
            devices: vec![DeviceOriginals { name: "tern-gone0".into(), ifindex: 999_999, ..Default::default() }],
        };
        let dead = dir.join(format!("netns-{netns}-pid-1.json"));
        std::fs::write(&dead, serde_json::to_vec(&gone).expect("json")).expect("write");
        // pid 1 with its real start time: alive.
        let live = StateFile { start_time: start_time(1).expect("pid 1"), pid: 1, ..gone.clone() };
        let alive = dir.join(format!("netns-{netns}-pid-1x.json"));
        std::fs::write(&alive, serde_json::to_vec(&live).expect("json")).expect("write");
        // Another namespace's file is not ours to touch.
        let other = dir.join(format!("netns-{}-pid-1.json", netns + 1));
        std::fs::write(&other, serde_json::to_vec(&gone).expect("json")).expect("write");
        // Garbage is reported, not a panic.
        let bad = dir.join(format!("netns-{netns}-pid-2.json"));
        std::fs::write(&bad, b"{not json").expect("write");

        let c = restore_leftovers(&dir).expect("scan");
        assert_eq!(c.files, vec![dead.clone()]);
        assert!(!dead.exists());
        assert_eq!(c.running, vec![(alive.clone(), 1)]);
        assert!(alive.exists() && other.exists() && bad.exists());
        assert!(c.failed.iter().any(|f| f.contains("not a tern state file")), "{c:?}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
