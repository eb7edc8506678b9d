//! HTTP API v1 end to end, over real HTTP on loopback against a server with a real store.

mod common;

use common::{TempDir, TestServer};
use serde_json::{Value, json};
use std::time::{Duration, Instant};

/// A job goes the whole way: submitted with a payload and a demand, leased with both, extended
/// by a heartbeat, completed; each step shows in its status, and a repeated completion of the
/// attempt that ended it answers the final state again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn submit_lease_heartbeat_complete() {
    let dir = TempDir::new("e2e");
    let server = TestServer::start(dir.path(), |_| {}).await;

    let (code, reply) = server
        .submit(json!({
            "id": "render-1", "tenant": "acme", "demand": {"cpu": 2},
            "estimate_ms": 5000, "payload": {"frame": 7, "scene": "intro"}
        }))
        .await;
    assert_eq!(code, 201, "{reply}");
    assert_eq!(reply["outcome"], "accepted");
    assert_eq!(reply["job_id"], "render-1");
    assert_eq!(reply["duplicate"], false);

    let (code, status) = server.status("render-1").await;
    assert_eq!(code, 200, "{status}");
    assert_eq!(status["state"], "queued");
    assert_eq!(status["tenant"], "acme");
    assert_eq!(status["class"], "default");
    assert_eq!(status["estimate_ms"], 5000);
    assert!(status["arrival"].as_str().unwrap().ends_with('Z'));

    let leases = server.lease("w1", 1, 0).await;
    assert_eq!(leases.len(), 1, "{leases:?}");
    let lease = &leases[0];
    assert_eq!(lease["job_id"], "render-1");
    assert_eq!(lease["attempt"], 1);
    assert_eq!(lease["epoch"], 1);
    assert_eq!(lease["members"], 1);
    assert_eq!(lease["lease_ms"], 30000);
    assert_eq!(lease["tenant"], "acme");
    assert_eq!(lease["class"], "default");
    assert_eq!(lease["demand"], json!({"cpu": 2.0}));
    assert_eq!(lease["payload"], json!({"frame": 7, "scene": "intro"}));

    let (_, status) = server.status("render-1").await;
    assert_eq!(status["state"], "running");
    assert_eq!(status["workers"], json!(["w1"]));
    assert!(status["lease_expires_at"].is_string());

    let (code, hb) = server
        .post("/v1/leases/render-1/heartbeat", json!({"epoch": 1}))
        .await;
    assert_eq!(code, 200, "{hb}");
    assert_eq!(hb["action"], "continue");
    assert!(hb["expires_at"].as_str().unwrap().ends_with('Z'));

    let (code, done) = server
        .post(
            "/v1/leases/render-1/complete",
            json!({"epoch": 1, "outcome": "succeeded", "usage_ms": 1200}),
        )
        .await;
    assert_eq!(code, 200, "{done}");
    assert_eq!(done, json!({"job_id": "render-1", "state": "succeeded"}));
    let (_, status) = server.status("render-1").await;
    assert_eq!(status["state"], "succeeded");

    // A worker that lost the answer and completes again learns the final state.
    let (code, again) = server
        .post(
            "/v1/leases/render-1/complete",
            json!({"epoch": 1, "outcome": "succeeded"}),
        )
        .await;
    assert_eq!(code, 200, "{again}");
    assert_eq!(again["state"], "succeeded");
    // And nothing is left to lease.
    assert!(server.lease("w1", 1, 0).await.is_empty());

    // A job without payload or demand leases with the defaults.
    server
        .submit(json!({"id": "plain", "tenant": "acme"}))
        .await;
    let leases = server.lease("w1", 1, 0).await;
    assert_eq!(leases[0]["demand"], json!({"cpu": 1.0}));
    assert_eq!(leases[0]["payload"], Value::Null);

    // A failure that may not be retried ends the job.
    let (code, failed) = server
        .post(
            "/v1/leases/plain/complete",
            json!({"epoch": 1, "outcome": "failed", "retryable": false}),
        )
        .await;
    assert_eq!(code, 200, "{failed}");
    assert_eq!(failed["state"], "failed");
    server.stop().await.expect("clean stop");
}

