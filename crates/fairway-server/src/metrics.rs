//! `GET /metrics`: the server's Prometheus metrics, in one explicit registry.
//!
//! Two kinds of series:
//!
//! - **Counted by the writer** as it works: admissions and their outcomes, leases, preemptions,
//!   ended jobs, refused heartbeats and completions, the time spent in engine calls, group
//!   commits, dispatch. These are ordinary prometheus-client metrics held in [`Metrics`]; the
//!   writer loop updates them (atomics) and the HTTP side encodes them. They count from the
//!   process's start, as Prometheus counters do.
//! - **Read from the engine**: queue depth and age per class and per pool, unplaceable jobs,
//!   predicted start, pools, reserves (held and used) and borrowed capacity, tenants' service
//!   against their entitlement, the policy version. They come from the latest [`Observation`]
//!   (the engine's census; see [`crate::observe`]) and are encoded at scrape time by a
//!   collector, so a series that no longer applies (a class removed from the policy) simply
//!   disappears.
//!
//! **Cardinality is bounded by construction.** Labels are typed structs whose values are codes
//! from fixed sets (outcome, reason, call), or names the policy bounds (class, pool, resource;
//! a pool the policy does not declare is reported as `undeclared`). Tenants are never a label,
//! except in the three `fairway_top_tenant_*` families, which hold at most
//! [`TOP_OFFENDERS`] series each: the tenants furthest above their entitlement. Everything else
//! about tenants is aggregated, or served per tenant by `GET /v1/tenants/{id}`.

use crate::observe::Observation;
use crate::wire::observe::{PoolView, ReserveView};
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet, EncodeMetric, MetricEncoder};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::{ConstCounter, Counter};
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::{ConstGauge, Gauge};
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::{Metric, Registry, Unit};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};

/// Tenants named in the top-offender families, at most.
pub const TOP_OFFENDERS: usize = 10;

/// `class`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ClassLabels {
    /// A class of the policy (or `unknown` for a name it does not declare).
    pub class: String,
}

/// An admission's class, outcome and reason.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct AdmissionLabels {
    /// A class of the policy, or `unknown`.
    pub class: String,
    /// `accepted`, `deferred`, `rejected_retryable` or `rejected_final`.
    pub outcome: &'static str,
    /// The rejection's code (`outstanding_full`, ...), or `none`.
    pub reason: &'static str,
}

/// A class and an outcome.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ClassOutcomeLabels {
    /// A class of the policy.
    pub class: String,
    /// What happened.
    pub outcome: &'static str,
}

/// A class and a final state.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct EndedLabels {
    /// A class of the policy.
    pub class: String,
    /// `succeeded`, `failed`, `canceled` or `expired`.
    pub state: &'static str,
}

/// A lease's class and whether it borrowed reserved capacity.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct LeaseLabels {
    /// A class of the policy.
    pub class: String,
    /// `true` when it runs on capacity reserved for a higher band.
    pub borrowed: &'static str,
}

/// A refused heartbeat or completion.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RefusalLabels {
    /// `heartbeat` or `complete`.
    pub call: &'static str,
    /// `stale_epoch` (an epoch conflict), `not_running` (the attempt already ended: a stale
    /// completion) or `unknown_job`.
    pub reason: &'static str,
}

/// The engine call timed.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct CallLabels {
    /// `submit`, `status`, `cancel`, `lease`, `heartbeat`, `complete`, `policy`, `observe`,
    /// `tick` or `schedule`.
    pub call: &'static str,
}

/// Buckets for latencies inside the writer: 1 µs to about 4 s.
fn latency_buckets() -> impl Iterator<Item = f64> {
    prometheus_client::metrics::histogram::exponential_buckets(1e-6, 4.0, 12)
}

/// A snapshot's encoding or storing: 1 ms to about 16 s (a snapshot holds the finished jobs
/// too, tens of megabytes on a busy server).
fn snapshot_buckets() -> impl Iterator<Item = f64> {
    prometheus_client::metrics::histogram::exponential_buckets(1e-3, 2.0, 15)
}

