//! The one helper every scenario test uses: run a scenario file under the runs its `.expect`
//! file lists and check each expectation against the JSON output.
//!
//! An `.expect` file is a list of runs; each starts with a header naming overrides and is
//! followed by expectations, one per line:
//!
//! ```text
//! [run policy=fair backfill=easy seed=3]
//! tenants.A.service_share ~ 0.5 +- 0.01
//! probes[0].running.A = 3
//! fairness.jain >= 0.999
//! order(attempts, tenant) = A A B A
//! ```
//!
//! Operators: `=` (numbers, strings, null), `~ x +- tol`, `<`, `<=`, `>`, `>=`. `order(attempts,
//! FIELD)` lists FIELD of every attempt in start order (needs `events`); `count(attempts, FIELD,
//! VALUE)` counts attempts whose FIELD equals VALUE; `start(ID)` is job ID's first start (s).
//! Paths are dotted, with `[i]` for indices.

use fairway_core::{Backfill, PolicyName};
use fairway_sim::scenario::Overrides;
use fairway_sim::{RunOptions, Scenario};
use serde_json::Value;
use std::path::{Path, PathBuf};

/// The directory of the test scenarios.
#[allow(dead_code)]
pub fn scenario_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/scenarios")
}

/// Runs `path` with the overrides of a run header and returns the JSON output.
pub fn run_json(path: &Path, header: &str) -> Value {
    let mut overrides = Overrides::default();
    let mut events = true;
    for word in header.split_whitespace() {
        let (k, v) = word
            .split_once('=')
            .unwrap_or_else(|| panic!("bad run header word {word:?}"));
        match k {
            "policy" => overrides.policy = Some(PolicyName::parse(v).expect("policy")),
            "backfill" => overrides.backfill = Some(Backfill::parse(v).expect("backfill")),
            "seed" => overrides.seed = Some(v.parse().expect("seed")),
            "events" => events = v == "true",
            other => panic!("unknown run header key {other:?}"),
        }
    }
    let scenario = Scenario::from_path(path, &overrides).unwrap_or_else(|e| panic!("{e}"));
    fairway_sim::run(
        &scenario,
        RunOptions {
            events,
            ..RunOptions::default()
        },
    )
    .to_json()
}

fn lookup<'a>(doc: &'a Value, path: &str) -> Option<&'a Value> {
    let mut cur = doc;
    for part in path.split('.') {
        let (name, rest) = match part.find('[') {
            Some(i) => (&part[..i], &part[i..]),
            None => (part, ""),
        };
        if !name.is_empty() {
            cur = cur.get(name)?;
        }
        for idx in rest.split('[').filter(|s| !s.is_empty()) {
            let i: usize = idx.trim_end_matches(']').parse().ok()?;
            cur = cur.get(i)?;
        }
    }
    Some(cur)
}

fn attempts_field(doc: &Value, field: &str) -> Vec<String> {
    doc["attempts"]
        .as_array()
        .expect("run with events to use order()")
        .iter()
        .map(|a| match &a[field] {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        })
        .collect()
}

fn parse_value(s: &str) -> Value {
    let s = s.trim();
    if s == "null" {
        Value::Null
    } else if let Ok(x) = s.parse::<f64>() {
        serde_json::json!(x)
    } else if s == "true" || s == "false" {
        Value::Bool(s == "true")
    } else {
        Value::String(s.trim_matches('"').to_string())
    }
}