/// Batches: one result per job in order (malformed items refused in their slot), and one result
/// per completion in order (unknown jobs and stale epochs in theirs).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn batch_submit_and_batch_complete() {
    let dir = TempDir::new("batch");
    let server = TestServer::start(dir.path(), |_| {}).await;
    let jobs: Vec<Value> = (0..5)
        .map(|i| json!({"id": format!("b{i}"), "tenant": "acme", "payload": i}))
        .chain([json!({"id": "bad", "tenant": "acme", "colour": "blue"})])
        .chain([json!({"id": "b0", "tenant": "acme", "payload": 0})])
        .collect();
    let (code, reply) = server.post("/v1/jobs/batch", json!({ "jobs": jobs })).await;
    assert_eq!(code, 200, "{reply}");
    let results = reply["results"].as_array().unwrap();
    assert_eq!(results.len(), 7);
    for (i, r) in results.iter().take(5).enumerate() {
        assert_eq!(r["status"], 201, "{r}");
        assert_eq!(r["outcome"], "accepted");
        assert_eq!(r["job_id"], format!("b{i}"));
    }
    assert_eq!(results[5]["status"], 422);
    assert_eq!(results[5]["outcome"], "rejected_final");
    assert_eq!(results[5]["reason"], "invalid");
    assert!(
        results[5]["message"]
            .as_str()
            .unwrap()
            .contains("jobs[5]: field `colour`"),
        "{}",
        results[5]
    );
    assert_eq!(results[6]["status"], 201);
    assert_eq!(results[6]["duplicate"], true);
    assert_eq!(server.status("bad").await.0, 404);

    let leases = server.lease("w1", 10, 0).await;
    assert_eq!(leases.len(), 5);
    let mut completions: Vec<Value> = leases
        .iter()
        .map(|l| json!({"job_id": l["job_id"], "epoch": l["epoch"], "outcome": "succeeded"}))
        .collect();
    completions.push(json!({"job_id": "nope", "epoch": 1, "outcome": "succeeded"}));
    completions.push(json!({"job_id": "b1", "epoch": 7, "outcome": "succeeded"}));
    completions.push(json!({"job_id": "b2", "epoch": 1, "outcome": "maybe"}));
    let (code, reply) = server
        .post("/v1/leases/complete", json!({ "completions": completions }))
        .await;
    assert_eq!(code, 200, "{reply}");
    let results = reply["results"].as_array().unwrap();
    assert_eq!(results.len(), 8);
    for (r, l) in results.iter().zip(&leases) {
        assert_eq!(r["job_id"], l["job_id"]);
        assert_eq!(r["status"], 200, "{r}");
        assert_eq!(r["state"], "succeeded");
    }
    assert_eq!(results[5]["status"], 404);
    assert_eq!(results[5]["error"], "unknown_job");
    // b1 already succeeded under epoch 1: epoch 7 is stale.
    assert_eq!(results[6]["status"], 409, "{}", results[6]);
    assert_eq!(results[6]["error"], "stale_epoch");
    assert_eq!(results[7]["status"], 422);
    assert_eq!(results[7]["error"], "invalid");

    // Over the limit, the whole batch is refused.
    let many: Vec<Value> = (0..1001)
        .map(|i| json!({"id": format!("m{i}"), "tenant": "acme"}))
        .collect();
    let (code, reply) = server.post("/v1/jobs/batch", json!({ "jobs": many })).await;
    assert_eq!(code, 413, "{reply}");
    assert_eq!(reply["error"], "too_large");
    assert_eq!(server.status("m0").await.0, 404);
}

/// A batch reply's listed results as (index, status, outcome).
fn listed(reply: &Value) -> Vec<(u64, u64, &str)> {
    reply["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["index"].as_u64().unwrap(),
                r["status"].as_u64().unwrap(),
                r["outcome"].as_str().unwrap(),
            )
        })
        .collect()
}

/// `omit=accepted`: a batch's reply leaves out the jobs accepted as new under the ids their
/// requests gave, counts them, and lists every other result (generated id, duplicate,
/// deferred, malformed) with its job's index; a bad `omit` or an unknown parameter is refused
/// by name and submits nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn batch_submit_can_leave_out_the_accepted() {
    let dir = TempDir::new("batch-omit");
    let server = TestServer::start(dir.path(), |_| {}).await;
    let (code, first) = server
        .post("/v1/jobs", json!({"id": "seen", "tenant": "acme"}))
        .await;
    assert_eq!(code, 201, "{first}");
    let jobs = json!({"jobs": [
        {"id": "new0", "tenant": "acme"},
        {"tenant": "acme"},
        {"id": "seen", "tenant": "acme"},
        {"id": "new3", "tenant": "acme"},
        {"id": "later", "tenant": "acme", "not_before": "2100-01-01T00:00:00.000Z"},
        {"id": "bad", "tenant": "acme", "colour": "blue"},
        {"id": "new6", "tenant": "acme"}
    ]});
    let (code, reply) = server
        .post("/v1/jobs/batch?omit=accepted", jobs.clone())
        .await;
    assert_eq!(code, 200, "{reply}");
    assert_eq!(reply["omitted"], 3, "{reply}");
    assert_eq!(
        listed(&reply),
        [
            (1, 201, "accepted"),
            (2, 201, "accepted"),
            (4, 202, "deferred"),
            (5, 422, "rejected_final")
        ],
        "{reply}"
    );
    let results = &reply["results"];
    let generated = results[0]["job_id"].as_str().unwrap();
    assert_eq!(results[0]["duplicate"], false);
    assert_eq!(server.status(generated).await.0, 200);
    assert_eq!(results[1]["job_id"], "seen");
    assert_eq!(results[1]["duplicate"], true);
    assert!(
        results[3]["message"]
            .as_str()
            .unwrap()
            .starts_with("jobs[5]:")
    );
    for id in ["new0", "new3", "new6"] {
        let (code, status) = server.status(id).await;
        assert_eq!(code, 200, "{id}: {status}");
        assert_eq!(status["state"], "queued", "{id}");
    }

    // Without the parameter, the same jobs again: every result, in order, no index.
    let (code, reply) = server.post("/v1/jobs/batch", jobs).await;
    assert_eq!(code, 200, "{reply}");
    assert!(reply.get("omitted").is_none(), "{reply}");
    let results = reply["results"].as_array().unwrap();
    assert_eq!(results.len(), 7);
    assert!(results.iter().all(|r| r.get("index").is_none()), "{reply}");

    for (query, names) in [("omit=rejected", "`omit`"), ("colour=blue", "colour")] {
        let (code, e) = server
            .post(
                &format!("/v1/jobs/batch?{query}"),
                json!({"jobs": [{"id": "never", "tenant": "acme"}]}),
            )
            .await;
        assert_eq!(code, 422, "{query}: {e}");
        assert_eq!(e["error"], "invalid", "{query}");
        assert!(
            e["message"].as_str().unwrap().contains(names),
            "{query}: {e}"
        );
    }
    assert_eq!(server.status("never").await.0, 404);
    server.stop().await.expect("clean stop");
}

