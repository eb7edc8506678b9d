//! Observability as a user meets it, against the real `fairway serve` on a loopback port with
//! traffic: `fairway explain`, `fairway top --once`, and the dashboard loaded by a real
//! headless browser (Debian's chromium), which checks its content, waits for its htmx panels
//! to refresh, and saves a screenshot (`target/dashboard.png`).
//!
//! The browser test runs when chromium is installed. Without it, it says "skipped" and passes,
//! unless `FAIRWAY_TEST_BROWSER=1` (CI sets it; `.ci/chromium` installs the browser), in which
//! case a missing browser fails the test.

mod serve_support;

use serde_json::{Value, json};
use serve_support::{Served, TempDir, client, get, post, serve, wait_with_timeout};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

/// Two tenants, `small` weighing three times `big`, and a class with a reserve.
const POLICY: &str = r#"
[policy]
name = "fair"

[[pool]]
name = "default"

[[class]]
name = "urgent"
priority = 10
reserve = 0.25

[[class]]
name = "batch"

[[tenant]]
name = "big"
weight = 1

[[tenant]]
name = "small"
weight = 3
"#;

/// Starts a server with the policy above and gives it traffic: big floods `batch` and takes
/// what the worker `w1` offers beyond the urgent reserve; small arrives after and waits; one
/// of big's jobs succeeds.
fn served_with_traffic(dir: &TempDir) -> Served {
    let policy = dir.path().join("policy.toml");
    std::fs::create_dir_all(dir.path()).unwrap();
    std::fs::write(&policy, POLICY).unwrap();
    let served = serve(
        &dir.path().join("data"),
        &["--policy", policy.to_str().unwrap()],
        &[],
    );
    let url = served.url.clone();
    runtime().block_on(async {
        let http = client();
        served.ready(&http).await;
        for i in 0..20 {
            let (code, r) = post(
                &http,
                format!("{url}/v1/jobs"),
                json!({"id": format!("big-{i}"), "tenant": "big", "class": "batch", "estimate_ms": 60000}),
            )
            .await
            .unwrap();
            assert_eq!(code, 201, "{r}");
        }
        let (code, r) = post(
            &http,
            format!("{url}/v1/leases"),
            json!({"worker": "w1", "capacity": {"cpu": 4}, "max_jobs": 4}),
        )
        .await
        .unwrap();
        assert_eq!(code, 200, "{r}");
        let leases = r["leases"].as_array().cloned().unwrap();
        assert_eq!(leases.len(), 3, "{r}");
        for i in 0..2 {
            let (code, r) = post(
                &http,
                format!("{url}/v1/jobs"),
                json!({"id": format!("small-{i}"), "tenant": "small", "class": "batch"}),
            )
            .await
            .unwrap();
            assert_eq!(code, 201, "{r}");
        }
        let first = &leases[0];
        let (code, r) = post(
            &http,
            format!("{url}/v1/leases/{}/complete", first["job_id"].as_str().unwrap()),
            json!({"epoch": first["epoch"], "outcome": "succeeded"}),
        )
        .await
        .unwrap();
        assert_eq!(code, 200, "{r}");
    });
    served
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

fn fairway(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_fairway"))
        .env_remove("FAIRWAY_SERVER")
        .env_remove("FAIRWAY_TOKEN")
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("fairway runs")
}

/// `fairway explain` says why a waiting job waits (with the reason's code), where a running
/// one runs and which decision started it; `--json` gives the server's reply; an unknown job
/// exits 5. `fairway top --once` prints one frame with the tenant over its share marked, the
/// bands and the worker.
#[test]
fn explain_and_top_from_the_command_line() {
    let dir = TempDir::new("cli-observe");
    let served = served_with_traffic(&dir);
    let url = served.url.as_str();

    let out = fairway(&["explain", "--server", url, "small-0"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        text.starts_with("small-0 (tenant small, class batch): queued\nit waits: "),
        "{text}"
    );
    assert!(
        text.contains("code: ") || text.lines().count() > 3,
        "{text}"
    );

    let out = fairway(&["explain", "--server", url, "big-1"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("it is running on w1"), "{text}");
    assert!(
        text.contains("started by:") && text.contains("big"),
        "{text}"
    );

    let out = fairway(&["explain", "--server", url, "--json", "small-1"]);
    let reply: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(reply["state"], "queued");
    assert!(!reply["reasons"].as_array().unwrap().is_empty(), "{reply}");

    let out = fairway(&["explain", "--server", url, "nope"]);
    assert_eq!(out.status.code(), Some(5));

    let out = fairway(&["top", "--server", url, "--once"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    assert!(!text.contains('\x1b'), "--once prints no escape sequences");
    let big = text
        .lines()
        .find(|l| l.starts_with("big "))
        .unwrap_or_else(|| panic!("no row for big:\n{text}"));
    assert!(
        big.contains("50.0%") && big.contains("25.0%") && big.contains('!'),
        "{big}"
    );
    assert!(text.lines().any(|l| l.starts_with("small ")), "{text}");
    assert!(text.lines().any(|l| l.starts_with("urgent ")), "{text}");
    assert!(text.lines().any(|l| l.starts_with("w1 ")), "{text}");
    assert!(text.contains("RECENT DECISIONS"), "{text}");
}

/// Where chromium is, if it is installed.
fn chromium() -> Option<PathBuf> {
    std::env::var_os("FAIRWAY_CHROMIUM")
        .map(PathBuf::from)
        .into_iter()
        .chain(["/usr/bin/chromium", "/usr/bin/chromium-browser"].map(PathBuf::from))
        .find(|p| p.exists())
}

/// Runs headless chromium with a fresh profile and `args`; returns stdout.
fn run_chromium(browser: &Path, profile: &Path, args: &[String]) -> String {
    let mut child = Command::new(browser)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--hide-scrollbars",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("chromium starts");
    let mut stdout = child.stdout.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = std::io::Read::read_to_string(&mut stdout, &mut s);
        s
    });
    let status = wait_with_timeout(&mut child, Duration::from_secs(120));
    assert!(status.success(), "chromium failed: {status}");
    reader.join().unwrap()
}

/// The number in the dashboard's `render` counter.
fn render_number(html: &str) -> u64 {
    let at = html
        .find("class=\"render\">")
        .unwrap_or_else(|| panic!("no render counter in\n{html}"));
    html[at + "class=\"render\">".len()..]
        .chars()
        .take_while(char::is_ascii_digit)
        .collect::<String>()
        .parse()
        .unwrap()
}

/// The dashboard in a real browser against a server with traffic: it shows the tenants with
/// the one over its share marked, why a waiting job waits, the worker and its leases, and the
/// recent decisions with their reasons; its panels refresh themselves (the render counter
/// moves on after a few seconds of the page's own time); and a screenshot is saved.
#[test]
fn dashboard_in_a_headless_browser() {
    let Some(browser) = chromium() else {
        if std::env::var("FAIRWAY_TEST_BROWSER").as_deref() == Ok("1") {
            panic!(
                "FAIRWAY_TEST_BROWSER=1 but chromium is not installed (looked for \
                 /usr/bin/chromium and $FAIRWAY_CHROMIUM): run .ci/chromium"
            );
        }
        eprintln!("skipped: chromium is not installed (set FAIRWAY_TEST_BROWSER=1 to require it)");
        return;
    };
    let dir = TempDir::new("dashboard");
    let served = served_with_traffic(&dir);
    let page = format!("{}/?job=small-0", served.url);

    // The page as served, and its render number before the browser's.
    let (code, html) = runtime().block_on(get(&client(), page.clone())).unwrap();
    assert_eq!(code, 200);
    let before = render_number(html.as_str().unwrap());

    let profile = dir.path().join("chromium-dom");
    let dom = run_chromium(
        &browser,
        &profile,
        &[
            "--virtual-time-budget=7000".into(),
            "--dump-dom".into(),
            page.clone(),
        ],
    );
    assert!(dom.contains("data-tenant=\"big\""), "{dom}");
    assert!(dom.contains("data-tenant=\"small\""), "{dom}");
    let big_row = &dom[dom.find("data-tenant=\"big\"").unwrap()..];
    let big_row = &big_row[..big_row.find("</tr>").unwrap()];
    assert!(big_row.contains("over its share"), "{big_row}");
    assert!(
        dom.contains("small-0</b> (small, batch) is <b class=\"state\">queued"),
        "{dom}"
    );
    assert!(dom.contains("it waits: "), "{dom}");
    assert!(dom.contains("data-worker=\"w1\""), "{dom}");
    assert!(dom.contains("had the smallest balance under fair"), "{dom}");
    let after = render_number(&dom);
    assert!(
        after >= before + 2,
        "the panels did not refresh: render {after} after {before} (page) in\n{dom}"
    );

    let shot = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .parent()
        .expect("the target directory")
        .join("dashboard.png");
    let _ = std::fs::remove_file(&shot);
    run_chromium(
        &browser,
        &dir.path().join("chromium-shot"),
        &[
            "--window-size=1400,1100".into(),
            "--virtual-time-budget=3000".into(),
            format!("--screenshot={}", shot.display()),
            page,
        ],
    );
    let png = std::fs::read(&shot).expect("the screenshot was written");
    assert!(png.starts_with(b"\x89PNG\r\n\x1a\n") && png.len() > 10_000);
    eprintln!("screenshot: {}", shot.display());
}
