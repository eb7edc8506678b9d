//! The RLScheduler compatibility simulator reproduces the 40 published numbers of RLScheduler
//! (SC'20, Tables V and VI) on the two Lublin traces, to the printed digit, and behaves as its
//! rules say on small hand-made traces.

use std::path::PathBuf;

use fairway_sim::rlscheduler::{CompatOptions, CompatPolicy, run_compat, schedule_sequence};
use fairway_sim::swf::{SwfTrace, parse_swf_file};

/// The shared traces directory: `$FAIRWAY_TRACES`, or `shared/traces` beside the repository.
fn traces_dir() -> PathBuf {
    let dir = match std::env::var_os("FAIRWAY_TRACES") {
        Some(dir) => PathBuf::from(dir),
        None => PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/traces"),
    };
    assert!(
        dir.is_dir(),
        "the traces directory {} does not exist: set FAIRWAY_TRACES to the directory holding \
         lublin_256.swf and lublin_256_new2.swf",
        dir.display()
    );
    dir
}

fn load(name: &str) -> SwfTrace {
    let path = traces_dir().join(name);
    parse_swf_file(&path).unwrap_or_else(|e| panic!("{e}"))
}

/// One row of the published tables: bounded slowdown and utilization for each policy, in the
/// order FCFS, WFP3, UNICEP, SJF, F1.
struct Published {
    backfill: bool,
    slowdown: [&'static str; 5],
    utilization: [&'static str; 5],
}

fn check_published(trace_file: &str, rows: [Published; 2]) {
    let trace = load(trace_file);
    let mut mismatches = Vec::new();
    for row in rows {
        for (i, policy) in CompatPolicy::ALL.into_iter().enumerate() {
            let options = CompatOptions {
                policy,
                backfill: row.backfill,
                ..CompatOptions::default()
            };
            let report = run_compat(&trace, &options).unwrap_or_else(|e| panic!("{e}"));
            let slowdown = format!("{:.2}", report.avg_bounded_slowdown);
            let utilization = format!("{:.3}", report.utilization);
            if slowdown != row.slowdown[i] || utilization != row.utilization[i] {
                mismatches.push(format!(
                    "{trace_file} {policy} backfill={}: slowdown {slowdown} (published {}), \
                     utilization {utilization} (published {}); per sequence: {:?}",
                    row.backfill,
                    row.slowdown[i],
                    row.utilization[i],
                    report
                        .sequences
                        .iter()
                        .map(|s| (s.start_index, s.avg_bounded_slowdown, s.utilization))
                        .collect::<Vec<_>>()
                ));
            }
        }
    }
    assert!(mismatches.is_empty(), "{}", mismatches.join("\n"));
}

#[test]
fn lublin_1_matches_the_published_tables() {
    check_published(
        "lublin_256.swf",
        [
            Published {
                backfill: false,
                slowdown: ["7273.77", "19753.53", "22274.74", "277.35", "258.37"],
                utilization: ["0.657", "0.747", "0.691", "0.762", "0.816"],
            },
            Published {
                backfill: true,
                slowdown: ["235.82", "133.87", "307.23", "73.31", "75.07"],
                utilization: ["0.868", "0.864", "0.883", "0.778", "0.840"],
            },
        ],
    );
}

#[test]
fn lublin_2_matches_the_published_tables() {
    check_published(
        "lublin_256_new2.swf",
        [
            Published {
                backfill: false,
                slowdown: ["7842.47", "9523.18", "11265.31", "787.89", "698.34"],
                utilization: ["0.404", "0.543", "0.510", "0.562", "0.478"],
            },
            Published {
                backfill: true,
                slowdown: ["247.61", "318.35", "379.59", "91.99", "148.25"],
                utilization: ["0.587", "0.583", "0.587", "0.593", "0.552"],
            },
        ],
    );
}

/// A deliberately naive model of the rules, written from their text: the queue and the
/// running list are plain vectors re-sorted in place with stable sorts at every point the
/// rules sort them (policy key at each decision, submit time at each backfilling pass, actual
/// finish before each event, estimated finish for the shadow time). The simulator keeps
/// indexed structures instead and resolves ties by rule; this model is what those rules must
/// agree with, job by job.
mod model {
    use fairway_sim::rlscheduler::CompatPolicy;
    use fairway_sim::swf::SwfTrace;

    #[derive(Clone, Debug)]
    struct Job {
        number: i64,
        submit: i64,
        run: i64,
        request: i64,
        size: i64,
    }

    struct Running {
        job: usize,
        start: i64,
        nodes: u64,
    }

    fn key(policy: CompatPolicy, job: &Job) -> (f64, i64) {
        let (s, r, n) = (job.submit as f64, job.request as f64, job.size as f64);
        let waiting = (-1 - job.submit) as f64;
        let primary = match policy {
            CompatPolicy::Fcfs => s,
            CompatPolicy::Sjf => return (r, job.submit),
            CompatPolicy::F1 => {
                let r = if job.request > 0 { r } else { 0.1 };
                let s = if job.submit > 0 { s } else { 0.1 };
                r.log10() * n + 870.0 * s.log10()
            }
            CompatPolicy::Wfp3 => -(waiting / r).powf(3.0) * n,
            CompatPolicy::Unicep => -(waiting + 1e-15) / ((n + 1e-15).log2() * r),
        };
        (primary + 0.0, 0)
    }

    /// (job number, start time) of each job of the sequence, in the order they started.
    pub fn schedule(
        trace: &SwfTrace,
        policy: CompatPolicy,
        backfill: bool,
        start: usize,
        len: usize,
    ) -> Vec<(i64, i64)> {
        let mut jobs: Vec<Job> = trace
            .jobs
            .iter()
            .map(|j| Job {
                number: j.job_number,
                submit: j.submit_s,
                run: if j.run_s < 0 { 10 } else { j.run_s },
                request: if j.requested_time_s == -1 {
                    j.run_s
                } else {
                    j.requested_time_s
                },
                size: j.allocated_procs.max(j.requested_procs),
            })
            .filter(|j| j.run > 0)
            .collect();
        jobs.sort_by_key(|j| j.number);
        let nodes = trace.header.max_nodes.unwrap();
        let procs = trace.header.max_procs.unwrap_or(nodes);
        let per_node = procs as f64 / nodes as f64;
        let needs = |j: usize| (jobs[j].size as f64 / per_node).ceil() as u64;
        let cmp = |a: &usize, b: &usize| {
            let (ka, kb) = (key(policy, &jobs[*a]), key(policy, &jobs[*b]));
            ka.0.total_cmp(&kb.0).then(ka.1.cmp(&kb.1))
        };

        let end = start + len;
        let mut now = jobs[start].submit;
        let mut queue = vec![start];
        let mut next = start + 1;
        let mut running: Vec<Running> = Vec::new();
        let mut free = nodes;
        let mut started = Vec::new();

        // One event: the next arrival if at or before the next completion, else that completion.
        let step = |now: &mut i64,
                    queue: &mut Vec<usize>,
                    next: &mut usize,
                    running: &mut Vec<Running>,
                    free: &mut u64| {
            running.sort_by_key(|r| r.start + jobs[r.job].run);
            let release = running.first().map(|r| r.start + jobs[r.job].run);
            if *next < end && release.is_none_or(|t| jobs[*next].submit <= t) {
                *now = (*now).max(jobs[*next].submit);
                queue.push(*next);
                *next += 1;
            } else {
                let r = running.remove(0);
                *now = (*now).max(r.start + jobs[r.job].run);
                *free += r.nodes;
            }
        };
        let start_job = |job: usize,
                         now: i64,
                         queue: &mut Vec<usize>,
                         running: &mut Vec<Running>,
                         free: &mut u64,
                         started: &mut Vec<(i64, i64)>| {
            *free -= needs(job);
            running.push(Running {
                job,
                start: now,
                nodes: needs(job),
            });
            started.push((jobs[job].number, now));
            let at = queue.iter().position(|&q| q == job).unwrap();
            queue.remove(at);
        };

        loop {
            queue.sort_by(cmp);
            let head = queue[0];
            if needs(head) > free {
                if backfill {
                    running.sort_by_key(|r| r.start + jobs[r.job].request);
                    let mut free_procs = free as f64 * per_node;
                    let mut shadow = now;
                    for r in &running {
                        free_procs += r.nodes as f64 * per_node;
                        shadow = r.start + jobs[r.job].request;
                        if free_procs >= jobs[head].size as f64 {
                            break;
                        }
                    }
                    while needs(head) > free {
                        queue.sort_by_key(|&q| jobs[q].submit);
                        for job in queue.clone() {
                            if now + jobs[job].request < shadow && needs(job) <= free {
                                start_job(
                                    job,
                                    now,
                                    &mut queue,
                                    &mut running,
                                    &mut free,
                                    &mut started,
                                );
                            }
                        }
                        step(&mut now, &mut queue, &mut next, &mut running, &mut free);
                    }
                } else {
                    while needs(head) > free {
                        step(&mut now, &mut queue, &mut next, &mut running, &mut free);
                    }
                }
            }
            start_job(head, now, &mut queue, &mut running, &mut free, &mut started);
            if queue.is_empty() && next >= end {
                return started;
            }
            while queue.is_empty() {
                step(&mut now, &mut queue, &mut next, &mut running, &mut free);
            }
        }
    }
}

/// Compares the simulator with the model job by job.
fn check_against_model(trace: &SwfTrace, name: &str, starts: &[usize], len: usize) {
    for policy in CompatPolicy::ALL {
        for backfill in [false, true] {
            for &start in starts {
                let simulated: Vec<(i64, i64)> =
                    schedule_sequence(trace, policy, backfill, start, len)
                        .unwrap_or_else(|e| panic!("{name}: {e}"))
                        .iter()
                        .map(|job| (job.job_number, job.start_s))
                        .collect();
                let modelled = model::schedule(trace, policy, backfill, start, len);
                if simulated != modelled {
                    let at = simulated
                        .iter()
                        .zip(&modelled)
                        .position(|(a, b)| a != b)
                        .unwrap_or(simulated.len().min(modelled.len()));
                    panic!(
                        "{name} {policy} backfill={backfill} start={start}: the simulator and the \
                         model differ from the {at}th start on: simulator {:?}, model {:?}",
                        &simulated[at..(at + 5).min(simulated.len())],
                        &modelled[at..(at + 5).min(modelled.len())]
                    );
                }
            }
        }
    }
}

#[test]
fn real_logs_with_inexact_estimates_follow_the_model_job_by_job() {
    // KTH: every job has its own estimate; LANL: estimates, unknown requests and many equal
    // submit times. These exercise the tie rules that perfect estimates never reach.
    let kth = load("KTH-SP2-1996-2.1-cln.swf");
    check_against_model(&kth, "KTH", &[1000, 9000, 20000], 256);
    let lanl = load("LANL-CM5-1994-4.1-cln.swf");
    check_against_model(&lanl, "LANL", &[5000, 60000, 110000], 256);
}

/// A small deterministic generator (64-bit LCG), so that every random trace can be rebuilt
/// from its seed.
struct Lcg(u64);

impl Lcg {
    fn below(&mut self, n: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 33) % n
    }
}

/// A random trace full of ties: equal submit times, equal run times, equal sizes, equal keys
/// for different submit times, estimates that are exact, too long or too short, unknown requests, run times of 0 and -1, job numbers
/// out of submit order, and 2 processors per node.
fn tie_heavy_trace(seed: u64, jobs: usize, equal_keys: bool) -> SwfTrace {
    let mut rng = Lcg(seed);
    let mut text = String::from("; MaxNodes: 16\n; MaxProcs: 32\n");
    let mut submit = 1;
    let mut numbers: Vec<usize> = (1..=jobs).collect();
    for i in 0..jobs {
        // Swap a few job numbers so that job-number order is not submit order.
        if i + 1 < jobs && rng.below(if equal_keys { 3 } else { 10 }) == 0 {
            numbers.swap(i, i + 1);
        }
    }
    for number in numbers {
        submit += rng.below(4) as i64;
        let run = [1, 5, 10, 20, 50, 50, 100][rng.below(7) as usize];
        let run = match rng.below(40) {
            0 => 0,
            1 => -1,
            _ => run,
        };
        let request = match rng.below(5) {
            0 => -1,
            1 => run,
            2 => run * 2 + 7,
            // WFP3 keys ((submit + 1) / r)^3 * n equal for jobs of different submit times.
            3 => (submit + 1) * (1 + rng.below(2) as i64),
            _ => (run / 2).max(1),
        };
        let size = [1, 2, 3, 4, 8, 16, 31][rng.below(7) as usize];
        // With equal keys, every WFP3 key is 4 or 8 whatever the submit time, so the head is
        // chosen by the tie rule alone.
        let (request, size) = if equal_keys {
            (submit + 1, [4, 8][rng.below(2) as usize])
        } else {
            (request, size)
        };
        let requested_procs = if rng.below(5) == 0 { size + 1 } else { -1 };
        text.push_str(&format!(
            "{number} {submit} -1 {run} {size} -1 -1 {requested_procs} {request} -1 1 -1 -1 -1 -1 -1 -1 -1\n"
        ));
    }
    fairway_sim::swf::parse_swf(&text).unwrap()
}

#[test]
fn random_tie_heavy_traces_follow_the_model_job_by_job() {
    for seed in 1..=12 {
        let trace = tie_heavy_trace(seed, 400, false);
        check_against_model(&trace, &format!("seed {seed}"), &[0, 100], 250);
    }
    for seed in 1..=4 {
        let trace = tie_heavy_trace(seed, 300, true);
        check_against_model(&trace, &format!("equal keys, seed {seed}"), &[0], 280);
    }
}

/// A trace on a machine of `nodes` single-processor nodes from `(job, submit, run, request,
/// size)` rows (request -1: unknown).
fn small_trace(nodes: u64, rows: &[(i64, i64, i64, i64, i64)]) -> SwfTrace {
    let mut text = format!("; MaxNodes: {nodes}\n");
    for (job, submit, run, request, size) in rows {
        text.push_str(&format!(
            "{job} {submit} -1 {run} {size} -1 -1 -1 {request} -1 1 -1 -1 -1 -1 -1 -1 -1\n"
        ));
    }
    fairway_sim::swf::parse_swf(&text).unwrap()
}

/// (job, start) in start order, for the whole trace as one sequence.
fn starts(trace: &SwfTrace, policy: CompatPolicy, backfill: bool) -> Vec<(i64, i64)> {
    schedule_sequence(trace, policy, backfill, 0, trace.jobs.len())
        .unwrap()
        .iter()
        .map(|job| (job.job_number, job.start_s))
        .collect()
}

#[test]
fn backfilling_needs_an_end_strictly_before_the_shadow_time() {
    // Job 2 waits for job 1 (shadow time 10). Job 3 would end exactly at 10 when it arrives,
    // so it may not backfill; job 4 ends at 9 and does.
    let trace = small_trace(
        4,
        &[
            (1, 0, 10, -1, 3),
            (2, 1, 5, -1, 4),
            (3, 2, 8, -1, 1),
            (4, 3, 6, -1, 1),
        ],
    );
    assert_eq!(
        starts(&trace, CompatPolicy::Fcfs, true),
        [(1, 0), (4, 3), (2, 10), (3, 15)]
    );
}

#[test]
fn backfilling_has_no_extra_processors_rule() {
    // Textbook EASY would start job 3 at 2 on the node job 2 leaves spare; here a job must end
    // before the shadow time whatever it uses.
    let trace = small_trace(
        4,
        &[(1, 0, 10, -1, 2), (2, 1, 5, -1, 3), (3, 2, 100, -1, 1)],
    );
    assert_eq!(
        starts(&trace, CompatPolicy::Fcfs, true),
        [(1, 0), (2, 10), (3, 10)]
    );
}

#[test]
fn the_shadow_time_is_not_recomputed_when_a_job_ends_early() {
    // Job 1 asks for 50 s but ends at 5. The shadow time for job 3 stays 50 (recomputed it
    // would be 20), so job 4 (6 + 20 < 50) backfills and delays job 3 to 26.
    let trace = small_trace(
        4,
        &[
            (1, 0, 5, 50, 2),
            (2, 0, 20, 20, 1),
            (3, 1, 10, 10, 4),
            (4, 6, 20, 20, 1),
        ],
    );
    assert_eq!(
        starts(&trace, CompatPolicy::Fcfs, true),
        [(1, 0), (2, 0), (4, 6), (3, 26)]
    );
}

#[test]
fn an_arrival_is_admitted_before_a_completion_at_the_same_time() {
    // At 10 job 3 arrives as job 1 ends. Admitted first, it is in the queue when job 2 starts,
    // so SJF picks it next (at 10) before job 4, which needs both nodes.
    let trace = small_trace(
        2,
        &[
            (1, 0, 10, -1, 2),
            (2, 1, 100, -1, 1),
            (4, 2, 100, -1, 2),
            (3, 10, 1, -1, 1),
        ],
    );
    assert_eq!(
        starts(&trace, CompatPolicy::Sjf, false),
        [(1, 0), (2, 10), (3, 10), (4, 110)]
    );
}

#[test]
fn an_arrival_on_an_empty_queue_is_decided_on_alone() {
    // Jobs 2 and 3 arrive together at 20 on an idle machine; job 2 is admitted and started
    // before job 3, shorter, is even seen.
    let trace = small_trace(
        1,
        &[(1, 0, 10, -1, 1), (2, 20, 50, -1, 1), (3, 20, 5, -1, 1)],
    );
    assert_eq!(
        starts(&trace, CompatPolicy::Sjf, false),
        [(1, 0), (2, 20), (3, 70)]
    );
}

#[test]
fn a_blocked_head_is_not_rechosen_when_better_jobs_arrive() {
    let trace = small_trace(1, &[(1, 0, 10, -1, 1), (2, 5, 50, -1, 1), (3, 6, 1, -1, 1)]);
    assert_eq!(
        starts(&trace, CompatPolicy::Sjf, false),
        [(1, 0), (2, 10), (3, 60)]
    );
}

#[test]
fn bad_requests_are_errors_not_panics() {
    let trace = small_trace(
        4,
        &[(1, 0, 10, -1, 2), (2, 1, 5, -1, 3), (3, 2, 100, -1, 8)],
    );
    let options = |starts: Vec<usize>, seq_len| CompatOptions {
        starts,
        seq_len,
        ..CompatOptions::default()
    };
    let out_of_range = run_compat(&trace, &options(vec![1], 3)).unwrap_err();
    assert!(
        out_of_range.to_string().contains("starting at index 1"),
        "{out_of_range}"
    );
    // The default (published) sequences do not fit in a 3-job trace.
    assert!(run_compat(&trace, &CompatOptions::default()).is_err());
    assert!(run_compat(&trace, &options(vec![], 2)).is_err());
    assert!(run_compat(&trace, &options(vec![0], 0)).is_err());
    let too_large = run_compat(&trace, &options(vec![0], 3)).unwrap_err();
    assert!(too_large.to_string().contains("job 3"), "{too_large}");

    let no_size =
        fairway_sim::swf::parse_swf("1 0 -1 10 1 -1 -1 -1 -1 -1 1 -1 -1 -1 -1 -1 -1 -1\n").unwrap();
    let err = run_compat(&no_size, &options(vec![0], 1)).unwrap_err();
    assert!(err.to_string().contains("machine size"), "{err}");

    assert!("lifo".parse::<CompatPolicy>().is_err());
    for policy in CompatPolicy::ALL {
        assert_eq!(policy.name().parse::<CompatPolicy>().unwrap(), policy);
    }
}

#[test]
fn the_report_as_json_has_the_means_and_every_sequence() {
    let trace = small_trace(
        4,
        &[(1, 0, 10, -1, 2), (2, 1, 5, -1, 3), (3, 2, 100, -1, 1)],
    );
    let options = CompatOptions {
        policy: CompatPolicy::Fcfs,
        backfill: true,
        starts: vec![0, 1],
        seq_len: 2,
    };
    let report = run_compat(&trace, &options).unwrap();
    let json = report.to_json();
    assert_eq!(json["policy"], "fcfs");
    assert_eq!(json["backfill"], true);
    assert_eq!(json["sequences"].as_array().unwrap().len(), 2);
    assert_eq!(json["sequences"][1]["start_index"], 1);
    // Sequence 0: job 1 at 0, job 2 at 10 (waits 9): slowdowns 1 and 14/10 -> mean 1.2;
    // utilization (10*2 + 5*3) / (10 * 4).
    assert_eq!(json["sequences"][0]["avg_bounded_slowdown"], 1.2);
    assert_eq!(json["sequences"][0]["utilization"], 35.0 / 40.0);
    assert_eq!(json["sequences"][0]["avg_wait_s"], 4.5);
    let mean = (report.sequences[0].avg_wait_s + report.sequences[1].avg_wait_s) / 2.0;
    assert_eq!(json["avg_wait_s"], mean);
}
