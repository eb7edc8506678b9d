//! The metrics of the parallel-workload literature, for runs of an SWF trace.
//!
//! A [`TraceReport`] is computed from what happened to each imported job (submit, first start,
//! actual run time, processors, tenant), whoever decided the starts: the engine
//! ([`TraceReport::from_run`]) or the log's own scheduler ([`TraceReport::replay`], each job at
//! submit + its recorded wait). Both give the same shape, so a policy can be compared with the
//! production scheduler job for job.
//!
//! Definitions (the ones of the Parallel Workloads Archive and RLScheduler):
//! - wait = first start - submit;
//! - bounded slowdown = max(1, (wait + run) / max(run, 10 s)) ([`bounded_slowdown_s`]);
//! - percentiles are nearest-rank (p50 of 1..=100 is 50), as elsewhere in the simulator;
//! - `utilization` = processor-seconds run / (machine processors x (last end - first submit));
//!   on a trace the arrivals are fixed, so this moves only with the makespan;
//! - `utilization_backlogged` = the mean fraction of the machine busy while at least one job
//!   was waiting: the measure that shows processors a policy left idle in front of a queue
//!   (fragmentation, or a reservation held too long). 1.0 is the ideal.

use crate::metrics::Metrics;
use crate::scenario::Scenario;
use crate::swf::{BOUNDED_SLOWDOWN_THRESHOLD_S, SwfTrace};
use crate::traces::{TraceOptions, imported_records, job_id, tenant_of};
use serde_json::{Map, Value, json};
use std::collections::{BTreeMap, HashMap};

/// Bounded slowdown of one job, in seconds: max(1, (wait + run) / max(run, 10)).
pub fn bounded_slowdown_s(wait_s: f64, run_s: f64) -> f64 {
    ((wait_s + run_s) / run_s.max(BOUNDED_SLOWDOWN_THRESHOLD_S as f64)).max(1.0)
}

/// What happened to one job of a trace.
#[derive(Clone, Debug, PartialEq)]
pub struct TraceJob {
    /// Tenant (`u<user>` by default).
    pub tenant: String,
    /// Submit time, seconds from the log's start.
    pub submit_s: f64,
    /// First start, seconds; `None` if it never started.
    pub start_s: Option<f64>,
    /// Actual run time, seconds.
    pub run_s: f64,
    /// Processors.
    pub procs: f64,
}

/// Mean and nearest-rank percentiles of a sample.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Summary {
    /// Mean.
    pub mean: f64,
    /// Median.
    pub p50: f64,
    /// 90th percentile.
    pub p90: f64,
    /// 99th percentile.
    pub p99: f64,
    /// Largest value.
    pub max: f64,
}

impl Summary {
    /// The summary of `values` (all zero for an empty sample).
    pub fn of(values: &[f64]) -> Summary {
        if values.is_empty() {
            return Summary::default();
        }
        let mut v = values.to_vec();
        v.sort_by(f64::total_cmp);
        let rank = |p: f64| v[((p * v.len() as f64).ceil() as usize).clamp(1, v.len()) - 1];
        Summary {
            mean: v.iter().sum::<f64>() / v.len() as f64,
            p50: rank(0.5),
            p90: rank(0.9),
            p99: rank(0.99),
            max: v[v.len() - 1],
        }
    }

    /// `{mean, p50, p90, p99, max}`.
    pub fn to_json(&self) -> Value {
        json!({
            "mean": round6(self.mean),
            "p50": round6(self.p50),
            "p90": round6(self.p90),
            "p99": round6(self.p99),
            "max": round6(self.max),
        })
    }
}

/// One tenant's jobs in a trace run.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TenantReport {
    /// Jobs submitted.
    pub jobs: usize,
    /// Jobs that started.
    pub started: usize,
    /// Processor-seconds of service received (run x processors of its started jobs).
    pub proc_s: f64,
    /// Its fraction of all the service delivered.
    pub service_share: f64,
    /// Waits of its started jobs.
    pub wait_s: Summary,
    /// Mean bounded slowdown of its started jobs.
    pub bounded_slowdown_mean: f64,
}

