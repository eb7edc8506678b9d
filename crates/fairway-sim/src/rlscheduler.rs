//! The decision rules of the RLScheduler (SC'20) simulator, reproduced exactly.
//!
//! RLScheduler (Zhang, Dai et al., SC'20) publishes the average bounded slowdown and the
//! utilization of five classic policies (FCFS, WFP3, UNICEP, SJF, F1), with and without
//! backfilling, on two synthetic Lublin traces. Those 40 numbers come from that code's own
//! rules, which differ from textbook EASY in places. This module implements those rules, so
//! that Fairway can be compared with the published numbers digit for digit; it is a
//! compatibility reference, not Fairway's scheduler, and contains no Fairway policy.
//!
//! # Rules
//!
//! **Job list.** Every job record; a run time < 0 is first set to 10 s, then jobs with run
//! time 0 are dropped; the rest are sorted by job number (stable). Indices are 0-based
//! positions in this list. Job size n = max(field 5, field 8); requested time r = field 9, or
//! the *recorded* run time when field 9 is -1 (so a job with run time -1 and no request has
//! r = -1 while it runs 10 s, as in that code). Jobs run for their run time; nothing is
//! killed.
//!
//! **Machine.** `MaxNodes` nodes of `MaxProcs / MaxNodes` processors (a fraction is kept, as
//! in that code); a job takes ceil(n / processors-per-node) nodes. `MaxProcs` absent or 0
//! means `MaxProcs = MaxNodes`. (That code divides by zero when `MaxNodes` is absent; here
//! `MaxProcs` nodes of one processor are used instead.)
//!
//! **Sequences.** Each sequence of `seq_len` consecutive jobs starts on an empty machine at
//! the submit time of its first job; only its jobs arrive; it ends when the last of them has
//! started.
//!
//! **Decision loop.** The queue is sorted by the policy key (smallest first) and the head is
//! taken. If it fits it starts now. Otherwise time advances one event at a time (the next
//! arrival if its submit time is at or before the next completion, else that completion)
//! until the head fits; the head is not re-chosen meanwhile. With backfilling, a shadow time
//! is first computed once (the estimated finish, start + r, of the running job at which enough
//! processors would be free for the head); then before each event every queued job, in
//! submit order, that fits now and has now + r < shadow (strict) starts. When the queue is
//! empty, time advances event by event until one arrival is admitted, and that job is decided
//! on alone.
//!
//! **Keys.** FCFS: submit. SJF: (r, submit). F1: log10(r) * n + 870 * log10(submit), where
//! r <= 0 and submit <= 0 are replaced by 0.1. WFP3 and UNICEP are evaluated, as in that code,
//! with the job's "scheduled time" still -1, so the waiting time is -1 - submit:
//! WFP3 = -((-1 - submit) / r)^3 * n and UNICEP = -((-1 - submit) + 1e-15) /
//! (log2(n + 1e-15) * r), computed with the same `f64` operations in the same order (`pow`,
//! `log2` and `log10` are the C library's, as numpy's are). Where that code would raise on
//! r = 0 (WFP3, UNICEP), the keys here follow IEEE arithmetic (infinities) and are ordered by
//! [`f64::total_cmp`].
//!
//! **Ties.** That code keeps its queue and its running list as Python lists and re-sorts them
//! in place with stable sorts: the queue by the policy key at each decision and by submit time
//! at each backfilling pass; the running list by actual finish before each event and by
//! estimated finish for the shadow time. Equal keys therefore keep the order left by earlier
//! sorts. Instead of re-sorting, this module keeps indexed structures and resolves ties by the
//! order those sorts would have produced:
//! - head selection, among jobs of equal key: jobs that arrived before the latest
//!   submit-order sort come first, in (submit, arrival) order, then later arrivals in arrival
//!   order;
//! - backfilling scan, among jobs of equal submit time: jobs that arrived before the latest
//!   decision's sort come first, in (key, arrival) order, then later arrivals in arrival order;
//! - completions at the same second are released one at a time (the head is checked after
//!   each): jobs started before the latest shadow computation first, in (estimated finish,
//!   start) order, then later starts in start order.
//!
//! With perfect estimates and submit times that do not decrease along the job list (the
//! Lublin traces) these reduce to (key, arrival) and (finish, start) order.
//!
//! **Metrics.** Bounded slowdown of a job: max(1, (wait + run) / max(run, 10)); a sequence's
//! value is the sum, in start order, of each job's value divided by the sequence length.
//! Utilization of a sequence: the sum, in start order, of run x n divided by (start of the last
//! job to start - submit of the first job) x `MaxProcs`. The report gives the mean of the
//! sequence values.
//!
//! **Not reproduced.** That code keys its per-job results by job number, so a sequence with
//! duplicate job numbers loses results or fails an assertion there; here every job counts.

