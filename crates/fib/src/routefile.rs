//! Route files: one `prefix [via]` per line.
//!
//! ```text
//! # comment
//! 10.0.0.0/8                # a bare prefix (the shared full table looks like this)
//! 192.0.2.0/24 198.51.100.1 # with a gateway
//! 2001:db8::/32 via fe80::1 # "via" is optional
//! ```
//! A bare prefix gets `None` as gateway: the caller picks the target (the
//! benchmark and the lab use a default gateway or a blackhole). Errors name
//! the line number and the offending text.

use std::fmt;
use std::fs::File;
use std::io::{self, BufRead, BufReader, Read};
use std::net::IpAddr;
use std::path::Path;

use crate::prefix::Prefix;

/// What went wrong, and where.
#[derive(Debug)]
pub enum RouteFileError {
    /// A line that is not `prefix [[via] gateway]`.
    Syntax { line: usize, text: String, reason: String },
    /// Reading or decompressing failed.
    Io { line: usize, error: io::Error },
}

impl fmt::Display for RouteFileError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RouteFileError::Syntax { line, text, reason } => {
                write!(f, "line {line}: {reason}: {text:?}")
            }
            RouteFileError::Io { line, error } => write!(f, "line {line}: {error}"),
        }
    }
}

impl std::error::Error for RouteFileError {}

impl RouteFileError {
    /// The 1-based line the error is about.
    pub fn line(&self) -> usize {
        match self {
            RouteFileError::Syntax { line, .. } | RouteFileError::Io { line, .. } => *line,
        }
    }
}

/// Parses one line; `Ok(None)` for blank and comment lines.
pub fn parse_line(line: &str) -> Result<Option<(Prefix, Option<IpAddr>)>, String> {
    let body = line.split_once('#').map_or(line, |(b, _)| b);
    let mut words = body.split_ascii_whitespace();
    let Some(first) = words.next() else {
        return Ok(None);
    };
    let prefix: Prefix = first.parse().map_err(|e: crate::prefix::PrefixError| e.to_string())?;
    let mut gw_word = words.next();
    if gw_word == Some("via") {
        gw_word = words.next();
        if gw_word.is_none() {
            return Err("\"via\" without a gateway".to_string());
        }
    }
    let gw = match gw_word {
        None => None,
        Some(w) => {
            let gw: IpAddr = w.parse().map_err(|_| format!("bad gateway {w:?}"))?;
            if gw.is_ipv4() != prefix.is_v4() {
                return Err(format!("gateway {gw} is not of the family of {prefix}"));
            }
            Some(gw)
        }
    };
    if let Some(extra) = words.next() {
        return Err(format!("unexpected {extra:?} after the route"));
    }
    Ok(Some((prefix, gw)))
}

/// Parses a whole route file; stops at the first bad line.
pub fn parse(mut r: impl BufRead) -> Result<Vec<(Prefix, Option<IpAddr>)>, RouteFileError> {
    let mut out = Vec::new();
    let mut buf = String::new();
    let mut line = 0;
    loop {
        buf.clear();
        line += 1;
        match r.read_line(&mut buf) {
            Ok(0) => return Ok(out),
            Ok(_) => {}
            Err(error) => return Err(RouteFileError::Io { line, error }),
        }
        match parse_line(&buf) {
            Ok(Some(route)) => out.push(route),
            Ok(None) => {}
            Err(reason) => {
                return Err(RouteFileError::Syntax { line, text: buf.trim_end().to_string(), reason });
            }
        }
    }
}

/// Opens a route file, transparently decompressing gzip (recognised by its
/// magic bytes, whatever the file name).
pub fn open(path: impl AsRef<Path>) -> io::Result<Box<dyn BufRead + Send>> {
    let mut f = BufReader::with_capacity(1 << 16, File::open(path)?);
    let gz = f.fill_buf()?.starts_with(&[0x1f, 0x8b]);
    Ok(if gz {
        Box::new(BufReader::with_capacity(1 << 16, flate2::bufread::MultiGzDecoder::new(f)))
    } else {
        Box::new(f)
    })
}

/// `parse(open(path)?)`, with open errors reported at line 0.
pub fn load(path: impl AsRef<Path>) -> Result<Vec<(Prefix, Option<IpAddr>)>, RouteFileError> {
    let r = open(path).map_err(|error| RouteFileError::Io { line: 0, error })?;
    parse(r)
}

/// Reads everything from `r` (for callers holding a `Read`).
pub fn parse_reader(r: impl Read) -> Result<Vec<(Prefix, Option<IpAddr>)>, RouteFileError> {
    parse(BufReader::new(r))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_all_forms() {
        let text = "# header\n\n10.0.0.0/8\n192.0.2.0/24 198.51.100.1\n  2001:db8::/32 via fe80::1 # trailing\n";
        let r = parse(text.as_bytes()).expect("valid file");
        assert_eq!(r.len(), 3);
        assert_eq!(r[0], ("10.0.0.0/8".parse().expect("p"), None));
        assert_eq!(r[1].1, Some("198.51.100.1".parse().expect("gw")));
        assert_eq!(r[2].1, Some("fe80::1".parse().expect("gw")));
    }

    #[test]
    fn errors_name_line_and_text() {
        let cases = [
            ("10.0.0.0/8\n10.1.0.0/8\n", 2, "host bits"),
            ("\n\n# c\n300.0.0.0/8\n", 4, "bad address"),
            ("10.0.0.0/8 via\n", 1, "without a gateway"),
            ("10.0.0.0/8 2001:db8::1\n", 1, "family"),
            ("10.0.0.0/8 1.2.3.4 extra\n", 1, "unexpected"),
            ("10.0.0.0/8 nope\n", 1, "bad gateway"),
            ("1.0.0.0/8\n2.0.0.0/33\n", 2, "length"),
        ];
        for (text, line, what) in cases {
            let e = parse(text.as_bytes()).expect_err(text);
            assert_eq!(e.line(), line, "{text:?}");
            let msg = e.to_string();
            assert!(msg.contains(what), "{msg:?} should mention {what:?}");
            assert!(msg.starts_with(&format!("line {line}:")), "{msg:?}");
        }
    }

    #[test]
    fn gzip_is_detected_by_magic() {
        use std::io::Write;
        let dir = std::env::temp_dir().join(format!("tern-fib-rf-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("tmp dir");
        let path = dir.join("routes.txt");
        let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        enc.write_all(b"10.0.0.0/8\n2001:db8::/32\n").expect("gz write");
        std::fs::write(&path, enc.finish().expect("gz finish")).expect("write");
        let r = load(&path).expect("load gz");
        assert_eq!(r.len(), 2);
        std::fs::write(&path, "192.0.2.0/24\n").expect("write plain");
        assert_eq!(load(&path).expect("load plain").len(), 1);
        assert_eq!(load(dir.join("missing")).expect_err("missing").line(), 0);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
