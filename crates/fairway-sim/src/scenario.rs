//! Scenario files: the `[sim]`, `[[stream]]`, `[[job]]`, `[[probe]]`, `[[fault]]` and `[trace]`
//! sections around a policy (see DESIGN.md, "Scenario files"). Unknown keys and references to
//! undeclared tenants, classes or pools are errors that name the file, line and key.

use fairway_core::config::{
    ClassSpec, ConfigError, DurStr, PolicySection, PoolSpec, TenantSpec, key_line, line_of,
};
use fairway_core::policy::{DEFAULT_CLASS, Policy};
use fairway_core::{Dur, Time};
use serde::Deserialize;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::path::{Path, PathBuf};
use toml::Spanned;

/// The most jobs one scenario may generate (streams, jobs and trace together).
pub const MAX_SCENARIO_JOBS: u64 = 20_000_000;

/// `[sim]`.
#[derive(Clone, Debug, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct SimSection {
    /// Seed of every random choice (failures, Poisson arrivals).
    #[serde(default)]
    pub seed: u64,
    /// Stop time; default: when every job has finished.
    pub until: Option<DurStr>,
    /// Window for shares and fairness; default: the whole run.
    pub measure: Option<Vec<DurStr>>,
    /// How often live workers heartbeat their leases (default: a third of the lease, and only
    /// when the scenario has faults; without faults leases never expire).
    pub heartbeat: Option<DurStr>,
    /// How long a worker takes to stop after a preemption or cancellation (default: at once).
    pub stop_delay: Option<DurStr>,
}

/// Arrival process of a stream.
#[derive(Clone, Copy, Debug, Deserialize, Default, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum Arrivals {
    /// Evenly spaced at `rate`.
    #[default]
    Uniform,
    /// A Poisson process of intensity `rate` (seeded).
    Poisson,
}

/// A `[[stream]]` of similar jobs, or a single `[[job]]`.
#[derive(Clone, Debug, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct StreamSpec {
    /// Job id (single jobs) or id prefix (streams; default `<tenant>-<stream index>`).
    pub id: Option<String>,
    /// Tenant.
    pub tenant: String,
    /// Class; default `default`.
    pub class: Option<String>,
    /// How many jobs (streams only).
    pub count: Option<u64>,
    /// First arrival.
    #[serde(default)]
    pub at: DurStr,
    /// Arrivals per second; absent: all at once.
    pub rate: Option<f64>,
    /// Arrival process.
    #[serde(default)]
    pub arrivals: Arrivals,
    /// Demand per member; default `{cpu = 1}`.
    #[serde(default)]
    pub demand: BTreeMap<String, f64>,
    /// Actual service time.
    pub duration: DurStr,
    /// Declared estimate; default the duration.
    pub estimate: Option<DurStr>,
    /// Whether the job declares no estimate at all (admission then uses its defaults).
    #[serde(default)]
    pub no_estimate: bool,
    /// Deadline relative to arrival.
    pub deadline: Option<DurStr>,
    /// Not before, relative to arrival.
    pub not_before: Option<DurStr>,
    /// Priority inside its class.
    #[serde(default)]
    pub priority: i32,
    /// Labels required.
    #[serde(default)]
    pub requires: BTreeMap<String, String>,
    /// Fraction of attempts that fail retryably.
    #[serde(default)]
    pub fail_rate: f64,
    /// Attempts allowed.
    pub max_attempts: Option<u32>,
    /// Preemptible.
    #[serde(default)]
    pub preemptible: bool,
    /// Checkpointable.
    #[serde(default)]
    pub checkpointable: bool,
    /// Gang members.
    pub gang: Option<u32>,
    /// Fewest members.
    pub gang_min: Option<u32>,
}

/// A `[[probe]]`: a snapshot after every event at an instant.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProbeSpec {
    /// When.
    pub at: DurStr,
}

/// A `[[fault]]`: workers of a pool lost or returned.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FaultSpec {
    /// When.
    pub at: DurStr,
    /// Which pool.
    pub pool: String,
    /// Workers lost (they stop heartbeating; their attempts never report).
    pub lost: Option<u32>,
    /// Workers returned (lost ones come back, fresh).
    pub returned: Option<u32>,
}

/// `[trace]`: jobs from an SWF file.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TraceSection {
    /// Path of the SWF file, relative to the scenario file.
    pub swf: String,
    /// Tenant key: `user` (default), `group`, or `none` (one tenant).
    pub tenant: Option<String>,
    /// Estimates: `requested` (the trace's requested time, default) or `actual` (run times).
    pub estimate: Option<String>,
    /// Pool the jobs run in; default: a pool named `machine` of one worker of `MaxProcs`
    /// processors is added when no pool is declared.
    pub pool: Option<String>,
    /// Class of the trace's jobs.
    pub class: Option<String>,
    /// Only the first N jobs.
    pub limit: Option<usize>,
}