use std::collections::BTreeSet;
use std::fmt;
use std::str::FromStr;

use serde_json::json;

use crate::swf::{SwfTrace, bounded_slowdown};

/// The start indices of the ten sequences used for the published tables.
pub const PUBLISHED_STARTS: [usize; 10] =
    [1981, 2756, 4299, 8850, 3316, 2714, 5228, 7762, 4022, 7085];

/// The sequence length used for the published tables.
pub const PUBLISHED_SEQ_LEN: usize = 1024;

/// A priority policy of the RLScheduler simulator.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CompatPolicy {
    /// First come, first served: smallest submit time first.
    Fcfs,
    /// WFP3, as that code computes it: ((submit + 1) / r)^3 * n, smallest first.
    Wfp3,
    /// UNICEP, as that code computes it: (submit + 1 - 1e-15) / (log2(n + 1e-15) * r).
    Unicep,
    /// Shortest job first: (r, submit).
    Sjf,
    /// F1: log10(r) * n + 870 * log10(submit).
    F1,
}

impl CompatPolicy {
    /// Every policy, in the order of the published tables.
    pub const ALL: [CompatPolicy; 5] = [
        CompatPolicy::Fcfs,
        CompatPolicy::Wfp3,
        CompatPolicy::Unicep,
        CompatPolicy::Sjf,
        CompatPolicy::F1,
    ];

    /// The policy's name, as accepted by [`FromStr`].
    pub fn name(self) -> &'static str {
        match self {
            CompatPolicy::Fcfs => "fcfs",
            CompatPolicy::Wfp3 => "wfp3",
            CompatPolicy::Unicep => "unicep",
            CompatPolicy::Sjf => "sjf",
            CompatPolicy::F1 => "f1",
        }
    }

    /// The priority key of a job; smaller is scheduled first.
    fn key(self, job: &CompatJob) -> PriorityKey {
        let submit = job.submit as f64;
        let r = job.request as f64;
        let n = job.size as f64;
        // The waiting time that code sees: its "scheduled time" is still -1 when scoring.
        let waiting = (-1 - job.submit) as f64;
        let (primary, secondary) = match self {
            CompatPolicy::Fcfs => (submit, 0),
            CompatPolicy::Sjf => (r, job.submit),
            CompatPolicy::F1 => {
                let r = if job.request > 0 { r } else { 0.1 };
                let s = if job.submit > 0 { submit } else { 0.1 };
                (r.log10() * n + 870.0 * s.log10(), 0)
            }
            CompatPolicy::Wfp3 => (-(waiting / r).powf(3.0) * n, 0),
            CompatPolicy::Unicep => (-(waiting + 1e-15) / ((n + 1e-15).log2() * r), 0),
        };
        // Python's `<` treats -0.0 and 0.0 as equal; `total_cmp` would not.
        PriorityKey {
            primary: primary + 0.0,
            secondary,
        }
    }
}

impl fmt::Display for CompatPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for CompatPolicy {
    type Err = CompatError;

    /// Parses `fcfs`, `wfp3`, `unicep`, `sjf` or `f1` (ASCII case-insensitive).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        CompatPolicy::ALL
            .into_iter()
            .find(|p| p.name().eq_ignore_ascii_case(s.trim()))
            .ok_or_else(|| CompatError::UnknownPolicy(s.to_string()))
    }
}

/// What to simulate.
#[derive(Clone, Debug, PartialEq)]
pub struct CompatOptions {
    /// The priority policy.
    pub policy: CompatPolicy,
    /// Whether to backfill (that code's rule: fixed shadow time, strict `now + r < shadow`).
    pub backfill: bool,
    /// The 0-based index, in the filtered job list, of each sequence's first job.
    pub starts: Vec<usize>,
    /// Jobs per sequence.
    pub seq_len: usize,
}

impl Default for CompatOptions {
    /// The published setup: the ten published sequences of 1,024 jobs, FCFS, no backfilling.
    fn default() -> Self {
        CompatOptions {
            policy: CompatPolicy::Fcfs,
            backfill: false,
            starts: PUBLISHED_STARTS.to_vec(),
            seq_len: PUBLISHED_SEQ_LEN,
        }
    }
}