/// A batch large enough to go to the writer in parts while it is read (1000 jobs, over 32 KiB)
/// answers as a small one does: a malformed job, a generated id, a duplicate and a reused id
/// in different parts each get their own result at their index, every other job is accepted
/// and stored, the last part's too; a body that is not JSON at its very end submits nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_large_batch_answers_each_job_in_its_place() {
    let dir = TempDir::new("batch-large");
    let server = TestServer::start(dir.path(), |_| {}).await;
    let payload = json!({"note": "a payload long enough to make the body large"});
    let mut jobs: Vec<Value> = (0..1000)
        .map(|i| json!({"id": format!("big{i}"), "tenant": "acme", "payload": payload}))
        .collect();
    jobs[5] = json!({"id": "big5", "tenant": "acme", "colour": "blue"});
    jobs[300] = json!({"id": "big300", "tenant": "acme", "priority": "high"});
    jobs[700] = json!({"tenant": "acme"});
    jobs[900] = jobs[10].clone();
    jobs[950] = json!({"id": "big20", "tenant": "acme", "priority": 7});
    let body = json!({ "jobs": jobs });
    assert!(body.to_string().len() > 32 * 1024);
    let (code, reply) = server
        .post("/v1/jobs/batch?omit=accepted", body.clone())
        .await;
    assert_eq!(code, 200, "{reply}");
    assert_eq!(reply["omitted"], 995, "{reply}");
    assert_eq!(
        listed(&reply),
        [
            (5, 422, "rejected_final"),
            (300, 422, "rejected_final"),
            (700, 201, "accepted"),
            (900, 201, "accepted"),
            (950, 422, "rejected_final")
        ],
        "{reply}"
    );
    let results = &reply["results"];
    assert!(
        results[1]["message"]
            .as_str()
            .unwrap()
            .starts_with("jobs[300]:")
    );
    assert_eq!(results[3]["job_id"], "big10");
    assert_eq!(results[3]["duplicate"], true);
    assert_eq!(results[4]["reason"], "id_reused");
    let generated = results[2]["job_id"].as_str().unwrap();
    for id in [generated, "big0", "big127", "big128", "big640", "big999"] {
        let (code, status) = server.status(id).await;
        assert_eq!(code, 200, "{id}: {status}");
        assert_eq!(status["state"], "queued", "{id}");
    }
    assert_eq!(server.status("big5").await.0, 404);

    // The same jobs again, every result listed: the named ones are duplicates now.
    let (code, reply) = server.post("/v1/jobs/batch", body).await;
    assert_eq!(code, 200, "{reply}");
    let results = reply["results"].as_array().unwrap();
    assert_eq!(results.len(), 1000);
    assert!(
        (0..1000)
            .filter(|i| ![5, 300, 700, 950].contains(i))
            .all(|i| results[i]["duplicate"] == true
                && results[i]["job_id"] == format!("big{}", if i == 900 { 10 } else { i })),
        "{reply}"
    );
    assert_eq!(results[700]["duplicate"], false);

    // A large body broken at its very end: refused whole, its first job not submitted.
    let fresh: Vec<Value> = (0..1000)
        .map(|i| json!({"id": format!("torn{i}"), "tenant": "acme", "payload": payload}))
        .collect();
    let mut torn = json!({ "jobs": fresh }).to_string();
    torn.pop();
    let (code, e) = server.post_raw("/v1/jobs/batch", torn).await;
    assert_eq!(code, 400, "{e}");
    assert_eq!(e["error"], "malformed_json");
    assert_eq!(server.status("torn0").await.0, 404);

    // Broken in its middle, inside a job's string (a raw control byte): refused whole too.
    let mut broken = json!({ "jobs": fresh }).to_string();
    let at = broken.find("torn600").unwrap();
    broken.replace_range(at..at + 1, "\u{1}");
    let (code, e) = server.post_raw("/v1/jobs/batch", broken).await;
    assert_eq!(code, 400, "{e}");
    assert_eq!(e["error"], "malformed_json");
    assert_eq!(server.status("torn0").await.0, 404);

    // The key written with an escape is still `jobs` (serde_json reads the shape the fast
    // split leaves to it): every job accepted.
    let escaped = json!({ "jobs": fresh })
        .to_string()
        .replacen("\"jobs\"", "\"j\\u006fbs\"", 1);
    assert!(escaped.starts_with(r#"{"j\u006fbs":"#));
    let (code, reply) = server.post_raw("/v1/jobs/batch", escaped).await;
    assert_eq!(code, 200, "{reply}");
    assert_eq!(reply["results"].as_array().unwrap().len(), 1000);
    assert_eq!(server.status("torn0").await.0, 200);
    assert_eq!(server.status("torn999").await.0, 200);
    server.stop().await.expect("clean stop");
}

/// A completion call with `next` completes, then leases in the same call: the capacity the
/// completions free goes to the lease request (a worker of capacity 2 holding 2 leases gets 2
/// more); with no work left it answers at once with no leases. A bad `next` changes nothing;
/// a lease request the engine refuses after the completions leaves their results standing
/// and says why in `lease_error`. Without `next` the reply has no `leases`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn completions_with_the_next_lease_request_in_one_call() {
    let dir = TempDir::new("complete-next");
    let server = TestServer::start(dir.path(), |_| {}).await;
    for i in 0..4 {
        let (code, reply) = server
            .submit(json!({"id": format!("n{i}"), "tenant": "acme", "payload": i}))
            .await;
        assert_eq!(code, 201, "{reply}");
    }
    let offer = json!({"worker": "w1", "capacity": {"cpu": 2}, "max_jobs": 2});
    let (code, reply) = server.post("/v1/leases", offer.clone()).await;
    assert_eq!(code, 200, "{reply}");
    let first = reply["leases"].as_array().unwrap().clone();
    assert_eq!(first.len(), 2, "{reply}");
    let done = |leases: &[Value]| -> Vec<Value> {
        leases
            .iter()
            .map(|l| json!({"job_id": l["job_id"], "epoch": l["epoch"], "outcome": "succeeded"}))
            .collect()
    };
    let complete = async |leases: &[Value], next: &Value| {
        let body = json!({"completions": done(leases), "next": next});
        server.post("/v1/leases/complete", body).await
    };

    let (code, reply) = complete(&first, &offer).await;
    assert_eq!(code, 200, "{reply}");
    for (r, l) in reply["results"].as_array().unwrap().iter().zip(&first) {
        assert_eq!(
            (r["job_id"].clone(), r["state"].clone()),
            (l["job_id"].clone(), json!("succeeded"))
        );
    }
    let second = reply["leases"].as_array().unwrap().clone();
    assert_eq!(
        second.len(),
        2,
        "the completions' capacity is leased again: {reply}"
    );
    assert!(reply.get("lease_error").is_none(), "{reply}");
    for l in &second {
        assert!(!first.iter().any(|f| f["job_id"] == l["job_id"]), "{reply}");
        let (_, status) = server.status(l["job_id"].as_str().unwrap()).await;
        assert_eq!(status["state"], "running", "{status}");
        let number: u64 = l["job_id"].as_str().unwrap()[1..].parse().unwrap();
        assert_eq!(l["payload"], number, "each lease carries its job's payload");
    }

    // No work left: answered at once, with no leases.
    let started = Instant::now();
    let (code, reply) = complete(&second, &offer).await;
    assert_eq!(code, 200, "{reply}");
    assert_eq!(reply["leases"], json!([]), "{reply}");
    assert_eq!(reply["results"][1]["state"], "succeeded", "{reply}");
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "it does not wait for work"
    );

    // A bad `next` is refused before anything is applied.
    let (code, _) = server.submit(json!({"id": "n4", "tenant": "acme"})).await;
    assert_eq!(code, 201);
    let held = server.lease("w2", 1, 0).await;
    assert_eq!(held.len(), 1);
    for (next, field) in [
        (
            json!({"worker": "w2", "capacity": {"cpu": 1}, "wait_ms": 5000}),
            "next.wait_ms",
        ),
        (
            json!({"worker": "w2", "capacity": {"cpu": 1}, "max_jobs": 100000}),
            "next.max_jobs",
        ),
        (json!({"worker": "w2", "capcity": {}}), "capcity"),
    ] {
        let (code, reply) = complete(&held, &next).await;
        assert_eq!(code, 422, "{reply}");
        let message = reply["message"].as_str().unwrap();
        assert!(message.contains(field), "{reply}");
        assert_eq!(server.status("n4").await.1["state"], "running");
    }

    // The engine refuses the offer after the completions were applied: they stand.
    let refused = json!({"worker": "w2", "capacity": {}});
    let (code, reply) = complete(&held, &refused).await;
    assert_eq!(code, 200, "{reply}");
    assert_eq!(reply["results"][0]["state"], "succeeded", "{reply}");
    assert_eq!(reply["leases"], json!([]), "{reply}");
    assert_eq!(reply["lease_error"]["status"], 422, "{reply}");
    assert_eq!(reply["lease_error"]["error"], "invalid", "{reply}");
    assert!(
        reply["lease_error"]["message"]
            .as_str()
            .unwrap()
            .contains("no capacity"),
        "{reply}"
    );
    assert_eq!(server.status("n4").await.1["state"], "succeeded");

    // Without `next`, the reply is as it always was.
    let (code, reply) = server
        .post(
            "/v1/leases/complete",
            json!({"completions": [{"job_id": "n4", "epoch": 9, "outcome": "succeeded"}]}),
        )
        .await;
    assert_eq!(code, 200, "{reply}");
    assert!(
        reply.get("leases").is_none() && reply.get("lease_error").is_none(),
        "{reply}"
    );
    server.stop().await.expect("clean stop");
}

