//! The veth rigs' tools (`scripts/lane_rig.sh`, `scripts/xsk_rig.sh`) and
//! the XDP lane's own cost, as `tern-bench` subcommands: [`lane`] (the lane
//! program per packet, BPF_PROG_TEST_RUN), [`generator`] (the one generator, `tern-bench gen`),
//! [`sink`] (the one sink), [`xdp_fwd`] (the one in-kernel reference XDP
//! forwarder, attached to a rig's router) and [`xsk_fwd`] (the least an
//! AF_XDP forwarder does). Each takes its options as words (`--key value`)
//! and prints `key=value` lines the scripts read.

pub mod generator;
pub mod lane;
pub mod sink;
pub mod xdp_fwd;
pub mod xsk_fwd;

use std::time::Duration;

/// A tool's command line: `--key value` words.
struct Args<'a>(&'a [String]);

impl Args<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        self.0.iter().position(|a| a == key).and_then(|i| self.0.get(i + 1)).map(String::as_str)
    }
    fn all(&self, key: &str) -> Vec<&str> {
        self.0.windows(2).filter(|w| w[0] == key).map(|w| w[1].as_str()).collect()
    }
    fn has(&self, key: &str) -> bool {
        self.0.iter().any(|a| a == key)
    }
    fn secs(&self, key: &str, default: f64) -> Result<Duration, String> {
        let v = self.get(key).map_or(Ok(default), |s| s.parse::<f64>().map_err(|e| format!("{key} {s}: {e}")))?;
        if !(0.0..=1e6).contains(&v) {
            return Err(format!("{key} {v}: need 0 to 1000000 seconds"));
        }
        Ok(Duration::from_secs_f64(v))
    }
}

fn parse_mac(s: &str) -> Result<[u8; 6], String> {
    crate::netns::parse_mac(s).ok_or_else(|| format!("MAC {s}: need six hex bytes separated by colons"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_are_read_and_bad_ones_refused() {
        let words: Vec<String> =
            ["--dev", "s0", "--local", "a", "--local", "b", "--seconds", "2.5", "--warmup", "-1", "--no-tune"]
                .map(String::from)
                .to_vec();
        let a = Args(&words);
        assert_eq!(a.get("--dev"), Some("s0"));
        assert_eq!(a.all("--local"), vec!["a", "b"]);
        assert!(a.has("--no-tune") && !a.has("--tune"));
        assert_eq!(a.secs("--seconds", 5.0), Ok(Duration::from_millis(2500)));
        assert_eq!(a.secs("--linger", 1.0), Ok(Duration::from_secs(1)));
        assert!(a.secs("--warmup", 2.0).is_err(), "negative seconds");
        assert_eq!(parse_mac("02:00:00:00:00:21"), Ok([2, 0, 0, 0, 0, 0x21]));
        assert!(parse_mac("02:00:00:00:00").is_err());
        assert!(parse_mac("zz:00:00:00:00:00").is_err());
    }
}
