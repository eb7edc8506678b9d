//! Leases and epochs: heartbeats, completions, cancellation, and the timers of `tick`.

use super::Engine;
use crate::config::DeadlinePolicy;
use crate::event::{AfterAttempt, AttemptEnd, Event, StopReason};
use crate::ids::JobIdx;
use crate::job::{HeartbeatReply, JobState, LeaseError, Outcome};
use crate::time::{Dur, Time};

/// What a call to [`Engine::tick`] did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TickReport {
    /// Deferred jobs that became eligible.
    pub eligible: u32,
    /// Leases that expired and were reclaimed.
    pub reclaimed: u32,
    /// Stopping attempts fenced at their grace deadline.
    pub fenced: u32,
    /// Jobs expired or downgraded at their deadline.
    pub deadline: u32,
}

impl Engine {
    fn running(&self, id: &str, epoch: u64) -> Result<JobIdx, LeaseError> {
        let Some(j) = self.job_idx(id) else {
            return Err(if self.finished.contains(id) {
                LeaseError::NotRunning
            } else {
                LeaseError::UnknownJob
            });
        };
        let job = self.job(j);
        match job.attempt.as_ref() {
            Some(a) if a.epoch == epoch => Ok(j),
            _ if epoch != job.epoch || job.attempt.is_some() => Err(LeaseError::StaleEpoch {
                presented: epoch,
                current: job.epoch,
            }),
            _ => Err(LeaseError::NotRunning),
        }
    }

    fn touch_workers(&mut self, j: JobIdx, now: Time) {
        let ttl = self.config.worker_ttl;
        let Some(a) = self.jobs[j.ix()]
            .as_ref()
            .and_then(|job| job.attempt.as_ref())
        else {
            return;
        };
        for &(w, _) in &a.placements {
            let worker = &mut self.workers[w.ix()];
            // Heard from already at this instant (a batch of completions): its expiry stands.
            if worker.group.is_some() && worker.last_seen != now {
                worker.last_seen = now;
                self.worker_ttl.set(w, now.plus(ttl));
            }
        }
    }

    /// A worker reports that it is still running job `id` under `epoch`, with the work done so
    /// far if it checkpoints. A stale epoch is refused and changes nothing.
    pub fn heartbeat(
        &mut self,
        now: Time,
        id: &str,
        epoch: u64,
        progress: Option<Dur>,
    ) -> Result<HeartbeatReply, LeaseError> {
        let now = self.observe(now);
        let j = self.running(id, epoch).inspect_err(|e| {
            if matches!(e, LeaseError::StaleEpoch { .. }) {
                self.stats.stale_epochs += 1;
            }
        })?;
        self.touch_workers(j, now);
        let a = self.job(j).attempt.as_ref().expect("running");
        if let Some((reason, deadline)) = a.stop {
            return Ok(match reason {
                StopReason::Preempt => HeartbeatReply::Preempt { deadline },
                StopReason::Cancel => HeartbeatReply::Cancel { deadline },
            });
        }
        let expires = now.plus(self.policy.lease);
        self.emit_for(
            j,
            Event::LeaseExtended {
                at: now,
                job: id.to_string(),
                epoch,
                expires,
                progress,
            },
        );
        Ok(HeartbeatReply::Continue { expires })
    }

    /// A worker reports that its attempt of job `id` under `epoch` ended. `usage` is the run
    /// time to charge (measured by the engine when absent). A stale epoch is refused and changes
    /// nothing.
    pub fn finish(
        &mut self,
        now: Time,
        id: &str,
        epoch: u64,
        outcome: Outcome,
        usage: Option<Dur>,
        progress: Option<Dur>,
    ) -> Result<JobState, LeaseError> {
        let now = self.observe(now);
        // A job that ends is remembered among the finished ones, under its id (and, at the
        // retention, the oldest is forgotten): where both sit in that index is read now, so
        // that those cold misses overlap the live look-up's.
        self.finished.touch(id, self.config.finished_retention);
        let j = self.running(id, epoch).inspect_err(|e| {
            if matches!(e, LeaseError::StaleEpoch { .. }) {
                self.stats.stale_epochs += 1;
            }
        })?;
        let a = self.job(j).attempt.as_ref().expect("running");
        let usage = usage.unwrap_or_else(|| now.since(a.started));
        let end = match (outcome, a.stop) {
            (Outcome::Succeeded, _) => AttemptEnd::Succeeded,
            (Outcome::Failed { retryable }, None) => AttemptEnd::Failed { retryable },
            (Outcome::Stopped, None) => AttemptEnd::Failed { retryable: true },
            (_, Some((StopReason::Preempt, _))) => AttemptEnd::Preempted,
            (_, Some((StopReason::Cancel, _))) => AttemptEnd::Canceled,
        };
        self.touch_workers(j, now);
        Ok(match self.end_attempt(j, now, end, usage, progress) {
            AfterAttempt::Requeue { .. } => self.job(j).state,
            // What `status` reports: the remembered state, or `Succeeded` for a job that is
            // not remembered (`finished_retention = 0`).
            AfterAttempt::Done(state) if self.config.finished_retention > 0 => state,
            AfterAttempt::Done(_) => JobState::Succeeded,
        })
    }