/// Checks one expectation line; `Err` describes the mismatch.
fn check_line(doc: &Value, line: &str) -> Result<(), String> {
    if let Some(rest) = line.strip_prefix("order(") {
        let (args, expected) = rest.split_once(")").ok_or("order( needs a closing )")?;
        let field = args
            .split(',')
            .nth(1)
            .ok_or("order(attempts, FIELD)")?
            .trim();
        let expected = expected
            .trim()
            .strip_prefix('=')
            .ok_or("order(...) = A B C")?;
        let want: Vec<&str> = expected.split_whitespace().collect();
        let got = attempts_field(doc, field);
        let got: Vec<&str> = got.iter().map(String::as_str).take(want.len()).collect();
        return if got == want {
            Ok(())
        } else {
            Err(format!("order of {field}: got {got:?}, want {want:?}"))
        };
    }
    if let Some(rest) = line
        .strip_prefix("start(")
        .or_else(|| line.strip_prefix("members("))
    {
        let (id, expected) = rest.split_once(")").ok_or("start(ID) needs a closing )")?;
        let field = if line.starts_with("start(") {
            "start"
        } else {
            "members"
        };
        let attempt = doc["attempts"]
            .as_array()
            .expect("run with events")
            .iter()
            .find(|a| a["job"] == id.trim())
            .ok_or_else(|| format!("job {id} never started"))?;
        let got = if field == "members" {
            serde_json::json!(attempt["workers"].as_array().map(|w| w.len()).unwrap_or(0))
        } else {
            attempt["start"].clone()
        };
        return compare(got, expected.trim(), &format!("{field}({id})"));
    }
    if let Some(rest) = line.strip_prefix("count(") {
        let (args, expected) = rest.split_once(")").ok_or("count( needs a closing )")?;
        let mut parts = args.split(',').map(str::trim);
        let (_, field, value) = (
            parts.next(),
            parts.next().ok_or("field")?,
            parts.next().ok_or("value")?,
        );
        let got = attempts_field(doc, field)
            .iter()
            .filter(|v| *v == value)
            .count() as f64;
        return compare(
            got.into(),
            expected.trim(),
            &format!("count({field}={value})"),
        );
    }
    let ops = ["<=", ">=", "~", "=", "<", ">"];
    let (pos, _) = ops
        .iter()
        .filter_map(|op| line.find(op).map(|p| (p, *op)))
        .min_by_key(|(p, op)| (*p, std::cmp::Reverse(op.len())))
        .ok_or_else(|| format!("no operator in {line:?}"))?;
    let path = line[..pos].trim();
    let got = lookup(doc, path)
        .ok_or_else(|| format!("{path}: not in the output"))?
        .clone();
    compare(got, &line[pos..], path)
}

fn compare(got: Value, op_and_value: &str, what: &str) -> Result<(), String> {
    let (op, rest) = ["<=", ">=", "~", "=", "<", ">"]
        .iter()
        .find_map(|op| op_and_value.strip_prefix(op).map(|r| (*op, r)))
        .ok_or("no operator")?;
    let ok = match op {
        "~" => {
            let (v, tol) = rest.split_once("+-").ok_or("~ needs +- tolerance")?;
            let (v, tol): (f64, f64) = (
                v.trim().parse().map_err(|_| "value")?,
                tol.trim().parse().map_err(|_| "tol")?,
            );
            got.as_f64().is_some_and(|g| (g - v).abs() <= tol)
        }
        "=" => {
            let want = parse_value(rest);
            match (got.as_f64(), want.as_f64()) {
                (Some(g), Some(w)) => (g - w).abs() < 1e-9,
                _ => got == want,
            }
        }
        _ => {
            let w: f64 = rest
                .trim()
                .parse()
                .map_err(|_| format!("{what}: {rest:?} is not a number"))?;
            let Some(g) = got.as_f64() else {
                return Err(format!("{what}: {got} is not a number"));
            };
            match op {
                "<=" => g <= w,
                ">=" => g >= w,
                "<" => g < w,
                ">" => g > w,
                _ => unreachable!(),
            }
        }
    };
    if ok {
        Ok(())
    } else {
        Err(format!("{what}: got {got}, want {} {}", op, rest.trim()))
    }
}

/// Runs scenario `name` (`tests/scenarios/NAME.toml`) under every run of `NAME.expect` and
/// fails with every mismatch found.
#[allow(dead_code)]
pub fn check(name: &str) {
    let dir = scenario_dir();
    check_files(
        name,
        &dir.join(format!("{name}.toml")),
        &dir.join(format!("{name}.expect")),
    );
}

/// Runs the user-facing example `examples/NAME.toml` under `tests/examples/NAME.expect`.
#[allow(dead_code)]
pub fn check_example(name: &str) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let expect =
        Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("tests/examples/{name}.expect"));
    check_files(name, &root.join(format!("examples/{name}.toml")), &expect);
}

fn check_files(name: &str, toml: &Path, expect: &Path) {
    let toml = toml.to_path_buf();
    let expect = std::fs::read_to_string(expect).expect("expect file");
    let mut failures = Vec::new();
    let mut doc: Option<Value> = None;
    let mut header = String::new();
    let mut checked = 0;
    for (n, raw) in expect.lines().enumerate() {
        let line = raw.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        if let Some(h) = line.strip_prefix("[run").and_then(|h| h.strip_suffix(']')) {
            header = h.trim().to_string();
            doc = Some(run_json(&toml, &header));
            continue;
        }
        let doc = doc.get_or_insert_with(|| run_json(&toml, ""));
        checked += 1;
        if let Err(e) = check_line(doc, line) {
            failures.push(format!("{name}.expect:{} [run {header}] {e}", n + 1));
        }
    }
    assert!(checked > 0, "{name}.expect has no expectations");
    assert!(
        failures.is_empty(),
        "{} expectation(s) failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
}
