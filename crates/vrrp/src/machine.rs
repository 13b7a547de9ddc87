//! One virtual router's state machine (RFC 5798 section 6), sans-IO.
//!
//! The caller feeds it events — [`Machine::startup`], [`Machine::shutdown`],
//! [`Machine::handle_advert`], tracking changes — and the passage of time
//! through [`Machine::poll`], which fires the timers that are due and
//! returns what to do, in order: send an advertisement, announce the
//! virtual addresses and take the virtual MAC ([`Action::BecameMaster`]),
//! give them back ([`Action::BecameBackup`], [`Action::Stopped`]).
//! [`Machine::next_deadline`] says when to call `poll` next.
//!
//! Beyond RFC 5798: a preemption delay (as keepalived's `preempt_delay`: a
//! backup that could preempt a lower-priority master waits that long after
//! first hearing it, counting its advertisements as a master's until then)
//! and tracking (each tracked object down lowers the priority by its
//! decrement, not below 1; an owner lowered so is no longer the owner).

use crate::packet::{Advert, DropReason, Family};
use std::net::IpAddr;
use std::time::{Duration, Instant};

/// RFC 5798 6.4's states.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum State {
    Initialize,
    Backup,
    Master,
}

impl State {
    pub fn name(self) -> &'static str {
        match self {
            State::Initialize => "initialize",
            State::Backup => "backup",
            State::Master => "master",
        }
    }
    /// The value /metrics shows (0 initialize, 1 backup, 2 master).
    pub fn code(self) -> u8 {
        match self {
            State::Initialize => 0,
            State::Backup => 1,
            State::Master => 2,
        }
    }
}

impl std::fmt::Display for State {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// What the caller does, in the order given.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Action {
    /// Send this VRRP message (checksummed) from the primary address to
    /// the group, TTL/hop limit 255, from the virtual MAC.
    SendAdvert(Vec<u8>),
    /// Now master: take the virtual MAC, make the virtual addresses the
    /// router's own (answered with the virtual MAC), and announce them
    /// (gratuitous ARP / unsolicited NA for each).
    BecameMaster,
    /// Now backup (from master or initialize): give the virtual MAC and
    /// addresses back.
    BecameBackup,
    /// Shut down (back in Initialize): give them back.
    Stopped,
}

/// A virtual router's configuration.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Config {
    pub vrid: u8,
    /// 1..=255; 255 only for the address owner.
    pub priority: u8,
    /// Advertisement_Interval, centiseconds (1..=4095).
    pub interval_cs: u16,
    /// The virtual addresses, one family; for IPv6 the first is the
    /// link-local one.
    pub addrs: Vec<IpAddr>,
    /// This router's primary address on the interface: the source of its
    /// advertisements and the tie-breaker (for IPv6 its link-local one).
    pub primary: IpAddr,
    pub preempt: bool,
    pub preempt_delay: Duration,
    pub accept_mode: bool,
}

/// Why a configuration is refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigError(pub String);

impl std::fmt::Display for ConfigError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ConfigError {}

impl Config {
    pub fn family(&self) -> Family {
        Family::of(&self.primary)
    }

    pub fn validate(&self) -> Result<(), ConfigError> {
        let e = |s: &str| Err(ConfigError(s.into()));
        if self.vrid == 0 {
            return e("vrid must be 1..=255");
        }
        if self.priority == 0 {
            return e("priority must be 1..=255 (0 is what a master sends when it stops)");
        }
        if self.interval_cs == 0 || self.interval_cs > crate::packet::MAX_INTERVAL_CS {
            return e("interval must be 1..=4095 centiseconds");
        }
        if self.addrs.is_empty() || self.addrs.len() > 255 {
            return e("1 to 255 addresses");
        }
        let fam = self.family();
        if self.addrs.iter().any(|a| Family::of(a) != fam) {
            return e("addresses and primary address of one family");
        }
        if let Some(IpAddr::V6(a)) = self.addrs.first()
            && !a.is_unicast_link_local()
        {
            return e("an IPv6 group's first address must be link-local (RFC 5798 5.2.9)");
        }
        Ok(())
    }
}

/// A virtual router's counters.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    pub adverts_rx: u64,
    pub adverts_tx: u64,
    /// Transitions between states (Initialize to Backup counts).
    pub transitions: u64,
    pub became_master: u64,
    /// Priority-0 advertisements received.
    pub priority_zero_rx: u64,
    /// Advertisements whose addresses differed from ours, from the owner
    /// (kept; RFC 5798 7.1 asks to log it).
    pub owner_mismatch: u64,
    /// Drops by [`DropReason::index`].
    pub drops: [u64; DropReason::ALL.len()],
}

/// One virtual router.
#[derive(Debug)]
pub struct Machine {
    cfg: Config,
    state: State,
    /// Priority lowered by tracking.
    penalty: u16,
    master_adver_interval: Duration,
    adver_timer: Option<Instant>,
    master_down_timer: Option<Instant>,
    /// When a lower-priority master was first heard, for the preemption
    /// delay.
    lower_master_since: Option<Instant>,
    /// The current master's address (ours while master), for `show`.
    master: Option<IpAddr>,
    pending: Vec<Action>,
    stats: Stats,
}

