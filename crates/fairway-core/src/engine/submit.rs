//! Admission: accept, defer, or reject with a reason, before work becomes useless.

use super::Engine;
use super::apply::{refill, spec_digest};
use crate::config::{OverloadPolicy, PolicyName};
use crate::event::Event;
use crate::ids::TenantIdx;
use crate::job::{
    Admission, JobSpec, JobState, MAX_GANG, MAX_JOB_ID_LEN, MAX_REQUIREMENTS, RejectReason,
};
use crate::policy::{COST_PER_WORKER_SECOND, check_name, check_tenant_name, has_char_outside};
use crate::resources::SHARE_SCALE;
use crate::time::{Dur, Time};

/// The shortest and longest retry hints admission gives.
const RETRY_AFTER_MIN: Dur = Dur::from_millis(100);
const RETRY_AFTER_MAX: Dur = Dur::from_secs(3600);

fn retry_after(d: Dur) -> Dur {
    d.max(RETRY_AFTER_MIN).min(RETRY_AFTER_MAX)
}

fn final_(reason: RejectReason) -> Admission {
    Admission::RejectedFinal { reason }
}

fn retryable(reason: RejectReason, after: Dur) -> Admission {
    Admission::RejectedRetryable {
        reason,
        retry_after: retry_after(after),
    }
}

/// The part of a class's maximum age admission fills with predicted wait: the rest is headroom
/// for the variance of service (a measured rate lags a slowdown by up to a window, and a job
/// waits for its worker's next poll), so that accepted work starts within the maximum age.
const MAX_AGE_HEADROOM_PERCENT: u64 = 20;

fn promised_wait(max_age: Dur) -> Dur {
    Dur(max_age.0 / 100 * (100 - MAX_AGE_HEADROOM_PERCENT))
}

/// Completions of a class, all tenants, before their mean run time stands in for the default
/// estimate of a tenant new to the class.
const CLASS_PRIOR_SAMPLES: u32 = 8;

/// What admission predicts for a job.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Prediction {
    /// Predicted wait before it starts.
    pub wait: Dur,
    /// Drain rate used, in worker-seconds per second (millionths).
    pub drain_micro: u64,
}

impl Engine {
    /// Decides whether to accept job `spec` at `now`. An accepted or deferred job is durable in
    /// the events this call emits; a rejected one leaves no trace. Submitting an id again returns
    /// the first outcome and creates nothing.
    pub fn submit(&mut self, now: Time, spec: JobSpec) -> Admission {
        let now = self.observe(now);

        self.admit(now, spec)
    }