/// The metrics of one sequence.
#[derive(Clone, Debug, PartialEq)]
pub struct SequenceResult {
    /// The index of the sequence's first job in the filtered job list.
    pub start_index: usize,
    /// Mean bounded slowdown (10 s threshold) of the sequence's jobs.
    pub avg_bounded_slowdown: f64,
    /// Processor-seconds used over processor-seconds available from the first submit to the
    /// last start.
    pub utilization: f64,
    /// Mean wait, seconds.
    pub avg_wait_s: f64,
}

/// The metrics of a run: means over its sequences, and each sequence.
#[derive(Clone, Debug, PartialEq)]
pub struct CompatReport {
    /// The policy's name.
    pub policy: String,
    /// Whether backfilling was on.
    pub backfill: bool,
    /// Mean over sequences of the sequence's mean bounded slowdown.
    pub avg_bounded_slowdown: f64,
    /// Mean over sequences of the sequence's utilization.
    pub utilization: f64,
    /// Mean over sequences of the sequence's mean wait, seconds.
    pub avg_wait_s: f64,
    /// Each sequence, in the order of [`CompatOptions::starts`].
    pub sequences: Vec<SequenceResult>,
}

impl CompatReport {
    /// The report as JSON: `policy`, `backfill`, the three means, and `sequences`, each with
    /// `start_index`, `avg_bounded_slowdown`, `utilization` and `avg_wait_s`.
    pub fn to_json(&self) -> serde_json::Value {
        let sequences: Vec<serde_json::Value> = self
            .sequences
            .iter()
            .map(|s| {
                json!({
                    "start_index": s.start_index,
                    "avg_bounded_slowdown": s.avg_bounded_slowdown,
                    "utilization": s.utilization,
                    "avg_wait_s": s.avg_wait_s,
                })
            })
            .collect();
        json!({
            "policy": self.policy,
            "backfill": self.backfill,
            "avg_bounded_slowdown": self.avg_bounded_slowdown,
            "utilization": self.utilization,
            "avg_wait_s": self.avg_wait_s,
            "sequences": sequences,
        })
    }
}

/// Why a compatibility run cannot be done.
#[derive(Clone, Debug, PartialEq)]
pub enum CompatError {
    /// A policy name that is not one of `fcfs|wfp3|unicep|sjf|f1`.
    UnknownPolicy(String),
    /// The header gives neither `MaxNodes` nor `MaxProcs` (or gives 0).
    NoMachineSize,
    /// No sequence was asked for, or a length of 0.
    NoSequences,
    /// A sequence extends past the end of the job list.
    SequenceOutOfRange {
        /// The requested first index.
        start_index: usize,
        /// The requested length.
        seq_len: usize,
        /// The length of the filtered job list.
        jobs: usize,
    },
    /// A job whose size (fields 5 and 8) is unknown.
    UnknownJobSize {
        /// The job's number.
        job_number: i64,
        /// Its line in the trace.
        line: usize,
    },
    /// A job larger than the machine, which could never start.
    JobTooLarge {
        /// The job's number.
        job_number: i64,
        /// Its line in the trace.
        line: usize,
        /// Nodes it needs.
        nodes: u64,
        /// Nodes of the machine.
        machine_nodes: u64,
    },
    /// Every job of a sequence started at the first submit time, so utilization (per second
    /// of the span) is undefined.
    ZeroSpan {
        /// The sequence's first index.
        start_index: usize,
    },
    /// No event could move the simulation on (an internal invariant failed).
    Stalled {
        /// The sequence's first index.
        start_index: usize,
    },
}

impl fmt::Display for CompatError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CompatError::UnknownPolicy(name) => write!(
                f,
                "unknown policy {name:?}; expected one of fcfs, wfp3, unicep, sjf, f1"
            ),
            CompatError::NoMachineSize => write!(
                f,
                "the trace header gives no machine size (MaxNodes or MaxProcs)"
            ),
            CompatError::NoSequences => {
                write!(f, "no sequence to simulate (no start index, or length 0)")
            }
            CompatError::SequenceOutOfRange {
                start_index,
                seq_len,
                jobs,
            } => write!(
                f,
                "a sequence of {seq_len} jobs starting at index {start_index} needs {} jobs, \
                 but the trace has {jobs} jobs with a positive run time",
                start_index.saturating_add(*seq_len)
            ),
            CompatError::UnknownJobSize { job_number, line } => write!(
                f,
                "job {job_number} (line {line}) has no size: fields 5 and 8 are both unknown"
            ),
            CompatError::JobTooLarge {
                job_number,
                line,
                nodes,
                machine_nodes,
            } => write!(
                f,
                "job {job_number} (line {line}) needs {nodes} nodes but the machine has \
                 {machine_nodes}"
            ),
            CompatError::ZeroSpan { start_index } => write!(
                f,
                "the sequence starting at index {start_index} started all its jobs at its \
                 first submit time, so its utilization is undefined"
            ),
            CompatError::Stalled { start_index } => write!(
                f,
                "the sequence starting at index {start_index} stalled: no arrival or \
                 completion left while a job waits (internal error)"
            ),
        }
    }
}