/// A centisecond count as a duration.
pub fn cs(n: u16) -> Duration {
    Duration::from_millis(u64::from(n) * 10)
}

impl Machine {
    pub fn new(cfg: Config) -> Result<Machine, ConfigError> {
        cfg.validate()?;
        let mai = cs(cfg.interval_cs);
        Ok(Machine {
            cfg,
            state: State::Initialize,
            penalty: 0,
            master_adver_interval: mai,
            adver_timer: None,
            master_down_timer: None,
            lower_master_since: None,
            master: None,
            pending: Vec::new(),
            stats: Stats::default(),
        })
    }

    pub fn config(&self) -> &Config {
        &self.cfg
    }
    pub fn state(&self) -> State {
        self.state
    }
    pub fn stats(&self) -> &Stats {
        &self.stats
    }
    /// The master's address as last heard (ours while master).
    pub fn master(&self) -> Option<IpAddr> {
        self.master
    }
    /// Master_Adver_Interval: the master's interval as learnt from its
    /// advertisements (ours until one is heard).
    pub fn master_adver_interval(&self) -> Duration {
        self.master_adver_interval
    }

    /// The priority in effect: the configured one less what tracking
    /// takes, never below 1.
    pub fn priority(&self) -> u8 {
        let p = u16::from(self.cfg.priority).saturating_sub(self.penalty);
        p.max(1) as u8
    }

    /// Whether this router owns the addresses (priority 255 in effect).
    pub fn is_owner(&self) -> bool {
        self.priority() == 255
    }

    /// Whether, now, packets to the virtual addresses are the router's own
    /// (RFC 5798 6.4.3: the master accepts them if it is the owner or in
    /// accept mode; it always answers ARP/ND for them).
    pub fn accepts_addresses(&self) -> bool {
        self.state == State::Master && (self.is_owner() || self.cfg.accept_mode)
    }

    /// Skew_Time (RFC 5798 6.1): ((256 - Priority) * Master_Adver_Interval) / 256.
    pub fn skew_time(&self) -> Duration {
        self.master_adver_interval * (256 - u32::from(self.priority())) / 256
    }

    /// Master_Down_Interval: 3 * Master_Adver_Interval + Skew_Time.
    pub fn master_down_interval(&self) -> Duration {
        self.master_adver_interval * 3 + self.skew_time()
    }