/// The same id again returns the first outcome and creates nothing: one job, leased once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn same_id_twice_is_one_job() {
    let dir = TempDir::new("idem");
    let server = TestServer::start(dir.path(), |_| {}).await;
    let job = json!({"id": "once", "tenant": "acme", "payload": "first"});
    let (code, first) = server.submit(job.clone()).await;
    assert_eq!((code, first["duplicate"].clone()), (201, json!(false)));
    let (code, second) = server
        .submit(json!({"id": "once", "tenant": "acme", "payload": "second"}))
        .await;
    assert_eq!(code, 201, "{second}");
    assert_eq!(second["outcome"], "accepted");
    assert_eq!(second["duplicate"], true);
    let (_, batch) = server.post("/v1/jobs/batch", json!({"jobs": [job]})).await;
    assert_eq!(batch["results"][0]["duplicate"], true);

    let leases = server.lease("w1", 10, 0).await;
    assert_eq!(leases.len(), 1);
    assert_eq!(leases[0]["payload"], "first", "the first payload stays");

    // The same id for a different job is refused for good.
    let (code, reused) = server
        .submit(json!({"id": "once", "tenant": "other"}))
        .await;
    assert_eq!(code, 422, "{reused}");
    assert_eq!(reused["reason"], "id_reused");

    // A deferred job answers deferred again, with the same instant.
    let later = "2100-01-01T00:00:00.000Z";
    let (code, d1) = server
        .submit(json!({"id": "later", "tenant": "acme", "not_before": later}))
        .await;
    assert_eq!(code, 202, "{d1}");
    assert_eq!(d1["outcome"], "deferred");
    assert_eq!(d1["not_before"], later);
    let (code, d2) = server
        .submit(json!({"id": "later", "tenant": "acme", "not_before": later}))
        .await;
    assert_eq!(code, 202);
    assert_eq!(d2["duplicate"], true);
    assert_eq!(d2["not_before"], later);
    let (_, status) = server.status("later").await;
    assert_eq!(status["state"], "deferred");
    assert_eq!(status["not_before"], later);

    // Without an id, each submission is a new job with a generated id.
    let (_, a) = server.submit(json!({"tenant": "acme"})).await;
    let (_, b) = server.submit(json!({"tenant": "acme"})).await;
    assert_ne!(a["job_id"], b["job_id"]);
    assert_eq!(server.status(a["job_id"].as_str().unwrap()).await.0, 200);
}