impl std::error::Error for CompatError {}

/// Runs the RLScheduler rules over each requested sequence of `trace`.
pub fn run_compat(trace: &SwfTrace, options: &CompatOptions) -> Result<CompatReport, CompatError> {
    if options.starts.is_empty() || options.seq_len == 0 {
        return Err(CompatError::NoSequences);
    }
    let machine = Machine::of(trace)?;
    let jobs = job_list(trace);
    let mut sequences = Vec::with_capacity(options.starts.len());
    for &start_index in &options.starts {
        let sequence = sequence_slice(&jobs, start_index, options.seq_len)?;
        let mut sim = Sequence::new(sequence, &machine, options.policy, options.backfill)?;
        sim.run(start_index)?;
        sequences.push(sim.result(start_index, &machine)?);
    }
    let count = sequences.len() as f64;
    let mean = |f: fn(&SequenceResult) -> f64| sequences.iter().map(f).sum::<f64>() / count;
    Ok(CompatReport {
        policy: options.policy.name().to_string(),
        backfill: options.backfill,
        avg_bounded_slowdown: mean(|s| s.avg_bounded_slowdown),
        utilization: mean(|s| s.utilization),
        avg_wait_s: mean(|s| s.avg_wait_s),
        sequences,
    })
}

/// One job of a simulated sequence, as it was started.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScheduledJob {
    /// The job's number (field 1).
    pub job_number: i64,
    /// Its index in the filtered job list.
    pub index: usize,
    /// Submit time, seconds.
    pub submit_s: i64,
    /// Start time, seconds.
    pub start_s: i64,
    /// Run time, seconds, as simulated (a recorded run time < 0 becomes 10).
    pub run_s: i64,
    /// Requested time r, seconds.
    pub request_s: i64,
    /// Processors n.
    pub procs: i64,
}

/// Simulates one sequence and returns its jobs in the order they started: the timeline
/// behind a [`SequenceResult`], for inspection and for checking the rules job by job.
pub fn schedule_sequence(
    trace: &SwfTrace,
    policy: CompatPolicy,
    backfill: bool,
    start_index: usize,
    seq_len: usize,
) -> Result<Vec<ScheduledJob>, CompatError> {
    if seq_len == 0 {
        return Err(CompatError::NoSequences);
    }
    let machine = Machine::of(trace)?;
    let jobs = job_list(trace);
    let sequence = sequence_slice(&jobs, start_index, seq_len)?;
    let mut sim = Sequence::new(sequence, &machine, policy, backfill)?;
    sim.run(start_index)?;
    Ok(sim
        .started
        .iter()
        .map(|&job| {
            let j = &sequence[job as usize];
            ScheduledJob {
                job_number: j.job_number,
                index: start_index + job as usize,
                submit_s: j.submit,
                start_s: sim.start_time[job as usize].unwrap_or(sim.now),
                run_s: j.run,
                request_s: j.request,
                procs: j.size,
            }
        })
        .collect())
}

fn sequence_slice(
    jobs: &[CompatJob],
    start_index: usize,
    seq_len: usize,
) -> Result<&[CompatJob], CompatError> {
    start_index
        .checked_add(seq_len)
        .and_then(|end| jobs.get(start_index..end))
        .ok_or(CompatError::SequenceOutOfRange {
            start_index,
            seq_len,
            jobs: jobs.len(),
        })
}

/// A job as that simulator sees it.
#[derive(Clone, Debug)]
struct CompatJob {
    job_number: i64,
    submit: i64,
    /// Actual run time, seconds (> 0).
    run: i64,
    /// Requested time r, seconds: the estimate used for keys and backfilling.
    request: i64,
    /// Processors n = max(allocated, requested).
    size: i64,
    line: usize,
}

/// The job list: run time < 0 becomes 10 s, run time 0 is dropped, sorted by job number.
fn job_list(trace: &SwfTrace) -> Vec<CompatJob> {
    let mut jobs: Vec<CompatJob> = trace
        .jobs
        .iter()
        .filter_map(|job| {
            // The request falls back to the run time as recorded, before the fix-up below.
            let request = if job.requested_time_s == -1 {
                job.run_s
            } else {
                job.requested_time_s
            };
            let run = if job.run_s < 0 { 10 } else { job.run_s };
            (run > 0).then_some(CompatJob {
                job_number: job.job_number,
                submit: job.submit_s,
                run,
                request,
                size: job.allocated_procs.max(job.requested_procs),
                line: job.line,
            })
        })
        .collect();
    jobs.sort_by_key(|job| job.job_number);
    jobs
}

