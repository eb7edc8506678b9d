//! `fairway explain JOB` (why a job waits) and `fairway top` (a live view of tenants, bands
//! and workers), thin over the SDK's `explain` and `overview` calls.
//!
//! `top` redraws the whole screen once a second with plain ANSI sequences (alternate screen,
//! cursor home, clear): the view is a handful of tables, so a TUI library would add a
//! dependency for nothing it needs. It reads single keys by turning off the terminal's line
//! mode (termios), and restores the terminal however it exits; `q` or Ctrl-C quits. With
//! `--once` it prints one frame without escape sequences and exits, for scripts and tests.

use crate::client_cmds::{EXIT_CODES, EXIT_OK, ServerArgs, block_on, fail, print_json, print_out};
use clap::Args;
use fairway_client::observe::{Explanation, Overview};
use fairway_client::{Client, Error};
use std::fmt::Write as _;
use std::io::{IsTerminal, Read, Write};
use std::process::ExitCode;
use std::time::Duration;

/// Options of `fairway explain`.
#[derive(Args, Debug)]
#[command(after_help = EXIT_CODES)]
pub struct ExplainArgs {
    #[command(flatten)]
    pub server: ServerArgs,
    /// Print the server's reply as JSON instead of sentences.
    #[arg(long)]
    pub json: bool,
    /// The job's id.
    pub job: String,
}

/// `fairway explain JOB`: why the job is (not) running. Exit 5 for an unknown job.
pub fn explain(args: ExplainArgs) -> ExitCode {
    let client = match args.server.client() {
        Ok(client) => client,
        Err(e) => return fail("explain", &e),
    };
    match block_on(client.explain(&args.job)) {
        Ok(e) if args.json => {
            print_json(&e);
            ExitCode::from(EXIT_OK)
        }
        Ok(e) => {
            print_out(&explanation_text(&e));
            ExitCode::from(EXIT_OK)
        }
        Err(e) => fail("explain", &e),
    }
}

/// An explanation as a few lines of text.
pub fn explanation_text(e: &Explanation) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{} (tenant {}, class {}): {}",
        e.job_id, e.tenant, e.class, e.state
    );
    let _ = writeln!(out, "{}", e.summary);
    if e.reasons.len() > 1 {
        for r in &e.reasons {
            let _ = writeln!(out, "  {:<21} {}", r.code, r.message);
        }
    } else if let Some(r) = e.reasons.first() {
        let _ = writeln!(out, "  code: {}", r.code);
    }
    if !e.decisions.is_empty() {
        let _ = writeln!(out, "started by:");
        for d in &e.decisions {
            let _ = writeln!(
                out,
                "  {}  epoch {} on {}: {}",
                d.at,
                d.epoch,
                d.workers.join(", "),
                d.reason
            );
        }
    }
    out
}

/// Options of `fairway top`.
#[derive(Args, Debug)]
#[command(after_help = EXIT_CODES)]
pub struct TopArgs {
    #[command(flatten)]
    pub server: ServerArgs,
    /// Print one frame (no escape sequences) and exit.
    #[arg(long)]
    pub once: bool,
    /// Time between frames, in milliseconds.
    #[arg(long, default_value_t = 1000, value_name = "MS")]
    pub interval_ms: u64,
    /// Rows per table.
    #[arg(long, default_value_t = 10, value_name = "N")]
    pub rows: usize,
}

/// `fairway top`: a live view of tenants, bands and workers, from `GET /v1/overview`
/// (admin). Quits on `q` or Ctrl-C.
pub fn top(args: TopArgs) -> ExitCode {
    let client = match args.server.client() {
        Ok(client) => client,
        Err(e) => return fail("top", &e),
    };
    let server = args.server.server.clone();
    if args.once || !std::io::stdout().is_terminal() {
        return match block_on(client.overview()) {
            Ok(o) => {
                print_out(&frame(&server, &o, args.rows, terminal_width(), true));
                ExitCode::from(EXIT_OK)
            }
            Err(e) => fail("top", &e),
        };
    }
    block_on(live(client, server, args))
}

