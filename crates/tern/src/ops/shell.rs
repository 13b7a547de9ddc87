//! The interactive shell (completion, history) and batch files: lines of
//! the same commands the one-shot CLI takes, without the leading `tern`.

use super::Ctx;
use super::cli::{Line, OpCmd};
use clap::{CommandFactory, Parser};
use rustyline::completion::{Completer, Pair};
use rustyline::error::ReadlineError;
use rustyline::highlight::Highlighter;
use rustyline::hint::Hinter;
use rustyline::validate::Validator;
use rustyline::{Context, Editor, Helper};
use std::io::BufRead;
use std::path::Path;
use std::process::ExitCode;

/// Splits a line into words: blanks separate, single or double quotes
/// group, `#` starts a comment outside quotes.
pub fn split(line: &str) -> Result<Vec<String>, String> {
    let mut words = Vec::new();
    let mut cur = String::new();
    let mut in_word = false;
    let mut quote: Option<char> = None;
    for c in line.chars() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), c) => cur.push(c),
            (None, '"' | '\'') => {
                quote = Some(c);
                in_word = true;
            }
            (None, '#') if !in_word => break,
            (None, c) if c.is_whitespace() => {
                if in_word {
                    words.push(std::mem::take(&mut cur));
                    in_word = false;
                }
            }
            (None, c) => {
                cur.push(c);
                in_word = true;
            }
        }
    }
    if quote.is_some() {
        return Err("unterminated quote".into());
    }
    if in_word {
        words.push(cur);
    }
    Ok(words)
}

/// Runs one line; Ok(None) for a blank line or comment.
pub fn run_line(ctx: &mut Ctx, line: &str) -> Result<Option<String>, String> {
    ctx.last_code = None;
    let words = split(line)?;
    if words.is_empty() {
        return Ok(None);
    }
    let words: Vec<String> = if words.first().is_some_and(|w| w == "tern") { words[1..].to_vec() } else { words };
    let parsed = Line::try_parse_from(&words).map_err(|e| e.render().to_string())?;
    if matches!(parsed.cmd, OpCmd::Shell) {
        return Err("already in the shell".into());
    }
    super::execute(ctx, &parsed.cmd, parsed.json).map(Some)
}

/// `tern -f FILE` (`-` reads standard input). Every command runs in
/// order; with `stop_on_error` the first failure ends the batch. Fails
/// when any command failed.
pub fn batch(ctx: &mut Ctx, file: &Path, stop_on_error: bool) -> Result<ExitCode, String> {
    let reader: Box<dyn BufRead> = if file.as_os_str() == "-" {
        Box::new(std::io::stdin().lock())
    } else {
        Box::new(std::io::BufReader::new(std::fs::File::open(file).map_err(|e| format!("{}: {e}", file.display()))?))
    };
    let mut failed = 0;
    for (n, line) in reader.lines().enumerate() {
        let line = line.map_err(|e| format!("{}: {e}", file.display()))?;
        match run_line(ctx, &line) {
            Ok(Some(out)) => print!("{out}"),
            Ok(None) => {}
            Err(e) => {
                failed += 1;
                let msg = format!("{}:{}: {}: {}", file.display(), n + 1, line.trim(), e.trim_end());
                let json = ctx.json || split(&line).is_ok_and(|w| w.iter().any(|w| w == "--json"));
                if json {
                    print!("{}", super::json_error(ctx.last_code(), &msg));
                } else {
                    eprintln!("{msg}");
                }
                if stop_on_error {
                    return Ok(ExitCode::FAILURE);
                }
            }
        }
    }
    Ok(if failed > 0 { ExitCode::FAILURE } else { ExitCode::SUCCESS })
}

/// Completes command words from the clap definitions, and interface names
/// where an interface is expected.
struct Complete {
    ifaces: Vec<String>,
}

