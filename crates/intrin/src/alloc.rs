//! The global allocator of tern's binaries, `tern` and `tern-bench`: one
//! definition ([`global_allocator!`](crate::global_allocator)), so that the
//! engine benchmark measures the router's heap, not glibc's.
//!
//! mimalloc 3 (`mimalloc` = 0.1.52, pinned in `Cargo.toml`): size classes
//! without a per-allocation header (a million idle tunnels hold less than
//! with glibc), and its heap on transparent huge pages. It reserves its
//! memory in arenas of 1 GiB, committed at once on Linux and advised
//! `MADV_HUGEPAGE` (its `allow_thp` option, on by default), so with THP in
//! `madvise` or `always` mode the kernel backs them with 2 MiB pages as
//! they are first touched. A million SAs, their key schedules and the
//! client map's entries are most of the 0.7 GB RSS of `tern-bench engine
//! --extra-sas 1000000`, small objects (0.57 GB of it on huge pages): on
//! 4 KiB pages, one packet per SA through a sample of them takes a TLB miss (a page walk)
//! on each, on huge pages one TLB entry covers 512 times as much.
//! `MIMALLOC_ALLOW_THP=0` in the environment switches this off for the
//! process (mimalloc then also sets `PR_SET_THP_DISABLE`); docs/CONFIG.md.
//!
//! Nothing here is `unsafe`: mimalloc's own crate holds the FFI.

/// The global allocator type; [`global_allocator!`](crate::global_allocator)
/// declares it.
pub use mimalloc::MiMalloc as Allocator;

/// Declares tern's global allocator ([`Allocator`]) at the root of a
/// binary crate: `tern_intrin::global_allocator!();`.
#[macro_export]
macro_rules! global_allocator {
    () => {
        /// tern's global allocator (see `tern_intrin::alloc`).
        #[global_allocator]
        static GLOBAL: $crate::alloc::Allocator = $crate::alloc::Allocator;
    };
}

/// Bytes of this process's anonymous memory on transparent huge pages
/// (`AnonHugePages` of `/proc/self/smaps_rollup`), or None where the file
/// cannot be read or lacks the line.
pub fn huge_page_bytes() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/self/smaps_rollup").ok()?;
    smaps_field_bytes(&s, "AnonHugePages:")
}

/// The kernel's transparent huge page mode (`always`, `madvise` or
/// `never`: the bracketed word of
/// `/sys/kernel/mm/transparent_hugepage/enabled`), or None.
pub fn thp_mode() -> Option<String> {
    let s = std::fs::read_to_string("/sys/kernel/mm/transparent_hugepage/enabled").ok()?;
    bracketed(&s).map(str::to_owned)
}

/// A field of `smaps_rollup` (`NAME:   123 kB`) in bytes.
fn smaps_field_bytes(s: &str, name: &str) -> Option<u64> {
    let line = s.lines().find(|l| l.starts_with(name))?;
    let mut words = line[name.len()..].split_whitespace();
    let n: u64 = words.next()?.parse().ok()?;
    match words.next() {
        Some("kB") => n.checked_mul(1024),
        _ => None,
    }
}

/// The word between `[` and `]` in a sysfs choice list.
fn bracketed(s: &str) -> Option<&str> {
    let open = s.find('[')?;
    let rest = &s[open + 1..];
    let close = rest.find(']')?;
    Some(&rest[..close])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn smaps_field_parses_kb_and_refuses_the_rest() {
        let s = "Rss:  4096 kB\nAnonHugePages:   6144 kB\nSwap: 0 kB\n";
        assert_eq!(smaps_field_bytes(s, "AnonHugePages:"), Some(6144 * 1024));
        assert_eq!(smaps_field_bytes(s, "Rss:"), Some(4096 * 1024));
        assert_eq!(smaps_field_bytes(s, "Pss:"), None);
        assert_eq!(smaps_field_bytes("AnonHugePages: 12 MB\n", "AnonHugePages:"), None);
        assert_eq!(smaps_field_bytes("AnonHugePages: x kB\n", "AnonHugePages:"), None);
        assert_eq!(smaps_field_bytes("AnonHugePages:\n", "AnonHugePages:"), None);
        assert_eq!(smaps_field_bytes(&format!("AnonHugePages: {} kB\n", u64::MAX), "AnonHugePages:"), None);
    }

    #[test]
    fn bracketed_picks_the_selected_mode() {
        assert_eq!(bracketed("always [madvise] never\n"), Some("madvise"));
        assert_eq!(bracketed("[always] madvise never"), Some("always"));
        assert_eq!(bracketed("always madvise never"), None);
        assert_eq!(bracketed("[never"), None);
    }
}
