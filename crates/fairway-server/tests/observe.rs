//! Observability end to end, over real HTTP against a server with traffic: `/metrics` parsed
//! by a strict Prometheus text parser, explanations, tenant reports, decision records, the
//! overview, and who may see what.

mod common;
#[path = "common/prom.rs"]
mod prom;

use common::{TempDir, TestServer};
use serde_json::{Value, json};

/// Two classes (one with a reserve) and two tenants, `small` weighing three times `big`.
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

/// `big` floods `batch` first and takes the worker's three CPUs that `urgent`'s reserve leaves
/// (a quarter of four is held for it); `small` arrives after. One of big's attempts succeeds,
/// a completion and a heartbeat come with a stale epoch, and a submission names an unknown
/// class. Returns the leases that are still running.
async fn traffic(server: &TestServer) -> Vec<Value> {
    for i in 0..20 {
        let (code, r) = server
            .submit(json!({"id": format!("big-{i}"), "tenant": "big", "class": "batch", "estimate_ms": 1000}))
            .await;
        assert_eq!(code, 201, "{r}");
    }
    let (code, r) = server
        .submit(json!({"id": "lost", "tenant": "big", "class": "nope"}))
        .await;
    assert_eq!(code, 422, "{r}");
    let (code, r) = server
        .post(
            "/v1/leases",
            json!({"worker": "w1", "capacity": {"cpu": 4}, "max_jobs": 4}),
        )
        .await;
    assert_eq!(code, 200, "{r}");
    let leases = r["leases"].as_array().cloned().unwrap();
    assert_eq!(leases.len(), 3, "{r}");
    for i in 0..2 {
        let (code, r) = server
            .submit(json!({"id": format!("small-{i}"), "tenant": "small", "class": "batch"}))
            .await;
        assert_eq!(code, 201, "{r}");
    }
    for lease in &leases[..1] {
        let (code, r) = server
            .post(
                &format!("/v1/leases/{}/complete", lease["job_id"].as_str().unwrap()),
                json!({"epoch": lease["epoch"], "outcome": "succeeded", "usage_ms": 1500}),
            )
            .await;
        assert_eq!(code, 200, "{r}");
    }
    let stale = leases[1]["job_id"].as_str().unwrap();
    let (code, _) = server
        .post(
            &format!("/v1/leases/{stale}/complete"),
            json!({"epoch": 99, "outcome": "succeeded"}),
        )
        .await;
    assert_eq!(code, 409);
    let (code, _) = server
        .post(
            &format!("/v1/leases/{stale}/heartbeat"),
            json!({"epoch": 98}),
        )
        .await;
    assert_eq!(code, 409);
    leases[1..].to_vec()
}

