//! Borrowing look-ups for drivers: what a job is, without building a whole [`JobStatus`]
//! (which clones its strings and walks its attempt). The server asks these on every lease it
//! delivers and every event it counts.
//!
//! [`JobStatus`]: crate::job::JobStatus

use super::Engine;

impl Engine {
    /// The names of job `id`'s tenant and class, live or remembered (as [`Engine::status`]
    /// would report them), borrowed from the engine.
    pub fn job_labels(&self, id: &str) -> Option<(&str, &str)> {
        let (tenant, class) = match self.job_idx(id) {
            Some(j) => {
                let job = self.job(j);
                (job.tenant, job.class)
            }
            None => {
                let f = self.finished.get(id)?;
                (crate::ids::TenantIdx(f.tenant), f.class)
            }
        };
        Some((&self.tenants[tenant.ix()].name, self.class_name(class)))
    }
}

#[cfg(test)]
mod tests {
    use crate::{Engine, EngineConfig, JobSpec, Outcome, Policy, Time, WorkerOffer};
    use std::collections::BTreeMap;

    /// Proves: a job's labels are its status's tenant and class, while it is queued, while it
    /// runs and once it has finished (remembered); an unknown job has none.
    #[test]
    fn labels_are_the_status_tenant_and_class() {
        let policy = Policy::from_text(crate::policy::BUILT_IN_POLICY).unwrap();
        let mut engine = Engine::new(Time::from_millis(1_000), policy, EngineConfig::default());
        let now = Time::from_millis(2_000);
        for (id, tenant) in [("a", "acme/etl"), ("b", "globex")] {
            assert!(engine.submit(now, JobSpec::new(id, tenant)).is_accepted());
        }
        let labels = |engine: &Engine, id: &str| {
            let status = engine.status(id).map(|s| (s.tenant, s.class));
            let labels = engine
                .job_labels(id)
                .map(|(t, c)| (t.to_string(), c.to_string()));
            assert_eq!(labels, status, "{id}");
            labels
        };
        assert_eq!(
            labels(&engine, "a"),
            Some(("acme/etl".into(), "default".into()))
        );
        engine
            .worker_ready(
                now,
                &WorkerOffer {
                    worker: "w".into(),
                    pool: "default".into(),
                    capacity: BTreeMap::from([("cpu".to_string(), 1.0)]),
                    labels: BTreeMap::new(),
                    max_jobs: 1,
                },
            )
            .unwrap();
        let lease = engine.schedule(now).pop().expect("a lease");
        labels(&engine, &lease.job);
        engine
            .finish(now, &lease.job, lease.epoch, Outcome::Succeeded, None, None)
            .unwrap();
        assert!(engine.status(&lease.job).unwrap().state.is_terminal());
        labels(&engine, &lease.job);
        labels(&engine, "b");
        assert_eq!(engine.job_labels("nobody"), None);
    }
}