/// The machine: whole nodes of a (possibly fractional) number of processors.
#[derive(Clone, Debug)]
struct Machine {
    nodes: u64,
    procs_per_node: f64,
    /// The processor count utilization is divided by.
    procs: u64,
}

impl Machine {
    fn of(trace: &SwfTrace) -> Result<Machine, CompatError> {
        let max_nodes = trace.header.max_nodes.filter(|&n| n > 0);
        let max_procs = trace.header.max_procs.filter(|&p| p > 0);
        let (nodes, procs) = match (max_nodes, max_procs) {
            (Some(nodes), procs) => (nodes, procs.unwrap_or(nodes)),
            (None, Some(procs)) => (procs, procs),
            (None, None) => return Err(CompatError::NoMachineSize),
        };
        Ok(Machine {
            nodes,
            procs_per_node: procs as f64 / nodes as f64,
            procs,
        })
    }

    /// Nodes a job of `size` processors takes: ceil(size / processors per node).
    fn nodes_for(&self, size: i64) -> u64 {
        (size as f64 / self.procs_per_node).ceil() as u64
    }
}

/// A policy key, ordered like Python compares that code's keys (floats, or `(r, submit)`).
#[derive(Clone, Copy, Debug)]
struct PriorityKey {
    primary: f64,
    secondary: i64,
}

impl Ord for PriorityKey {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.primary
            .total_cmp(&other.primary)
            .then(self.secondary.cmp(&other.secondary))
    }
}

impl PartialOrd for PriorityKey {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl PartialEq for PriorityKey {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == std::cmp::Ordering::Equal
    }
}

impl Eq for PriorityKey {}

/// A running job.
#[derive(Clone, Debug)]
struct Running {
    job: u32,
    nodes: u64,
    /// start + run: when it really ends.
    finish: i64,
    /// start + r: when the scheduler expects it to end.
    estimate: i64,
    /// Shadow computations done before it started (see the tie rules).
    shadow_epoch: u64,
}

/// The state of one sequence's simulation. Jobs are named by their position in the sequence,
/// which is also their arrival order.
struct Sequence<'a> {
    jobs: &'a [CompatJob],
    backfill: bool,
    keys: Vec<PriorityKey>,
    nodes: Vec<u64>,
    /// Processors per node (may be fractional, as in that code).
    procs_per_node: f64,
    now: i64,
    /// The next job to arrive.
    next: usize,
    free_nodes: u64,

    /// The queue by (policy key, arrival).
    queue_by_key: BTreeSet<(PriorityKey, u32)>,
    /// The queue in submit order, as a tree over submit ranks (for the backfilling scan).
    queue_by_submit: SubmitIndex,
    /// Decisions (policy-key sorts) done when each job arrived.
    arrival_decision_epoch: Vec<u64>,
    /// Backfilling passes (submit-order sorts) done when each job arrived.
    arrival_pass_epoch: Vec<u64>,
    decisions: u64,
    passes: u64,

    /// Running jobs by start order.
    running: Vec<Running>,
    /// Running jobs by (finish, start order).
    running_by_finish: BTreeSet<(i64, u32)>,
    /// Running jobs by (estimated finish, start order).
    running_by_estimate: BTreeSet<(i64, u32)>,
    shadow_computations: u64,

    /// Each job's start time, once started.
    start_time: Vec<Option<i64>>,
    /// Jobs in the order they started.
    started: Vec<u32>,
}