/// The file as parsed.
#[derive(Clone, Debug, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct ScenarioFile {
    /// `[sim]`.
    #[serde(default)]
    pub sim: SimSection,
    /// `[policy]`.
    #[serde(default)]
    pub policy: PolicySection,
    /// `[[pool]]`.
    #[serde(default)]
    pub pool: Vec<Spanned<PoolSpec>>,
    /// `[[tenant]]`.
    #[serde(default)]
    pub tenant: Vec<Spanned<TenantSpec>>,
    /// `[[class]]`.
    #[serde(default)]
    pub class: Vec<Spanned<ClassSpec>>,
    /// `[[stream]]`.
    #[serde(default)]
    pub stream: Vec<Spanned<StreamSpec>>,
    /// `[[job]]`.
    #[serde(default)]
    pub job: Vec<Spanned<StreamSpec>>,
    /// `[[probe]]`.
    #[serde(default)]
    pub probe: Vec<Spanned<ProbeSpec>>,
    /// `[[fault]]`.
    #[serde(default)]
    pub fault: Vec<Spanned<FaultSpec>>,
    /// `[trace]`.
    pub trace: Option<Spanned<TraceSection>>,
}

/// An error in a scenario file: the file, then the line and key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScenarioError {
    /// The file (when read from one).
    pub path: Option<PathBuf>,
    /// The error.
    pub error: ConfigError,
}

impl fmt::Display for ScenarioError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (&self.path, self.error.line) {
            (Some(p), Some(line)) => write!(f, "{}:{line}: ", p.display())?,
            (Some(p), None) => write!(f, "{}: ", p.display())?,
            (None, Some(line)) => write!(f, "line {line}: ")?,
            (None, None) => {}
        }
        match &self.error.key {
            Some(k) => write!(f, "key `{k}`: {}", self.error.message),
            None => write!(f, "{}", self.error.message),
        }
    }
}

impl std::error::Error for ScenarioError {}

/// Errors found in one file; the first is shown first.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScenarioErrors(pub Vec<ScenarioError>);

impl fmt::Display for ScenarioErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, e) in self.0.iter().enumerate() {
            if i > 0 {
                writeln!(f)?;
            }
            write!(f, "{e}")?;
        }
        Ok(())
    }
}

impl std::error::Error for ScenarioErrors {}

/// A job the simulator will submit.
#[derive(Clone, Debug)]
pub struct SimJob {
    /// Id.
    pub id: String,
    /// Tenant.
    pub tenant: String,
    /// Class.
    pub class: String,
    /// Arrival.
    pub at: Time,
    /// Actual service time.
    pub duration: Dur,
    /// Declared estimate (None: undeclared).
    pub estimate: Option<Dur>,
    /// Absolute deadline.
    pub deadline: Option<Time>,
    /// Absolute not-before.
    pub not_before: Option<Time>,
    /// Priority.
    pub priority: i32,
    /// Demand per member.
    pub demand: BTreeMap<String, f64>,
    /// Requirements.
    pub requires: BTreeMap<String, String>,
    /// Failure probability per attempt.
    pub fail_rate: f64,
    /// Attempts.
    pub max_attempts: Option<u32>,
    /// Preemptible.
    pub preemptible: bool,
    /// Checkpointable.
    pub checkpointable: bool,
    /// Gang.
    pub gang: u32,
    /// Gang minimum.
    pub gang_min: Option<u32>,
}

/// A validated pool of simulated workers.
#[derive(Clone, Debug)]
pub struct SimPool {
    /// Name.
    pub name: String,
    /// Workers.
    pub workers: u32,
    /// Capacity per worker.
    pub capacity: BTreeMap<String, f64>,
    /// Labels.
    pub labels: BTreeMap<String, String>,
}

/// A fault at an instant.
#[derive(Clone, Debug)]
pub struct SimFault {
    /// When.
    pub at: Time,
    /// Pool.
    pub pool: String,
    /// Workers lost.
    pub lost: u32,
    /// Workers returned.
    pub returned: u32,
}