/// `/metrics` from a server with traffic parses strictly, and its key series say what
/// happened: admissions by class/outcome/reason, leases, refusals, estimate errors, latency
/// histograms, queue depth and age by class, pools, reserves, the top offender, the policy
/// version. No series is labelled by tenant outside the bounded top-offender families.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_scrape_parses_and_tells_what_happened() {
    let dir = TempDir::new("metrics");
    let server = TestServer::start(dir.path(), |c| c.policy = Some(POLICY.to_string())).await;
    traffic(&server).await;

    let (scrape, text) = scrape(&server).await;
    let text = text.as_str();
    let v = |name: &str, labels: &[(&str, &str)]| value(&scrape, text, name, labels);

    assert_eq!(
        v(
            "fairway_admissions_total",
            &[
                ("class", "batch"),
                ("outcome", "accepted"),
                ("reason", "none")
            ]
        ),
        22.0
    );
    assert_eq!(
        v(
            "fairway_admissions_total",
            &[
                ("class", "unknown"),
                ("outcome", "rejected_final"),
                ("reason", "unknown_class")
            ]
        ),
        1.0
    );
    // 22 jobs of 1 s estimated (big's) or the class default: at least big's 20 s.
    assert!(
        v(
            "fairway_admitted_work_seconds_total",
            &[("class", "batch"), ("outcome", "accepted")]
        ) >= 20.0
    );
    assert_eq!(scrape.sum("fairway_leases_granted_total", &[]), 3.0);
    assert_eq!(
        v(
            "fairway_jobs_ended_total",
            &[("class", "batch"), ("state", "succeeded")]
        ),
        1.0
    );
    assert_eq!(
        v(
            "fairway_lease_refusals_total",
            &[("call", "complete"), ("reason", "stale_epoch")]
        ),
        1.0
    );
    assert_eq!(
        v(
            "fairway_lease_refusals_total",
            &[("call", "heartbeat"), ("reason", "stale_epoch")]
        ),
        1.0
    );
    // The success ran 1.5 s against an estimate of 1 s.
    assert_eq!(
        v("fairway_estimate_ratio_count", &[("class", "batch")]),
        1.0
    );
    assert_eq!(v("fairway_estimate_ratio_sum", &[("class", "batch")]), 1.5);
    assert_eq!(
        v(
            "fairway_estimate_ratio_bucket",
            &[("class", "batch"), ("le", "1.25")]
        ),
        0.0
    );
    assert!(v("fairway_engine_call_seconds_count", &[("call", "submit")]) >= 23.0);
    assert!(v("fairway_engine_call_seconds_count", &[("call", "schedule")]) >= 1.0);
    assert_eq!(v("fairway_dispatch_seconds_count", &[]), 3.0);
    assert!(v("fairway_group_commit_seconds_count", &[]) >= 20.0);
    assert!(v("fairway_group_commit_commands_sum", &[]) >= 20.0);
    assert_eq!(v("fairway_writer_queue_depth", &[]), 0.0);

    assert_eq!(v("fairway_policy_version", &[]), 1.0);
    assert_eq!(v("fairway_policy_info", &[("policy", "fair")]), 1.0);
    assert_eq!(v("fairway_queued_jobs", &[]), 19.0);
    assert_eq!(v("fairway_observation_complete", &[]), 1.0);
    assert_eq!(v("fairway_class_queued_jobs", &[("class", "batch")]), 19.0);
    assert_eq!(v("fairway_class_queued_jobs", &[("class", "urgent")]), 0.0);
    assert!(
        v(
            "fairway_class_oldest_queue_age_seconds",
            &[("class", "batch")]
        ) > 0.0
    );
    assert!(
        v(
            "fairway_class_predicted_start_seconds",
            &[("class", "batch")]
        ) >= 0.0
    );
    assert_eq!(
        v("fairway_deadline_misses_total", &[("class", "batch")]),
        0.0
    );
    assert_eq!(v("fairway_pool_workers", &[("pool", "default")]), 1.0);
    assert_eq!(
        v(
            "fairway_pool_capacity",
            &[("pool", "default"), ("resource", "cpu")]
        ),
        4.0
    );
    assert_eq!(
        v(
            "fairway_pool_used",
            &[("pool", "default"), ("resource", "cpu")]
        ),
        2.0
    );
    assert_eq!(
        v(
            "fairway_reserve_capacity",
            &[
                ("pool", "default"),
                ("class", "urgent"),
                ("resource", "cpu")
            ]
        ),
        1.0
    );
    assert_eq!(
        v(
            "fairway_reserve_occupancy_ratio",
            &[("pool", "default"), ("class", "urgent")]
        ),
        0.0
    );
    // big holds 2 of 4 CPUs; with small waiting, big's weight earns it a quarter.
    assert_eq!(
        v("fairway_top_tenant_dominant_share", &[("tenant", "big")]),
        0.5
    );
    assert_eq!(
        v("fairway_top_tenant_entitlement", &[("tenant", "big")]),
        0.25
    );
    assert!(
        scrape
            .find("fairway_top_tenant_dominant_share", &[("tenant", "small")])
            .is_empty()
    );
    assert_eq!(v("fairway_tenants", &[("state", "over_entitlement")]), 1.0);
    assert_eq!(v("fairway_tenants", &[("state", "with_jobs")]), 2.0);

    // Tenants are a label only in the bounded top-offender families.
    for (name, family) in &scrape.families {
        for s in &family.samples {
            assert!(
                !s.labels.contains_key("tenant") || name.starts_with("fairway_top_tenant_"),
                "{name} is labelled by tenant"
            );
        }
    }
    // Every family has help, and every name the fairway_ prefix.
    for (name, family) in &scrape.families {
        assert!(name.starts_with("fairway_"), "{name}");
        assert!(!family.help.is_empty(), "{name} has no help");
    }

    // OpenMetrics on request.
    let r = server
        .http
        .get(format!("{}/metrics", server.url))
        .header("accept", "application/openmetrics-text; version=1.0.0")
        .send()
        .await
        .unwrap();
    assert!(
        r.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("application/openmetrics-text")
    );
    assert!(r.text().await.unwrap().ends_with("# EOF\n"));
}