/// A long poll waits for work: a submit wakes it with the lease; without work it ends after
/// `wait_ms` with an empty list.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn long_poll_is_woken_by_a_submit() {
    let dir = TempDir::new("poll");
    let server = TestServer::start(dir.path(), |_| {}).await;

    let started = Instant::now();
    assert!(server.lease("idle", 1, 300).await.is_empty());
    let waited = started.elapsed();
    assert!(waited >= Duration::from_millis(300), "{waited:?}");
    assert!(waited < Duration::from_secs(5), "{waited:?}");

    let poller = {
        let s = server.client();
        tokio::spawn(async move {
            let started = Instant::now();
            let leases = s.lease("w1", 1, 20_000).await;
            (leases, started.elapsed())
        })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        !poller.is_finished(),
        "the poll waits while there is no work"
    );
    let (code, _) = server.submit(json!({"id": "wake", "tenant": "acme"})).await;
    assert_eq!(code, 201);
    let (leases, waited) = poller.await.unwrap();
    assert_eq!(leases.len(), 1);
    assert_eq!(leases[0]["job_id"], "wake");
    assert!(waited < Duration::from_secs(10), "{waited:?}");
    let (_, status) = server.status("wake").await;
    assert_eq!(status["workers"], json!(["w1"]));
}

/// A lease that expires is reclaimed; the next worker gets the job under a new epoch, and the
/// old worker's heartbeat and completion are refused with 409 and change nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stale_epoch_is_refused_and_changes_nothing() {
    let dir = TempDir::new("stale");
    let server = TestServer::start(dir.path(), |c| c.lease_ms = Some(300)).await;
    server.submit(json!({"id": "j", "tenant": "acme"})).await;
    let old = server.lease("old", 1, 0).await;
    assert_eq!(old[0]["epoch"], 1);
    assert_eq!(old[0]["lease_ms"], 300);

    // The lease expires; the job waits out its retry backoff (1 s) and goes to the new worker.
    tokio::time::sleep(Duration::from_millis(400)).await;
    let new = server.lease("new", 1, 10_000).await;
    assert_eq!(new.len(), 1);
    assert_eq!(new[0]["job_id"], "j");
    assert_eq!(new[0]["epoch"], 2);
    assert_eq!(new[0]["attempt"], 2);

    let (code, refused) = server
        .post(
            "/v1/leases/j/complete",
            json!({"epoch": 1, "outcome": "succeeded"}),
        )
        .await;
    assert_eq!(code, 409, "{refused}");
    assert_eq!(refused["error"], "stale_epoch");
    assert_eq!(refused["current_epoch"], 2);
    let (code, refused) = server
        .post("/v1/leases/j/heartbeat", json!({"epoch": 1}))
        .await;
    assert_eq!(code, 409, "{refused}");
    let (_, status) = server.status("j").await;
    assert_eq!(status["state"], "running");
    assert_eq!(status["epoch"], 2);
    assert_eq!(status["workers"], json!(["new"]));

    let (code, done) = server
        .post(
            "/v1/leases/j/complete",
            json!({"epoch": 2, "outcome": "succeeded"}),
        )
        .await;
    assert_eq!(code, 200, "{done}");
    assert_eq!(done["state"], "succeeded");
}

