//! `batch_json`: the server's split of a large `POST /v1/jobs/batch` body into its jobs' JSON
//! texts (`fairway_server::batch_json::job_texts`, which checks the body as JSON on the way)
//! against serde_json's reading of the same body as `{"jobs": [RawValue, ...]}`.
//!
//! Checks: whatever the split accepts, serde_json accepts, with the same texts; whatever
//! serde_json accepts in the plain shape, the split accepts (`check_against_serde_json`).
//! Each input is tried as it is and as the jobs list of a plain body, so that the fuzzer's
//! mutations reach the values rather than dying at the outer object. Each job the split finds,
//! and the input itself, also goes through `plain_job` (the server's reader of a job of the
//! plain shape), which must not panic; the server's unit tests compare it with serde_json's
//! `SubmitBody`, a type this workspace does not build.

// The server's module, compiled here as it is: it uses nothing but the standard library and,
// for the check, serde and serde_json, so the fuzz workspace does not build the whole server.
#[path = "../../crates/fairway-server/src/batch_json.rs"]
mod split;

/// Runs one input.
pub fn run(data: &[u8]) {
    split::check_against_serde_json(data);
    let mut body = Vec::with_capacity(data.len() + 11);
    body.extend_from_slice(b"{\"jobs\":[");
    body.extend_from_slice(data);
    body.extend_from_slice(b"]}");
    split::check_against_serde_json(&body);
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = split::plain_job(text);
    }
    for job in split::job_texts(&body).unwrap_or_default() {
        let _ = split::plain_job(job);
    }
}