/// Snapshots say what they cost: how long the writer took to encode each, how long the store
/// took to store it (from its hand-over to its bytes freed, the file written), and the latest
/// one's size. Before any snapshot the histograms are empty.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn snapshot_metrics_say_what_snapshots_cost() {
    let dir = TempDir::new("snapshot-metrics");
    let server = TestServer::start(dir.path(), |c| c.limits.snapshot_every_events = 20).await;
    let (scrape_before, text) = scrape(&server).await;
    assert_eq!(
        value(
            &scrape_before,
            &text,
            "fairway_snapshot_encode_seconds_count",
            &[]
        ),
        0.0
    );
    assert_eq!(
        value(&scrape_before, &text, "fairway_snapshot_bytes", &[]),
        0.0
    );
    let jobs: Vec<Value> = (0..60)
        .map(|i| json!({"id": format!("j{i}"), "tenant": "t", "payload": {"i": i}}))
        .collect();
    let (code, r) = server.post("/v1/jobs/batch", json!({ "jobs": jobs })).await;
    assert_eq!(code, 200, "{r}");
    // Single submissions follow until a snapshot is stored (one is taken after a turn, once
    // enough events followed the last).
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    let mut i = 0;
    loop {
        let (scrape, text) = scrape(&server).await;
        let v = |name: &str| value(&scrape, &text, name, &[]);
        if v("fairway_snapshot_store_seconds_count") >= 1.0 {
            assert!(v("fairway_snapshot_encode_seconds_count") >= 1.0, "{text}");
            assert!(v("fairway_snapshot_bytes") > 1000.0, "{text}");
            assert!(v("fairway_snapshot_store_seconds_sum") > 0.0, "{text}");
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no snapshot stored:\n{text}"
        );
        let (code, r) = server
            .submit(json!({"id": format!("more-{i}"), "tenant": "t"}))
            .await;
        assert_eq!(code, 201, "{r}");
        i += 1;
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}