/// The metrics the writer counts. Cheap to update from the writer thread (atomics); encoded
/// by the HTTP side.
pub struct Metrics {
    registry: Registry,
    /// Submissions by class, outcome and reason (duplicates are not counted).
    pub admissions: Family<AdmissionLabels, Counter>,
    /// Resubmissions of a known id (they create nothing).
    pub duplicates: Counter,
    /// Large batches the writer stopped waiting for: a part came later than
    /// [`crate::writer::BATCH_PART_WAIT`], and the jobs not applied were answered 503.
    pub batch_parts_late: Counter,
    /// Estimated work accepted or deferred, in worker-seconds, by class.
    pub admitted_work: Family<ClassOutcomeLabels, Counter<f64, AtomicU64>>,
    /// Jobs that reached a final state, by class and state.
    pub ended: Family<EndedLabels, Counter>,
    /// Estimated work of jobs dropped at their deadline, worker-seconds, by class.
    pub expired_work: Family<ClassLabels, Counter<f64, AtomicU64>>,
    /// Leases granted, by class and whether they borrowed reserved capacity.
    pub leases: Family<LeaseLabels, Counter>,
    /// Preemptions requested, by class of the preempted job.
    pub preemptions: Family<ClassLabels, Counter>,
    /// From a stop request (preemption or cancel) to the attempt's end, seconds.
    pub stop_seconds: Histogram,
    /// Run time of preempted attempts not saved by a checkpoint, worker-seconds.
    pub preempted_lost_work: Counter<f64, AtomicU64>,
    /// Leases that expired without a heartbeat, by class.
    pub lease_expiries: Family<ClassLabels, Counter>,
    /// Heartbeats and completions refused (epoch conflicts, stale completions).
    pub refusals: Family<RefusalLabels, Counter>,
    /// Actual run time over the estimate charged, for attempts that succeeded, by class.
    pub estimate_ratio: Family<ClassLabels, Histogram>,
    /// Time inside one engine call (a command, `tick`, `schedule`), seconds.
    pub engine_call_seconds: Family<CallLabels, Histogram>,
    /// From the start of the scheduling pass that granted a lease to the lease's delivery to
    /// its worker (after the group commit), seconds.
    pub dispatch_seconds: Histogram,
    /// Duration of one group commit, seconds.
    pub commit_seconds: Histogram,
    /// Commands in one group commit.
    pub commit_commands: Histogram,
    /// Events in one group commit.
    pub commit_events: Histogram,
    /// Commands sent to the writer and not yet taken by it.
    pub writer_queue_depth: Gauge,
    /// Cost of computing one observation of the engine, seconds.
    pub observe_seconds: Histogram,
    /// The writer's encoding of one snapshot of the engine (every turn waits for it), seconds.
    pub snapshot_encode_seconds: Histogram,
    /// One snapshot's storing, from its hand-over to the store to its bytes freed, seconds
    /// (the redb store writes the file while commits go on).
    pub snapshot_store_seconds: Histogram,
    /// The size of the latest snapshot, bytes.
    pub snapshot_bytes: Gauge,
    latest: Arc<Mutex<Option<Arc<Observation>>>>,
}

impl fmt::Debug for Metrics {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Metrics").finish_non_exhaustive()
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics::new()
    }
}

