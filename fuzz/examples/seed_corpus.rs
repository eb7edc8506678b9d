//! Writes the seed corpora under `fuzz/seeds/<target>/`: inputs a person would start from,
//! named for what they are. libFuzzer's own finds go to `fuzz/corpus/<target>/`.
//!
//!     cargo run --manifest-path fuzz/Cargo.toml --example seed_corpus -- ../shared/traces
//!
//! Run from the repository root. The argument is the folder of the SWF traces (the shared
//! traces of README's simulator section); a slice of each is taken, never a whole trace.
//! The output is deterministic: the same tree gives the same files.

use fairway_core::event::Event;
use fairway_core::{Engine, EngineConfig, Policy, Time};
use fairway_fuzz::{engine_ops, store_record};
use fairway_store::codec::{encode_blob, encode_event, encode_events, encode_snapshot};
use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

/// SWF job lines taken from each trace (after its header).
const SWF_LINES: usize = 150;
/// Random command sequences tried for the engine_ops seeds, and how many are kept.
const OPS_TRIES: u64 = 400;
const OPS_KEPT: usize = 12;

fn write(dir: &Path, name: &str, bytes: &[u8]) {
    fs::create_dir_all(dir).unwrap();
    fs::write(dir.join(name), bytes).unwrap();
}

fn toml_files(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .collect();
    files.sort();
    files
}

/// A small deterministic generator (xorshift64*), so that seeds do not depend on a crate.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn bytes(&mut self, len: usize) -> Vec<u8> {
        (0..len).map(|_| self.next() as u8).collect()
    }
}

fn variant(event: &Event) -> String {
    let debug = format!("{event:?}");
    debug
        .split(|c: char| !c.is_alphanumeric())
        .next()
        .unwrap_or("event")
        .to_string()
}