/// Explanations, tenant reports, decision records and the overview say why jobs wait and
/// who holds what, from the engine's own records.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn explain_tenants_decisions_and_overview() {
    let dir = TempDir::new("explain");
    let server = TestServer::start(dir.path(), |c| c.policy = Some(POLICY.to_string())).await;
    let running = traffic(&server).await;

    // A running job: where, and the decision that started it.
    let job = running[0]["job_id"].as_str().unwrap();
    let (code, e) = server.get(&format!("/v1/jobs/{job}/explain")).await;
    assert_eq!(code, 200, "{e}");
    assert_eq!(e["state"], "running");
    assert_eq!(e["workers"], json!(["w1"]));
    assert!(
        e["summary"].as_str().unwrap().contains("running on w1"),
        "{e}"
    );
    let decisions = e["decisions"].as_array().unwrap();
    assert_eq!(decisions.len(), 1, "{e}");
    assert_eq!(decisions[0]["job_id"], job);
    assert!(
        decisions[0]["reason"].as_str().unwrap().contains("big"),
        "{e}"
    );

    // A waiting job: why, with a stable code.
    let (code, e) = server.get("/v1/jobs/small-0/explain").await;
    assert_eq!(code, 200, "{e}");
    assert_eq!(e["state"], "queued");
    let reasons = e["reasons"].as_array().unwrap();
    assert!(!reasons.is_empty(), "{e}");
    let codes = [
        "no_workers",
        "unplaceable",
        "behind_in_queue",
        "tenant_at_limit",
        "reserve_held",
        "waiting_for_capacity",
        "behind_tenants",
    ];
    for r in reasons {
        assert!(codes.contains(&r["code"].as_str().unwrap()), "{e}");
        assert!(!r["message"].as_str().unwrap().is_empty());
    }
    assert!(
        e["summary"].as_str().unwrap().starts_with("it waits: "),
        "{e}"
    );
    // A finished job says how it ended.
    let done = "big-0";
    let (code, e) = server.get(&format!("/v1/jobs/{done}/explain")).await;
    assert_eq!((code, e["state"].as_str()), (200, Some("succeeded")), "{e}");
    assert_eq!(server.get("/v1/jobs/nope/explain").await.0, 404);

    // The tenant report: exact backlog per class, usage, entitlement.
    let (code, t) = server.get("/v1/tenants/big").await;
    assert_eq!(code, 200, "{t}");
    assert_eq!(t["backlog"]["batch"]["queued"], 17);
    assert!(t["backlog"]["batch"]["oldest_age_ms"].as_u64().is_some());
    assert_eq!(t["running"], 2);
    assert_eq!(t["usage"]["cpu"], 2.0);
    assert_eq!(t["entitlement"], 0.25);
    assert_eq!(t["dominant_share"], 0.5);
    assert_eq!(t["ledger"]["attempts"], 1);
    assert!(t["ledger"]["debt_ws"].as_f64().unwrap() > 0.0, "{t}");
    assert_eq!(t["accepted"], 20);
    let (code, e) = server.get("/v1/tenants/nobody").await;
    assert_eq!((code, e["error"].as_str()), (404, Some("unknown_tenant")));

    // Decision records: the latest, one job's, pages forward.
    let (code, d) = server.get("/v1/decisions?limit=2").await;
    assert_eq!(code, 200, "{d}");
    let page = d["decisions"].as_array().unwrap();
    assert_eq!(page.len(), 2);
    assert_eq!(page[1]["seq"], 3);
    let (_, d) = server.get(&format!("/v1/decisions?job={job}")).await;
    assert_eq!(d["decisions"].as_array().unwrap().len(), 1);
    let (_, d) = server.get("/v1/decisions?after=0&limit=2").await;
    assert_eq!(d["decisions"].as_array().unwrap().len(), 2);
    assert_eq!(d["next_after"], 2);
    let (_, d) = server.get("/v1/decisions?after=2&limit=2").await;
    assert_eq!(d["decisions"].as_array().unwrap().len(), 1);
    assert!(d.get("next_after").is_none(), "{d}");
    let (_, d) = server.get("/v1/decisions?since=2000-01-01T00:00:00Z").await;
    assert_eq!(d["decisions"].as_array().unwrap().len(), 3);
    assert_eq!(server.get("/v1/decisions?limit=0").await.0, 422);
    assert_eq!(server.get("/v1/decisions?since=yesterday").await.0, 422);
    assert_eq!(server.get("/v1/decisions?bogus=1").await.0, 422);

    // The overview: big is first, above its share.
    let (code, o) = server.get("/v1/overview").await;
    assert_eq!(code, 200, "{o}");
    assert_eq!(o["tenants"][0]["name"], "big");
    assert_eq!(o["tenants"][0]["over"], 0.25);
    assert_eq!(o["tenants_over"], 1);
    assert_eq!(o["workers"][0]["name"], "w1");
    assert_eq!(o["workers"][0]["leases"], 2);
    assert_eq!(o["decisions"].as_array().unwrap().len(), 3);
    let accepted: u64 = o["admissions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["accepted"].as_u64().unwrap())
        .sum();
    assert_eq!(accepted, 22);
    let batch = o["classes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "batch")
        .unwrap();
    assert_eq!(batch["queued"], 19);

    // The dashboard renders the same picture on an open server.
    let (code, page) = server.get("/").await;
    assert_eq!(code, 200);
    let html = page.as_str().unwrap();
    assert!(html.contains("over its share"), "{html}");
    assert!(html.contains("data-tenant=\"big\""));
    assert!(html.contains("htmx-2.0.11.min.js"));
    let r = server
        .http
        .get(format!("{}/assets/htmx-2.0.11.min.js", server.url))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert!(
        r.headers()["cache-control"]
            .to_str()
            .unwrap()
            .contains("max-age=31536000")
    );

    // A second kind of worker (another capacity) is a second group the job could run in:
    // the engine gives a reason per group, and the same reason is said once.
    let (code, _) = server
        .post(
            "/v1/leases",
            json!({"worker": "w2", "capacity": {"cpu": 2}, "max_jobs": 0}),
        )
        .await;
    assert_eq!(code, 200);
    let (_, e) = server.get("/v1/jobs/small-0/explain").await;
    let reasons = e["reasons"].as_array().unwrap();
    for (i, r) in reasons.iter().enumerate() {
        assert!(!reasons[..i].contains(r), "a reason is repeated: {e}");
    }
}

const TOKENS: &str = r#"
[[token]]
secret = "big-secret-0123456789"
role = "tenant"
tenant = "big"

[[token]]
secret = "small-secret-0123456789"
role = "tenant"
tenant = "small"

[[token]]
secret = "worker-secret-0123456789"
role = "worker"

[[token]]
secret = "admin-secret-0123456789"
role = "admin"
"#;

/// Tenants see their own jobs, tenant and decisions only, and never another tenant's name;
/// the overview, the metrics and the dashboard are for admins.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn observability_routes_respect_tokens() {
    let dir = TempDir::new("observe-auth");
    let server = TestServer::start(dir.path(), |c| {
        c.policy = Some(POLICY.to_string());
        c.tokens = Some(fairway_server::Tokens::parse("tokens.toml", TOKENS).unwrap());
    })
    .await;
    let admin = server.with_token("admin-secret-0123456789");
    let small = server.with_token("small-secret-0123456789");
    let worker = server.with_token("worker-secret-0123456789");
    traffic(&admin).await;

    let (code, e) = small.get("/v1/jobs/small-0/explain").await;
    assert_eq!(code, 200, "{e}");
    assert!(!e.to_string().contains("\"big\""), "{e}");
    assert_eq!(small.get("/v1/jobs/big-3/explain").await.0, 404);
    assert_eq!(small.get("/v1/tenants/small").await.0, 200);
    let (code, e) = small.get("/v1/tenants/big").await;
    assert_eq!((code, e["error"].as_str()), (403, Some("forbidden")));
    let (code, d) = small.get("/v1/decisions").await;
    assert_eq!(code, 200);
    assert_eq!(d["decisions"].as_array().unwrap().len(), 0, "{d}");
    assert_eq!(
        admin.get("/v1/decisions").await.1["decisions"]
            .as_array()
            .unwrap()
            .len(),
        3
    );
    assert_eq!(small.get("/v1/overview").await.0, 403);
    assert_eq!(worker.get("/v1/jobs/big-3/explain").await.0, 403);
    assert_eq!(small.get("/metrics").await.0, 403);
    assert_eq!(server.get("/metrics").await.0, 401);
    assert_eq!(admin.get("/metrics").await.0, 200);
    assert_eq!(admin.get("/v1/overview").await.0, 200);

    // The dashboard: a login form without the admin token; `?token=` sets a cookie.
    let http = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let r = http.get(format!("{}/", server.url)).send().await.unwrap();
    assert_eq!(r.status(), 401);
    assert!(r.text().await.unwrap().contains("name=\"token\""));
    let r = http
        .get(format!("{}/?token=small-secret-0123456789", server.url))
        .send()
        .await
        .unwrap();
    assert_eq!(
        r.status(),
        403,
        "a tenant token does not open the dashboard"
    );
    let r = http
        .get(format!("{}/?token=admin-secret-0123456789", server.url))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 303);
    assert_eq!(r.headers()["location"], "/");
    let cookie = r.headers()["set-cookie"].to_str().unwrap().to_string();
    assert!(
        cookie.contains("HttpOnly") && cookie.contains("SameSite=Strict"),
        "{cookie}"
    );
    let pair = cookie.split(';').next().unwrap().to_string();
    let r = http
        .get(format!("{}/", server.url))
        .header("cookie", &pair)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert!(r.text().await.unwrap().contains("data-tenant=\"big\""));
    let r = http
        .get(format!("{}/dashboard/panel/tenants", server.url))
        .header("cookie", &pair)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    // The cookie opens the dashboard only, not the API.
    let r = http
        .get(format!("{}/v1/overview", server.url))
        .header("cookie", &pair)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 401);
}