    fn admit(&mut self, now: Time, spec: JobSpec) -> Admission {
        if let Some(previous) = self.previous_answer(&spec) {
            return previous;
        }
        // A tenant the engine knows had its name checked when it first appeared (a submission
        // or the policy): it is not checked again (item 91).
        let tenant = self.tenant_by_name.get(&spec.tenant).copied();
        if let Err(why) = validate(&spec, tenant.is_some()) {
            return final_(RejectReason::Invalid(why));
        }
        let Some(class) = self.class_index(spec.class.as_deref()) else {
            return final_(RejectReason::UnknownClass(
                spec.class.clone().unwrap_or_default(),
            ));
        };
        if !self.class_permitted(&spec.tenant, class) {
            return final_(RejectReason::ClassNotPermitted(
                self.class_name(class).to_string(),
            ));
        }
        let key = match self.shape_key(&spec, class) {
            Ok(k) => k,
            Err(why) => return final_(RejectReason::Invalid(why)),
        };
        if self.live_jobs >= self.config.max_jobs {
            return retryable(RejectReason::EngineFull, Dur::from_secs(1));
        }
        if !self.shapes.has_room_for(&key) {
            return retryable(RejectReason::TooManyShapes, Dur::from_secs(1));
        }
        let (max_estimate, max_age, overload) = {
            let p = &self.classes[class as usize].policy;
            (p.max_estimate, p.max_age, p.overload)
        };
        if let Some(declared) = spec.estimate
            && declared > max_estimate
        {
            return final_(RejectReason::EstimateTooLarge);
        }
        let estimate = self.effective_estimate(tenant, class, spec.estimate);
        let start = spec.not_before.unwrap_or(now).max(now);
        if let Some(deadline) = spec.deadline
            && start.plus(estimate) > deadline
        {
            return final_(RejectReason::ImpossibleDeadline);
        }
        // Cost of the job: its estimate times its dominant share of one worker, per member.
        let member_share = self.member_share_ppb(&key);
        let worker_share = member_share as u128 * key.gang as u128;
        let cost = worker_share * estimate.0 as u128;
        if let Some(rejection) = self.check_quotas(tenant, &spec.tenant, cost, now) {
            return rejection;
        }
        // Predicted start from the work queued ahead of it and how fast that work is served.
        let mut deferred_until = spec.not_before.filter(|nb| *nb > now);
        if max_age.is_some() || spec.deadline.is_some() {
            let (wait, _) = self.predict_wait(&key, class, tenant, cost);
            if let Some(deadline) = spec.deadline
                && start.plus(wait).plus(estimate) > deadline
            {
                let excess = start.plus(wait).plus(estimate).since(deadline);
                return retryable(RejectReason::PredictedLate, excess);
            }
            if let Some(max_age) = max_age
                && wait > promised_wait(max_age)
            {
                let excess = wait.minus(promised_wait(max_age));
                match overload {
                    OverloadPolicy::Reject => {
                        return retryable(RejectReason::PredictedTooOld, excess);
                    }
                    OverloadPolicy::Defer => {
                        if excess > RETRY_AFTER_MAX {
                            return retryable(RejectReason::PredictedTooOld, excess);
                        }
                        deferred_until = Some(start.plus(excess));
                    }
                }
            }
        }
        let wfq_tag = if self.policy.name == PolicyName::Wfq {
            self.wfq_tag(&spec.tenant, cost, now)
        } else {
            0
        };
        self.seq += 1;
        let id = spec.id.clone();
        self.accept_hint = Some((class, key));
        self.emit(Event::JobAccepted {
            at: now,
            seq: self.seq,
            spec,
            estimate,
            deferred_until,
            wfq_tag,
            cost,
        });
        match deferred_until {
            Some(until) => Admission::Deferred {
                job: id,
                until,
                duplicate: false,
            },
            None => Admission::Accepted {
                job: id,
                duplicate: false,
            },
        }
    }

    /// The first answer to a job id submitted before, if any. The spec's digest is computed
    /// only for an id seen before: a new id's is computed once, where its job is created.
    fn previous_answer(&self, spec: &JobSpec) -> Option<Admission> {
        if let Some(j) = self.job_idx(spec.id.as_str()) {
            let job = self.job(j);
            if job.digest != spec_digest(spec) {
                return Some(final_(RejectReason::IdReused));
            }
            return Some(if job.state == JobState::Deferred && job.attempts == 0 {
                Admission::Deferred {
                    job: spec.id.clone(),
                    until: job.deferred_until(),
                    duplicate: true,
                }
            } else {
                Admission::Accepted {
                    job: spec.id.clone(),
                    duplicate: true,
                }
            });
        }
        let f = self.finished.get(spec.id.as_str())?;
        if f.digest != spec_digest(spec) {
            return Some(final_(RejectReason::IdReused));
        }
        Some(Admission::Accepted {
            job: spec.id.clone(),
            duplicate: true,
        })
    }