/// A payload is kept as the JSON text sent, single and batched: the lease carries it byte for
/// byte (spacing, key order, `1.50`); a body with a payload that is not JSON is refused whole.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn payload_text_is_kept_as_sent() {
    let dir = TempDir::new("raw");
    let server = TestServer::start(dir.path(), |_| {}).await;
    let text = r#"{"z": [1.50, 2e3],  "a": {"k": "v\u00e9"}}"#;
    let (code, reply) = server
        .post_raw(
            "/v1/jobs",
            format!(r#"{{"id": "raw-1", "tenant": "acme", "payload": {text}}}"#),
        )
        .await;
    assert_eq!(code, 201, "{reply}");
    let (code, reply) = server
        .post_raw(
            "/v1/jobs/batch",
            format!(
                r#"{{"jobs": [{{"id": "raw-2", "tenant": "acme", "payload": {text}}},
                    {{"id": "raw-3", "tenant": "acme", "payload": {{"open": }}]}}"#
            ),
        )
        .await;
    assert_eq!(
        code, 400,
        "a body that is not JSON is refused whole: {reply}"
    );
    let (code, reply) = server
        .post_raw(
            "/v1/jobs/batch",
            format!(r#"{{"jobs": [{{"id": "raw-2", "tenant": "acme", "payload": {text}}}]}}"#),
        )
        .await;
    assert_eq!(code, 200, "{reply}");

    let body = server
        .auth(server.http.post(format!("{}/v1/leases", server.url)))
        .json(&json!({"worker": "w1", "capacity": {"cpu": 4}, "max_jobs": 2, "wait_ms": 0}))
        .send()
        .await
        .expect("lease")
        .text()
        .await
        .expect("lease body");
    assert_eq!(
        body.matches(&format!(r#""payload":{text}"#)).count(),
        2,
        "both leases carry the text as sent: {body}"
    );
    let leases: Value = serde_json::from_str(&body).expect("the lease reply is JSON");
    assert_eq!(leases["leases"][0]["payload"]["z"][0], 1.5);
}

/// Each kind of bad input gets its status and stable error code, and leaves no trace.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_gets_its_error_and_changes_nothing() {
    let dir = TempDir::new("bad");
    let server = TestServer::start(dir.path(), |c| {
        c.limits.max_payload_bytes = 1000;
        c.limits.max_body_bytes = 64 * 1024;
    })
    .await;

    let (code, e) = server.post_raw("/v1/jobs", "{\"id\": \"x\", ").await;
    assert_eq!(
        (code, e["error"].as_str()),
        (400, Some("malformed_json")),
        "{e}"
    );
    let (code, e) = server.post_raw("/v1/jobs", "").await;
    assert_eq!(
        (code, e["error"].as_str()),
        (400, Some("malformed_json")),
        "{e}"
    );

    let (code, e) = server
        .submit(json!({"id": "x", "tenant": "acme", "priorty": 3}))
        .await;
    assert_eq!((code, e["error"].as_str()), (422, Some("invalid")), "{e}");
    assert!(e["message"].as_str().unwrap().contains("priorty"), "{e}");
    let (code, e) = server
        .submit(json!({"id": "x", "tenant": "acme", "demand": {"cpu": "lots"}}))
        .await;
    assert_eq!(code, 422, "{e}");
    assert!(e["message"].as_str().unwrap().contains("demand.cpu"), "{e}");
    let (code, e) = server.submit(json!({"id": "x"})).await;
    assert_eq!(code, 422, "{e}");
    assert!(e["message"].as_str().unwrap().contains("tenant"), "{e}");
    let (code, e) = server
        .submit(json!({"id": "x", "tenant": "acme", "not_before": "soon"}))
        .await;
    assert_eq!(code, 422, "{e}");
    assert!(e["message"].as_str().unwrap().contains("not_before"), "{e}");

    let (code, e) = server
        .submit(json!({"id": "x", "tenant": "acme", "payload": "x".repeat(2000)}))
        .await;
    assert_eq!((code, e["error"].as_str()), (413, Some("too_large")), "{e}");
    assert!(e["message"].as_str().unwrap().contains("payload"), "{e}");
    let huge = format!("{{\"jobs\": [\"{}\"]}}", "y".repeat(100 * 1024));
    let (code, e) = server.post_raw("/v1/jobs/batch", huge).await;
    assert_eq!((code, e["error"].as_str()), (413, Some("too_large")), "{e}");

    let (code, e) = server
        .submit(json!({"id": "x", "tenant": "acme", "class": "platinum"}))
        .await;
    assert_eq!(code, 422, "{e}");
    assert_eq!(e["outcome"], "rejected_final");
    assert_eq!(e["reason"], "unknown_class");

    let (code, e) = server.get("/v1/jobs/x").await;
    assert_eq!(
        (code, e["error"].as_str()),
        (404, Some("unknown_job")),
        "{e}"
    );
    let (code, e) = server.post("/v1/jobs/x/cancel", json!({})).await;
    assert_eq!(
        (code, e["error"].as_str()),
        (404, Some("unknown_job")),
        "{e}"
    );
    let (code, e) = server
        .post("/v1/leases/x/heartbeat", json!({"epoch": 1}))
        .await;
    assert_eq!(
        (code, e["error"].as_str()),
        (404, Some("unknown_job")),
        "{e}"
    );
    let (code, e) = server
        .post(
            "/v1/leases",
            json!({"worker": "w", "capacity": {"cpu": 1}, "wait_ms": 60001}),
        )
        .await;
    assert_eq!(code, 422, "{e}");
    assert!(e["message"].as_str().unwrap().contains("wait_ms"), "{e}");
    let (code, e) = server
        .post(
            "/v1/leases",
            json!({"worker": "w", "capacity": {"cpu": 1}, "max_jobs": 1001}),
        )
        .await;
    assert_eq!(code, 422, "{e}");
    let (code, e) = server
        .post("/v1/leases", json!({"worker": "w", "capacity": {}}))
        .await;
    assert_eq!((code, e["error"].as_str()), (422, Some("invalid")), "{e}");
    let (code, e) = server.get("/v1/nothing").await;
    assert_eq!((code, e["error"].as_str()), (404, Some("not_found")), "{e}");
    let (code, e) = server.get("/v1/leases").await;
    assert_eq!(code, 405, "{e}");
    assert_eq!(e["error"], "method_not_allowed");

    // A malformed policy is refused with its errors, and the prior version stays.
    let (code, before) = server.get("/v1/policy").await;
    assert_eq!(code, 200);
    assert_eq!(before["version"], 1);
    let (code, e) = server
        .put_text(
            "/v1/policy",
            "[policy]\nname = \"fair\"\n\n[[class]]\nname = \"x\"\nwieght = 2\n",
        )
        .await;
    assert_eq!(code, 422, "{e}");
    assert_eq!(e["error"], "invalid_policy");
    assert_eq!(e["errors"][0]["line"], 6, "{e}");
    assert_eq!(e["errors"][0]["key"], "wieght", "{e}");
    let (_, after) = server.get("/v1/policy").await;
    assert_eq!(after, before);

    // Nothing of the above created a job.
    assert_eq!(server.status("x").await.0, 404);
    assert!(server.lease("w", 10, 0).await.is_empty());
}

/// A published policy becomes the next version and governs admission.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn policy_versions_govern_admission() {
    let dir = TempDir::new("policy");
    let server = TestServer::start(dir.path(), |_| {}).await;
    let (code, e) = server
        .submit(json!({"id": "g", "tenant": "acme", "class": "gold"}))
        .await;
    assert_eq!((code, e["reason"].as_str()), (422, Some("unknown_class")));
    let text = "[policy]\nname = \"fair\"\n\n[[class]]\nname = \"default\"\n\n[[class]]\nname = \"gold\"\npriority = 10\n\n[[tenant]]\nname = \"cheap\"\nclasses = [\"default\"]\n";
    let (code, v) = server.put_text("/v1/policy", text).await;
    assert_eq!(code, 200, "{v}");
    assert_eq!(v["version"], 2);
    let (_, p) = server.get("/v1/policy").await;
    assert_eq!(p["version"], 2);
    assert_eq!(p["policy"], text);
    let (code, ok) = server
        .submit(json!({"id": "g", "tenant": "acme", "class": "gold"}))
        .await;
    assert_eq!(code, 201, "{ok}");
    let (code, e) = server
        .submit(json!({"id": "c", "tenant": "cheap", "class": "gold"}))
        .await;
    assert_eq!(code, 403, "{e}");
    assert_eq!(e["reason"], "class_not_permitted");

    // The policy survives a restart.
    server.stop().await.expect("clean stop");
    let server = TestServer::start(dir.path(), |_| {}).await;
    let (_, p) = server.get("/v1/policy").await;
    assert_eq!(p["version"], 2);
    let (_, s) = server.status("g").await;
    assert_eq!(s["class"], "gold");
}