/// Two declared pools, each with half of it held for `urgent`; preemptible work may borrow
/// it.
const POOLS_POLICY: &str = r#"
[policy]
name = "fair"
preemption = true

[[pool]]
name = "cpu"

[[pool]]
name = "gpu"

[[class]]
name = "urgent"
priority = 10
reserve = 0.5

[[class]]
name = "batch"

[[tenant]]
name = "acme"
"#;

/// An overview newer than generation `than` (observations are paced: at most one a second).
async fn fresh_overview(server: &TestServer, than: u64) -> Value {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let (code, o) = server.get("/v1/overview").await;
        assert_eq!(code, 200, "{o}");
        if o["generation"].as_u64().unwrap() > than {
            return o;
        }
        assert!(std::time::Instant::now() < deadline, "no fresh overview");
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
}

/// A sample's labels, as the prom parser takes them.
type Labels = &'static [(&'static str, &'static str)];

/// `/metrics`, parsed strictly, and its text.
async fn scrape(server: &TestServer) -> (prom::Scrape, String) {
    let (code, body) = server.get("/metrics").await;
    assert_eq!(code, 200);
    let text = body.as_str().expect("text").to_string();
    let scrape = prom::parse(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    (scrape, text)
}

/// The single sample of `name` with `labels` in a scrape of `text`.
fn value(scrape: &prom::Scrape, text: &str, name: &str, labels: &[(&str, &str)]) -> f64 {
    scrape
        .value(name, labels)
        .unwrap_or_else(|| panic!("no single {name}{labels:?} in\n{text}"))
}

/// The member of `list` whose `key` is `value`.
fn find<'a>(list: &'a Value, key: &str, value: &str) -> &'a Value {
    list.as_array()
        .unwrap()
        .iter()
        .find(|x| x[key] == value)
        .unwrap_or_else(|| panic!("no {key}={value} in {list}"))
}