/// The trace metrics of one run (see the module documentation for definitions).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TraceReport {
    /// Machine size, processors.
    pub machine_procs: f64,
    /// Jobs in the run.
    pub jobs: usize,
    /// Jobs that started.
    pub started: usize,
    /// Waits of the started jobs.
    pub wait_s: Summary,
    /// Bounded slowdowns of the started jobs.
    pub bounded_slowdown: Summary,
    /// Processor-seconds run / (machine x (last end - first submit)).
    pub utilization: f64,
    /// Mean busy fraction of the machine while some job waited.
    pub utilization_backlogged: f64,
    /// Seconds during which some job waited.
    pub backlogged_s: f64,
    /// First submit, seconds.
    pub first_submit_s: f64,
    /// Last end of a started job, seconds.
    pub last_end_s: f64,
    /// Per tenant.
    pub tenants: BTreeMap<String, TenantReport>,
}

impl TraceReport {
    /// The report of `jobs` on a machine of `machine_procs` processors.
    pub fn from_jobs(jobs: &[TraceJob], machine_procs: f64) -> TraceReport {
        assert!(machine_procs > 0.0, "a machine has processors");
        let mut waits = Vec::with_capacity(jobs.len());
        let mut slowdowns = Vec::with_capacity(jobs.len());
        let mut per_tenant: BTreeMap<&str, (TenantReport, Vec<f64>, f64)> = BTreeMap::new();
        let mut work = 0.0;
        let mut first_submit = f64::INFINITY;
        let mut last_end = f64::NEG_INFINITY;
        for job in jobs {
            first_submit = first_submit.min(job.submit_s);
            let entry = per_tenant.entry(&job.tenant).or_default();
            entry.0.jobs += 1;
            let Some(start) = job.start_s else { continue };
            let wait = start - job.submit_s;
            assert!(
                wait >= 0.0,
                "a job cannot start before it is submitted: {job:?}"
            );
            let bsld = bounded_slowdown_s(wait, job.run_s);
            waits.push(wait);
            slowdowns.push(bsld);
            work += job.run_s * job.procs;
            last_end = last_end.max(start + job.run_s);
            entry.0.started += 1;
            entry.0.proc_s += job.run_s * job.procs;
            entry.1.push(wait);
            entry.2 += bsld;
        }
        let span = last_end - first_submit;
        let utilization = if span > 0.0 {
            work / (machine_procs * span)
        } else {
            0.0
        };
        let (backlogged_s, busy_backlogged) = backlogged_busy(jobs);
        let tenants = per_tenant
            .into_iter()
            .map(|(name, (mut t, waits, bsld_sum))| {
                t.service_share = if work > 0.0 { t.proc_s / work } else { 0.0 };
                t.wait_s = Summary::of(&waits);
                t.bounded_slowdown_mean = if t.started > 0 {
                    bsld_sum / t.started as f64
                } else {
                    0.0
                };
                (name.to_string(), t)
            })
            .collect();
        TraceReport {
            machine_procs,
            jobs: jobs.len(),
            started: waits.len(),
            wait_s: Summary::of(&waits),
            bounded_slowdown: Summary::of(&slowdowns),
            utilization,
            utilization_backlogged: if backlogged_s > 0.0 {
                busy_backlogged / (machine_procs * backlogged_s)
            } else {
                1.0
            },
            backlogged_s,
            first_submit_s: if jobs.is_empty() { 0.0 } else { first_submit },
            last_end_s: if waits.is_empty() { 0.0 } else { last_end },
            tenants,
        }
    }

