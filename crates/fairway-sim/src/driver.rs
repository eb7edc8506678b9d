//! The simulator's driver: a simulated clock and worker fleet around the engine.
//!
//! Time jumps from event to event (arrivals, completions, faults, heartbeats, probes, and the
//! engine's own timers). At each instant the driver feeds the events to the engine, runs its
//! timers and a scheduling pass, and starts the attempts the engine leased. It learns every
//! state change from the engine's event stream, exactly as the store would, so what it reports
//! is what the engine decided. Every random choice comes from the scenario's seed.

use crate::metrics::Metrics;
use crate::rng::Rng;
use crate::scenario::{Scenario, SimJob};
use fairway_core::event::{AfterAttempt, AttemptEnd, Event};
use fairway_core::{Admission, Dur, Engine, EngineConfig, JobSpec, Outcome, Time, WorkerOffer};
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};

/// What happens at an instant; the discriminant orders events that share an instant.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Ev {
    /// An attempt's work ends (success or failure), on its workers.
    Finish { job: usize, epoch: u64 },
    /// A worker stops an attempt it was asked to stop.
    Stop { job: usize, epoch: u64 },
    /// Workers are lost or return.
    Fault(usize),
    /// A job arrives.
    Arrival(usize),
    /// Live workers renew an attempt's lease.
    Heartbeat { job: usize, epoch: u64 },
    /// A snapshot, after everything else at its instant.
    Probe(usize),
}

/// A simulated worker.
#[derive(Clone, Debug)]
struct SimWorker {
    name: String,
    pool: usize,
    alive: bool,
}

/// A running attempt as the simulated workers see it.
#[derive(Clone, Debug)]
struct Running {
    epoch: u64,
    attempt: u32,
    start: Time,
    workers: Vec<usize>,
    /// Whether this attempt was drawn to fail.
    fails: bool,
    /// Work done before this attempt (checkpoint).
    progress: Dur,
    /// The attempt finished while its workers were cut off: its report waits for them.
    undelivered: bool,
}

/// A checker called after every simulated instant, with every event so far when the run copies
/// them.
pub type StepHook<'a> = dyn FnMut(&mut Engine, Time, &[Event]) + 'a;

/// Options of a run.
#[derive(Default)]
pub struct RunOptions<'a> {
    /// Record every attempt (`--events`).
    pub events: bool,
    /// Called now and then with (jobs finished or refused, jobs in the scenario).
    pub progress: Option<&'a mut dyn FnMut(u64, u64)>,
    /// Called after every simulated instant with the engine (for checkers).
    pub on_step: Option<&'a mut StepHook<'a>>,
    /// Keep a copy of every event the engine emits, in order, and pass it to `on_step` (for
    /// recovery checks).
    pub copy_events: bool,
}

/// Runs a scenario to completion (or its `until`) and returns its metrics.
pub fn run(scenario: &Scenario, options: RunOptions<'_>) -> Metrics {
    let mut driver = Driver::new(scenario, options.events);
    driver.copy_events = options.copy_events;
    if !driver.copy_events {
        driver.copied.clear();
    }
    let mut progress = options.progress;
    let mut on_step = options.on_step;
    let mut last_report = 0u64;
    loop {
        let next_event = driver.queue.peek().map(|Reverse((t, _, _))| *t);
        let next_timer = if driver.open_jobs > 0 || next_event.is_some() {
            driver.engine.poll_timeout()
        } else {
            None
        };
        let Some(t) = [next_event, next_timer].into_iter().flatten().min() else {
            break;
        };
        if scenario.until.is_some_and(|u| t > u) {
            break;
        }
        driver.step(t);
        if let Some(check) = on_step.as_deref_mut() {
            check(&mut driver.engine, t, &driver.copied);
        }
        if let Some(p) = progress.as_deref_mut() {
            let done = driver.metrics.closed_jobs();
            if done >= last_report + 1000 {
                last_report = done;
                p(done, scenario.jobs.len() as u64);
            }
        }
    }
    let end = scenario.until.unwrap_or(driver.now).max(driver.now);
    driver.metrics.finish(end, &mut driver.engine);
    driver.metrics
}

struct Driver<'a> {
    sc: &'a Scenario,
    engine: Engine,
    now: Time,
    queue: BinaryHeap<Reverse<(Time, Ev, u64)>>,
    seq: u64,
    rng: Rng,
    workers: Vec<SimWorker>,
    worker_by_name: HashMap<String, usize>,
    job_index: HashMap<String, usize>,
    running: HashMap<usize, Running>,
    /// Attempts reclaimed while their workers were cut off: they still run there, and report
    /// (late, under a stale epoch) once the workers come back.
    zombies: HashMap<(usize, u64), Running>,
    open_jobs: u64,
    /// Whether to keep a copy of every event, and the copies.
    copy_events: bool,
    copied: Vec<Event>,
    metrics: Metrics,
}