const TOKENS: &str = r#"
[[token]]
secret = "acme-secret-0123456789"
role = "tenant"
tenant = "acme"

[[token]]
secret = "globex-secret-0123456789"
role = "tenant"
tenant = "globex"

[[token]]
secret = "worker-secret-0123456789"
role = "worker"
pool = "default"

[[token]]
secret = "admin-secret-0123456789"
role = "admin"
"#;

/// Tokens: a tenant submits only as itself and sees only its jobs; workers lease only from
/// their pool; only an admin changes the policy; no token, no entry.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokens_scope_tenants_workers_and_admins() {
    let dir = TempDir::new("auth");
    let server = TestServer::start(dir.path(), |c| {
        c.tokens = Some(fairway_server::Tokens::parse("tokens.toml", TOKENS).unwrap());
    })
    .await;
    let acme = server.with_token("acme-secret-0123456789");
    let globex = server.with_token("globex-secret-0123456789");
    let worker = server.with_token("worker-secret-0123456789");
    let admin = server.with_token("admin-secret-0123456789");
    let stranger = server.with_token("not-a-token-0123456789");

    let (code, e) = server.submit(json!({"id": "a", "tenant": "acme"})).await;
    assert_eq!(
        (code, e["error"].as_str()),
        (401, Some("unauthorized")),
        "{e}"
    );
    let (code, _) = stranger.submit(json!({"id": "a", "tenant": "acme"})).await;
    assert_eq!(code, 401);

    let (code, e) = acme.submit(json!({"id": "a", "tenant": "globex"})).await;
    assert_eq!(code, 403, "{e}");
    assert_eq!(e["error"], "tenant_mismatch");
    assert_eq!(
        admin.status("a").await.0,
        404,
        "a refused submission leaves nothing"
    );

    let (code, ok) = acme.submit(json!({"id": "a"})).await;
    assert_eq!(code, 201, "{ok}");
    let (code, s) = acme.status("a").await;
    assert_eq!((code, s["tenant"].as_str()), (200, Some("acme")));
    assert_eq!(
        globex.status("a").await.0,
        404,
        "another tenant's job is invisible"
    );
    assert_eq!(globex.post("/v1/jobs/a/cancel", json!({})).await.0, 404);
    assert_eq!(admin.status("a").await.0, 200);

    let (code, e) = acme
        .post("/v1/leases", json!({"worker": "w", "capacity": {"cpu": 1}}))
        .await;
    assert_eq!((code, e["error"].as_str()), (403, Some("forbidden")), "{e}");
    let (code, e) = worker
        .post(
            "/v1/leases",
            json!({"worker": "w", "pool": "gpu", "capacity": {"cpu": 1}}),
        )
        .await;
    assert_eq!(code, 403, "{e}");
    let leases = worker.lease("w", 1, 0).await;
    assert_eq!(leases.len(), 1);
    let (code, _) = worker
        .post("/v1/jobs", json!({"id": "w1", "tenant": "acme"}))
        .await;
    assert_eq!(code, 403, "workers do not submit");
    let (code, _) = worker
        .post(
            "/v1/leases/a/complete",
            json!({"epoch": 1, "outcome": "succeeded"}),
        )
        .await;
    assert_eq!(code, 200);

    assert_eq!(acme.get("/v1/policy").await.0, 403);
    assert_eq!(
        acme.put_text("/v1/policy", fairway_core::policy::BUILT_IN_POLICY)
            .await
            .0,
        403
    );
    let (code, v) = admin
        .put_text("/v1/policy", fairway_core::policy::BUILT_IN_POLICY)
        .await;
    assert_eq!((code, v["version"].as_u64()), (200, Some(2)), "{v}");

    // Health and the spec need no token.
    assert_eq!(server.get("/healthz").await.0, 200);
    assert_eq!(server.get("/readyz").await.0, 200);
    assert_eq!(server.get("/openapi.json").await.0, 200);
}

/// Long polls are bounded: beyond the cap a poll is refused with 429 `busy` and Retry-After.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn parked_long_polls_are_bounded() {
    let dir = TempDir::new("parked");
    let server = TestServer::start(dir.path(), |c| c.limits.max_parked = 1).await;
    let parked = {
        let s = server.client();
        tokio::spawn(async move { s.lease("first", 1, 2_000).await })
    };
    tokio::time::sleep(Duration::from_millis(200)).await;
    let r = server
        .http
        .post(format!("{}/v1/leases", server.url))
        .json(&json!({"worker": "second", "capacity": {"cpu": 1}, "wait_ms": 1000}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 429);
    assert_eq!(r.headers()["retry-after"], "1");
    let e: Value = r.json().await.unwrap();
    assert_eq!(e["error"], "busy");
    // A poll that does not wait is still served.
    assert!(server.lease("third", 1, 0).await.is_empty());
    assert!(parked.await.unwrap().is_empty());
}

/// `/openapi.json` documents every route of the API.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn openapi_lists_every_route() {
    let dir = TempDir::new("openapi");
    let server = TestServer::start(dir.path(), |_| {}).await;
    let (code, spec) = server.get("/openapi.json").await;
    assert_eq!(code, 200);
    let paths = spec["paths"].as_object().unwrap();
    for (path, method) in [
        ("/v1/jobs", "post"),
        ("/v1/jobs/batch", "post"),
        ("/v1/jobs/{id}", "get"),
        ("/v1/jobs/{id}/cancel", "post"),
        ("/v1/leases", "post"),
        ("/v1/leases/{job_id}/heartbeat", "post"),
        ("/v1/leases/{job_id}/complete", "post"),
        ("/v1/leases/complete", "post"),
        ("/v1/policy", "get"),
        ("/v1/policy", "put"),
        ("/healthz", "get"),
        ("/readyz", "get"),
    ] {
        assert!(paths[path][method].is_object(), "{method} {path} missing");
    }
    assert!(spec["components"]["schemas"]["SubmitBody"].is_object());
}