/// A validated scenario, ready to run.
#[derive(Clone, Debug)]
pub struct Scenario {
    /// The policy (as published to the engine).
    pub policy: Policy,
    /// Pools of simulated workers.
    pub pools: Vec<SimPool>,
    /// Jobs, sorted by arrival then id order of declaration.
    pub jobs: Vec<SimJob>,
    /// Probe instants.
    pub probes: Vec<Time>,
    /// Faults.
    pub faults: Vec<SimFault>,
    /// Seed.
    pub seed: u64,
    /// Stop time.
    pub until: Option<Time>,
    /// Measurement window.
    pub measure: (Time, Option<Time>),
    /// Heartbeat period (None: leases never expire).
    pub heartbeat: Option<Dur>,
    /// Worker reaction time to a stop request.
    pub stop_delay: Dur,
    /// Tenant weights and declared tenants, for entitlements.
    pub tenants: Vec<TenantSpec>,
}

/// Overrides from the command line.
#[derive(Clone, Debug, Default)]
pub struct Overrides {
    /// Policy name.
    pub policy: Option<fairway_core::PolicyName>,
    /// Backfill mode.
    pub backfill: Option<fairway_core::Backfill>,
    /// Seed.
    pub seed: Option<u64>,
    /// An SWF trace to run (instead of, or with, the file's own).
    pub swf: Option<PathBuf>,
}

impl Scenario {
    /// Reads and validates a scenario file.
    pub fn from_path(path: &Path, overrides: &Overrides) -> Result<Scenario, ScenarioErrors> {
        let text = std::fs::read_to_string(path).map_err(|e| {
            ScenarioErrors(vec![ScenarioError {
                path: Some(path.to_path_buf()),
                error: ConfigError {
                    line: None,
                    key: None,
                    message: format!("cannot read: {e}"),
                },
            }])
        })?;
        Scenario::from_text(&text, Some(path), overrides)
    }

    /// Parses and validates scenario text (`path` names it in errors and anchors `[trace]`).
    pub fn from_text(
        text: &str,
        path: Option<&Path>,
        overrides: &Overrides,
    ) -> Result<Scenario, ScenarioErrors> {
        let wrap = |errors: Vec<ConfigError>| {
            ScenarioErrors(
                errors
                    .into_iter()
                    .map(|error| ScenarioError {
                        path: path.map(Path::to_path_buf),
                        error,
                    })
                    .collect(),
            )
        };
        let mut file: ScenarioFile =
            toml::from_str(text).map_err(|e| wrap(vec![ConfigError::from_toml(text, &e)]))?;
        if let Some(p) = overrides.policy {
            file.policy.name = p;
        }
        if let Some(b) = overrides.backfill {
            file.policy.backfill = b;
        }
        if let Some(s) = overrides.seed {
            file.sim.seed = s;
        }
        let mut errors = Vec::new();
        let trace_jobs = load_trace(&mut file, text, path, overrides, &mut errors);
        let has_faults = !file.fault.is_empty();
        let heartbeat = match (file.sim.heartbeat, has_faults) {
            (Some(h), _) => Some(h.0),
            (None, true) => Some(Dur(file
                .policy
                .lease
                .map(|l| l.0)
                .unwrap_or(Dur::from_secs(30))
                .0
                / 3)),
            (None, false) => None,
        };
        if heartbeat.is_none() && file.policy.lease.is_none() {
            // Without faults nobody goes silent: leases are made long enough never to expire.
            file.policy.lease = Some(DurStr(Dur::from_secs(100 * 365 * 86400)));
        }
        let policy = match Policy::from_sections(
            &file.policy,
            &file.pool,
            &file.tenant,
            &file.class,
            text,
        ) {
            Ok(p) => Some(p),
            Err(e) => {
                errors.extend(e);
                None
            }
        };
        let classes: BTreeSet<String> = file
            .class
            .iter()
            .map(|c| c.get_ref().name.clone())
            .chain([DEFAULT_CLASS.to_string()])
            .collect();
        let tenants: BTreeSet<String> = file
            .tenant
            .iter()
            .map(|t| t.get_ref().name.clone())
            .collect();
        let mut pools = Vec::new();
        for p in &file.pool {
            let spec = p.get_ref();
            let workers = spec.workers.unwrap_or(1);
            if spec.capacity.is_empty() {
                errors.push(err_key(
                    text,
                    p.span().start,
                    "capacity",
                    "a simulated pool needs a capacity per worker",
                ));
            }
            pools.push(SimPool {
                name: spec.name.clone(),
                workers,
                capacity: spec.capacity.clone(),
                labels: spec.labels.clone(),
            });
        }
        let mut jobs = trace_jobs;
        let mut rng = crate::rng::Rng::new(file.sim.seed ^ 0x5EED_0FA1);
        for (i, s) in file.stream.iter().enumerate() {
            expand(
                text,
                s,
                Some(i),
                &classes,
                &tenants,
                &mut rng,
                &mut jobs,
                &mut errors,
            );
        }
        for j in &file.job {
            expand(
                text,
                j,
                None,
                &classes,
                &tenants,
                &mut rng,
                &mut jobs,
                &mut errors,
            );
        }
        let mut ids = BTreeSet::new();
        for j in &jobs {
            if !ids.insert(j.id.as_str()) {
                errors.push(ConfigError {
                    line: None,
                    key: Some("id".into()),
                    message: format!("job id {:?} is used twice", j.id),
                });
                break;
            }
        }
        let pool_names: BTreeSet<&str> = pools.iter().map(|p| p.name.as_str()).collect();
        let mut faults = Vec::new();
        for f in &file.fault {
            let spec = f.get_ref();
            if !pool_names.contains(spec.pool.as_str()) {
                errors.push(err_key(
                    text,
                    f.span().start,
                    "pool",
                    format!("unknown pool {:?}", spec.pool),
                ));
            }
            if spec.lost.is_none() && spec.returned.is_none() {
                errors.push(err_key(
                    text,
                    f.span().start,
                    "lost",
                    "a fault loses or returns workers: set `lost` or `returned`",
                ));
            }
            faults.push(SimFault {
                at: Time(spec.at.0.0),
                pool: spec.pool.clone(),
                lost: spec.lost.unwrap_or(0),
                returned: spec.returned.unwrap_or(0),
            });
        }
        let measure = match &file.sim.measure {
            None => (Time::ZERO, None),
            Some(m) if m.len() == 2 && m[0].0 < m[1].0 => (Time(m[0].0.0), Some(Time(m[1].0.0))),
            Some(_) => {
                let start = text.find("[sim]").unwrap_or(0);
                errors.push(err_key(
                    text,
                    start,
                    "measure",
                    "must be two instants, [start, end], start before end",
                ));
                (Time::ZERO, None)
            }
        };
        if !errors.is_empty() {
            return Err(wrap(errors));
        }
        jobs.sort_by_key(|j| j.at);
        let mut probes: Vec<Time> = file
            .probe
            .iter()
            .map(|p| Time(p.get_ref().at.0.0))
            .collect();
        probes.sort();
        probes.dedup();
        faults.sort_by_key(|f| f.at);
        Ok(Scenario {
            policy: policy.expect("no errors means a policy"),
            pools,
            jobs,
            probes,
            faults,
            seed: file.sim.seed,
            until: file.sim.until.map(|u| Time(u.0.0)),
            measure,
            heartbeat,
            stop_delay: file.sim.stop_delay.map(|d| d.0).unwrap_or(Dur::ZERO),
            tenants: file.tenant.iter().map(|t| t.get_ref().clone()).collect(),
        })
    }
}