impl Metrics {
    /// A registry with every metric registered, under the `fairway_` prefix.
    pub fn new() -> Metrics {
        let mut registry = Registry::with_prefix("fairway");
        let latency = || Histogram::new(latency_buckets());
        let m = Metrics {
            admissions: Family::default(),
            duplicates: Counter::default(),
            batch_parts_late: Counter::default(),
            admitted_work: Family::default(),
            ended: Family::default(),
            expired_work: Family::default(),
            leases: Family::default(),
            preemptions: Family::default(),
            stop_seconds: Histogram::new(
                prometheus_client::metrics::histogram::exponential_buckets(0.01, 2.0, 14),
            ),
            preempted_lost_work: Counter::default(),
            lease_expiries: Family::default(),
            refusals: Family::default(),
            estimate_ratio: Family::new_with_constructor(|| {
                Histogram::new([0.1, 0.25, 0.5, 0.8, 0.95, 1.05, 1.25, 2.0, 4.0, 10.0])
            }),
            engine_call_seconds: Family::new_with_constructor(|| Histogram::new(latency_buckets())),
            dispatch_seconds: latency(),
            commit_seconds: latency(),
            commit_commands: Histogram::new(
                prometheus_client::metrics::histogram::exponential_buckets(1.0, 2.0, 12),
            ),
            commit_events: Histogram::new(
                prometheus_client::metrics::histogram::exponential_buckets(1.0, 2.0, 14),
            ),
            writer_queue_depth: Gauge::default(),
            observe_seconds: latency(),
            snapshot_encode_seconds: Histogram::new(snapshot_buckets()),
            snapshot_store_seconds: Histogram::new(snapshot_buckets()),
            snapshot_bytes: Gauge::default(),
            latest: Arc::new(Mutex::new(None)),
            registry: Registry::default(),
        };
        let parts_late_help = format!(
            "Large batches ended early: a part came later than {} ms (the server starved of \
             CPU); their jobs not applied were answered 503",
            crate::writer::BATCH_PART_WAIT.as_millis()
        );
        // Each family: its name (after the `fairway_` prefix), help, whether it is in seconds,
        // and the metric.
        let families: Vec<(&str, &str, bool, Box<dyn Metric>)> = vec![
            (
                "admissions",
                "Submissions by class, outcome and reason (jobs; duplicates excluded)",
                false,
                Box::new(m.admissions.clone()),
            ),
            (
                "admission_duplicates",
                "Resubmissions of a known job id (they create nothing)",
                false,
                Box::new(m.duplicates.clone()),
            ),
            (
                "batch_parts_late",
                &parts_late_help,
                false,
                Box::new(m.batch_parts_late.clone()),
            ),
            (
                "admitted_work",
                "Estimated work accepted or deferred, in worker-seconds",
                true,
                Box::new(m.admitted_work.clone()),
            ),
            (
                "jobs_ended",
                "Jobs that reached a final state, by class and state",
                false,
                Box::new(m.ended.clone()),
            ),
            (
                "expired_work",
                "Estimated work of jobs dropped at their deadline, in worker-seconds",
                true,
                Box::new(m.expired_work.clone()),
            ),
            (
                "leases_granted",
                "Leases granted, by class and whether they borrowed capacity reserved for a higher band",
                false,
                Box::new(m.leases.clone()),
            ),
            (
                "preemptions",
                "Preemptions requested, by class of the preempted job",
                false,
                Box::new(m.preemptions.clone()),
            ),
            (
                "stop",
                "Time from a stop request (preemption or cancel) to the attempt's end (checkpoint and stop time)",
                true,
                Box::new(m.stop_seconds.clone()),
            ),
            (
                "preempted_lost_work",
                "Run time of preempted attempts that no checkpoint saved, in worker-seconds",
                true,
                Box::new(m.preempted_lost_work.clone()),
            ),
            (
                "lease_expiries",
                "Leases that expired without a heartbeat (the attempt was reclaimed), by class",
                false,
                Box::new(m.lease_expiries.clone()),
            ),
            (
                "lease_refusals",
                "Heartbeats and completions refused: stale_epoch is an epoch conflict, not_running a stale completion",
                false,
                Box::new(m.refusals.clone()),
            ),
            (
                "estimate_ratio",
                "Actual run time over the estimate charged, for attempts that succeeded (1 is exact)",
                false,
                Box::new(m.estimate_ratio.clone()),
            ),
            (
                "engine_call",
                "Time inside one engine call made by the writer loop (the decision latency)",
                true,
                Box::new(m.engine_call_seconds.clone()),
            ),
            (
                "dispatch",
                "From the start of the scheduling pass that granted a lease to its delivery to the worker, after the commit",
                true,
                Box::new(m.dispatch_seconds.clone()),
            ),
            (
                "group_commit",
                "Duration of one group commit (the store's durable write)",
                true,
                Box::new(m.commit_seconds.clone()),
            ),
            (
                "group_commit_commands",
                "Commands applied in one group commit",
                false,
                Box::new(m.commit_commands.clone()),
            ),
            (
                "group_commit_events",
                "Events made durable by one group commit",
                false,
                Box::new(m.commit_events.clone()),
            ),
            (
                "writer_queue_depth",
                "Commands sent to the writer loop and not yet taken by it",
                false,
                Box::new(m.writer_queue_depth.clone()),
            ),
            (
                "observe",
                "Cost of one observation of the engine (the engine-side metrics and the dashboard)",
                true,
                Box::new(m.observe_seconds.clone()),
            ),
            (
                "snapshot_encode",
                "The writer's encoding of one snapshot of the engine (every turn waits for it)",
                true,
                Box::new(m.snapshot_encode_seconds.clone()),
            ),
            (
                "snapshot_store",
                "One snapshot's storing, from its hand-over to the store to its bytes freed (the embedded store writes the file while commits go on)",
                true,
                Box::new(m.snapshot_store_seconds.clone()),
            ),
            (
                "snapshot_bytes",
                "The size of the latest snapshot of the engine, bytes",
                false,
                Box::new(m.snapshot_bytes.clone()),
            ),
        ];
        for (name, help, seconds, metric) in families {
            let metric = Registered(metric);
            if seconds {
                registry.register_with_unit(name, help, Unit::Seconds, metric);
            } else {
                registry.register(name, help, metric);
            }
        }
        registry.register_collector(Box::new(EngineCollector {
            latest: m.latest.clone(),
        }));
        Metrics { registry, ..m }
    }