    /// Whether tenant `name` may submit to `class`: its own declaration, or the nearest
    /// declared ancestor's, decides.
    fn class_permitted(&self, name: &str, class: u16) -> bool {
        if !self.classes_limited {
            return true;
        }
        let class_name = self.class_name(class);
        let mut cur = Some(name);
        while let Some(n) = cur {
            if let Some(t) = self.policy.tenant(n)
                && let Some(classes) = &t.classes
            {
                return classes.contains(class_name)
                    || (class_name == crate::policy::DEFAULT_CLASS && classes.is_empty());
            }
            cur = n.rfind('/').map(|i| &n[..i]);
        }
        true
    }

    /// The estimate admission settles on: declared (raised to the class minimum and by the
    /// tenant's record of underestimation), or learned from the tenant's jobs of the class, or
    /// from the class's jobs of every tenant, or the class's or policy's default.
    pub(crate) fn effective_estimate(
        &self,
        tenant: Option<TenantIdx>,
        class: u16,
        declared: Option<Dur>,
    ) -> Dur {
        let cp = &self.classes[class as usize].policy;
        let learned = tenant.and_then(|t| self.tenants[t.ix()].estimators.get(class).copied());
        let estimate =
            match declared {
                Some(d) => {
                    let mut e = d;
                    if let Some(l) = learned
                        && l.samples >= 3
                        && l.ratio_ppm > 1_100_000
                    {
                        // A tenant that runs longer than it declares is believed less.
                        e = Dur((e.0 as u128 * l.ratio_ppm as u128 / 1_000_000)
                            .min(u64::MAX as u128) as u64);
                    }
                    e
                }
                None => match learned {
                    Some(l) if l.samples > 0 => Dur(l.mean_ns),
                    // A tenant new to the class: what the class's jobs run, once it is known.
                    _ if self.classes[class as usize].estimator.samples >= CLASS_PRIOR_SAMPLES => {
                        Dur(self.classes[class as usize].estimator.mean_ns)
                    }
                    _ => cp.default_estimate.unwrap_or(self.policy.default_estimate),
                },
            };
        estimate.max(cp.min_estimate).min(cp.max_estimate)
    }

    /// A member's dominant share of one worker of the first live group that can run it; a
    /// whole worker when none can yet (conservative).
    fn member_share_ppb(&mut self, key: &crate::shape::ShapeKey) -> u64 {
        for g in self.groups.live() {
            let group = self.groups.get(g);
            if key.demand.fits_in(&group.capacity)
                && key
                    .requires
                    .iter()
                    .all(|(k, v)| group.labels.get(k) == Some(v))
            {
                return key
                    .demand
                    .dominant_share_ppb(&group.capacity)
                    .min(SHARE_SCALE);
            }
        }
        SHARE_SCALE
    }

    fn shapes_lookup(&self, key: &crate::shape::ShapeKey) -> Option<crate::ids::ShapeId> {
        self.shapes.lookup(key)
    }

    /// Quotas: the outstanding-work envelope and the burst quota.
    fn check_quotas(
        &self,
        tenant: Option<TenantIdx>,
        name: &str,
        cost: u128,
        now: Time,
    ) -> Option<Admission> {
        let declared = self.policy.tenant(name);
        let (max_outstanding, burst, rate) = declared
            .map(|d| (d.max_outstanding, d.burst, d.rate))
            .unwrap_or_default();
        let (outstanding, tokens, tokens_at) = match tenant {
            Some(t) => {
                let t = &self.tenants[t.ix()];
                (t.outstanding, t.tokens, t.tokens_at)
            }
            None => (0, burst.unwrap_or(0), now),
        };
        if let Some(max) = max_outstanding {
            if cost > max {
                return Some(final_(RejectReason::QuotaExceeded));
            }
            if outstanding + cost > max {
                // Roughly how long the excess takes to drain on one worker.
                let excess = outstanding + cost - max;
                let secs = (excess / COST_PER_WORKER_SECOND) as u64;
                return Some(retryable(
                    RejectReason::OutstandingFull,
                    Dur::from_secs(secs.max(1)),
                ));
            }
        }
        if let Some(burst) = burst {
            if cost > burst {
                return Some(final_(RejectReason::QuotaExceeded));
            }
            let available = (tokens + refill(rate, tokens_at, now)).min(burst);
            if cost > available {
                let missing = cost - available;
                let wait = match rate {
                    Some(r) if r > 0 => {
                        Dur((missing * 1_000_000_000 / r).min(u64::MAX as u128) as u64)
                    }
                    _ => RETRY_AFTER_MAX,
                };
                return Some(retryable(RejectReason::BurstExhausted, wait));
            }
        }
        None
    }

