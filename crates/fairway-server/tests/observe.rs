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

    let (code, body) = server.get("/metrics").await;
    assert_eq!(code, 200);
    let text = body.as_str().expect("text");
    let scrape = prom::parse(text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    let v = |name: &str, labels: &[(&str, &str)]| {
        scrape
            .value(name, labels)
            .unwrap_or_else(|| panic!("no single {name}{labels:?} in\n{text}"))
    };

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