/// Candidates for the word being typed after `done` words.
pub fn candidates(done: &[String], prefix: &str, ifaces: &[String]) -> Vec<String> {
    let mut cmd = Line::command();
    for w in done {
        let next = cmd.get_subcommands().find(|s| s.get_name() == w || s.get_all_aliases().any(|a| a == w)).cloned();
        match next {
            Some(n) => cmd = n,
            None => break,
        }
    }
    let mut out: Vec<String> = cmd
        .get_subcommands()
        .map(|s| s.get_name().to_string())
        .chain(cmd.get_arguments().filter_map(|a| a.get_long().map(|l| format!("--{l}"))))
        .filter(|c| c != "--help" && c != "help")
        .collect();
    let wants_iface = matches!(
        done.iter().map(String::as_str).collect::<Vec<_>>().as_slice(),
        ["interface" | "iface", "show" | "set"] | ["address" | "addr", "show"] | ["capture"] | [.., "dev"]
    );
    if wants_iface {
        out.extend(ifaces.iter().cloned());
    }
    if done.len() >= 3 && matches!(done.first().map(String::as_str), Some("interface" | "iface")) {
        out.extend(["up", "down", "mtu"].map(String::from));
    }
    out.retain(|c| c.starts_with(prefix));
    out.sort();
    out.dedup();
    out
}

impl Completer for Complete {
    type Candidate = Pair;
    fn complete(&self, line: &str, pos: usize, _ctx: &Context<'_>) -> rustyline::Result<(usize, Vec<Pair>)> {
        let head = &line[..pos.min(line.len())];
        let start = head.rfind(char::is_whitespace).map_or(0, |i| i + 1);
        let done = split(&head[..start]).unwrap_or_default();
        let c = candidates(&done, &head[start..], &self.ifaces);
        Ok((start, c.into_iter().map(|s| Pair { display: s.clone(), replacement: format!("{s} ") }).collect()))
    }
}

impl Hinter for Complete {
    type Hint = String;
}
impl Highlighter for Complete {}
impl Validator for Complete {}
impl Helper for Complete {}

