//! Turning an SWF trace into simulator jobs.
//!
//! Each trace job becomes **one job demanding n processors** on a machine modeled as a single
//! worker with `MaxProcs` processors, rather than a gang of n one-processor members: a parallel
//! job of the Parallel Workloads Archive is allocated and released as a whole, backfilling
//! reasons about whole jobs, and one job per trace line keeps the simulation of a 122,000-job
//! log to a few seconds. Submit time, run time (the actual duration) and requested time (the
//! estimate) come from the trace; the user (or group) is the tenant.

use crate::scenario::{SimJob, TraceSection};
use crate::swf::SwfTrace;
use fairway_core::config::PoolSpec;
use fairway_core::policy::DEFAULT_CLASS;
use fairway_core::{Dur, Time};
use std::collections::{BTreeMap, BTreeSet};

/// How trace jobs map to tenants.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum TenantKey {
    /// `u<user id>`.
    #[default]
    User,
    /// `g<group id>`.
    Group,
    /// One tenant, `trace`.
    None,
}

/// Options for importing a trace.
#[derive(Clone, Debug, Default)]
pub struct TraceOptions {
    /// Tenant key.
    pub tenant: TenantKey,
    /// Use actual run times as estimates instead of requested times.
    pub actual_estimates: bool,
    /// Pool name.
    pub pool: Option<String>,
    /// Class.
    pub class: Option<String>,
    /// Only the first N jobs.
    pub limit: Option<usize>,
}

impl TraceOptions {
    /// Options from a `[trace]` section.
    pub fn from_section(section: Option<&TraceSection>) -> Result<TraceOptions, String> {
        let Some(s) = section else {
            return Ok(TraceOptions::default());
        };
        let tenant = match s.tenant.as_deref() {
            None | Some("user") => TenantKey::User,
            Some("group") => TenantKey::Group,
            Some("none") => TenantKey::None,
            Some(other) => {
                return Err(format!(
                    "unknown tenant key {other:?} (expected user, group or none)"
                ));
            }
        };
        let actual_estimates = match s.estimate.as_deref() {
            None | Some("requested") => false,
            Some("actual") => true,
            Some(other) => {
                return Err(format!(
                    "unknown estimate {other:?} (expected requested or actual)"
                ));
            }
        };
        Ok(TraceOptions {
            tenant,
            actual_estimates,
            pool: s.pool.clone(),
            class: s.class.clone(),
            limit: s.limit,
        })
    }
}

/// The machine pool of a trace: one worker with `MaxProcs` processors (`cpu`).
pub fn machine_pool(trace: &SwfTrace, name: &str) -> PoolSpec {
    PoolSpec {
        name: name.to_string(),
        workers: Some(1),
        capacity: [("cpu".to_string(), trace.machine_size() as f64)]
            .into_iter()
            .collect(),
        labels: BTreeMap::new(),
    }
}

/// The trace's jobs as simulator jobs, its machine pool, and its tenants. Jobs whose size or
/// run time is unknown, or which are larger than the machine, are left out (and counted by the
/// caller from the difference).
pub fn trace_jobs(
    trace: &SwfTrace,
    options: &TraceOptions,
) -> (Vec<SimJob>, PoolSpec, BTreeSet<String>) {
    let pool_name = options
        .pool
        .clone()
        .unwrap_or_else(|| "machine".to_string());
    let pool = machine_pool(trace, &pool_name);
    let size = trace.machine_size() as i64;
    let mut jobs = Vec::new();
    let mut tenants = BTreeSet::new();
    for j in trace.jobs.iter().take(options.limit.unwrap_or(usize::MAX)) {
        let procs = if j.allocated_procs > 0 {
            j.allocated_procs
        } else {
            j.requested_procs
        };
        if procs <= 0 || procs > size || j.run_s < 0 || j.submit_s < 0 {
            continue;
        }
        let run = Dur::from_secs(j.run_s as u64);
        let requested = if j.requested_time_s > 0 {
            Dur::from_secs(j.requested_time_s as u64)
        } else {
            run
        };
        let tenant = match options.tenant {
            TenantKey::User => format!("u{}", j.user),
            TenantKey::Group => format!("g{}", j.group),
            TenantKey::None => "trace".to_string(),
        };
        tenants.insert(tenant.clone());
        jobs.push(SimJob {
            id: format!("swf-{}", j.job_number),
            tenant,
            class: options
                .class
                .clone()
                .unwrap_or_else(|| DEFAULT_CLASS.to_string()),
            at: Time::ZERO.plus(Dur::from_secs(j.submit_s as u64)),
            duration: run,
            estimate: Some(if options.actual_estimates {
                run
            } else {
                requested.max(Dur(1))
            }),
            deadline: None,
            not_before: None,
            priority: 0,
            demand: [("cpu".to_string(), procs as f64)].into_iter().collect(),
            requires: [("pool".to_string(), pool_name.clone())]
                .into_iter()
                .collect(),
            fail_rate: 0.0,
            max_attempts: None,
            preemptible: false,
            checkpointable: false,
            gang: 1,
            gang_min: None,
        });
    }
    (jobs, pool, tenants)
}