    /// Predicted wait of a job costing `cost`, of shape `key` in `class`, from `tenant`
    /// (`None`: one not seen yet), and the service rate it used (cost units per second). The work ahead of it is its
    /// queue's: the whole class and shape under the one-queue policies (`fifo`, `strict`,
    /// `sjf`), the tenant's leaf under the others, where each tenant is served its share. The
    /// rate is the one measured for that queue while it was backlogged (see `meter`), else
    /// the shape's, else, before there is any history, what the live workers that can run the
    /// shape could do if it had them all.
    fn predict_wait(
        &mut self,
        key: &crate::shape::ShapeKey,
        class: u16,
        tenant: Option<TenantIdx>,
        cost: u128,
    ) -> (Dur, u128) {
        let now = self.now;
        let shape = self.shapes_lookup(key);
        let shape_rate = shape
            .and_then(|s| self.meters.get(&s))
            .or_else(|| self.meter_archive.get(key))
            .and_then(|m| m.rate(now));
        let one_queue = matches!(
            self.policy.name,
            PolicyName::Fifo | PolicyName::Strict | PolicyName::Sjf
        );
        let (ahead, measured) = if one_queue {
            let ahead = shape
                .and_then(|s| self.backlog.get(&(class, s)))
                .map(|b| b.queued_cost)
                .unwrap_or(0);
            (ahead, shape_rate)
        } else {
            let leaf = tenant.and_then(|t| self.existing_leaf(t, class));
            let ahead = leaf
                .map(|n| self.nodes[n.ix()].queued_work.cost)
                .unwrap_or(0);
            let leaf_rate = leaf.and_then(|n| self.nodes[n.ix()].meter.rate(now));
            (ahead, leaf_rate.or(shape_rate))
        };
        let rate = match measured {
            Some(r) => r,
            None => self.capacity_drain(key),
        };
        if ahead == 0 {
            return (Dur::ZERO, rate);
        }
        if rate == 0 {
            return (Dur::MAX, 0);
        }
        // It starts once the work ahead and its own turn have been served.
        let served = ahead.saturating_add(cost);
        let wait = Dur((served.saturating_mul(1_000_000_000) / rate).min(u64::MAX as u128) as u64);
        (wait, rate)
    }

    /// The leaf a job of tenant `t` in `class` would join, if it exists yet.
    fn existing_leaf(&self, t: TenantIdx, class: u16) -> Option<crate::ids::NodeIdx> {
        let tenant = &self.tenants[t.ix()];
        match self.shape_kind {
            super::state::TreeShape::Flat => tenant.node,
            super::state::TreeShape::Hierarchical => tenant.bands.get(&class).copied(),
        }
    }

    /// How fast the live workers could drain work of shape `key` if it had them all, in cost
    /// units per second.
    pub(crate) fn capacity_drain(&mut self, key: &crate::shape::ShapeKey) -> u128 {
        let mut rate = 0u128;
        for g in self.groups.live() {
            let group = self.groups.get(g);
            if !(key.demand.fits_in(&group.capacity)
                && key
                    .requires
                    .iter()
                    .all(|(k, v)| group.labels.get(k) == Some(v)))
            {
                continue;
            }
            let copies = group.capacity.copies_of(&key.demand) as u128;
            let share = key
                .demand
                .dominant_share_ppb(&group.capacity)
                .min(SHARE_SCALE) as u128;
            rate += group.workers.len() as u128 * copies * share * 1_000_000_000;
        }
        rate
    }