impl<'a> Sequence<'a> {
    fn new(
        jobs: &'a [CompatJob],
        machine: &Machine,
        policy: CompatPolicy,
        backfill: bool,
    ) -> Result<Sequence<'a>, CompatError> {
        let mut nodes = Vec::with_capacity(jobs.len());
        for job in jobs {
            if job.size < 0 {
                return Err(CompatError::UnknownJobSize {
                    job_number: job.job_number,
                    line: job.line,
                });
            }
            let needed = machine.nodes_for(job.size);
            if needed > machine.nodes {
                return Err(CompatError::JobTooLarge {
                    job_number: job.job_number,
                    line: job.line,
                    nodes: needed,
                    machine_nodes: machine.nodes,
                });
            }
            nodes.push(needed);
        }
        Ok(Sequence {
            jobs,
            backfill,
            keys: jobs.iter().map(|job| policy.key(job)).collect(),
            queue_by_submit: SubmitIndex::new(jobs, &nodes),
            nodes,
            procs_per_node: machine.procs_per_node,
            now: jobs.first().map_or(0, |job| job.submit),
            next: 0,
            free_nodes: machine.nodes,
            queue_by_key: BTreeSet::new(),
            arrival_decision_epoch: vec![0; jobs.len()],
            arrival_pass_epoch: vec![0; jobs.len()],
            decisions: 0,
            passes: 0,
            running: Vec::with_capacity(jobs.len()),
            running_by_finish: BTreeSet::new(),
            running_by_estimate: BTreeSet::new(),
            shadow_computations: 0,
            start_time: vec![None; jobs.len()],
            started: Vec::with_capacity(jobs.len()),
        })
    }

    /// Runs the decision loop until every job of the sequence has started.
    fn run(&mut self, start_index: usize) -> Result<(), CompatError> {
        let stalled = CompatError::Stalled { start_index };
        self.admit();
        // Each decision starts one job, so the loop runs exactly once per job.
        for _ in 0..self.jobs.len() {
            let head = self.select_head().ok_or(stalled.clone())?;
            if !self.fits(head) {
                if self.backfill {
                    let shadow = self.shadow_time(head);
                    while !self.fits(head) {
                        self.backfill_pass(shadow);
                        self.advance().then_some(()).ok_or(stalled.clone())?;
                    }
                } else {
                    while !self.fits(head) {
                        self.advance().then_some(()).ok_or(stalled.clone())?;
                    }
                }
            }
            self.start(head);
            // With the queue empty, move on until one job arrives; it is decided on alone.
            while self.queue_by_key.is_empty() && self.next < self.jobs.len() {
                self.advance().then_some(()).ok_or(stalled.clone())?;
            }
            if self.queue_by_key.is_empty() {
                break;
            }
        }
        if self.started.len() == self.jobs.len() {
            Ok(())
        } else {
            Err(stalled)
        }
    }

    fn fits(&self, job: u32) -> bool {
        self.nodes[job as usize] <= self.free_nodes
    }

    /// Sorts the queue by the policy key (a decision) and returns its head.
    fn select_head(&mut self) -> Option<u32> {
        self.decisions += 1;
        let mut ordered = self.queue_by_key.iter();
        let &(key, first) = ordered.next()?;
        match ordered.next() {
            Some(&(second_key, _)) if second_key == key => {}
            _ => return Some(first),
        }
        // Equal keys keep the order of earlier sorts: jobs present at the latest submit-order
        // sort were put in submit order by it; later arrivals follow in arrival order.
        let passes = self.passes;
        let arrival_pass_epoch = &self.arrival_pass_epoch;
        let jobs = self.jobs;
        self.queue_by_key
            .range((key, 0)..=(key, u32::MAX))
            .map(|&(_, job)| job)
            .min_by_key(|&job| {
                let sorted_by_submit = arrival_pass_epoch[job as usize] < passes;
                let submit = if sorted_by_submit {
                    jobs[job as usize].submit
                } else {
                    0
                };
                (!sorted_by_submit, submit, job)
            })
    }

    /// The shadow time for `head`: the estimated finish of the running job at which, taking
    /// running jobs by estimated finish, enough processors would be free. Computed once per
    /// blocked head and never recomputed.
    fn shadow_time(&mut self, head: u32) -> i64 {
        self.shadow_computations += 1;
        let procs_per_node = self.procs_per_node;
        let needed = self.jobs[head as usize].size as f64;
        let mut free_procs = self.free_nodes as f64 * procs_per_node;
        let mut shadow = self.now;
        for &(estimate, run) in &self.running_by_estimate {
            free_procs += self.running[run as usize].nodes as f64 * procs_per_node;
            shadow = estimate;
            if free_procs >= needed {
                break;
            }
        }
        shadow
    }

    /// One backfilling pass: in submit order, start every queued job that fits now and whose
    /// estimated end is strictly before the shadow time.
    fn backfill_pass(&mut self, shadow: i64) {
        self.passes += 1;
        let limit = shadow.saturating_sub(self.now);
        let mut from = 0;
        while let Some(rank) = self
            .queue_by_submit
            .first_candidate(from, self.free_nodes, limit)
        {
            let (group_start, group_end) = self.queue_by_submit.group(rank);
            if group_end - group_start == 1 {
                let job = self.queue_by_submit.job_at(rank);
                self.start(job);
                from = rank + 1;
                continue;
            }
            // Jobs with equal submit times keep the order of earlier sorts: those present at
            // the latest decision were put in key order by it; later arrivals follow.
            let mut members: Vec<u32> = (group_start..group_end)
                .map(|r| self.queue_by_submit.job_at(r))
                .filter(|&job| self.queue_by_submit.is_queued(job))
                .collect();
            let decisions = self.decisions;
            let epochs = &self.arrival_decision_epoch;
            let keys = &self.keys;
            members.sort_by(|&a, &b| {
                let a_sorted = epochs[a as usize] < decisions;
                let b_sorted = epochs[b as usize] < decisions;
                match (a_sorted, b_sorted) {
                    (true, true) => keys[a as usize].cmp(&keys[b as usize]).then(a.cmp(&b)),
                    (false, false) => a.cmp(&b),
                    (true, false) => std::cmp::Ordering::Less,
                    (false, true) => std::cmp::Ordering::Greater,
                }
            });
            for job in members {
                if self.fits(job) && self.jobs[job as usize].request < limit {
                    self.start(job);
                }
            }
            from = group_end;
        }
    }

    /// The running job that completes next, as that code's stable sort by finish time would
    /// put it first.
    fn next_completion(&self) -> Option<(i64, u32)> {
        let mut ordered = self.running_by_finish.iter();
        let &(finish, first) = ordered.next()?;
        match ordered.next() {
            Some(&(second_finish, _)) if second_finish == finish => {}
            _ => return Some((finish, first)),
        }
        // Equal finish times keep the order of earlier sorts: jobs running at the latest
        // shadow computation were put in estimated-finish order by it; later starts follow.
        let computations = self.shadow_computations;
        self.running_by_finish
            .range((finish, 0)..=(finish, u32::MAX))
            .map(|&(_, run)| run)
            .min_by_key(|&run| {
                let r = &self.running[run as usize];
                let sorted_by_estimate = r.shadow_epoch < computations;
                let estimate = if sorted_by_estimate { r.estimate } else { 0 };
                (!sorted_by_estimate, estimate, run)
            })
            .map(|run| (finish, run))
    }

    /// Moves to the next event: admits the next arrival if it comes at or before the next
    /// completion, else releases that completion. `false` when there is no event left.
    fn advance(&mut self) -> bool {
        let arrival = self.jobs.get(self.next).map(|job| job.submit);
        match (arrival, self.next_completion()) {
            (Some(submit), Some((finish, _))) if submit <= finish => self.admit(),
            (Some(_), None) => self.admit(),
            (_, Some((finish, run))) => {
                self.now = self.now.max(finish);
                self.release(run);
            }
            (None, None) => return false,
        }
        true
    }

    fn admit(&mut self) {
        let job = self.next;
        self.next += 1;
        self.now = self.now.max(self.jobs[job].submit);
        self.arrival_decision_epoch[job] = self.decisions;
        self.arrival_pass_epoch[job] = self.passes;
        self.queue_by_key.insert((self.keys[job], job as u32));
        self.queue_by_submit.insert(job as u32);
    }

    fn start(&mut self, job: u32) {
        let j = &self.jobs[job as usize];
        self.queue_by_key.remove(&(self.keys[job as usize], job));
        self.queue_by_submit.remove(job);
        let nodes = self.nodes[job as usize];
        self.free_nodes -= nodes;
        let run = self.running.len() as u32;
        let finish = self.now + j.run;
        let estimate = self.now + j.request;
        self.running.push(Running {
            job,
            nodes,
            finish,
            estimate,
            shadow_epoch: self.shadow_computations,
        });
        self.running_by_finish.insert((finish, run));
        self.running_by_estimate.insert((estimate, run));
        self.start_time[job as usize] = Some(self.now);
        self.started.push(job);
    }

    fn release(&mut self, run: u32) {
        let r = &self.running[run as usize];
        self.running_by_finish.remove(&(r.finish, run));
        self.running_by_estimate.remove(&(r.estimate, run));
        self.free_nodes += r.nodes;
        debug_assert!(self.start_time[r.job as usize].is_some());
    }

    /// The sequence's metrics, summed in start order as that code does.
    fn result(&self, start_index: usize, machine: &Machine) -> Result<SequenceResult, CompatError> {
        let first_submit = self.jobs.first().map_or(0, |job| job.submit);
        let span = i128::from(self.now - first_submit) * i128::from(machine.procs);
        if span == 0 {
            return Err(CompatError::ZeroSpan { start_index });
        }
        let capacity = span as f64;
        let len = self.jobs.len() as f64;
        let mut slowdown = 0.0;
        let mut utilization = 0.0;
        let mut wait_sum = 0.0;
        for &job in &self.started {
            let j = &self.jobs[job as usize];
            let start = self.start_time[job as usize].unwrap_or(self.now);
            let wait = start - j.submit;
            slowdown += bounded_slowdown(wait, j.run) / len;
            utilization += (i128::from(j.run) * i128::from(j.size)) as f64 / capacity;
            wait_sum += wait as f64;
        }
        Ok(SequenceResult {
            start_index,
            avg_bounded_slowdown: slowdown,
            utilization,
            avg_wait_s: wait_sum / len,
        })
    }
}