    /// When [`Machine::poll`] has something to do next (None: nothing
    /// until an event).
    pub fn next_deadline(&self) -> Option<Instant> {
        if !self.pending.is_empty() {
            return Some(Instant::now());
        }
        match (self.adver_timer, self.master_down_timer) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Lowers the priority by `penalty` (the sum of the decrements of the
    /// tracked objects that are down); 0 restores it. The next
    /// advertisement carries it; a backup's Skew_Time follows from the
    /// next advertisement it hears.
    pub fn set_penalty(&mut self, penalty: u16) {
        self.penalty = penalty;
    }

    /// Tracking with one decrement: `down` lowers the priority by
    /// `decrement`, `!down` restores it.
    pub fn set_tracked_down(&mut self, down: bool, decrement: u8) {
        self.set_penalty(if down { u16::from(decrement) } else { 0 });
    }

    fn advert(&mut self, priority: u8) {
        let a =
            Advert { vrid: self.cfg.vrid, priority, interval_cs: self.cfg.interval_cs, addrs: self.cfg.addrs.clone() };
        // The configuration was validated: encoding cannot fail.
        if let Ok(b) = a.encode(self.cfg.primary, self.cfg.family().group()) {
            self.stats.adverts_tx += 1;
            self.pending.push(Action::SendAdvert(b));
        }
    }

    fn enter(&mut self, to: State) {
        if self.state != to {
            self.stats.transitions += 1;
        }
        self.state = to;
        match to {
            State::Master => {
                self.stats.became_master += 1;
                self.master = Some(self.cfg.primary);
                self.lower_master_since = None;
                self.pending.push(Action::BecameMaster);
            }
            State::Backup => self.pending.push(Action::BecameBackup),
            State::Initialize => {
                self.master = None;
                self.pending.push(Action::Stopped);
            }
        }
    }

    fn become_master(&mut self, now: Instant) {
        self.master_down_timer = None;
        self.advert(self.priority());
        self.adver_timer = Some(now + cs(self.cfg.interval_cs));
        self.enter(State::Master);
    }

    /// RFC 5798 6.4.1: the Startup event.
    pub fn startup(&mut self, now: Instant) {
        if self.state != State::Initialize {
            return;
        }
        if self.is_owner() {
            self.become_master(now);
        } else {
            self.master_adver_interval = cs(self.cfg.interval_cs);
            self.master_down_timer = Some(now + self.master_down_interval());
            self.adver_timer = None;
            self.enter(State::Backup);
        }
    }

    /// RFC 5798 6.4.2/6.4.3: the Shutdown event. A master sends an
    /// advertisement with priority 0 so that a backup takes over at once.
    pub fn shutdown(&mut self, _now: Instant) {
        match self.state {
            State::Initialize => return,
            State::Master => self.advert(0),
            State::Backup => {}
        }
        self.adver_timer = None;
        self.master_down_timer = None;
        self.lower_master_since = None;
        self.enter(State::Initialize);
    }

    /// Fires the timers due at `now` and returns what to do.
    pub fn poll(&mut self, now: Instant) -> Vec<Action> {
        match self.state {
            State::Backup => {
                if self.master_down_timer.is_some_and(|t| t <= now) {
                    self.master = None;
                    self.become_master(now);
                }
            }
            State::Master => {
                if self.adver_timer.is_some_and(|t| t <= now) {
                    self.advert(self.priority());
                    self.adver_timer = Some(now + cs(self.cfg.interval_cs));
                }
            }
            State::Initialize => {}
        }
        std::mem::take(&mut self.pending)
    }

    fn drop(&mut self, r: DropReason) -> Result<(), DropReason> {
        self.stats.drops[r.index()] += 1;
        Err(r)
    }

    /// A received advertisement: `msg` is the VRRP message sent from `src`
    /// to `dst` with TTL/hop limit `ttl`. Validates it (RFC 5798 7.1) and
    /// applies it (6.4.2, 6.4.3); what it leads to comes from the next
    /// [`Machine::poll`]. An advertisement for another VRID is refused as
    /// [`DropReason::WrongVrid`] (and counted here).
    pub fn handle_advert(
        &mut self,
        now: Instant,
        src: IpAddr,
        dst: IpAddr,
        ttl: u8,
        msg: &[u8],
    ) -> Result<(), DropReason> {
        let a = match Advert::decode(msg, src, dst, ttl) {
            Ok(a) => a,
            Err(r) => return self.drop(r),
        };
        if Family::of(&src) != self.cfg.family() {
            return self.drop(DropReason::WrongFamily);
        }
        if a.vrid != self.cfg.vrid {
            return self.drop(DropReason::WrongVrid);
        }
        if src == self.cfg.primary {
            return self.drop(DropReason::OwnAdvert);
        }
        if !same_set(&a.addrs, &self.cfg.addrs) {
            if a.priority != 255 {
                return self.drop(DropReason::AddressMismatch);
            }
            self.stats.owner_mismatch += 1;
        }
        if self.state == State::Initialize {
            return self.drop(DropReason::NotRunning);
        }
        self.stats.adverts_rx += 1;
        if a.priority == 0 {
            self.stats.priority_zero_rx += 1;
        }
        self.apply(now, src, &a);
        Ok(())
    }

    fn apply(&mut self, now: Instant, src: IpAddr, a: &Advert) {
        let ours = self.priority();
        match self.state {
            State::Initialize => {}
            State::Backup => {
                if a.priority == 0 {
                    // The master stopped: take over after Skew_Time.
                    self.master_down_timer = Some(now + self.skew_time());
                    return;
                }
                let lower = a.priority < ours;
                if lower && self.cfg.preempt {
                    let since = *self.lower_master_since.get_or_insert(now);
                    if now >= since + self.cfg.preempt_delay {
                        // Preempt: let the master-down timer run out.
                        return;
                    }
                } else {
                    self.lower_master_since = None;
                }
                self.master = Some(src);
                self.master_adver_interval = cs(a.interval_cs);
                self.master_down_timer = Some(now + self.master_down_interval());
            }
            State::Master => {
                if a.priority == 0 {
                    self.advert(ours);
                    self.adver_timer = Some(now + cs(self.cfg.interval_cs));
                    return;
                }
                let wins = a.priority > ours || (a.priority == ours && addr_greater(src, self.cfg.primary));
                if wins {
                    self.adver_timer = None;
                    self.master = Some(src);
                    self.master_adver_interval = cs(a.interval_cs);
                    self.master_down_timer = Some(now + self.master_down_interval());
                    self.enter(State::Backup);
                }
            }
        }
    }
}

/// Whether `a` and `b` hold the same addresses, in any order.
fn same_set(a: &[IpAddr], b: &[IpAddr]) -> bool {
    a.len() == b.len() && a.iter().all(|x| b.contains(x)) && b.iter().all(|x| a.contains(x))
}

/// RFC 5798 6.4.3: "the primary IPvX address of the sender is greater than
/// the local primary IPvX address" (as unsigned integers in network byte
/// order).
fn addr_greater(a: IpAddr, b: IpAddr) -> bool {
    match (a, b) {
        (IpAddr::V4(a), IpAddr::V4(b)) => u32::from(a) > u32::from(b),
        (IpAddr::V6(a), IpAddr::V6(b)) => u128::from(a) > u128::from(b),
        _ => false,
    }
}