    /// WFQ: the virtual finish tag of a job of `tenant` costing `cost`, on GPS virtual time.
    fn wfq_tag(&mut self, tenant: &str, cost: u128, now: Time) -> u128 {
        self.gps_advance(now);
        let t = self.tenant_by_name.get(tenant).copied();
        let weight = t
            .map(|t| self.tenants[t.ix()].weight)
            .or_else(|| self.policy.tenant(tenant).map(|d| d.weight));
        let weight = weight.unwrap_or_default();
        let last = t
            .and_then(|t| self.gps.last_finish.get(&t).copied())
            .unwrap_or(0);
        last.max(self.gps.v) + weight.divide(cost)
    }

    /// Advances GPS virtual time to `now`: it grows at the service rate divided by the total
    /// weight of flows backlogged in the fluid system, which leave as V passes their last tag.
    fn gps_advance(&mut self, now: Time) {
        let workers: u128 = self
            .groups
            .live()
            .map(|g| self.groups.get(g).workers.len() as u128)
            .sum();
        let rate = workers.max(1) * COST_PER_WORKER_SECOND;
        let gps = &mut self.gps;
        while gps.at < now {
            let Some(&(finish, flow)) = gps.backlog.first() else {
                gps.at = now;
                break;
            };
            let ws = gps.weight_sum.max(1);
            // Nanoseconds until V reaches `finish`.
            let needed = finish.saturating_sub(gps.v) * ws * 1_000_000_000 / (rate * 1_000_000);
            let elapsed = now.0 - gps.at.0;
            if needed <= elapsed as u128 {
                gps.v = finish;
                gps.at = Time(gps.at.0 + needed as u64);
                gps.backlog.remove(&(finish, flow));
                gps.weight_sum -= self.tenants[flow.ix()].weight.micros() as u128;
            } else {
                gps.v += rate * elapsed as u128 * 1_000_000 / (ws * 1_000_000_000);
                gps.at = now;
            }
        }
    }

    /// What admission would predict now for a job of `spec` (for explanations and tests).
    pub fn predict(&mut self, spec: &JobSpec) -> Option<Prediction> {
        let (class, key) = self.class_and_shape(spec)?;
        let tenant = self.tenant_by_name.get(&spec.tenant).copied();
        let (wait, rate) = self.predict_wait(&key, class, tenant, 0);
        Some(Prediction {
            wait,
            drain_micro: (rate / (COST_PER_WORKER_SECOND / 1_000_000)).min(u64::MAX as u128) as u64,
        })
    }
}