/// The queue in submit order, for the backfilling scan: a min-tree over the sequence's jobs
/// ranked by (submit, arrival), holding each queued job's nodes and requested time, so that
/// the next job that fits and ends before the shadow time is found without visiting the
/// whole queue.
struct SubmitIndex {
    /// Job at each rank.
    rank_job: Vec<u32>,
    /// Rank of each job.
    job_rank: Vec<u32>,
    /// First rank of the equal-submit group of each rank, and one past its last.
    group: Vec<(u32, u32)>,
    nodes: Vec<u64>,
    requests: Vec<i64>,
    queued: Vec<bool>,
    /// Leaves start at `width`; node i has children 2i and 2i + 1.
    min_nodes: Vec<u64>,
    min_request: Vec<i64>,
    width: usize,
}

impl SubmitIndex {
    fn new(jobs: &[CompatJob], nodes: &[u64]) -> SubmitIndex {
        let mut rank_job: Vec<u32> = (0..jobs.len() as u32).collect();
        rank_job.sort_by_key(|&job| (jobs[job as usize].submit, job));
        let mut job_rank = vec![0u32; jobs.len()];
        for (rank, &job) in rank_job.iter().enumerate() {
            job_rank[job as usize] = rank as u32;
        }
        let mut group = vec![(0u32, 0u32); jobs.len()];
        let mut start = 0;
        while start < rank_job.len() {
            let submit = jobs[rank_job[start] as usize].submit;
            let mut end = start + 1;
            while end < rank_job.len() && jobs[rank_job[end] as usize].submit == submit {
                end += 1;
            }
            for g in &mut group[start..end] {
                *g = (start as u32, end as u32);
            }
            start = end;
        }
        let width = jobs.len().next_power_of_two().max(1);
        SubmitIndex {
            rank_job,
            job_rank,
            group,
            nodes: nodes.to_vec(),
            requests: jobs.iter().map(|job| job.request).collect(),
            queued: vec![false; jobs.len()],
            min_nodes: vec![u64::MAX; 2 * width],
            min_request: vec![i64::MAX; 2 * width],
            width,
        }
    }