fn err_key(text: &str, start: usize, key: &str, message: impl Into<String>) -> ConfigError {
    ConfigError {
        line: Some(key_line(text, start, key)),
        key: Some(key.to_string()),
        message: message.into(),
    }
}

#[allow(clippy::too_many_arguments)]
fn expand(
    text: &str,
    spanned: &Spanned<StreamSpec>,
    stream_index: Option<usize>,
    classes: &BTreeSet<String>,
    tenants: &BTreeSet<String>,
    rng: &mut crate::rng::Rng,
    jobs: &mut Vec<SimJob>,
    errors: &mut Vec<ConfigError>,
) {
    let start = spanned.span().start;
    let s = spanned.get_ref();
    let before = errors.len();
    if !tenants.contains(&s.tenant) {
        errors.push(err_key(
            text,
            start,
            "tenant",
            format!(
                "tenant {:?} is not declared in a [[tenant]] section",
                s.tenant
            ),
        ));
    }
    if let Some(c) = &s.class
        && !classes.contains(c)
    {
        errors.push(err_key(
            text,
            start,
            "class",
            format!("class {c:?} is not declared in a [[class]] section"),
        ));
    }
    if !(s.fail_rate.is_finite() && (0.0..1.0).contains(&s.fail_rate)) {
        errors.push(err_key(
            text,
            start,
            "fail_rate",
            "must be a fraction in [0, 1)",
        ));
    }
    let count = match (stream_index, s.count) {
        (Some(_), Some(c)) => c,
        (Some(_), None) => {
            errors.push(err_key(text, start, "count", "a stream needs a count"));
            0
        }
        (None, Some(_)) => {
            errors.push(err_key(
                text,
                start,
                "count",
                "a single [[job]] has no count (use [[stream]])",
            ));
            1
        }
        (None, None) => 1,
    };
    if stream_index.is_none() && s.id.is_none() {
        errors.push(err_key(text, start, "id", "a [[job]] needs an id"));
    }
    if stream_index.is_none() && s.rate.is_some() {
        errors.push(err_key(
            text,
            start,
            "rate",
            "a single [[job]] has no rate (use [[stream]])",
        ));
    }
    if let Some(r) = s.rate
        && !(r.is_finite() && r > 0.0)
    {
        errors.push(err_key(
            text,
            start,
            "rate",
            "must be a positive number of arrivals per second",
        ));
    }
    if s.no_estimate && s.estimate.is_some() {
        errors.push(err_key(
            text,
            start,
            "no_estimate",
            "contradicts `estimate`",
        ));
    }
    if jobs.len() as u64 + count > MAX_SCENARIO_JOBS {
        errors.push(err_key(
            text,
            start,
            "count",
            format!("the scenario would have more than {MAX_SCENARIO_JOBS} jobs"),
        ));
    }
    if errors.len() > before {
        return;
    }
    let line = line_of(text, start);
    let prefix =
        s.id.clone()
            .unwrap_or_else(|| format!("{}-s{}", s.tenant, stream_index.unwrap_or(line)));
    let mut t = s.at.0.0 as f64;
    for i in 0..count {
        let at = match (s.rate, s.arrivals) {
            (None, _) => s.at.0.0,
            (Some(rate), Arrivals::Uniform) => s.at.0.0 + (i as f64 * 1e9 / rate).round() as u64,
            (Some(rate), Arrivals::Poisson) => {
                if i > 0 {
                    t += rng.exponential(rate) * 1e9;
                }
                t.round() as u64
            }
        };
        let at = Time(at);
        jobs.push(SimJob {
            id: if stream_index.is_some() {
                format!("{prefix}-{i}")
            } else {
                prefix.clone()
            },
            tenant: s.tenant.clone(),
            class: s.class.clone().unwrap_or_else(|| DEFAULT_CLASS.to_string()),
            at,
            duration: s.duration.0,
            estimate: if s.no_estimate {
                None
            } else {
                Some(s.estimate.map(|e| e.0).unwrap_or(s.duration.0))
            },
            deadline: s.deadline.map(|d| at.plus(d.0)),
            not_before: s.not_before.map(|d| at.plus(d.0)),
            priority: s.priority,
            demand: s.demand.clone(),
            requires: s.requires.clone(),
            fail_rate: s.fail_rate,
            max_attempts: s.max_attempts,
            preemptible: s.preemptible,
            checkpointable: s.checkpointable,
            gang: s.gang.unwrap_or(1),
            gang_min: s.gang_min,
        });
    }
}