    /// The report of an engine run of `scenario`, over the jobs imported from `trace` (a
    /// scenario's own streams, if any, are left out).
    pub fn from_run(
        scenario: &Scenario,
        metrics: &Metrics,
        trace: &SwfTrace,
        options: &TraceOptions,
    ) -> TraceReport {
        let index: HashMap<&str, usize> = scenario
            .jobs
            .iter()
            .enumerate()
            .map(|(i, j)| (j.id.as_str(), i))
            .collect();
        let jobs: Vec<TraceJob> = imported_records(trace, options)
            .filter_map(|(record, _)| index.get(job_id(record).as_str()).copied())
            .map(|i| {
                let job = &scenario.jobs[i];
                TraceJob {
                    tenant: job.tenant.clone(),
                    submit_s: job.at.as_secs_f64(),
                    start_s: metrics.first_start(i).map(|t| t.as_secs_f64()),
                    run_s: job.duration.as_secs_f64(),
                    procs: job.demand.get("cpu").copied().unwrap_or(0.0),
                }
            })
            .collect();
        TraceReport::from_jobs(&jobs, trace.machine_size() as f64)
    }

    /// The report of the log's own schedule: each imported job starts at submit + its
    /// recorded wait (field 3). Jobs whose recorded wait is unknown count as never started.
    pub fn replay(trace: &SwfTrace, options: &TraceOptions) -> TraceReport {
        let jobs: Vec<TraceJob> = imported_records(trace, options)
            .map(|(record, imported)| TraceJob {
                tenant: tenant_of(record, options.tenant),
                submit_s: record.submit_s as f64,
                start_s: (record.wait_s >= 0).then(|| (record.submit_s + record.wait_s) as f64),
                run_s: imported.run.as_secs_f64(),
                procs: imported.procs as f64,
            })
            .collect();
        TraceReport::from_jobs(&jobs, trace.machine_size() as f64)
    }

    /// The `trace` section of the JSON output.
    pub fn to_json(&self) -> Value {
        let mut tenants = Map::new();
        for (name, t) in &self.tenants {
            tenants.insert(
                name.clone(),
                json!({
                    "jobs": t.jobs,
                    "started": t.started,
                    "proc_s": round6(t.proc_s),
                    "service_share": round6(t.service_share),
                    "wait_s": t.wait_s.to_json(),
                    "bounded_slowdown_mean": round6(t.bounded_slowdown_mean),
                }),
            );
        }
        json!({
            "machine_procs": self.machine_procs,
            "jobs": self.jobs,
            "started": self.started,
            "wait_s": self.wait_s.to_json(),
            "bounded_slowdown": self.bounded_slowdown.to_json(),
            "utilization": round6(self.utilization),
            "utilization_backlogged": round6(self.utilization_backlogged),
            "backlogged_s": round6(self.backlogged_s),
            "span_s": [round6(self.first_submit_s), round6(self.last_end_s)],
            "tenants": tenants,
        })
    }

    /// Three readable lines.
    pub fn to_text(&self) -> String {
        format!(
            "trace: {} jobs ({} started) on {} processors\n\
             wait s: mean {:.1}, p50 {:.1}, p90 {:.1}, p99 {:.1}, max {:.1}; bounded slowdown: mean {:.2}, p50 {:.2}, p99 {:.2}\n\
             utilization {:.3} (first submit to last end), {:.3} while jobs waited ({:.0} s)\n",
            self.jobs,
            self.started,
            self.machine_procs,
            self.wait_s.mean,
            self.wait_s.p50,
            self.wait_s.p90,
            self.wait_s.p99,
            self.wait_s.max,
            self.bounded_slowdown.mean,
            self.bounded_slowdown.p50,
            self.bounded_slowdown.p99,
            self.utilization,
            self.utilization_backlogged,
            self.backlogged_s,
        )
    }
}

