//! `fairway sim --report` and `--compare` end to end, as a user runs them: the noisy-neighbour
//! example in, an HTML page with SVG plots or a comparison out, and the exit codes of the two
//! mistakes a user makes (an unknown policy, a report path that cannot be written).

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn noisy_neighbor() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../examples/noisy-neighbor.toml")
}

fn fairway(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_fairway"))
        .args(args)
        .output()
        .expect("run the fairway binary")
}

/// A fresh, empty directory of the system's temporary directory.
fn fresh_dir(name: &str) -> PathBuf {
    let dir =
        std::env::temp_dir().join(format!("fairway-cli-report-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("temp dir");
    dir
}

fn assert_success(out: &Output) {
    assert!(
        out.status.success(),
        "fairway failed ({:?}): {}",
        out.status.code(),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The `<figure id="ID">…</figure>` of a page.
fn figure<'a>(page: &'a str, id: &str) -> &'a str {
    let open = format!("<figure id=\"{id}\">");
    let start = page
        .find(&open)
        .unwrap_or_else(|| panic!("the page has no figure {id}"));
    let end = start + page[start..].find("</figure>").expect("a closed figure");
    &page[start..end]
}

/// A text element of an SVG with exactly this text (a legend entry, a panel title).
fn has_text(svg: &str, text: &str) -> bool {
    svg.split("</text>")
        .filter_map(|piece| piece.rsplit_once('>'))
        .any(|(_, content)| content.trim() == text)
}

fn read_page(dir: &Path) -> String {
    std::fs::read_to_string(dir.join("index.html")).expect("index.html written")
}

#[test]
fn report_writes_a_page_with_the_four_plots() {
    let dir = fresh_dir("single").join("out");
    let example = noisy_neighbor();
    let out = fairway(&[
        "sim",
        example.to_str().unwrap(),
        "--report",
        dir.to_str().unwrap(),
    ]);
    assert_success(&out);
    // The usual text report still goes to stdout.
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.starts_with("policy fair"), "{stdout}");
    let page = read_page(&dir);
    assert!(page.starts_with("<!doctype html>"));
    // (1) share over time: a line per tenant, both named in the legend.
    let share = figure(&page, "share");
    assert!(
        share.contains("<svg") && share.contains("<polyline"),
        "{share}"
    );
    assert!(has_text(share, "batch") && has_text(share, "web"));
    assert!(has_text(share, "entitlement (dashed)"));
    // (2) wait-time CDFs per tenant and per class.
    let waits = figure(&page, "wait-tenant");
    assert!(waits.contains("<polyline") && has_text(waits, "batch") && has_text(waits, "web"));
    let classes = figure(&page, "wait-class");
    assert!(classes.contains("<polyline") && has_text(classes, "default"));
    // (3) utilization over time.
    let utilization = figure(&page, "utilization");
    assert!(utilization.contains("<polyline") && has_text(utilization, "utilization"));
    // (4) admission outcomes: bars per tenant and per class.
    let admission = figure(&page, "admission");
    assert!(admission.contains("<rect") && has_text(admission, "tenant web"));
    assert!(has_text(admission, "class default"));
    // Axis labels carry units.
    assert!(has_text(share, "simulated time (s)"));
    assert!(has_text(
        waits,
        "wait from arrival to first start (s, log scale)"
    ));
    // The key numbers and the text report are on the page, and each plot sits beside it too.
    assert!(page.contains("id=\"key-numbers\"") && page.contains("policy fair (backfill none)"));
    for id in [
        "share",
        "wait-tenant",
        "wait-class",
        "utilization",
        "admission",
    ] {
        let svg = std::fs::read_to_string(dir.join(format!("{id}.svg"))).expect("svg file");
        assert!(
            svg.contains("<svg") && svg.trim_end().ends_with("</svg>"),
            "{id}.svg"
        );
    }
    assert!(
        !dir.join(".index.html.tmp").exists(),
        "the temporary page was renamed"
    );
}

#[test]
fn compare_json_has_both_documents_and_fair_serves_web_sooner() {
    let example = noisy_neighbor();
    let out = fairway(&[
        "sim",
        example.to_str().unwrap(),
        "--compare",
        "fifo,fair",
        "--format",
        "json",
    ]);
    assert_success(&out);
    // Nothing but the document on stdout: no progress bar under --format json.
    let doc: Value = serde_json::from_slice(&out.stdout).expect("one JSON document");
    let compare = doc["compare"].as_object().expect("a compare object");
    let keys: Vec<&str> = compare.keys().map(String::as_str).collect();
    assert_eq!(keys, ["fair", "fifo"]);
    let (fifo, fair) = (&compare["fifo"], &compare["fair"]);
    assert_eq!(fifo["policy"], "fifo");
    assert_eq!(fair["policy"], "fair");
    // Each is the normal document of its run.
    assert_eq!(fifo["jobs"]["submitted"], 20200);
    assert!(fair["tenants"]["web"]["wait_s"]["p99"].is_number());
    // Under fair every web job starts within one batch job's duration (0.1 s); under fifo web
    // waits behind the whole flood: no web job starts in the run's 60 s (no wait to report),
    // or, if one did, it waited for most of the run.
    let fair_p99 = fair["tenants"]["web"]["wait_s"]["p99"]
        .as_f64()
        .expect("fair web waits");
    assert!(fair_p99 <= 0.1, "fair web p99 {fair_p99}");
    let fifo_p99 = &fifo["tenants"]["web"]["wait_s"]["p99"];
    assert!(
        fifo_p99.is_null() || fifo_p99.as_f64().unwrap() > 100.0 * fair_p99.max(0.01),
        "fifo web p99 {fifo_p99}"
    );
    assert_eq!(fair["tenants"]["web"]["completed"], 200);
    let share = |d: &Value, t: &str| d["tenants"][t]["service_share"].as_f64().unwrap();
    assert!(share(fifo, "web") < 0.01 && share(fair, "web") > 0.04);
    assert!(
        fair["fairness"]["jain"].as_f64().unwrap() > fifo["fairness"]["jain"].as_f64().unwrap()
    );
}

#[test]
fn compare_text_is_one_table_and_the_report_puts_policies_side_by_side() {
    let dir = fresh_dir("compare");
    let example = noisy_neighbor();
    let out = fairway(&[
        "sim",
        example.to_str().unwrap(),
        "--compare",
        "fifo,fair",
        "--report",
        dir.to_str().unwrap(),
        "--quiet",
    ]);
    assert_success(&out);
    assert!(out.stderr.is_empty(), "--quiet prints nothing on stderr");
    let table = String::from_utf8_lossy(&out.stdout);
    let rows: Vec<&str> = table.lines().collect();
    assert!(
        rows[0].starts_with("run") && rows[0].contains("wait p99 s"),
        "{table}"
    );
    assert!(
        rows[1].starts_with("fifo") && rows[2].starts_with("fair"),
        "{table}"
    );
    // Per tenant, the runs one under another: web gets 0% under fifo and 5% under fair.
    let web = rows
        .iter()
        .position(|r| *r == "web")
        .expect("a web section");
    assert!(rows[web + 1].trim_start().starts_with("fifo") && rows[web + 1].contains("0.0000"));
    assert!(rows[web + 2].trim_start().starts_with("fair") && rows[web + 2].contains("0.0500"));
    // One page, every plot with a panel per policy.
    let page = read_page(&dir);
    for id in [
        "share",
        "wait-tenant",
        "wait-class",
        "utilization",
        "admission",
    ] {
        let fig = figure(&page, id);
        assert!(
            has_text(fig, "fifo") && has_text(fig, "fair"),
            "{id} has both panels"
        );
    }
    assert!(page.contains("<h3>fifo</h3>") && page.contains("<h3>fair</h3>"));
}

#[test]
fn an_unknown_policy_in_compare_exits_2_naming_it() {
    let example = noisy_neighbor();
    let out = fairway(&["sim", example.to_str().unwrap(), "--compare", "fifo,fiar"]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("\"fiar\""), "{stderr}");
    assert!(out.stdout.is_empty());
    let out = fairway(&[
        "sim",
        example.to_str().unwrap(),
        "--compare-backfill",
        "none,eazy",
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("eazy"));
}

#[test]
fn an_unwritable_report_path_exits_1_before_running() {
    // Under a regular file: no directory can be made there, even by root.
    let dir = fresh_dir("unwritable");
    let blocker = dir.join("a-file");
    std::fs::write(&blocker, "not a directory").unwrap();
    let target = blocker.join("out");
    let example = noisy_neighbor();
    let out = fairway(&[
        "sim",
        example.to_str().unwrap(),
        "--report",
        target.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("--report") && stderr.contains(target.to_str().unwrap()),
        "{stderr}"
    );
    assert!(
        out.stdout.is_empty(),
        "no run before the path is known to be writable"
    );
}