/// Canceling: a queued job ends at once; a running one is told to stop at its heartbeat and
/// ends when its worker reports it stopped.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancel_queued_and_running_jobs() {
    let dir = TempDir::new("cancel");
    let server = TestServer::start(dir.path(), |_| {}).await;
    server.submit(json!({"id": "run", "tenant": "acme"})).await;
    let leases = server.lease("w", 1, 0).await;
    assert_eq!(leases.len(), 1);
    server.submit(json!({"id": "wait", "tenant": "acme"})).await;
    let (code, r) = server.post("/v1/jobs/wait/cancel", json!({})).await;
    assert_eq!(code, 200, "{r}");
    assert_eq!(r, json!({"job_id": "wait", "state": "canceled"}));
    let (_, r) = server.post("/v1/jobs/run/cancel", json!({})).await;
    assert_eq!(r["state"], "running");
    let (code, hb) = server
        .post("/v1/leases/run/heartbeat", json!({"epoch": 1}))
        .await;
    assert_eq!(code, 200);
    assert_eq!(hb["action"], "cancel");
    let (_, done) = server
        .post(
            "/v1/leases/run/complete",
            json!({"epoch": 1, "outcome": "stopped"}),
        )
        .await;
    assert_eq!(done["state"], "canceled");
}

/// Snapshots bound what a restart replays, and the restart is exact: with a snapshot every 20
/// events, finished, running and queued jobs, epochs and the policy version all come back, the
/// leases held still heartbeat and complete, and the store holds a snapshot and a short log.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn snapshots_bound_replay_and_restart_exactly() {
    use fairway_store::EventStore;
    let dir = TempDir::new("snapshots");
    let configure = |c: &mut fairway_server::ServerConfig| c.limits.snapshot_every_events = 20;
    let server = TestServer::start(dir.path(), configure).await;
    let jobs: Vec<Value> = (0..30)
        .map(|i| json!({"id": format!("j{i}"), "tenant": format!("t{}", i % 3), "payload": i}))
        .collect();
    server.post("/v1/jobs/batch", json!({ "jobs": jobs })).await;
    let leases = server.lease("w1", 10, 0).await;
    assert_eq!(leases.len(), 10);
    let (done, held) = leases.split_at(5);
    for l in done {
        let id = l["job_id"].as_str().unwrap();
        let (code, _) = server
            .post(
                &format!("/v1/leases/{id}/complete"),
                json!({"epoch": l["epoch"], "outcome": "succeeded"}),
            )
            .await;
        assert_eq!(code, 200);
    }
    let (code, _) = server
        .put_text("/v1/policy", fairway_core::policy::BUILT_IN_POLICY)
        .await;
    assert_eq!(code, 200);
    let mut before = Vec::new();
    for i in 0..30 {
        before.push(server.status(&format!("j{i}")).await.1);
    }
    server.stop().await.expect("clean stop");

    {
        let mut store = fairway_store::RedbStore::open(dir.path()).unwrap();
        let recovered = store.recover().unwrap();
        let (lsn, _) = recovered.snapshot.expect("a snapshot was taken");
        assert_eq!(
            lsn,
            store.last_lsn(),
            "the clean stop snapshots the last event"
        );
        assert!(recovered.events.is_empty());
    }

    let server = TestServer::start(dir.path(), configure).await;
    for (i, b) in before.iter().enumerate() {
        let (code, after) = server.status(&format!("j{i}")).await;
        assert_eq!(code, 200);
        assert_eq!(&after, b, "j{i} changed across the restart");
    }
    let (_, p) = server.get("/v1/policy").await;
    assert_eq!(p["version"], 2);
    for l in held {
        let id = l["job_id"].as_str().unwrap();
        let (code, hb) = server
            .post(
                &format!("/v1/leases/{id}/heartbeat"),
                json!({"epoch": l["epoch"]}),
            )
            .await;
        assert_eq!(
            (code, hb["action"].as_str()),
            (200, Some("continue")),
            "{hb}"
        );
        let (code, r) = server
            .post(
                &format!("/v1/leases/{id}/complete"),
                json!({"epoch": l["epoch"], "outcome": "succeeded"}),
            )
            .await;
        assert_eq!((code, r["state"].as_str()), (200, Some("succeeded")), "{r}");
    }
    let rest = server.lease("w2", 100, 0).await;
    assert_eq!(rest.len(), 20, "the queued jobs, once each");
    for r in &rest {
        assert!(leases.iter().all(|l| l["job_id"] != r["job_id"]), "{r}");
        let id = r["job_id"].as_str().unwrap();
        assert_eq!(r["payload"], id[1..].parse::<u64>().unwrap(), "{r}");
    }
}

/// The OpenAPI document is pinned in `crates/fairway-server/openapi.json`, so that a change to
/// the API shows in review. After a deliberate change, regenerate it with
/// `UPDATE_OPENAPI=1 cargo test -p fairway-server --test api openapi_document_is_pinned`.
#[test]
fn openapi_document_is_pinned() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("openapi.json");
    let current = fairway_server::http::openapi().to_pretty_json().unwrap() + "\n";
    if std::env::var_os("UPDATE_OPENAPI").is_some() {
        std::fs::write(&path, &current).unwrap();
        return;
    }
    let pinned = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        pinned == current,
        "the API changed: review the difference and regenerate {} (see this test's comment)",
        path.display()
    );
}