/// Checks a job spec for malformed fields; the tenant's name only if `tenant_known` is false
/// (a known tenant's name was checked when it first appeared).
pub(crate) fn validate(spec: &JobSpec, tenant_known: bool) -> Result<(), String> {
    if spec.id.is_empty() || spec.id.len() > MAX_JOB_ID_LEN {
        return Err(format!("job id must be 1 to {MAX_JOB_ID_LEN} bytes"));
    }
    if has_char_outside(&spec.id, b' ', char::is_control) {
        return Err("job id contains control characters".to_string());
    }
    if tenant_known {
        debug_assert!(check_tenant_name(&spec.tenant).is_ok(), "{:?}", spec.tenant);
    } else {
        check_tenant_name(&spec.tenant)?;
    }
    if let Some(c) = &spec.class {
        check_name("class", c)?;
    }
    if !(-1_000_000..=1_000_000).contains(&spec.priority) {
        return Err("priority must be between -1000000 and 1000000".to_string());
    }
    for (r, a) in &spec.demand {
        check_name("resource", r)?;
        if !a.is_finite() || *a < 0.0 || *a > 1e12 {
            return Err(format!("demand of {r} must be a number between 0 and 1e12"));
        }
    }
    if spec.requires.len() > MAX_REQUIREMENTS {
        return Err(format!("at most {MAX_REQUIREMENTS} requirements"));
    }
    for (k, v) in &spec.requires {
        check_name("label", k)?;
        check_name("label value", v)?;
    }
    if spec.gang == 0 || spec.gang > MAX_GANG {
        return Err(format!("gang must be between 1 and {MAX_GANG}"));
    }
    if let Some(m) = spec.gang_min
        && (m == 0 || m > spec.gang)
    {
        return Err("gang_min must be between 1 and gang".to_string());
    }
    if let Some(m) = spec.max_attempts
        && m == 0
    {
        return Err("max_attempts must be at least 1".to_string());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{EngineConfig, Outcome, Policy, WorkerOffer};

    /// Worker `w` of the default pool, with room for `jobs` jobs of one CPU each.
    fn worker(jobs: u32) -> WorkerOffer {
        WorkerOffer {
            worker: "w".into(),
            pool: "default".into(),
            capacity: [("cpu".to_string(), jobs as f64)].into(),
            labels: Default::default(),
            max_jobs: jobs,
        }
    }

    // Proves: a tenant declared with `classes` is refused the others, and so are the tenants
    // under it, under every policy version that declares it and after a snapshot restore;
    // a policy that limits no tenant's classes permits every class (item 91's short cut).
    #[test]
    fn class_limits_hold_across_policy_versions_and_a_restore() {
        let limited = "[policy]\nname = \"fair\"\n\n[[class]]\nname = \"default\"\n\n\
            [[class]]\nname = \"gold\"\n\n[[tenant]]\nname = \"cheap\"\nclasses = [\"default\"]\n";
        let open = "[policy]\nname = \"fair\"\n\n[[class]]\nname = \"default\"\n\n\
            [[class]]\nname = \"gold\"\n\n[[tenant]]\nname = \"cheap\"\n";
        let gold = |id: &str, tenant: &str| JobSpec {
            class: Some("gold".into()),
            ..JobSpec::new(id, tenant)
        };
        let refused = |engine: &mut Engine, id: &str, tenant: &str| {
            matches!(
                engine.submit(Time::ZERO, gold(id, tenant)),
                Admission::RejectedFinal {
                    reason: RejectReason::ClassNotPermitted(_)
                }
            )
        };
        let mut engine = Engine::new(
            Time::ZERO,
            Policy::from_text(limited).unwrap(),
            EngineConfig::default(),
        );
        assert!(refused(&mut engine, "a", "cheap"));
        assert!(refused(&mut engine, "b", "cheap/team"));
        assert!(!refused(&mut engine, "c", "acme"));
        engine.publish(Time::ZERO, open).unwrap();
        assert!(!refused(&mut engine, "d", "cheap"));
        assert!(!refused(&mut engine, "e", "cheap/team"));
        engine.publish(Time::ZERO, limited).unwrap();
        assert!(refused(&mut engine, "f", "cheap"));
        let mut restored = Engine::restore(&engine.snapshot(), EngineConfig::default()).unwrap();
        assert!(refused(&mut restored, "g", "cheap/team"));
        assert!(!refused(&mut restored, "h", "acme"));
        restored.audit().unwrap();
    }

    // Proves: an id submitted again gets its first answer when the spec is the same, and is
    // refused as reused when it differs, while its job is live and once it has finished.
    #[test]
    fn an_id_again_is_the_same_job_or_refused_as_reused() {
        let policy = Policy::from_text(crate::policy::BUILT_IN_POLICY).unwrap();
        let mut engine = Engine::new(Time::ZERO, policy, EngineConfig::default());
        let now = Time::from_millis(1_000);
        let spec = JobSpec::new("a", "acme");
        let other = JobSpec {
            priority: 5,
            ..JobSpec::new("a", "acme")
        };
        let first = engine.submit(now, spec.clone());
        assert_eq!(
            first,
            Admission::Accepted {
                job: "a".into(),
                duplicate: false
            }
        );
        let check = |engine: &mut Engine| {
            assert_eq!(
                engine.submit(now, spec.clone()),
                Admission::Accepted {
                    job: "a".into(),
                    duplicate: true
                }
            );
            assert_eq!(
                engine.submit(now, other.clone()),
                Admission::RejectedFinal {
                    reason: RejectReason::IdReused
                }
            );
        };
        check(&mut engine);
        engine.worker_ready(now, &worker(1)).unwrap();
        let lease = engine.schedule(now).pop().expect("a lease");
        engine
            .finish(now, &lease.job, lease.epoch, Outcome::Succeeded, None, None)
            .unwrap();
        assert!(engine.status("a").unwrap().state.is_terminal());
        check(&mut engine);
    }

    // Proves: a job's id reads back exactly, whichever of its record's forms holds it (short,
    // UUID, heap; `engine/job_id.rs`): in its lease, its status, a resubmission, and after a
    // snapshot's restore, live and finished; a UUID in another spelling is another job.
    #[test]
    fn ids_of_every_form_survive_the_jobs_life_and_a_restore() {
        let ids = [
            "j-1",
            "0123456789abcdef",
            "0192d3c4-5e6f-7a8b-9c0d-1e2f3a4b5c6d",
            "0192D3C4-5E6F-7A8B-9C0D-1E2F3A4B5C6D",
            "0192d3c4-5e6f-7a8b-cc0d-1e2f3a4b5c6d",
            "a longer id, with spaces, past sixteen bytes",
            "déjà-vu",
        ];
        let policy = Policy::from_text(crate::policy::BUILT_IN_POLICY).unwrap();
        let mut engine = Engine::new(Time::ZERO, policy, EngineConfig::default());
        let now = Time::from_millis(1_000);
        for id in ids {
            let spec = JobSpec::new(id, "acme");
            assert_eq!(
                engine.submit(now, spec),
                Admission::Accepted {
                    job: id.into(),
                    duplicate: false
                },
                "{id}"
            );
        }
        engine.worker_ready(now, &worker(3)).unwrap();
        let leases = engine.schedule(now);
        assert_eq!(leases.len(), 3);
        for lease in &leases {
            assert!(ids.contains(&lease.job.as_str()), "{}", lease.job);
            engine
                .finish(now, &lease.job, lease.epoch, Outcome::Succeeded, None, None)
                .unwrap();
        }
        let check = |engine: &mut Engine| {
            engine.audit().unwrap();
            for id in ids {
                let status = engine.status(id).unwrap_or_else(|| panic!("{id}"));
                let done = leases.iter().any(|l| l.job == id);
                assert_eq!(status.state.is_terminal(), done, "{id}");
                assert_eq!(
                    engine.submit(now, JobSpec::new(id, "acme")),
                    Admission::Accepted {
                        job: id.into(),
                        duplicate: true
                    },
                    "{id}"
                );
            }
            assert!(
                engine
                    .status("0192d3c4-5e6f-7a8b-9c0d-1e2f3a4b5c6e")
                    .is_none()
            );
        };
        check(&mut engine);
        let mut restored = Engine::restore(&engine.snapshot(), EngineConfig::default()).unwrap();
        check(&mut restored);
    }

    // Proves: a job id is refused for a control character, ASCII or not, and for nothing else
    // (spaces are allowed).
    proptest::proptest! {
        #[test]
        fn job_ids_are_refused_for_control_characters_only(
            id in proptest::collection::vec(
                proptest::sample::select(vec!['a', ' ', '\t', '\0', '\u{1f}', '\u{7f}', 'é', '\u{85}', '\u{9f}', '\u{3000}']),
                1..12,
            ),
        ) {
            let id: String = id.into_iter().collect();
            let refused = validate(&JobSpec::new(id.as_str(), "t"), false).is_err();
            proptest::prop_assert_eq!(refused, id.chars().any(char::is_control), "{:?}", id);
        }
    }
}