/// The interactive shell.
pub fn interactive(ctx: &mut Ctx) -> Result<ExitCode, String> {
    let ifaces = match ctx.call(&tern_control::api::Command::InterfaceList {}) {
        Ok(tern_control::api::Reply::Interfaces(v)) => v.into_iter().map(|i| i.name).collect(),
        Ok(_) => Vec::new(),
        Err(e) => return Err(e),
    };
    let mut ed: Editor<Complete, rustyline::history::DefaultHistory> =
        Editor::new().map_err(|e| format!("terminal: {e}"))?;
    ed.set_helper(Some(Complete { ifaces }));
    let history = std::env::var_os("HOME").map(|h| Path::new(&h).join(".tern_history"));
    if let Some(h) = &history {
        let _ = ed.load_history(h);
    }
    println!("tern shell on {}: Tab completes, `help` lists commands, Ctrl-D leaves", ctx.socket.display());
    loop {
        match ed.readline("tern> ") {
            Ok(line) => {
                let t = line.trim();
                if t.is_empty() {
                    continue;
                }
                let _ = ed.add_history_entry(t);
                match t {
                    "exit" | "quit" => break,
                    "help" | "?" => {
                        let _ = Line::command().print_help();
                        continue;
                    }
                    _ => {}
                }
                match run_line(ctx, t) {
                    Ok(Some(out)) => print!("{out}"),
                    Ok(None) => {}
                    Err(e) => eprintln!("{}", e.trim_end()),
                }
            }
            Err(ReadlineError::Interrupted) => continue,
            Err(ReadlineError::Eof) => break,
            Err(e) => return Err(e.to_string()),
        }
    }
    if let Some(h) = &history {
        let _ = ed.save_history(h);
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words() {
        assert_eq!(
            split("route add  10.0.0.0/8 via 1.2.3.4 # gw").expect("ok"),
            ["route", "add", "10.0.0.0/8", "via", "1.2.3.4"]
        );
        assert_eq!(split("a 'b c' \"d\"").expect("ok"), ["a", "b c", "d"]);
        assert!(split("a 'b").is_err());
        assert!(split("  # only a comment").expect("ok").is_empty());
    }

    #[test]
    fn completion_follows_the_grammar() {
        let none: Vec<String> = Vec::new();
        let c = candidates(&[], "ro", &none);
        assert_eq!(c, ["route"]);
        let c = candidates(&["route".into()], "", &none);
        for v in ["add", "del", "get", "show", "summary"] {
            assert!(c.contains(&v.to_string()), "{c:?}");
        }
        let ifs = vec!["lan0".to_string(), "wan0".to_string()];
        assert_eq!(candidates(&["interface".into(), "set".into()], "w", &ifs), ["wan0"]);
        assert_eq!(candidates(&["interface".into(), "set".into(), "lan0".into()], "d", &ifs), ["down"]);
        assert!(candidates(&["capture".into()], "", &ifs).contains(&"--write".to_string()));
    }

    /// Lines drawn from the grammar's words and hostile values: splitting,
    /// parsing and building the API request give a result or an error for
    /// each, never a panic, and the well-formed ones among them still work.
    #[test]
    fn hostile_lines_give_errors_not_panics() {
        const WORDS: &[&str] = &[
            "tern",
            "route",
            "add",
            "del",
            "get",
            "show",
            "summary",
            "via",
            "dev",
            "source",
            "distance",
            "metric",
            "blackhole",
            "unreachable",
            "prohibit",
            "interface",
            "set",
            "up",
            "down",
            "mtu",
            "address",
            "neighbor",
            "stats",
            "clear",
            "worker",
            "graph",
            "dot",
            "acl",
            "load",
            "import-nft",
            "--ct",
            "--in",
            "--out",
            "trace",
            "start",
            "stop",
            "config",
            "reload",
            "check",
            "capture",
            "--write",
            "--count",
            "--json",
            "--limit",
            "shell",
            "status",
            "lan0",
            "wan0",
            "10.0.0.0/8",
            "10.0.0.1",
            "::/0",
            "2001:db8::1/64",
            "1.2.3.4/33",
            "::/129",
            "0",
            "65535",
            "65536",
            "-1",
            "18446744073709551616",
            "",
            "'",
            "\"",
            "'a b'",
            "#",
            "x#y",
            "\u{0}",
            "é",
            "\t",
            "api",
            "static",
            "1e9",
            "NaN",
            "/",
            ":",
            "..",
        ];
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let (mut parsed, mut requests) = (0, 0);
        for _ in 0..10_000 {
            let n = 1 + next() % 7;
            let line: Vec<&str> = (0..n).map(|_| WORDS[(next() % WORDS.len() as u64) as usize]).collect();
            let line = line.join(" ");
            let Ok(words) = split(&line) else { continue };
            let words: Vec<String> =
                if words.first().is_some_and(|w| w == "tern") { words[1..].to_vec() } else { words };
            let Ok(l) = Line::try_parse_from(&words) else { continue };
            parsed += 1;
            if let Ok(Some(_)) = super::super::request(&l.cmd) {
                requests += 1;
            }
        }
        assert!(parsed > 100 && requests > 100, "{parsed} lines parsed, {requests} requests built");
        // Well-formed lines still build their requests; bad values are errors.
        let req = |line: &str| {
            let words = split(line).expect("split");
            let l = Line::try_parse_from(&words).map_err(|e| e.to_string())?;
            super::super::request(&l.cmd)
        };
        assert!(matches!(req("route add 10.0.0.0/8 via 10.0.2.2"), Ok(Some(tern_control::api::Command::RouteAdd(_)))));
        assert!(matches!(req("interface set lan0 mtu 1500"), Ok(Some(tern_control::api::Command::InterfaceSet(_)))));
        assert!(req("interface set lan0 mtu 65536").is_err());
        assert!(req("interface set lan0 mtu").is_err());
        assert!(req("route del 10.0.0.0/8 source").is_err());
        assert!(req("address add 10.0.9.1/24 dev").is_err());
    }
}