/// Per-pool backlog, unplaceable jobs, reserves held and capacity borrowed from them, in the
/// overview and in `/metrics`, from the engine's census. A cpu worker (2 CPUs, half held for
/// `urgent`) takes two preemptible batch jobs, the second on the reserve (borrowed, since no
/// urgent job waits); a gpu worker registers without taking work. Four batch jobs fit both pools, one
/// only the gpu pool, and one no pool at all.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pools_backlog_unplaceable_reserves_and_borrowing() {
    let dir = TempDir::new("pools");
    let server = TestServer::start(dir.path(), |c| c.policy = Some(POOLS_POLICY.to_string())).await;
    for i in 0..6 {
        let (code, r) = server
            .submit(json!({"id": format!("b{i}"), "tenant": "acme", "class": "batch", "preemptible": true}))
            .await;
        assert_eq!(code, 201, "{r}");
    }
    let (code, r) = server
        .post(
            "/v1/leases",
            json!({"worker": "c1", "pool": "cpu", "capacity": {"cpu": 2}, "max_jobs": 4}),
        )
        .await;
    assert_eq!(code, 200, "{r}");
    assert_eq!(r["leases"].as_array().unwrap().len(), 2, "{r}");
    let (code, r) = server
        .post(
            "/v1/leases",
            json!({"worker": "g1", "pool": "gpu", "capacity": {"cpu": 2},
                   "labels": {"gpu": "a100"}, "max_jobs": 0}),
        )
        .await;
    assert_eq!(code, 200, "{r}");
    for (id, gpu) in [("needs-a100", "a100"), ("needs-h100", "h100")] {
        let (code, r) = server
            .submit(json!({"id": id, "tenant": "acme", "class": "batch", "requires": {"gpu": gpu}}))
            .await;
        assert_eq!(code, 201, "{r}");
    }

    let (code, o) = server.get("/v1/overview").await;
    assert_eq!(code, 200, "{o}");
    let batch = find(&o["classes"], "name", "batch");
    assert_eq!(batch["queued"], 6, "{batch}");
    assert_eq!(batch["queued_by_pool"]["cpu"]["queued"], 4, "{batch}");
    assert_eq!(batch["queued_by_pool"]["gpu"]["queued"], 5, "{batch}");
    assert_eq!(batch["unplaceable"], 1, "{batch}");
    let urgent = find(&o["classes"], "name", "urgent");
    assert_eq!(urgent["unplaceable"], 0);
    assert_eq!(urgent["queued_by_pool"], json!({}));

    let cpu = find(&o["pools"], "name", "cpu");
    assert_eq!(cpu["used"]["cpu"], 2.0, "{cpu}");
    assert_eq!(cpu["borrowed"]["cpu"], 1.0, "{cpu}");
    let reserve = find(&cpu["reserves"], "class", "urgent");
    assert_eq!(reserve["reserved"]["cpu"], 1.0, "{reserve}");
    assert_eq!(reserve["held"]["cpu"], 1.0, "{reserve}");
    assert_eq!(reserve["occupancy"], 0.0, "{reserve}");
    let gpu = find(&o["pools"], "name", "gpu");
    assert_eq!(gpu["borrowed"], json!({}), "nothing borrowed: {gpu}");
    assert_eq!(
        find(&gpu["reserves"], "class", "urgent")["held"]["cpu"],
        1.0
    );

    let acme = find(&o["tenants"], "name", "acme");
    assert_eq!(acme["dominant_share"], 0.5, "{acme}");
    assert_eq!(
        acme["dominant_share_by_pool"],
        json!({"cpu": 1.0}),
        "{acme}"
    );
    let c1 = find(&o["workers"], "name", "c1");
    assert_eq!(
        (c1["leases"].as_u64(), c1["live"].as_bool()),
        (Some(2), Some(true))
    );
    assert_eq!(c1["free"], json!({}), "nothing free: {c1}");
    let g1 = find(&o["workers"], "name", "g1");
    assert_eq!(g1["free"]["cpu"], 2.0, "{g1}");
    assert_eq!(o["workers_total"], 2);

    let (_, d) = server.get("/v1/decisions").await;
    let borrowed: Vec<bool> = d["decisions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["borrowed"].as_bool().unwrap())
        .collect();
    assert_eq!(borrowed, [false, true], "{d}");
    assert!(
        d["decisions"][1]["reason"]
            .as_str()
            .unwrap()
            .contains("borrowed capacity reserved"),
        "{d}"
    );
    assert!(d["decisions"][0]["waited_ms"].as_u64().is_some(), "{d}");

    let (scrape, text) = scrape(&server).await;
    let cpu_reserve: Labels = &[("pool", "cpu"), ("class", "urgent"), ("resource", "cpu")];
    let expected: [(&str, Labels, f64); 11] = [
        (
            "fairway_pool_queued_jobs",
            &[("pool", "cpu"), ("class", "batch")],
            4.0,
        ),
        (
            "fairway_pool_queued_jobs",
            &[("pool", "gpu"), ("class", "batch")],
            5.0,
        ),
        // No urgent job waits: the series is there, at zero.
        (
            "fairway_pool_queued_jobs",
            &[("pool", "gpu"), ("class", "urgent")],
            0.0,
        ),
        ("fairway_class_unplaceable_jobs", &[("class", "batch")], 1.0),
        (
            "fairway_class_unplaceable_jobs",
            &[("class", "urgent")],
            0.0,
        ),
        ("fairway_reserve_capacity", cpu_reserve, 1.0),
        ("fairway_reserve_held", cpu_reserve, 1.0),
        ("fairway_reserve_used", cpu_reserve, 0.0),
        (
            "fairway_pool_borrowed",
            &[("pool", "cpu"), ("resource", "cpu")],
            1.0,
        ),
        (
            "fairway_pool_borrowed",
            &[("pool", "gpu"), ("resource", "cpu")],
            0.0,
        ),
        (
            "fairway_leases_granted_total",
            &[("class", "batch"), ("borrowed", "true")],
            1.0,
        ),
    ];
    for (name, labels, want) in expected {
        assert_eq!(
            value(&scrape, &text, name, labels),
            want,
            "{name}{labels:?}"
        );
    }
}