    /// Publishes the latest observation; the engine-side series are read from it.
    pub fn set_observation(&self, observation: Arc<Observation>) {
        *self.latest.lock().unwrap_or_else(|e| e.into_inner()) = Some(observation);
    }

    /// The latest observation, if any was made.
    pub fn observation(&self) -> Option<Arc<Observation>> {
        self.latest
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// The Prometheus text format (0.0.4).
    pub fn encode_prometheus(&self) -> String {
        let mut out = String::new();
        // Writing into a String cannot fail.
        let _ = prometheus_client::encoding::prometheus_text::encode(&mut out, &self.registry);
        out
    }

    /// The OpenMetrics text format (with its `# EOF`).
    pub fn encode_openmetrics(&self) -> String {
        let mut out = String::new();
        let _ = prometheus_client::encoding::text::encode(&mut out, &self.registry);
        out
    }
}

/// A metric of any kind, to register from one table.
#[derive(Debug)]
struct Registered(Box<dyn Metric>);

impl EncodeMetric for Registered {
    fn encode(&self, encoder: MetricEncoder) -> Result<(), fmt::Error> {
        self.0.encode(encoder)
    }

    fn metric_type(&self) -> MetricType {
        self.0.metric_type()
    }

    fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// Encodes the engine-side series from the latest observation, at scrape time.
#[derive(Debug)]
struct EngineCollector {
    latest: Arc<Mutex<Option<Arc<Observation>>>>,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PoolLabels {
    pool: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PoolResourceLabels {
    pool: String,
    resource: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PoolClassLabels {
    pool: String,
    class: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PoolClassResourceLabels {
    pool: String,
    class: String,
    resource: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct TenantLabels {
    tenant: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StateLabels {
    state: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PolicyLabels {
    policy: String,
}

/// A pool label's figures: the pools behind one label (a declared pool, or all the
/// undeclared ones) summed.
#[derive(Default)]
struct PoolTotals {
    workers: f64,
    capacity: BTreeMap<String, f64>,
    used: BTreeMap<String, f64>,
    borrowed: BTreeMap<String, f64>,
}

/// Adds `amounts` into `into`, resource by resource.
fn add_amounts(into: &mut BTreeMap<String, f64>, amounts: &BTreeMap<String, f64>) {
    for (r, v) in amounts {
        *into.entry(r.clone()).or_default() += v;
    }
}

/// Writes one family of constant gauges (or counters, with `counter`).
fn family<L: EncodeLabelSet>(
    encoder: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    unit: Option<&Unit>,
    counter: bool,
    samples: impl IntoIterator<Item = (L, f64)>,
) -> Result<(), fmt::Error> {
    let kind = if counter {
        MetricType::Counter
    } else {
        MetricType::Gauge
    };
    let mut metric = encoder.encode_descriptor(name, help, unit, kind)?;
    for (labels, value) in samples {
        let sample = metric.encode_family(&labels)?;
        if counter {
            ConstCounter::new(value.max(0.0)).encode(sample)?;
        } else {
            ConstGauge::new(value).encode(sample)?;
        }
    }
    Ok(())
}

/// A gauge family of amounts by resource: its name, help, and which amounts it reads.
type Amounts<P> = (&'static str, &'static str, P);

/// Writes one gauge family per entry of `families`, its samples made by `samples` from the
/// entry's choice of amounts.
fn amount_families<P: Copy, L: EncodeLabelSet>(
    encoder: &mut DescriptorEncoder,
    families: impl IntoIterator<Item = Amounts<P>>,
    samples: impl Fn(P) -> Vec<(L, f64)>,
) -> Result<(), fmt::Error> {
    for (name, help, pick) in families {
        family(encoder, name, help, None, false, samples(pick))?;
    }
    Ok(())
}

/// One unlabelled constant gauge.
fn gauge(
    encoder: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    unit: Option<&Unit>,
    value: f64,
) -> Result<(), fmt::Error> {
    let metric = encoder.encode_descriptor(name, help, unit, MetricType::Gauge)?;
    ConstGauge::new(value).encode(metric)
}

impl Collector for EngineCollector {
    fn encode(&self, mut e: DescriptorEncoder) -> Result<(), fmt::Error> {
        let Some(o) = self
            .latest
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
        else {
            return Ok(());
        };
        let computed_at = o.computed_at;
        let stats = o.stats.clone();
        let o = &o.view;
        let secs = Some(&Unit::Seconds);
        for (name, help, unit, value) in [
            (
                "policy_version",
                "The policy version in force",
                None,
                o.policy_version as f64,
            ),
            (
                "live_jobs",
                "Jobs deferred, queued or running",
                None,
                o.live_jobs as f64,
            ),
            (
                "queued_jobs",
                "Jobs waiting in queues",
                None,
                o.queued_jobs as f64,
            ),
            (
                "observation_age",
                "Age of the engine observation these series come from",
                secs,
                computed_at.elapsed().as_secs_f64(),
            ),
            (
                "observation_complete",
                "1 when every tenant with jobs was examined, so per-class backlog and age are exact (always, since observations are one census of the engine)",
                None,
                if o.complete { 1.0 } else { 0.0 },
            ),
        ] {
            gauge(&mut e, name, help, unit, value)?;
        }
        family(
            &mut e,
            "policy_info",
            "The ordering policy in force (always 1)",
            None,
            false,
            [(
                PolicyLabels {
                    policy: o.policy.clone(),
                },
                1.0,
            )],
        )?;
        let classes = &o.classes;
        // Per class: name, help, unit, whether a counter, whether it needs a complete census,
        // and the class's value (none: the class is left out).
        type ClassFamily<'a> = (
            &'a str,
            &'a str,
            Option<&'a Unit>,
            bool,
            bool,
            fn(&crate::wire::observe::ClassView) -> Option<f64>,
        );
        let per_class: [ClassFamily; 7] = [
            (
                "class_queued_jobs",
                "Jobs waiting, by class",
                None,
                false,
                true,
                |c| Some(c.queued.unwrap_or(0) as f64),
            ),
            (
                "class_oldest_queue_age",
                "Age of the oldest waiting job, by class (0 when none waits)",
                secs,
                false,
                true,
                |c| Some(c.oldest_age_s.unwrap_or(0.0)),
            ),
            (
                "class_predicted_start",
                "What admission predicts now as the wait of a default-demand job of the class (absent when no live worker can run it)",
                secs,
                false,
                false,
                |c| c.predicted_start_s,
            ),
            (
                "deadline_misses",
                "Jobs whose deadline passed before they finished, by class (the engine's count)",
                None,
                true,
                false,
                |c| Some(c.deadline_misses as f64),
            ),
            (
                "class_charged_work",
                "Work charged for finished attempts, by class, in worker-seconds (the engine's books)",
                secs,
                true,
                false,
                |c| Some(c.charged_ws),
            ),
            (
                "class_underestimated_work",
                "Actual run time above the estimates, summed, by class, in worker-seconds (the engine's debt)",
                secs,
                true,
                false,
                |c| Some(c.debt_ws),
            ),
            (
                "class_unplaceable_jobs",
                "Jobs waiting that no live worker can run, by class",
                None,
                false,
                false,
                |c| Some(c.unplaceable as f64),
            ),
        ];
        for (name, help, unit, counter, whole, value) in per_class {
            if whole && !o.complete {
                continue;
            }
            let samples = classes.iter().filter_map(|c| {
                let labels = ClassLabels {
                    class: c.name.clone(),
                };
                value(c).map(|v| (labels, v))
            });
            family(&mut e, name, help, unit, counter, samples)?;
        }
        // Pools the policy does not declare share one label, `undeclared`, so that workers
        // naming new pools cannot add series: sum them.
        let mut by_label: BTreeMap<&str, PoolTotals> = BTreeMap::new();
        for p in &o.pools {
            let entry = by_label.entry(p.label.as_str()).or_default();
            entry.workers += f64::from(p.workers);
            add_amounts(&mut entry.capacity, &p.capacity);
            add_amounts(&mut entry.used, &p.used);
            add_amounts(&mut entry.borrowed, &p.borrowed);
        }
        family(
            &mut e,
            "pool_workers",
            "Live workers, by pool",
            None,
            false,
            by_label.iter().map(|(pool, totals)| {
                (
                    PoolLabels {
                        pool: pool.to_string(),
                    },
                    totals.workers,
                )
            }),
        )?;
        // One sample per resource of the pool's capacity (or held there), zero included.
        let per_resource = |pick: fn(&PoolTotals) -> &BTreeMap<String, f64>| {
            by_label
                .iter()
                .flat_map(move |(pool, totals)| {
                    let resources: BTreeSet<&String> =
                        totals.capacity.keys().chain(pick(totals).keys()).collect();
                    resources.into_iter().map(move |r| {
                        (
                            PoolResourceLabels {
                                pool: pool.to_string(),
                                resource: r.clone(),
                            },
                            pick(totals).get(r).copied().unwrap_or(0.0),
                        )
                    })
                })
                .collect::<Vec<_>>()
        };
        type PoolAmounts = fn(&PoolTotals) -> &BTreeMap<String, f64>;
        let pool_amounts: [Amounts<PoolAmounts>; 3] = [
            (
                "pool_capacity",
                "Capacity of the live workers, by pool and resource",
                |t| &t.capacity,
            ),
            (
                "pool_used",
                "Capacity held by running attempts, by pool and resource",
                |t| &t.used,
            ),
            (
                "pool_borrowed",
                "Capacity held by running attempts that borrowed capacity reserved for a higher band, by pool and resource",
                |t| &t.borrowed,
            ),
        ];
        amount_families(&mut e, pool_amounts, per_resource)?;
        // Per pool label and class (zero included): jobs waiting that some live worker of the
        // pool could run.
        let label_of: BTreeMap<&str, &str> = o
            .pools
            .iter()
            .map(|p| (p.name.as_str(), p.label.as_str()))
            .collect();
        let mut pool_queued: BTreeMap<(&str, &str), f64> = BTreeMap::new();
        for pool in by_label.keys() {
            for c in classes {
                pool_queued.insert((pool, c.name.as_str()), 0.0);
            }
        }
        for c in classes {
            for (pool, b) in &c.queued_by_pool {
                let label = label_of.get(pool.as_str()).copied().unwrap_or("undeclared");
                *pool_queued.entry((label, c.name.as_str())).or_default() += b.queued as f64;
            }
        }
        family(
            &mut e,
            "pool_queued_jobs",
            "Jobs waiting that some live worker of the pool could run, by pool and class (a job that fits several pools counts in each)",
            None,
            false,
            pool_queued.iter().map(|((pool, class), n)| {
                (
                    PoolClassLabels {
                        pool: pool.to_string(),
                        class: class.to_string(),
                    },
                    *n,
                )
            }),
        )?;
        let declared: Vec<&PoolView> = o.pools.iter().filter(|p| p.label == p.name).collect();
        let reserves: Vec<(&PoolView, &ReserveView)> = declared
            .iter()
            .flat_map(|p| p.reserves.iter().map(move |r| (*p, r)))
            .collect();
        // One sample per reserved resource, zero included, so that the series do not come
        // and go as the reserve fills and empties.
        let reserve_amounts = |pick: fn(&ReserveView) -> &BTreeMap<String, f64>| {
            reserves
                .iter()
                .flat_map(move |(p, r)| {
                    r.reserved.keys().map(move |res| {
                        (
                            PoolClassResourceLabels {
                                pool: p.label.clone(),
                                class: r.class.clone(),
                                resource: res.clone(),
                            },
                            pick(r).get(res).copied().unwrap_or(0.0),
                        )
                    })
                })
                .collect::<Vec<_>>()
        };
        type ReserveAmounts = fn(&ReserveView) -> &BTreeMap<String, f64>;
        let reserve_families: [Amounts<ReserveAmounts>; 3] = [
            (
                "reserve_capacity",
                "Capacity of a declared pool held for a class (its reserve fraction of the live capacity), by resource",
                |r| &r.reserved,
            ),
            (
                "reserve_used",
                "Capacity of a declared pool held by the running attempts of a class with a reserve there, by resource (above fairway_reserve_capacity: it uses more than its reserve)",
                |r| &r.used,
            ),
            (
                "reserve_held",
                "Capacity of a declared pool held for a class and not used by it: what lower bands may not take except by borrowing, by resource",
                |r| &r.held,
            ),
        ];
        amount_families(&mut e, reserve_families, reserve_amounts)?;
        family(
            &mut e,
            "class_used",
            "Capacity of a declared pool held by running attempts of a class, by resource",
            None,
            false,
            declared.iter().flat_map(|p| {
                p.class_used.iter().flat_map(move |(class, used)| {
                    used.iter().map(move |(res, v)| {
                        (
                            PoolClassResourceLabels {
                                pool: p.label.clone(),
                                class: class.clone(),
                                resource: res.clone(),
                            },
                            *v,
                        )
                    })
                })
            }),
        )?;
        family(
            &mut e,
            "reserve_occupancy_ratio",
            "A class's use of a declared pool over its reserve there, by the dominant resource (above 1: it uses more than its reserve)",
            None,
            false,
            reserves.iter().map(|(p, r)| {
                (
                    PoolClassLabels {
                        pool: p.label.clone(),
                        class: r.class.clone(),
                    },
                    r.occupancy,
                )
            }),
        )?;
        family(
            &mut e,
            "tenants",
            "Tenants with jobs, those listed in the overview (examined), and those above their entitlement",
            None,
            false,
            [
                (
                    StateLabels { state: "with_jobs" },
                    o.tenants_with_jobs as f64,
                ),
                (StateLabels { state: "examined" }, o.tenants.len() as f64),
                (
                    StateLabels {
                        state: "over_entitlement",
                    },
                    o.tenants_over as f64,
                ),
            ],
        )?;
        gauge(
            &mut e,
            "tenant_share_above_entitlement_sum",
            "Sum over the tenants with jobs of their dominant share above their entitlement",
            None,
            o.share_above_entitlement_sum,
        )?;
        let top: Vec<&crate::wire::observe::TenantView> = o
            .tenants
            .iter()
            .filter(|t| t.over > 0.0)
            .take(TOP_OFFENDERS)
            .collect();
        type TenantValue = fn(&crate::wire::observe::TenantView) -> f64;
        let top_families: [(&str, &str, TenantValue); 3] = [
            (
                "top_tenant_dominant_share",
                "Dominant share of all live capacity held by the tenants furthest above their entitlement (at most 10 tenants)",
                |t| t.dominant_share,
            ),
            (
                "top_tenant_entitlement",
                "Entitlement (share of all capacity its weight earns among active tenants) of the same tenants",
                |t| t.entitlement,
            ),
            (
                "top_tenant_queued_jobs",
                "Jobs waiting, of the same tenants",
                |t| t.queued as f64,
            ),
        ];
        for (name, help, value) in top_families {
            let samples = top.iter().map(|t| {
                let labels = TenantLabels {
                    tenant: t.name.clone(),
                };
                (labels, value(t))
            });
            family(&mut e, name, help, None, false, samples)?;
        }
        let s = &stats;
        for (name, help, value) in [
            (
                "engine_passes",
                "Scheduling passes the engine ran",
                s.passes,
            ),
            (
                "engine_candidates_examined",
                "Candidates the scheduling passes examined",
                s.candidates_examined,
            ),
            (
                "engine_backfills",
                "Leases granted as backfill behind a reservation",
                s.backfills,
            ),
            ("engine_retries", "Retries the engine scheduled", s.retries),
        ] {
            let metric = e.encode_descriptor(name, help, None, MetricType::Counter)?;
            ConstCounter::new(value).encode(metric)?;
        }
        Ok(())
    }
}