    fn insert(&mut self, job: u32) {
        self.queued[job as usize] = true;
        let (nodes, request) = (self.nodes[job as usize], self.requests[job as usize]);
        self.set(self.job_rank[job as usize] as usize, nodes, request);
    }

    fn remove(&mut self, job: u32) {
        self.queued[job as usize] = false;
        self.set(self.job_rank[job as usize] as usize, u64::MAX, i64::MAX);
    }

    fn is_queued(&self, job: u32) -> bool {
        self.queued[job as usize]
    }

    fn job_at(&self, rank: usize) -> u32 {
        self.rank_job[rank]
    }

    fn group(&self, rank: usize) -> (usize, usize) {
        let (start, end) = self.group[rank];
        (start as usize, end as usize)
    }

    fn set(&mut self, rank: usize, nodes: u64, request: i64) {
        let mut i = self.width + rank;
        self.min_nodes[i] = nodes;
        self.min_request[i] = request;
        while i > 1 {
            i /= 2;
            self.min_nodes[i] = self.min_nodes[2 * i].min(self.min_nodes[2 * i + 1]);
            self.min_request[i] = self.min_request[2 * i].min(self.min_request[2 * i + 1]);
        }
    }

    /// The first rank >= `from` holding a queued job with nodes <= `free_nodes` and
    /// request < `limit`.
    fn first_candidate(&self, from: usize, free_nodes: u64, limit: i64) -> Option<usize> {
        self.search(1, 0, self.width, from, free_nodes, limit)
    }

    fn search(
        &self,
        node: usize,
        lo: usize,
        hi: usize,
        from: usize,
        free_nodes: u64,
        limit: i64,
    ) -> Option<usize> {
        if hi <= from || self.min_nodes[node] > free_nodes || self.min_request[node] >= limit {
            return None;
        }
        if hi - lo == 1 {
            return Some(lo);
        }
        let mid = (lo + hi) / 2;
        self.search(2 * node, lo, mid, from, free_nodes, limit)
            .or_else(|| self.search(2 * node + 1, mid, hi, from, free_nodes, limit))
    }
}
