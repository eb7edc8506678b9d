//! Proptest strategies shared by the integration tests: valid engine events of every variant.

use fairway_core::event::{AfterAttempt, AttemptEnd, Placement, StopReason};
use fairway_core::{Dur, Event, JobSpec, JobState, Time};
use proptest::collection::{btree_map, vec};
use proptest::option;
use proptest::prelude::*;

fn name() -> impl Strategy<Value = String> {
    "[a-z0-9/_-]{1,12}"
}

fn time() -> impl Strategy<Value = Time> {
    any::<u64>().prop_map(Time)
}

fn dur() -> impl Strategy<Value = Dur> {
    any::<u64>().prop_map(Dur)
}

/// Finite demands only: a NaN would make two equal events compare unequal.
fn demand() -> impl Strategy<Value = f64> {
    (0u32..10_000).prop_map(|q| f64::from(q) / 4.0)
}

fn job_spec() -> impl Strategy<Value = JobSpec> {
    (
        (name(), name(), option::of(name()), any::<i32>()),
        (
            btree_map(name(), demand(), 0..3),
            btree_map(name(), name(), 0..3),
        ),
        (
            option::of(dur()),
            option::of(time()),
            option::of(time()),
            option::of(any::<u32>()),
        ),
        (any::<bool>(), any::<bool>(), 1u32..64, option::of(1u32..64)),
    )
        .prop_map(
            |(
                (id, tenant, class, priority),
                (demand, requires),
                (estimate, deadline, not_before, max_attempts),
                (preemptible, checkpointable, gang, gang_min),
            )| JobSpec {
                id,
                tenant,
                class,
                priority,
                demand,
                requires,
                estimate,
                deadline,
                not_before,
                max_attempts,
                preemptible,
                checkpointable,
                gang,
                gang_min,
            },
        )
}

fn job_state() -> impl Strategy<Value = JobState> {
    prop_oneof![
        Just(JobState::Deferred),
        Just(JobState::Queued),
        Just(JobState::Running),
        Just(JobState::Succeeded),
        Just(JobState::Failed),
        Just(JobState::Canceled),
        Just(JobState::Expired),
    ]
}

fn attempt_end() -> impl Strategy<Value = AttemptEnd> {
    prop_oneof![
        Just(AttemptEnd::Succeeded),
        any::<bool>().prop_map(|retryable| AttemptEnd::Failed { retryable }),
        Just(AttemptEnd::Expired),
        Just(AttemptEnd::Preempted),
        Just(AttemptEnd::Canceled),
    ]
}

fn after_attempt() -> impl Strategy<Value = AfterAttempt> {
    prop_oneof![
        job_state().prop_map(AfterAttempt::Done),
        (option::of(time()), any::<u64>(), any::<bool>()).prop_map(|(not_before, seq, retry)| {
            AfterAttempt::Requeue {
                not_before,
                seq,
                retry,
            }
        }),
    ]
}

fn placement() -> impl Strategy<Value = Placement> {
    (name(), name(), any::<u32>()).prop_map(|(worker, pool, members)| Placement {
        worker: worker.into(),
        pool: pool.into(),
        members,
    })
}

/// Any valid engine event, every variant reachable, with small strings and collections.
pub fn event() -> impl Strategy<Value = Event> {
    prop_oneof![
        (time(), any::<u64>(), "[ -~\n]{0,40}").prop_map(|(at, version, source)| {
            Event::PolicyPublished {
                at,
                version,
                source,
            }
        }),
        (
            time(),
            any::<u64>(),
            job_spec(),
            dur(),
            option::of(time()),
            any::<u128>(),
            any::<u128>()
        )
            .prop_map(|(at, seq, spec, estimate, deferred_until, wfq_tag, cost)| {
                Event::JobAccepted {
                    at,
                    seq,
                    spec,
                    estimate,
                    deferred_until,
                    wfq_tag,
                    cost,
                }
            }),
        (time(), name()).prop_map(|(at, job)| Event::JobEligible { at, job }),
        (time(), name()).prop_map(|(at, job)| Event::JobDowngraded { at, job }),
        (
            (time(), name(), any::<u32>(), any::<u64>(), time()),
            (vec(placement(), 0..3), vec(any::<u64>(), 0..4), dur()),
            (
                any::<u64>(),
                any::<bool>(),
                option::of((any::<u128>(), any::<i128>(), any::<u64>())),
                any::<u64>()
            ),
        )
            .prop_map(
                |(
                    (at, job, attempt, epoch, expires),
                    (placements, charges, estimate),
                    (policy_version, borrowed, drr, worker_share),
                )| Event::LeaseGranted {
                    at,
                    job,
                    attempt,
                    epoch,
                    expires,
                    placements,
                    charges,
                    estimate,
                    policy_version,
                    borrowed,
                    drr,
                    worker_share,
                }
            ),
        (time(), name(), any::<u64>(), time(), option::of(dur())).prop_map(
            |(at, job, epoch, expires, progress)| Event::LeaseExtended {
                at,
                job,
                epoch,
                expires,
                progress,
            }
        ),
        (
            time(),
            name(),
            any::<u64>(),
            prop_oneof![Just(StopReason::Preempt), Just(StopReason::Cancel)],
            time()
        )
            .prop_map(|(at, job, epoch, reason, deadline)| Event::StopRequested {
                at,
                job,
                epoch,
                reason,
                deadline,
            }),
        (
            time(),
            name(),
            any::<u64>(),
            attempt_end(),
            dur(),
            option::of(dur()),
            after_attempt()
        )
            .prop_map(|(at, job, epoch, end, usage, progress, after)| {
                Event::AttemptEnded {
                    at,
                    job,
                    epoch,
                    end,
                    usage,
                    progress,
                    after,
                }
            }),
        (time(), name()).prop_map(|(at, job)| Event::JobCanceled { at, job }),
        (time(), name()).prop_map(|(at, job)| Event::JobExpired { at, job }),
    ]
}