/// Decision records are numbered by the engine's durable dispatch count: after a restart on
/// the embedded store, numbering goes on where it was (a reader's cursor stays valid), and the
/// workers holding recovered leases are listed before they ask for work again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn decisions_and_workers_carry_over_a_restart() {
    let dir = TempDir::new("restart-observe");
    let configure = |c: &mut fairway_server::ServerConfig| c.policy = Some(POLICY.to_string());
    let server = TestServer::start(dir.path(), configure).await;
    for i in 0..4 {
        let (code, r) = server
            .submit(json!({"id": format!("j{i}"), "tenant": "big", "class": "batch", "estimate_ms": 60000}))
            .await;
        assert_eq!(code, 201, "{r}");
    }
    let (code, r) = server
        .post(
            "/v1/leases",
            json!({"worker": "w1", "capacity": {"cpu": 4}, "max_jobs": 2}),
        )
        .await;
    assert_eq!(code, 200, "{r}");
    let before: Vec<String> = r["leases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["job_id"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(before.len(), 2, "{r}");
    let (_, d) = server.get("/v1/decisions?after=0").await;
    let seqs: Vec<u64> = d["decisions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["seq"].as_u64().unwrap())
        .collect();
    assert_eq!(seqs, [1, 2], "{d}");
    server.stop().await.expect("clean stop");

    let server = TestServer::start(dir.path(), configure).await;
    // The ring starts empty; the numbering does not.
    let (code, d) = server.get("/v1/decisions?after=2").await;
    assert_eq!(code, 200, "{d}");
    assert_eq!(d["decisions"], json!([]), "{d}");
    assert_eq!(d["oldest_seq"], 3, "{d}");
    // w1 holds its two recovered leases: listed, though it has not asked for work since.
    let (_, o) = server.get("/v1/overview").await;
    let w1 = find(&o["workers"], "name", "w1");
    assert_eq!(w1["leases"], 2, "{w1}");
    assert_eq!(w1["live"], false, "{w1}");
    let mut jobs: Vec<String> = w1["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|j| j.as_str().unwrap().to_string())
        .collect();
    jobs.sort();
    let mut expected = before.clone();
    expected.sort();
    assert_eq!(jobs, expected, "{w1}");
    assert_eq!(o["engine"]["dispatches"], 2, "{o}");
    // big holds CPUs no live worker offers yet: all there is, not an unbounded share.
    let big = find(&o["tenants"], "name", "big");
    assert_eq!(big["dominant_share"], 1.0, "{big}");
    assert_eq!(
        big["dominant_share_by_pool"],
        json!({"default": 1.0}),
        "{big}"
    );
    assert_eq!(big["over"], 0.0, "{big}");
    assert_eq!(o["tenants_over"], 0, "{o}");
    let (_, t) = server.get("/v1/tenants/big").await;
    assert_eq!(t["dominant_share"], 1.0, "{t}");

    // The next decision is number 3, and a cursor from before the restart finds it.
    let (code, r) = server
        .post(
            "/v1/leases",
            json!({"worker": "w2", "capacity": {"cpu": 4}, "max_jobs": 1}),
        )
        .await;
    assert_eq!(code, 200, "{r}");
    let started = r["leases"][0]["job_id"].as_str().unwrap().to_string();
    let (_, d) = server.get("/v1/decisions?after=2&limit=1").await;
    let page = d["decisions"].as_array().unwrap();
    assert_eq!(page.len(), 1, "{d}");
    assert_eq!(page[0]["seq"], 3, "{d}");
    assert_eq!(page[0]["job_id"], started.as_str(), "{d}");
    assert_eq!(page[0]["workers"], json!(["w2"]), "{d}");
    assert!(d.get("next_after").is_none(), "{d}");
    let (_, e) = server.get(&format!("/v1/jobs/{started}/explain")).await;
    assert_eq!(e["decisions"][0]["seq"], 3, "{e}");
    let o = fresh_overview(&server, o["generation"].as_u64().unwrap()).await;
    assert_eq!(o["workers_total"], 2, "{o}");
    assert_eq!(find(&o["workers"], "name", "w2")["live"], true, "{o}");
}
