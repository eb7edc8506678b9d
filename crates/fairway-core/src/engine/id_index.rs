//! Job ids to the places that hold them, storing only the place.
//!
//! A job's id is stored once, in the record the place points at, and the index compares ids
//! through those records. A map from a shared id to its place cost a 24-byte bucket and the
//! shared string's 16 bytes of counts per job, about 68 bytes per queued job at 10^6 jobs; this
//! costs a 4-byte place (8 for a finished job's) and hashbrown's control byte per bucket. A hit
//! reads the record it points at, which its caller reads next anyway; hashbrown's control bytes
//! hold 7 bits of each hash, so a miss rarely reads a record at all.

use crate::hash::FxHasher;
use hashbrown::HashTable;
use std::hash::Hasher;

/// The hash of a job id (the Fx hash with its finalizer, over the id's bytes).
fn id_hash(id: &str) -> u64 {
    let mut h = FxHasher::default();
    h.write(id.as_bytes());
    h.finish()
}

/// Job ids to places of type `P`; `id_of` tells the id stored at a place. Every place in the
/// index must hold its id for as long as it is in the index.
#[derive(Clone, Debug, Default)]
pub(crate) struct IdIndex<P> {
    table: HashTable<P>,
}

impl<P: Copy + Eq> IdIndex<P> {
    /// The place of `id`.
    pub fn get<'a>(&self, id: &str, id_of: impl Fn(P) -> &'a str) -> Option<P> {
        self.table.find(id_hash(id), |&p| id_of(p) == id).copied()
    }

    /// Points `id` at `place`, which must already hold it, replacing the place it had.
    pub fn insert<'a>(&mut self, id: &str, place: P, id_of: impl Fn(P) -> &'a str) {
        let hash = id_hash(id);
        if let Some(p) = self.table.find_mut(hash, |&p| id_of(p) == id) {
            *p = place;
        } else {
            self.table
                .insert_unique(hash, place, |&p| id_hash(id_of(p)));
        }
    }

    /// Forgets `id` if it points at `place` (which need no longer hold it); whether it did.
    pub fn remove_at(&mut self, id: &str, place: P) -> bool {
        match self.table.find_entry(id_hash(id), |&p| p == place) {
            Ok(entry) => {
                entry.remove();
                true
            }
            Err(_) => false,
        }
    }

    /// How many ids are indexed.
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.table.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_found_through_the_places_that_hold_them() {
        let names: Vec<String> = (0..10_000).map(|i| format!("{i}")).collect();
        let mut index = IdIndex::<u32>::default();
        for (i, n) in names.iter().enumerate() {
            index.insert(n, i as u32, |p| &names[p as usize]);
        }
        assert_eq!(index.len(), names.len());
        for (i, n) in names.iter().enumerate() {
            assert_eq!(index.get(n, |p| &names[p as usize]), Some(i as u32));
        }
        assert_eq!(index.get("10000", |p| &names[p as usize]), None);
        assert_eq!(index.get("", |p| &names[p as usize]), None);
    }

    #[test]
    fn an_id_inserted_again_moves_and_is_removed_only_from_where_it_points() {
        let names = ["a", "b", "a"];
        let id_of = |p: u32| names[p as usize];
        let mut index = IdIndex::<u32>::default();
        index.insert("a", 0, id_of);
        index.insert("b", 1, id_of);
        index.insert("a", 2, id_of);
        assert_eq!(index.len(), 2);
        assert_eq!(index.get("a", id_of), Some(2));
        assert!(!index.remove_at("a", 0), "a no longer points at 0");
        assert_eq!(index.get("a", id_of), Some(2));
        assert!(index.remove_at("a", 2));
        assert_eq!(index.get("a", id_of), None);
        assert_eq!(index.get("b", id_of), Some(1));
    }
}