async fn live(client: Client, server: String, args: TopArgs) -> ExitCode {
    let _terminal = Terminal::enter();
    let (keys_tx, mut keys) = tokio::sync::mpsc::channel::<u8>(16);
    // Stdin blocks: read it on a thread of its own, which dies with the process.
    std::thread::spawn(move || {
        let mut byte = [0u8; 1];
        let mut stdin = std::io::stdin();
        while let Ok(1) = stdin.read(&mut byte) {
            if keys_tx.blocking_send(byte[0]).is_err() {
                break;
            }
        }
    });
    let mut tick = tokio::time::interval(Duration::from_millis(args.interval_ms.max(100)));
    let mut last_error: Option<Error> = None;
    loop {
        tokio::select! {
            _ = tick.tick() => {
                let text = match client.overview().await {
                    Ok(o) => {
                        last_error = None;
                        frame(&server, &o, args.rows, terminal_width(), false)
                    }
                    Err(e) => {
                        let text = format!("fairway top: {e}\n(retrying; q to quit)\n");
                        if matches!(e, Error::Http { status: 401 | 403, .. }) {
                            last_error = Some(e);
                            break;
                        }
                        text
                    }
                };
                let mut out = std::io::stdout().lock();
                // Home, draw, clear what the last frame left below.
                let _ = write!(out, "\x1b[H{}\x1b[J", text.replace('\n', "\x1b[K\r\n"));
                let _ = out.flush();
            }
            key = keys.recv() => match key {
                Some(b'q') | Some(b'Q') | Some(3) | None => break,
                _ => {}
            },
            _ = tokio::signal::ctrl_c() => break,
        }
    }
    drop(_terminal);
    match last_error {
        Some(e) => fail("top", &e),
        None => ExitCode::from(EXIT_OK),
    }
}

/// The terminal in the state `top` needs: alternate screen, hidden cursor, keys without
/// Enter and without echo. Restored on drop, however `top` ends.
struct Terminal {
    saved: Option<libc::termios>,
}

impl Terminal {
    fn enter() -> Terminal {
        let saved = if std::io::stdin().is_terminal() {
            // SAFETY: tcgetattr/tcsetattr on stdin with a zeroed termios to fill in.
            unsafe {
                let mut t: libc::termios = std::mem::zeroed();
                if libc::tcgetattr(libc::STDIN_FILENO, &mut t) == 0 {
                    let saved = t;
                    t.c_lflag &= !(libc::ICANON | libc::ECHO);
                    t.c_cc[libc::VMIN] = 1;
                    t.c_cc[libc::VTIME] = 0;
                    libc::tcsetattr(libc::STDIN_FILENO, libc::TCSANOW, &t);
                    Some(saved)
                } else {
                    None
                }
            }
        } else {
            None
        };
        print_out("\x1b[?1049h\x1b[?25l");
        Terminal { saved }
    }
}

impl Drop for Terminal {
    fn drop(&mut self) {
        print_out("\x1b[?25h\x1b[?1049l");
        if let Some(t) = &self.saved {
            // SAFETY: restores the attributes read in `enter`.
            unsafe {
                libc::tcsetattr(libc::STDIN_FILENO, libc::TCSANOW, t);
            }
        }
    }
}

/// The terminal's width, or 120 off a terminal.
fn terminal_width() -> usize {
    // SAFETY: TIOCGWINSZ fills a zeroed winsize.
    unsafe {
        let mut w: libc::winsize = std::mem::zeroed();
        if libc::ioctl(libc::STDOUT_FILENO, libc::TIOCGWINSZ, &mut w) == 0 && w.ws_col > 20 {
            return w.ws_col as usize;
        }
    }
    120
}

fn pct(x: f64) -> String {
    format!("{:.1}%", x * 100.0)
}

fn age_ms(ms: u64) -> String {
    let s = ms as f64 / 1e3;
    if s < 1.0 {
        format!("{ms}ms")
    } else if s < 120.0 {
        format!("{s:.1}s")
    } else if s < 7200.0 {
        format!("{:.1}m", s / 60.0)
    } else {
        format!("{:.1}h", s / 3600.0)
    }
}

fn cut(s: &str, width: usize) -> String {
    if s.chars().count() <= width {
        s.to_string()
    } else {
        let mut t: String = s.chars().take(width.saturating_sub(1)).collect();
        t.push('~');
        t
    }
}