impl<'a> Driver<'a> {
    fn new(sc: &'a Scenario, events: bool) -> Driver<'a> {
        let config = EngineConfig {
            capture_events: true,
            decision_ring: 0,
            worker_ttl: Dur::from_secs(365 * 86400),
            ..EngineConfig::default()
        };
        let engine = Engine::new(Time::ZERO, sc.policy.clone(), config);
        let mut driver = Driver {
            sc,
            engine,
            now: Time::ZERO,
            queue: BinaryHeap::new(),
            seq: 0,
            rng: Rng::new(sc.seed),
            workers: Vec::new(),
            worker_by_name: HashMap::new(),
            job_index: HashMap::new(),
            running: HashMap::new(),
            zombies: HashMap::new(),
            open_jobs: 0,
            copy_events: false,
            copied: Vec::new(),
            metrics: Metrics::new(sc, events),
        };
        if driver.sc.heartbeat.is_some() {
            // Workers that stop heartbeating are forgotten after three lease periods.
            driver.engine = Engine::new(
                Time::ZERO,
                sc.policy.clone(),
                EngineConfig {
                    capture_events: true,
                    decision_ring: 0,
                    worker_ttl: Dur(sc.policy.lease.0.saturating_mul(3)),
                    ..EngineConfig::default()
                },
            );
        }
        // The first events (the policy) are kept for a caller that copies the stream.
        driver.copied = driver.engine.drain_events();
        for (p, pool) in sc.pools.iter().enumerate() {
            for i in 0..pool.workers {
                let name = format!("{}-{i}", pool.name);
                driver
                    .worker_by_name
                    .insert(name.clone(), driver.workers.len());
                driver.workers.push(SimWorker {
                    name,
                    pool: p,
                    alive: true,
                });
            }
        }
        for w in 0..driver.workers.len() {
            driver.offer(w);
        }
        for (i, job) in sc.jobs.iter().enumerate() {
            driver.job_index.insert(job.id.clone(), i);
            driver.push(job.at, Ev::Arrival(i));
        }
        for (i, f) in sc.faults.iter().enumerate() {
            driver.push(f.at, Ev::Fault(i));
        }
        for (i, p) in sc.probes.iter().enumerate() {
            driver.push(*p, Ev::Probe(i));
        }
        driver
    }

    fn push(&mut self, t: Time, ev: Ev) {
        self.seq += 1;
        self.queue.push(Reverse((t, ev, self.seq)));
    }

    fn offer(&mut self, w: usize) {
        let worker = &self.workers[w];
        let pool = &self.sc.pools[worker.pool];
        let offer = WorkerOffer {
            worker: worker.name.clone(),
            pool: pool.name.clone(),
            capacity: pool.capacity.clone(),
            labels: pool.labels.clone(),
            max_jobs: u32::MAX,
        };
        self.engine
            .worker_ready(self.now, &offer)
            .expect("scenario pools are valid workers");
    }

    fn step(&mut self, t: Time) {
        self.now = t;
        self.metrics.advance(t);
        let mut probes = Vec::new();
        while let Some(Reverse((at, ev, _))) = self.queue.peek().copied() {
            if at != t {
                break;
            }
            self.queue.pop();
            match ev {
                Ev::Arrival(i) => self.arrive(i),
                Ev::Finish { job, epoch } => self.work_done(job, epoch),
                Ev::Stop { job, epoch } => self.stop(job, epoch),
                Ev::Fault(i) => self.fault(i),
                Ev::Heartbeat { job, epoch } => self.heartbeat(job, epoch),
                Ev::Probe(i) => probes.push(i),
            }
            self.absorb_events();
        }
        if self.engine.poll_timeout().is_some_and(|due| due <= t) {
            self.engine.tick(t);
            self.absorb_events();
        }
        // Stops with no delay free capacity at once, so schedule until nothing changes.
        for _ in 0..64 {
            self.engine.schedule(t);
            if !self.absorb_events() {
                break;
            }
        }
        for i in probes {
            self.metrics.probe(self.sc.probes[i], &self.engine);
        }
    }

    fn arrive(&mut self, i: usize) {
        let job: &SimJob = &self.sc.jobs[i];
        let spec = JobSpec {
            id: job.id.clone(),
            tenant: job.tenant.clone(),
            class: Some(job.class.clone()),
            priority: job.priority,
            demand: job.demand.clone(),
            requires: job.requires.clone(),
            estimate: job.estimate,
            deadline: job.deadline,
            not_before: job.not_before,
            max_attempts: job.max_attempts,
            preemptible: job.preemptible,
            checkpointable: job.checkpointable,
            gang: job.gang,
            gang_min: job.gang_min,
        };
        let admission = self.engine.submit(self.now, spec);
        if admission.is_accepted() {
            self.open_jobs += 1;
        }
        self.metrics.admission(i, &admission);
        if let Admission::RejectedRetryable { .. } | Admission::RejectedFinal { .. } = admission {
            self.metrics.close_rejected();
        }
    }

    /// The attempt's work is over; its workers report unless they are cut off.
    fn work_done(&mut self, job: usize, epoch: u64) {
        let alive = |workers: &[usize], all: &[SimWorker]| workers.iter().all(|&w| all[w].alive);
        if let Some(r) = self.zombies.get_mut(&(job, epoch)) {
            if alive(&r.workers, &self.workers) {
                self.deliver_zombie(job, epoch);
            } else {
                r.undelivered = true;
            }
            return;
        }
        let Some(r) = self.running.get_mut(&job) else {
            return;
        };
        if r.epoch != epoch {
            return;
        }
        if !alive(&r.workers, &self.workers) {
            r.undelivered = true;
            return;
        }
        let outcome = if r.fails {
            Outcome::Failed { retryable: true }
        } else {
            Outcome::Succeeded
        };
        self.report(job, epoch, outcome, None);
    }

    /// A reclaimed attempt's worker reports at last: the engine must refuse it.
    fn deliver_zombie(&mut self, job: usize, epoch: u64) {
        let Some(r) = self.zombies.remove(&(job, epoch)) else {
            return;
        };
        let outcome = if r.fails {
            Outcome::Failed { retryable: true }
        } else {
            Outcome::Succeeded
        };
        let id = self.sc.jobs[job].id.clone();
        match self
            .engine
            .finish(self.now, &id, epoch, outcome, None, None)
        {
            Err(e) => self.metrics.stale_completion(&e),
            Ok(_) => panic!(
                "the engine accepted a report from a reclaimed attempt of {id} (epoch {epoch})"
            ),
        }
    }

    fn report(&mut self, job: usize, epoch: u64, outcome: Outcome, progress: Option<Dur>) {
        let id = self.sc.jobs[job].id.clone();
        if let Err(e) = self
            .engine
            .finish(self.now, &id, epoch, outcome, None, progress)
        {
            self.metrics.stale_completion(&e);
            self.running.remove(&job);
        }
    }

    fn stop(&mut self, job: usize, epoch: u64) {
        let Some(r) = self.running.get(&job) else {
            return;
        };
        if r.epoch != epoch || r.workers.iter().any(|&w| !self.workers[w].alive) {
            return;
        }
        let progress = r.progress.plus(self.now.since(r.start));
        let checkpoint = self.sc.jobs[job].checkpointable.then_some(progress);
        self.report(job, epoch, Outcome::Stopped, checkpoint);
    }

    fn heartbeat(&mut self, job: usize, epoch: u64) {
        let Some(r) = self.running.get(&job) else {
            return;
        };
        if r.epoch != epoch || r.undelivered || r.workers.iter().any(|&w| !self.workers[w].alive) {
            return;
        }
        let id = self.sc.jobs[job].id.clone();
        match self.engine.heartbeat(self.now, &id, epoch, None) {
            Ok(fairway_core::HeartbeatReply::Continue { .. }) => {
                if let Some(period) = self.sc.heartbeat {
                    self.push(self.now.plus(period), Ev::Heartbeat { job, epoch });
                }
            }
            Ok(_) => self.push(self.now.plus(self.sc.stop_delay), Ev::Stop { job, epoch }),
            Err(e) => self.metrics.stale_completion(&e),
        }
    }

    fn fault(&mut self, i: usize) {
        let f = &self.sc.faults[i];
        let pool = self
            .sc
            .pools
            .iter()
            .position(|p| p.name == f.pool)
            .expect("validated pool");
        let members: Vec<usize> = (0..self.workers.len())
            .filter(|&w| self.workers[w].pool == pool)
            .collect();
        // Lose the highest-numbered live workers; return the lowest-numbered lost ones.
        let mut lost = f.lost;
        for &w in members.iter().rev() {
            if lost == 0 {
                break;
            }
            if self.workers[w].alive {
                self.workers[w].alive = false;
                self.engine.worker_withdraw(&self.workers[w].name.clone());
                lost -= 1;
                self.metrics.worker_lost();
            }
        }
        let mut returned = f.returned;
        for &w in &members {
            if returned == 0 {
                break;
            }
            if !self.workers[w].alive {
                self.workers[w].alive = true;
                returned -= 1;
                self.offer(w);
                // Reports held while cut off are delivered now: late, and refused because the
                // lease was reclaimed meanwhile.
                let mut held: Vec<(usize, u64)> = self
                    .zombies
                    .iter()
                    .filter(|(_, r)| {
                        r.undelivered && r.workers.iter().all(|&x| self.workers[x].alive)
                    })
                    .map(|(k, _)| *k)
                    .collect();
                held.sort();
                for (job, epoch) in held {
                    self.deliver_zombie(job, epoch);
                }
            }
        }
    }

    /// Reads the engine's events and acts on them; returns whether capacity was freed.
    fn absorb_events(&mut self) -> bool {
        let events = self.engine.drain_events();
        if self.copy_events {
            self.copied.extend(events.iter().cloned());
        }
        let mut freed = false;
        for event in &events {
            match event {
                Event::LeaseGranted {
                    at,
                    job,
                    attempt,
                    epoch,
                    placements,
                    ..
                } => {
                    let j = self.job_index[job];
                    let workers: Vec<usize> = placements
                        .iter()
                        .map(|p| self.worker_by_name[&*p.worker])
                        .collect();
                    let sim_job = &self.sc.jobs[j];
                    let progress = self
                        .running
                        .get(&j)
                        .map(|r| r.progress)
                        .unwrap_or(self.metrics.progress_of(j));
                    let remaining = sim_job.duration.minus(progress);
                    let fails = sim_job.fail_rate > 0.0 && self.rng.unit() < sim_job.fail_rate;
                    let work = if fails {
                        Dur((remaining.0 as f64 * self.rng.unit()).round() as u64)
                    } else {
                        remaining
                    };
                    let end = at.plus(work);
                    self.running.insert(
                        j,
                        Running {
                            epoch: *epoch,
                            attempt: *attempt,
                            start: *at,
                            workers: workers.clone(),
                            fails,
                            progress,
                            undelivered: false,
                        },
                    );
                    self.push(
                        end,
                        Ev::Finish {
                            job: j,
                            epoch: *epoch,
                        },
                    );
                    if let Some(period) = self.sc.heartbeat {
                        self.push(
                            at.plus(period),
                            Ev::Heartbeat {
                                job: j,
                                epoch: *epoch,
                            },
                        );
                    }
                    let names: Vec<String> =
                        placements.iter().map(|p| p.worker.to_string()).collect();
                    let members: u32 = placements.iter().map(|p| p.members).sum();
                    self.metrics.started(
                        j,
                        *at,
                        *attempt,
                        &names,
                        members,
                        &self.sc.pools,
                        &self.workers_pool_of(&workers),
                    );
                }
                Event::StopRequested { job, epoch, .. } => {
                    let j = self.job_index[job];
                    if self.running.get(&j).is_some_and(|r| r.epoch == *epoch) {
                        self.push(
                            self.now.plus(self.sc.stop_delay),
                            Ev::Stop {
                                job: j,
                                epoch: *epoch,
                            },
                        );
                    }
                }
                Event::AttemptEnded {
                    at,
                    job,
                    end,
                    after,
                    progress,
                    ..
                } => {
                    let j = self.job_index[job];
                    let r = self.running.remove(&j);
                    if let Some(r) = &r
                        && r.workers.iter().any(|&w| !self.workers[w].alive)
                    {
                        self.zombies.insert((j, r.epoch), r.clone());
                    }
                    freed = true;
                    self.metrics
                        .ended(j, *at, *end, r.as_ref().map(|r| r.attempt).unwrap_or(0));
                    if let Some(p) = progress {
                        self.metrics.set_progress(j, *p);
                    } else if *end != AttemptEnd::Preempted || !self.sc.jobs[j].checkpointable {
                        self.metrics.set_progress(j, Dur::ZERO);
                    }
                    match after {
                        AfterAttempt::Done(state) => {
                            self.open_jobs -= 1;
                            self.metrics.closed(j, *at, *state);
                        }
                        AfterAttempt::Requeue { not_before, .. } => {
                            let deferred = not_before.is_some_and(|nb| nb > *at);
                            self.metrics.requeued(j, deferred);
                        }
                    }
                }
                Event::JobAccepted {
                    spec,
                    deferred_until,
                    ..
                } => {
                    let j = self.job_index[&spec.id];
                    self.metrics.accepted(j, deferred_until.is_some());
                }
                Event::JobEligible { job, .. } => {
                    let j = self.job_index[job];
                    self.metrics.eligible(j);
                }
                Event::JobExpired { at, job } | Event::JobCanceled { at, job } => {
                    let j = self.job_index[job];
                    self.open_jobs -= 1;
                    let state = if matches!(event, Event::JobExpired { .. }) {
                        fairway_core::JobState::Expired
                    } else {
                        fairway_core::JobState::Canceled
                    };
                    self.metrics.left_queue(j);
                    self.metrics.closed(j, *at, state);
                }
                Event::PolicyPublished { .. }
                | Event::JobDowngraded { .. }
                | Event::LeaseExtended { .. } => {}
            }
        }
        freed
    }

    fn workers_pool_of(&self, workers: &[usize]) -> Vec<usize> {
        workers.iter().map(|&w| self.workers[w].pool).collect()
    }
}