    /// Decides what follows an attempt's end, emits it and returns it.
    fn end_attempt(
        &mut self,
        j: JobIdx,
        now: Time,
        end: AttemptEnd,
        usage: Dur,
        progress: Option<Dur>,
    ) -> AfterAttempt {
        let after = self.after_attempt(j, now, end);
        let job = self.job(j);
        let epoch = job.attempt.as_ref().expect("running").epoch;
        let progress = if job.checkpointable && end == AttemptEnd::Preempted {
            Some(progress.unwrap_or(job.progress).min(job.estimate))
        } else {
            None
        };
        if self.config.capture_events {
            let id = job.id.to_text();
            self.emit_for(
                j,
                Event::AttemptEnded {
                    at: now,
                    job: id,
                    epoch,
                    end,
                    usage,
                    progress,
                    after,
                },
            );
        } else {
            // Nobody will persist the event: apply its effect without building it.
            self.applying(now);
            self.apply_ended(j, now, end, usage, progress, after);
        }
        after
    }

    /// What happens to job `j` after an attempt ends with `end`.
    fn after_attempt(&mut self, j: JobIdx, now: Time, end: AttemptEnd) -> AfterAttempt {
        let job = self.job(j);
        let class = &self.classes[job.class as usize].policy;
        match end {
            AttemptEnd::Succeeded => AfterAttempt::Done(JobState::Succeeded),
            AttemptEnd::Canceled => AfterAttempt::Done(JobState::Canceled),
            // Preemption is the scheduler's doing: the job keeps its place and its attempts.
            AttemptEnd::Preempted => AfterAttempt::Requeue {
                not_before: None,
                seq: job.seq,
                retry: false,
            },
            AttemptEnd::Failed { retryable: false } => AfterAttempt::Done(JobState::Failed),
            AttemptEnd::Failed { retryable: true } | AttemptEnd::Expired => {
                if job.failures + 1 >= job.max_attempts {
                    return AfterAttempt::Done(JobState::Failed);
                }
                if job.deadline != Time::MAX
                    && now.plus(job.estimate) > job.deadline
                    && class.on_deadline == DeadlinePolicy::Drop
                {
                    return AfterAttempt::Done(JobState::Expired);
                }
                let tenant = &self.tenants[job.tenant.ix()];
                if let Some(budget) = tenant.retry_budget {
                    let used = if now.since(tenant.retry_since) >= tenant.retry_window {
                        0
                    } else {
                        tenant.retry_used
                    };
                    if used + job.cost() > budget {
                        return AfterAttempt::Done(JobState::Failed);
                    }
                }
                // Backoff doubles per failure; a retry goes to the back of its queue.
                let shift = job.failures.min(30);
                let backoff =
                    Dur(class.backoff.0.saturating_mul(1u64 << shift)).min(class.backoff_max);
                self.seq += 1;
                AfterAttempt::Requeue {
                    not_before: Some(now.plus(backoff)),
                    seq: self.seq,
                    retry: true,
                }
            }
        }
    }

    /// Cancels job `id`: a waiting job ends at once; a running one is told to stop through its
    /// heartbeat and is fenced after the grace period. Canceling a finished job changes nothing.
    pub fn cancel(&mut self, now: Time, id: &str) -> Result<JobState, LeaseError> {
        let now = self.observe(now);
        let Some(j) = self.job_idx(id) else {
            return self
                .finished
                .get(id)
                .map(|f| f.state)
                .ok_or(LeaseError::UnknownJob);
        };
        match self.job(j).state {
            JobState::Queued | JobState::Deferred => {
                self.emit_for(
                    j,
                    Event::JobCanceled {
                        at: now,
                        job: id.to_string(),
                    },
                );
                Ok(JobState::Canceled)
            }
            JobState::Running => {
                self.request_stop(j, StopReason::Cancel);
                Ok(JobState::Running)
            }
            state => Ok(state),
        }
    }

    /// Runs the timers due at `now`: deferred jobs become eligible, expired leases are
    /// reclaimed under a new epoch, attempts that did not stop in their grace are fenced, jobs
    /// that can no longer meet their deadline are handled as their class says, silent workers
    /// are forgotten.
    pub fn tick(&mut self, now: Time) -> TickReport {
        let now = self.observe(now);
        let mut report = TickReport::default();
        self.expire_workers(now);
        while let Some(&(at, j)) = self.deferred.first() {
            if at > now {
                break;
            }
            let id = self.job(j).id.to_text();
            self.emit_for(j, Event::JobEligible { at: now, job: id });
            report.eligible += 1;
        }
        for (_, j) in self.expiries.take_due(&mut self.jobs, now) {
            let j = JobIdx(j);
            let usage = now.since(self.job(j).attempt.as_ref().expect("running").started);
            self.end_attempt(j, now, AttemptEnd::Expired, usage, None);
            report.reclaimed += 1;
        }
        while let Some(&(at, j)) = self.stops.first() {
            if at > now {
                break;
            }
            let a = self.job(j).attempt.as_ref().expect("stopping");
            let usage = now.since(a.started);
            let end = match a.stop.expect("stopping").0 {
                StopReason::Preempt => AttemptEnd::Preempted,
                StopReason::Cancel => AttemptEnd::Canceled,
            };
            self.end_attempt(j, now, end, usage, None);
            report.fenced += 1;
        }
        while let Some(&(at, j)) = self.deadlines.first() {
            if at > now {
                break;
            }
            let job = self.job(j);
            let id = job.id.to_text();
            match self.classes[job.class as usize].policy.on_deadline {
                DeadlinePolicy::Drop => self.emit_for(j, Event::JobExpired { at: now, job: id }),
                DeadlinePolicy::Downgrade => {
                    self.emit_for(j, Event::JobDowngraded { at: now, job: id })
                }
                DeadlinePolicy::RunLate => {
                    self.deadlines.remove(&(at, j));
                }
            }
            report.deadline += 1;
        }
        self.process_caps(now);
        report
    }
}
