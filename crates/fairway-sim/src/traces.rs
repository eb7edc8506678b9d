//! Turning an SWF trace into simulator jobs.
//!
//! Each trace job becomes **one job demanding n processors** on a machine modeled as a single
//! worker with `MaxProcs` processors, rather than a gang of n one-processor members: a parallel
//! job of the Parallel Workloads Archive is allocated and released as a whole, backfilling
//! reasons about whole jobs, and one job per trace line keeps the simulation of a 122,000-job
//! log to a few seconds. Submit time, run time (the actual duration) and requested time (the
//! estimate) come from the trace; the user (or group) is the tenant.

use crate::scenario::{SimJob, TraceSection};
use crate::swf::{SwfJob, SwfTrace};
use fairway_core::config::PoolSpec;
use fairway_core::policy::DEFAULT_CLASS;
use fairway_core::{Dur, Time};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};

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

/// What one SWF record becomes in the simulator: its size, actual run time and requested time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ImportedRecord {
    /// Processors: field 5 (allocated), or field 8 (requested) when field 5 is unknown.
    pub procs: u64,
    /// The actual run time (field 4): how long the simulated job runs.
    pub run: Dur,
    /// The requested time (field 9), or the run time when the trace has none.
    pub requested: Dur,
}

impl ImportedRecord {
    /// The estimate the engine sees: the requested time, or the actual run time when
    /// `actual_estimates` is set. Never zero (a zero estimate would look already overdue).
    pub fn estimate(&self, actual_estimates: bool) -> Dur {
        if actual_estimates {
            self.run
        } else {
            self.requested.max(Dur(1))
        }
    }
}

/// The simulator's view of an SWF record, or `None` when the record cannot be simulated: its
/// size is unknown or larger than the machine (`machine_procs`), or its run or submit time is
/// unknown.
pub fn import_record(job: &SwfJob, machine_procs: u64) -> Option<ImportedRecord> {
    let procs = if job.allocated_procs > 0 {
        job.allocated_procs
    } else {
        job.requested_procs
    };
    if procs <= 0 || procs as u64 > machine_procs || job.run_s < 0 || job.submit_s < 0 {
        return None;
    }
    let run = Dur::from_secs(job.run_s as u64);
    let requested = if job.requested_time_s > 0 {
        Dur::from_secs(job.requested_time_s as u64)
    } else {
        run
    };
    Some(ImportedRecord {
        procs: procs as u64,
        run,
        requested,
    })
}

/// The id of the simulator job made from a record: `swf-<job number>`.
pub fn job_id(job: &SwfJob) -> String {
    format!("swf-{}", job.job_number)
}

/// The tenant of a record under `key`.
pub fn tenant_of(job: &SwfJob, key: TenantKey) -> String {
    match key {
        TenantKey::User => format!("u{}", job.user),
        TenantKey::Group => format!("g{}", job.group),
        TenantKey::None => "trace".to_string(),
    }
}

/// The records the options select (the first `limit`), each with its simulator view; records
/// that cannot be simulated are left out (see [`import_record`]).
pub fn imported_records<'a>(
    trace: &'a SwfTrace,
    options: &TraceOptions,
) -> impl Iterator<Item = (&'a SwfJob, ImportedRecord)> + 'a {
    let machine = trace.machine_size();
    trace
        .jobs
        .iter()
        .take(options.limit.unwrap_or(usize::MAX))
        .filter_map(move |j| import_record(j, machine).map(|r| (j, r)))
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
    let mut jobs = Vec::new();
    let mut tenants = BTreeSet::new();
    for (j, record) in imported_records(trace, options) {
        let tenant = tenant_of(j, options.tenant);
        tenants.insert(tenant.clone());
        jobs.push(SimJob {
            id: job_id(j),
            tenant,
            class: options
                .class
                .clone()
                .unwrap_or_else(|| DEFAULT_CLASS.to_string()),
            at: Time::ZERO.plus(Dur::from_secs(j.submit_s as u64)),
            duration: record.run,
            estimate: Some(record.estimate(options.actual_estimates)),
            deadline: None,
            not_before: None,
            priority: 0,
            demand: [("cpu".to_string(), record.procs as f64)]
                .into_iter()
                .collect(),
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

/// Sets the estimate of every job of `jobs` that came from `trace` (matched by id, see
/// [`job_id`]) to its requested time, or to its actual run time when `actual_estimates` is
/// set; other jobs (a scenario's own streams) keep theirs. Returns how many jobs changed
/// source. This is how `fairway sim --estimates` overrides a `[trace] estimate` key.
pub fn set_estimates(
    jobs: &mut [SimJob],
    trace: &SwfTrace,
    options: &TraceOptions,
    actual_estimates: bool,
) -> usize {
    let estimates: HashMap<String, Dur> = imported_records(trace, options)
        .map(|(j, r)| (job_id(j), r.estimate(actual_estimates)))
        .collect();
    let mut set = 0;
    for job in jobs.iter_mut() {
        if let Some(e) = estimates.get(&job.id) {
            job.estimate = Some(*e);
            set += 1;
        }
    }
    set
}

/// Where a scenario's trace comes from: the `--swf` override, else the file's `[trace] swf`
/// (relative to the scenario file, as the scenario loader reads it), with the `[trace]`
/// section's options. `None` when the scenario has no trace. `text` is the scenario file's
/// text (empty without a file); errors in it are reported by the scenario loader, so a file
/// that does not parse here simply has no trace.
pub fn trace_source(
    text: &str,
    path: Option<&Path>,
    swf_override: Option<&Path>,
) -> Result<Option<(PathBuf, TraceOptions)>, String> {
    let section: Option<TraceSection> = toml::from_str::<crate::scenario::ScenarioFile>(text)
        .ok()
        .and_then(|f| f.trace.map(|t| t.into_inner()));
    let options = TraceOptions::from_section(section.as_ref())?;
    let swf = match (swf_override, &section) {
        (Some(p), _) => p.to_path_buf(),
        (None, Some(s)) => path
            .and_then(Path::parent)
            .unwrap_or(Path::new("."))
            .join(&s.swf),
        (None, None) => return Ok(None),
    };
    Ok(Some((swf, options)))
}