/// Seconds during which at least one job waited, and the processor-seconds busy during them.
fn backlogged_busy(jobs: &[TraceJob]) -> (f64, f64) {
    // (time, change in waiting jobs, change in busy processors)
    let mut changes: Vec<(f64, i64, f64)> = Vec::with_capacity(jobs.len() * 3);
    for job in jobs {
        changes.push((job.submit_s, 1, 0.0));
        if let Some(start) = job.start_s {
            changes.push((start, -1, job.procs));
            changes.push((start + job.run_s, 0, -job.procs));
        }
    }
    changes.sort_by(|a, b| a.0.total_cmp(&b.0));
    let (mut waiting, mut busy) = (0i64, 0.0);
    let (mut backlogged, mut busy_backlogged) = (0.0, 0.0);
    let mut i = 0;
    while i < changes.len() {
        let t = changes[i].0;
        while i < changes.len() && changes[i].0 == t {
            waiting += changes[i].1;
            busy += changes[i].2;
            i += 1;
        }
        // Jobs that never start wait to the end of the run, which is the last change.
        if let Some(next) = changes.get(i)
            && waiting > 0
        {
            let dt = next.0 - t;
            backlogged += dt;
            busy_backlogged += busy * dt;
        }
    }
    (backlogged, busy_backlogged)
}

fn round6(x: f64) -> f64 {
    if x.is_finite() {
        (x * 1e6).round() / 1e6
    } else {
        0.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(tenant: &str, submit: f64, start: Option<f64>, run: f64, procs: f64) -> TraceJob {
        TraceJob {
            tenant: tenant.into(),
            submit_s: submit,
            start_s: start,
            run_s: run,
            procs,
        }
    }

    #[test]
    fn bounded_slowdown_uses_a_ten_second_floor_and_never_drops_below_one() {
        assert_eq!(bounded_slowdown_s(0.0, 100.0), 1.0);
        assert_eq!(bounded_slowdown_s(100.0, 100.0), 2.0);
        // A 1 s job that waited 19 s: (19 + 1) / 10.
        assert_eq!(bounded_slowdown_s(19.0, 1.0), 2.0);
        assert_eq!(bounded_slowdown_s(3.0, 1.0), 1.0);
    }

    #[test]
    fn percentiles_are_nearest_rank() {
        let v: Vec<f64> = (1..=100).map(f64::from).collect();
        let s = Summary::of(&v);
        assert_eq!((s.p50, s.p90, s.p99, s.max), (50.0, 90.0, 99.0, 100.0));
        assert_eq!(s.mean, 50.5);
    }

    #[test]
    fn utilization_and_backlog_of_a_hand_made_schedule() {
        // Machine of 4. A: 2 procs 0..100. B: 4 procs, submitted 10, runs 100..150.
        // C: 2 procs, submitted 20, runs 20..70. B waits 10..100.
        let jobs = [
            job("u1", 0.0, Some(0.0), 100.0, 2.0),
            job("u2", 10.0, Some(100.0), 50.0, 4.0),
            job("u2", 20.0, Some(20.0), 50.0, 2.0),
        ];
        let r = TraceReport::from_jobs(&jobs, 4.0);
        // Work 200 + 200 + 100 over 4 x 150.
        assert!((r.utilization - 500.0 / 600.0).abs() < 1e-12);
        // Backlogged 10..100: busy 2 x 10 (10..20) + 4 x 50 (20..70) + 2 x 30 (70..100).
        assert_eq!(r.backlogged_s, 90.0);
        assert!((r.utilization_backlogged - 280.0 / 360.0).abs() < 1e-12);
        assert_eq!(r.wait_s.max, 90.0);
        let u2 = &r.tenants["u2"];
        assert_eq!((u2.jobs, u2.started, u2.proc_s), (2, 2, 300.0));
        assert!((u2.service_share - 0.6).abs() < 1e-12);
        // B: (90 + 50) / 50; C: 1.
        assert!((u2.bounded_slowdown_mean - (2.8 + 1.0) / 2.0).abs() < 1e-12);
    }

    #[test]
    fn a_job_that_never_starts_is_counted_but_not_averaged() {
        let jobs = [
            job("u1", 0.0, Some(5.0), 10.0, 1.0),
            job("u1", 0.0, None, 10.0, 1.0),
        ];
        let r = TraceReport::from_jobs(&jobs, 1.0);
        assert_eq!((r.jobs, r.started), (2, 1));
        assert_eq!(r.wait_s.mean, 5.0);
        assert_eq!(r.tenants["u1"].jobs, 2);
    }
}
