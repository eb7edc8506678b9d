//! The finished jobs the engine remembers (at most `EngineConfig::finished_retention`), so
//! that a resubmitted id gets its earlier answer and a status query still finds the job.
//!
//! They are kept in the order they finished, each record beside its id, and an index maps an
//! id to its place in that order. A snapshot writes them in order by walking the records one
//! after the other; it used to look each one up by id in a hash map, one cache miss per job,
//! which at a few hundred thousand finished jobs was most of a snapshot's encoding time.

use super::state::Finished;
use crate::hash::FxHashMap;
use std::collections::VecDeque;
use std::sync::Arc;

#[derive(Clone, Debug, Default)]
pub(crate) struct FinishedJobs {
    /// Oldest first.
    order: VecDeque<(Arc<str>, Finished)>,
    /// Each id's place in finishing order since the engine began: `forgotten` plus its index
    /// in `order`.
    by_id: FxHashMap<Arc<str>, u64>,
    /// How many have been dropped from the front of `order`.
    forgotten: u64,
}

impl FinishedJobs {
    pub fn get(&self, id: &str) -> Option<&Finished> {
        let place = *self.by_id.get(id)?;
        let (_, f) = self.order.get((place - self.forgotten) as usize)?;
        Some(f)
    }

    pub fn contains(&self, id: &str) -> bool {
        self.by_id.contains_key(id)
    }

    pub fn len(&self) -> usize {
        self.order.len()
    }

    /// Oldest first.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = (&Arc<str>, &Finished)> {
        self.order.iter().map(|(id, f)| (id, f))
    }

    /// Remembers `id` as the latest to finish; beyond `retention` the oldest is forgotten.
    pub fn push(&mut self, id: Arc<str>, f: Finished, retention: usize) {
        while self.order.len() >= retention.max(1) {
            let Some((old, _)) = self.order.pop_front() else {
                break;
            };
            // An id remembered twice maps to its later place: that stays.
            if self.by_id.get(&old) == Some(&self.forgotten) {
                self.by_id.remove(&old);
            }
            self.forgotten += 1;
        }
        let place = self.forgotten + self.order.len() as u64;
        self.by_id.insert(Arc::clone(&id), place);
        self.order.push_back((id, f));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::TenantIdx;
    use crate::job::JobState;
    use crate::time::{Dur, Time};

    fn record(attempts: u32) -> Finished {
        Finished {
            tenant: TenantIdx(0),
            class: 0,
            state: JobState::Succeeded,
            attempts,
            epoch: 1,
            arrival: Time::ZERO,
            estimate: Dur::ZERO,
            reason: None,
            digest: 7,
        }
    }

    #[test]
    fn keeps_the_latest_in_order_and_forgets_the_oldest() {
        let mut f = FinishedJobs::default();
        for i in 0..5 {
            f.push(Arc::from(format!("j{i}")), record(i), 3);
        }
        let ids: Vec<&str> = f.iter().map(|(id, _)| &**id).collect();
        assert_eq!(ids, ["j2", "j3", "j4"]);
        assert!(f.get("j1").is_none() && !f.contains("j0"));
        assert_eq!(f.get("j3").map(|r| r.attempts), Some(3));
        assert_eq!(f.get("j4").map(|r| r.attempts), Some(4));
        assert_eq!(f.len(), 3);
    }

    #[test]
    fn an_id_finished_twice_is_found_at_its_later_place() {
        let mut f = FinishedJobs::default();
        f.push(Arc::from("a"), record(1), 2);
        f.push(Arc::from("b"), record(1), 2);
        f.push(Arc::from("a"), record(2), 2);
        // The first "a" was forgotten; the second must still be found.
        assert_eq!(f.get("a").map(|r| r.attempts), Some(2));
        f.push(Arc::from("c"), record(1), 2);
        assert!(f.get("b").is_none());
        assert_eq!(f.get("a").map(|r| r.attempts), Some(2));
        assert_eq!(f.get("c").map(|r| r.attempts), Some(1));
    }
}