fn main() {
    let traces = PathBuf::from(std::env::args().nth(1).unwrap_or("../shared/traces".into()));
    let seeds = PathBuf::from("fuzz/seeds");
    assert!(
        Path::new("fuzz/Cargo.toml").exists(),
        "run from the repository root"
    );

    // Policies and scenarios: the examples, the scenario tests, the harness's own policies.
    let mut scenario_files = toml_files(Path::new("examples"));
    scenario_files.extend(toml_files(Path::new("crates/fairway-sim/tests/scenarios")));
    for path in &scenario_files {
        let text = fs::read(path).unwrap();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        write(&seeds.join("scenario_toml"), &name, &text);
        // A scenario's policy sections are a policy file's; its other sections are errors there.
        write(&seeds.join("policy_toml"), &name, &text);
    }
    for (i, text) in engine_ops::POLICIES.iter().enumerate() {
        write(
            &seeds.join("policy_toml"),
            &format!("engine_ops-{i}.toml"),
            text.as_bytes(),
        );
    }
    write(
        &seeds.join("policy_toml"),
        "built-in.toml",
        fairway_core::policy::BUILT_IN_POLICY.as_bytes(),
    );

    // Batch bodies: a bulk call as the SDK writes it, and values as a jobs list's contents
    // (the target also tries each input inside `{"jobs":[...]}`).
    let batch_json = seeds.join("batch_json");
    let bulk: Vec<String> = (0..4)
        .map(|i| {
            format!(
                r#"{{"id":"0193a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a{i:02}","tenant":"tenant-{i}","payload":{{"t":"A","i":{i},"e":1733612345678.125}}}}"#
            )
        })
        .collect();
    write(&batch_json, "bulk.json", format!(r#"{{"jobs":[{}]}}"#, bulk.join(",")).as_bytes());
    write(
        &batch_json,
        "values.json",
        br#" "caf\u00e9 \ud83d\ude00 \"q\" \\ \/",-0.5e-3 , 0,[true,false,null,[]],{"a":{"b":{}}}"#,
    );
    write(
        &batch_json,
        "unicode.json",
        "{\"jobs\":[\"h\u{e9}llo \u{20ac} \u{1F600} \u{7f}\",{\"k\u{e9}y\":\"\u{4e2d}\u{6587}\"}]}".as_bytes(),
    );

    // SWF: each trace's header and its first job lines.
    let mut trace_files: Vec<PathBuf> = fs::read_dir(&traces)
        .unwrap_or_else(|e| panic!("{}: {e}", traces.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "swf"))
        .collect();
    trace_files.sort();
    for path in &trace_files {
        let bytes = fs::read(path).unwrap();
        let text = String::from_utf8_lossy(&bytes);
        let mut out = String::new();
        let mut jobs = 0;
        for line in text.lines() {
            if !line.trim_start().starts_with(';') {
                jobs += 1;
                if jobs > SWF_LINES {
                    break;
                }
            }
            out.push_str(line);
            out.push('\n');
        }
        let name = path.file_stem().unwrap().to_string_lossy().into_owned();
        write(
            &seeds.join("swf"),
            &format!("{name}-head.swf"),
            out.as_bytes(),
        );
    }

    // engine_ops: random command sequences, keeping those that exercise the most kinds of
    // events (and, among equals, the most events).
    let mut rng = Rng(0x00F0_22ED_5EED);
    let mut tried: Vec<(usize, usize, Vec<u8>)> = Vec::new();
    for _ in 0..OPS_TRIES {
        let len = 64 + (rng.next() % 448) as usize;
        let data = rng.bytes(len);
        if let Some((log, _)) = engine_ops::run_to_end(&data) {
            let kinds: std::collections::BTreeSet<String> = log.iter().map(variant).collect();
            tried.push((kinds.len(), log.len(), data));
        }
    }
    tried.sort_by(|a, b| (b.0, b.1).cmp(&(a.0, a.1)));
    let mut by_kind: BTreeMap<String, Event> = BTreeMap::new();
    let mut snapshots: Vec<Vec<u8>> = Vec::new();
    for (i, (_, _, data)) in tried.iter().take(OPS_KEPT).enumerate() {
        write(&seeds.join("engine_ops"), &format!("random-{i:02}"), data);
        let (log, engine) = engine_ops::run_to_end(data).unwrap();
        for event in log {
            by_kind.entry(variant(&event)).or_insert(event);
        }
        snapshots.push(engine.snapshot());
    }

    // Store records: one frame per event variant (mode byte 0: a whole frame), the same
    // payloads for the sealed mode (mode byte 1), a snapshot frame and a blob frame.
    for (kind, event) in &by_kind {
        let frame = encode_event(event).unwrap();
        write(
            &seeds.join("store_record"),
            &format!("event-{kind}"),
            &[&[0u8][..], &frame].concat(),
        );
        let payload = &frame[fairway_store::codec::FRAME_HEADER_LEN..];
        assert_eq!(
            store_record::seal(payload),
            frame,
            "seal frames as the store does"
        );
        write(
            &seeds.join("store_record"),
            &format!("payload-{kind}"),
            &[&[1u8][..], payload].concat(),
        );
    }
    // A group record (one group commit) of one event of each variant, whole and sealed.
    let group: Vec<Event> = by_kind.values().cloned().collect();
    let frame = encode_events(&group).unwrap();
    write(
        &seeds.join("store_record"),
        "group",
        &[&[0u8][..], &frame].concat(),
    );
    write(
        &seeds.join("store_record"),
        "payload-group",
        &[&[1u8][..], &frame[fairway_store::codec::FRAME_HEADER_LEN..]].concat(),
    );
    let smallest = snapshots.iter().min_by_key(|s| s.len()).unwrap();
    let frame = encode_snapshot(smallest).unwrap();
    write(
        &seeds.join("store_record"),
        "snapshot",
        &[&[0u8][..], &frame].concat(),
    );
    let frame = encode_blob(br#"{"msg": "hi"}"#).unwrap();
    write(
        &seeds.join("store_record"),
        "blob",
        &[&[0u8][..], &frame].concat(),
    );

    // engine_restore: snapshots of a fresh engine and of the random runs above (small ones).
    let fresh = Engine::new(Time::ZERO, Policy::built_in(), EngineConfig::default());
    write(&seeds.join("engine_restore"), "fresh", &fresh.snapshot());
    let mut sized: Vec<&Vec<u8>> = snapshots.iter().collect();
    sized.sort_by_key(|s| s.len());
    for (i, snapshot) in sized.iter().take(6).enumerate() {
        write(
            &seeds.join("engine_restore"),
            &format!("run-{i:02}"),
            snapshot,
        );
    }
    println!("seeds written under {}", seeds.display());
}