/// One frame of `top`, each line at most `width` characters.
pub fn frame(server: &str, o: &Overview, rows: usize, width: usize, once: bool) -> String {
    let mut lines: Vec<String> = Vec::new();
    let quit = if once { "" } else { "  (q to quit)" };
    lines.push(format!(
        "fairway top  {server}  policy {} v{}  {}{quit}",
        o.policy, o.policy_version, o.at
    ));
    lines.push(format!(
        "jobs {} live, {} queued   workers {}   tenants with jobs {}, {} over their share{}",
        o.live_jobs,
        o.queued_jobs,
        o.workers_total,
        o.tenants_with_jobs,
        o.tenants_over,
        if o.complete {
            ""
        } else {
            "   (partial: observation budget)"
        }
    ));
    lines.push(String::new());
    lines.push(format!(
        "{:<24} {:>6} {:>7} {:>8} {:>8} {:>7} {:>8} {:>7}",
        "TENANT", "WEIGHT", "SHARE", "ENTITLED", "OVER", "QUEUED", "OLDEST", "RUNNING"
    ));
    for t in o.tenants.iter().take(rows) {
        lines.push(format!(
            "{:<24} {:>6} {:>7} {:>8} {:>7}{} {:>7} {:>8} {:>7}",
            cut(&t.name, 24),
            format!("{}", t.weight),
            pct(t.dominant_share),
            pct(t.entitlement),
            format!("{:+.1}%", t.over * 100.0),
            if t.over > 0.005 { "!" } else { " " },
            t.queued,
            t.oldest_age_ms.map(age_ms).unwrap_or_else(|| "-".into()),
            t.running
        ));
    }
    if o.tenants.is_empty() {
        lines.push("(no tenant has jobs)".into());
    }
    lines.push(String::new());
    lines.push(format!(
        "{:<24} {:>6} {:>8} {:>7} {:>8} {:>10} {:>7}",
        "BAND", "PRIO", "RESERVE", "QUEUED", "OLDEST", "PREDICTED", "MISSES"
    ));
    for c in o.classes.iter().take(rows) {
        lines.push(format!(
            "{:<24} {:>6} {:>8} {:>7} {:>8} {:>10} {:>7}",
            cut(&c.name, 24),
            c.priority,
            pct(c.reserve),
            c.queued
                .map(|q| q.to_string())
                .unwrap_or_else(|| "?".into()),
            c.oldest_age_s
                .map(|s| age_ms((s * 1e3) as u64))
                .unwrap_or_else(|| "-".into()),
            c.predicted_start_s
                .map(|s| age_ms((s * 1e3) as u64))
                .unwrap_or_else(|| "no capacity".into()),
            c.deadline_misses
        ));
    }
    lines.push(String::new());
    lines.push(format!(
        "{:<24} {:<12} {:>6} {:<24} {:>9}",
        "WORKER", "POOL", "LEASES", "CAPACITY", "LAST POLL"
    ));
    for w in o.workers.iter().take(rows) {
        let capacity: Vec<String> = w.capacity.iter().map(|(r, v)| format!("{r}={v}")).collect();
        lines.push(format!(
            "{:<24} {:<12} {:>6} {:<24} {:>9}",
            cut(&w.name, 24),
            cut(&w.pool, 12),
            w.leases,
            cut(&capacity.join(","), 24),
            age_ms(w.last_poll_ms)
        ));
    }
    if o.workers.is_empty() {
        lines.push("(no worker has asked for work recently)".into());
    }
    lines.push(String::new());
    lines.push("RECENT DECISIONS".into());
    for d in o.decisions.iter().take(rows) {
        let at =
            d.at.format(&time::macros::format_description!(
                "[hour]:[minute]:[second].[subsecond digits:3]"
            ))
            .unwrap_or_default();
        lines.push(format!(
            "{at} {} {}/{} on {}: {}",
            d.job_id,
            d.tenant,
            d.class,
            d.workers.join(","),
            d.reason
        ));
    }
    if o.decisions.is_empty() {
        lines.push("(none yet)".into());
    }
    let mut out = String::new();
    for line in lines {
        out.push_str(&cut(&line, width));
        out.push('\n');
    }
    out
}