/// Loads `[trace]` (or the `--swf` override) into jobs, adding a machine pool when none is declared.
fn load_trace(
    file: &mut ScenarioFile,
    text: &str,
    path: Option<&Path>,
    overrides: &Overrides,
    errors: &mut Vec<ConfigError>,
) -> Vec<SimJob> {
    let (swf_path, section, start) = match (&overrides.swf, &file.trace) {
        (Some(p), t) => (
            p.clone(),
            t.as_ref().map(|t| t.get_ref().clone()),
            t.as_ref().map(|t| t.span().start).unwrap_or(0),
        ),
        (None, Some(t)) => {
            let base = path.and_then(Path::parent).unwrap_or(Path::new("."));
            (
                base.join(&t.get_ref().swf),
                Some(t.get_ref().clone()),
                t.span().start,
            )
        }
        (None, None) => return Vec::new(),
    };
    let trace = match crate::swf::parse_swf_file(&swf_path) {
        Ok(t) => t,
        Err(e) => {
            errors.push(err_key(text, start, "swf", e.to_string()));
            return Vec::new();
        }
    };
    let options = crate::traces::TraceOptions::from_section(section.as_ref()).unwrap_or_else(|e| {
        errors.push(err_key(text, start, "tenant", e));
        crate::traces::TraceOptions::default()
    });
    let (jobs, pool, tenants) = crate::traces::trace_jobs(&trace, &options);
    if file.pool.is_empty() {
        file.pool.push(Spanned::new(0..0, pool));
    }
    let declared: BTreeSet<String> = file
        .tenant
        .iter()
        .map(|t| t.get_ref().name.clone())
        .collect();
    for t in tenants {
        if !declared.contains(&t) {
            file.tenant.push(Spanned::new(
                0..0,
                TenantSpec {
                    name: t,
                    ..TenantSpec::default()
                },
            ));
        }
    }
    jobs
}
