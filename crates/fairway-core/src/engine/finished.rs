//! The finished jobs the engine remembers (at most `EngineConfig::finished_retention`), so
//! that a resubmitted id gets its earlier answer and a status query still finds the job.
//!
//! They are kept in the order they finished, each record beside its id, and an index maps an
//! id to its place in that order. A snapshot writes them in order by walking the records one
//! after the other; it used to look each one up by id in a hash map, one cache miss per job,
//! which at a few hundred thousand finished jobs was most of a snapshot's encoding time.

use super::id_index::IdIndex;
use super::state::Finished;
use std::collections::VecDeque;

#[derive(Clone, Debug, Default)]
pub(crate) struct FinishedJobs {
    /// Oldest first.
    order: VecDeque<(Box<str>, Finished)>,
    /// Each id's place in finishing order since the engine began: `forgotten` plus its index
    /// in `order`.
    by_id: IdIndex<u64>,
    /// How many have been dropped from the front of `order`.
    forgotten: u64,
}

impl FinishedJobs {
    /// The id remembered at `place` (which must still be remembered).
    fn id_at(&self, place: u64) -> &str {
        &self.order[(place - self.forgotten) as usize].0
    }

    fn place(&self, id: &str) -> Option<u64> {
        self.by_id.get(id, |p| self.id_at(p))
    }

    pub fn get(&self, id: &str) -> Option<&Finished> {
        let place = self.place(id)?;
        let (_, f) = self.order.get((place - self.forgotten) as usize)?;
        Some(f)
    }

    pub fn contains(&self, id: &str) -> bool {
        self.place(id).is_some()
    }

    pub fn len(&self) -> usize {
        self.order.len()
    }

    /// Oldest first.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = (&str, &Finished)> {
        self.order.iter().map(|(id, f)| (&**id, f))
    }

    /// Remembers `id` as the latest to finish; beyond `retention` the oldest is forgotten.
    pub fn push(&mut self, id: Box<str>, f: Finished, retention: usize) {
        while self.order.len() >= retention.max(1) {
            let Some((old, _)) = self.order.pop_front() else {
                break;
            };
            // An id remembered twice points at its later place: that stays.
            self.by_id.remove_at(&old, self.forgotten);
            self.forgotten += 1;
        }
        let place = self.forgotten + self.order.len() as u64;
        self.order.push_back((id, f));
        let (order, forgotten) = (&self.order, self.forgotten);
        let id = &*order.back().expect("just pushed").0;
        self.by_id
            .insert(id, place, |p| &order[(p - forgotten) as usize].0);
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
            f.push(format!("j{i}").into(), record(i), 3);
        }
        let ids: Vec<&str> = f.iter().map(|(id, _)| id).collect();
        assert_eq!(ids, ["j2", "j3", "j4"]);
        assert!(f.get("j1").is_none() && !f.contains("j0"));
        assert_eq!(f.get("j3").map(|r| r.attempts), Some(3));
        assert_eq!(f.get("j4").map(|r| r.attempts), Some(4));
        assert_eq!(f.len(), 3);
    }

    #[test]
    fn an_id_finished_twice_is_found_at_its_later_place() {
        let mut f = FinishedJobs::default();
        f.push(Box::from("a"), record(1), 2);
        f.push(Box::from("b"), record(1), 2);
        f.push(Box::from("a"), record(2), 2);
        // The first "a" was forgotten; the second must still be found.
        assert_eq!(f.get("a").map(|r| r.attempts), Some(2));
        f.push(Box::from("c"), record(1), 2);
        assert!(f.get("b").is_none());
        assert_eq!(f.get("a").map(|r| r.attempts), Some(2));
        assert_eq!(f.get("c").map(|r| r.attempts), Some(1));
    }
}
