//! Progress on long work as operators see it: a route file loading at
//! start-up and `tern route add --file` print no progress line when their
//! output is not a terminal (a log, a pipe): only the one summary line; on
//! a terminal (a pty from `script`), the line is drawn and cleared.
//! Memory ports: no root needed.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

mod common;

const TERN: &str = env!("CARGO_BIN_EXE_tern");
const ROUTES: usize = 20_000;

struct Daemon {
    child: Option<Child>,
    dir: PathBuf,
}

impl Drop for Daemon {
    fn drop(&mut self) {
        common::stop(&mut self.child, Duration::from_secs(5));
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn scratch(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("tern-progress-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).expect("scratch");
    d
}

/// A configuration on a memory port with a route file of [`ROUTES`]
/// prefixes (10.x.y.0/24).
fn config(dir: &Path) -> PathBuf {
    let mut table = String::from("# a table\n");
    for i in 0..ROUTES {
        table += &format!("{}.{}.{}.0/24\n", 20 + i / 65536, i / 256 % 256, i % 256);
    }
    std::fs::write(dir.join("table.txt"), table).expect("route file");
    let text = format!(
        "[api]\nsocket = \"{}\"\n[metrics]\nlisten = \"\"\n\n\
         [[interface]]\nname = \"lan\"\ndriver = \"memory\"\nmac = \"02:00:00:00:01:01\"\naddresses = [\"10.0.1.1/24\"]\n\n\
         [[route_file]]\npath = \"table.txt\"\nvia = \"10.0.1.2\"\n",
        dir.join("tern.sock").display()
    );
    let p = dir.join("tern.toml");
    std::fs::write(&p, text).expect("config");
    p
}

fn cli(socket: &Path, args: &[&str]) -> Output {
    Command::new(TERN).arg("--socket").arg(socket).args(args).stdin(Stdio::null()).output().expect("run tern")
}

/// No progress line: no carriage return, no erase, no `routes: N` count.
fn assert_no_progress(what: &str, text: &str) {
    assert!(!text.contains('\r') && !text.contains("\x1b[K"), "{what}: a progress line off a terminal: {text:?}");
    assert!(!text.lines().any(|l| l.trim_start().starts_with("routes: ")), "{what}: {text}");
}

#[test]
fn a_route_file_loads_with_one_summary_line_and_no_progress_off_a_terminal() {
    let dir = scratch("run");
    let cfg = config(&dir);
    let log = dir.join("tern.log");
    let child = Command::new(TERN)
        .args(["--log", "info", "run", "--config"])
        .arg(&cfg)
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(dir.join("tern.out")).expect("out"))
        .stderr(std::fs::File::create(&log).expect("log"))
        .spawn()
        .expect("tern run");
    let mut d = Daemon { child: Some(child), dir: dir.clone() };
    let socket = dir.join("tern.sock");
    let deadline = Instant::now() + Duration::from_secs(60);
    while !(socket.exists() && cli(&socket, &["status"]).status.success()) {
        if let Some(c) = d.child.as_mut()
            && let Ok(Some(st)) = c.try_wait()
        {
            panic!("tern run exited ({st}): {}", std::fs::read_to_string(&log).unwrap_or_default());
        }
        assert!(Instant::now() < deadline, "tern run never answered");
        std::thread::sleep(Duration::from_millis(50));
    }
    let text = std::fs::read_to_string(&log).expect("log");
    assert_no_progress("tern run's log", &text);
    let loaded: Vec<&str> = text.lines().filter(|l| l.contains("route files: loaded ")).collect();
    assert_eq!(loaded.len(), 1, "one summary line of the load:\n{text}");
    assert!(loaded[0].contains("loaded 20,000 routes in ") && loaded[0].contains("/s), 0 stale removed"), "{text}");
    assert!(text.contains("table.txt: read 20,000 routes in "), "{text}");

    // `tern route add --file` into a pipe: its answer, nothing drawn.
    let mut adds = String::new();
    for i in 0..3000 {
        adds += &format!("198.{}.{}.0/24 via 10.0.1.2\n", 18 + i / 256, i % 256);
    }
    let file = dir.join("adds.txt");
    std::fs::write(&file, adds).expect("adds");
    let o = cli(&socket, &["route", "add", "--file", file.to_str().expect("utf-8")]);
    let (out, err) = (String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
    assert!(o.status.success(), "{out}{err}");
    assert!(out.contains("3000 route(s) added"), "{out}");
    assert_no_progress("route add --file", &format!("{out}{err}"));
    assert!(err.is_empty(), "nothing on stderr: {err:?}");
}

/// Under a pseudo-terminal (`script`), `tern config check` reading the
/// route file draws the count and clears it again.
#[test]
fn on_a_terminal_the_count_is_drawn_and_cleared() {
    let have_script =
        Command::new("script").arg("--version").stdout(Stdio::null()).stderr(Stdio::null()).status().is_ok();
    if !have_script {
        eprintln!("skipped: needs script(1) from util-linux for a pty");
        return;
    }
    let dir = scratch("tty");
    let cfg = config(&dir);
    let o = Command::new("script")
        .args(["-qec"])
        .arg(format!("'{TERN}' config check '{}'", cfg.display()))
        .arg("/dev/null")
        .stdin(Stdio::null())
        .output()
        .expect("script");
    let _ = std::fs::remove_dir_all(&dir);
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{text}");
    let drawn = text.find("\r\x1b[Kroutes: 4,096").unwrap_or_else(|| panic!("no count drawn: {text:?}"));
    // Cleared after the last draw, before the answer.
    let cleared = text.rfind("\x1b[K").expect("erase");
    assert!(
        cleared > drawn && text[cleared..].starts_with("\x1b[K") && !text[cleared + 3..].contains("routes: "),
        "{text:?}"
    );
    assert!(text.contains("ok"), "{text:?}");
}
