//! Job ids to the places that hold them, storing only the place.
//!
//! A job's id is stored once, in the record the place points at, and the index compares ids
//! through those records. A map from a shared id to its place cost a 24-byte bucket and the
//! shared string's 16 bytes of counts per job, about 68 bytes per queued job at 10^6 jobs; this
//! costs a 4-byte place (8 for a finished job's) and hashbrown's control byte per bucket. A hit
//! reads the record it points at, which its caller reads next anyway; hashbrown's control bytes
//! hold 7 bits of each hash, so a miss rarely reads a record at all.
//!
//! The index grows without a pause. A hash table that doubles moves every entry at once, and
//! moving one here means reading its id (the table keeps no hashes) from a record nobody has
//! touched for a while: at 2^19 finished jobs (with the finished records' own doubling) that
//! was one decision taking 197 to 211 ms on machine I of BENCHMARKS.md. Instead, a full table
//! is set aside as `old` and a table twice its size takes the new entries; every insertion then moves the entries of [`MOVE_BUCKETS`] of the old
//! table's buckets, so the old one is empty long before the new one fills. Look-ups and
//! removals search both while a move is under way. Moving an entry needs its id's hash: an
//! entry may carry it ([`Entry::hash`]), as the finished jobs' do, so that a move reads no
//! record at all; the live jobs' entries stay 4 bytes and their moves read the ids, a few
//! buckets' worth at a time with their misses overlapped ([`IdIndex::move_some`]).

use hashbrown::HashTable;

/// The hash of a job id: 32 bits of the Fx hash with its finalizer, over the id's bytes, in
/// both halves of the word (the table takes a bucket from the low bits and a tag from the top
/// seven), so that an entry can carry its hash in 4 bytes.
pub(crate) fn id_hash(id: &str) -> u64 {
    let h = crate::hash::hash_str(id) as u32 as u64;
    h << 32 | h
}

/// What the index holds for an id: its place, and perhaps its hash.
pub(crate) trait Entry: Copy + Eq {
    /// The id's hash ([`id_hash`]), if the entry carries it.
    fn hash(self) -> Option<u64> {
        None
    }
}

impl Entry for crate::ids::JobIdx {}

#[cfg(test)]
impl Entry for u32 {}

/// An id as a place holds it: what the index compares, hashes and asks for ahead.
pub(crate) trait IdAt: Copy {
    /// Whether this is the id `id`.
    fn is(self, id: &str) -> bool;
    /// The id's hash ([`id_hash`]).
    fn hash(self) -> u64;
    /// Asks for the memory that `is` and `hash` will read.
    fn prefetch(self);
}

impl IdAt for &str {
    fn is(self, id: &str) -> bool {
        self == id
    }
    fn hash(self) -> u64 {
        id_hash(self)
    }
    fn prefetch(self) {
        crate::hint::prefetch(self.as_ptr());
    }
}

impl IdAt for &super::job_id::JobId {
    fn is(self, id: &str) -> bool {
        super::job_id::JobId::is(self, id)
    }
    fn hash(self) -> u64 {
        id_hash(&self.as_str())
    }
    fn prefetch(self) {
        crate::hint::prefetch(self);
    }
}

/// The hash of the id of `entry`, read from the entry when it carries it.
fn hash_of<P: Entry, I: IdAt>(entry: P, id_of: &impl Fn(P) -> I) -> u64 {
    entry.hash().unwrap_or_else(|| id_of(entry).hash())
}

/// The hash an entry that must carry its id's hash carries (a finished job's place does).
fn carried_hash<P: Entry>(entry: P) -> u64 {
    entry.hash().expect("an entry that carries its id's hash")
}

/// Buckets of the old table emptied per insertion while the index grows. A table of `b`
/// buckets holds at most `7b/8` entries, and its successor has room for twice as many: the
/// `b / MOVE_BUCKETS` insertions that empty the old table come well before the new one is full.
/// Both tables are held meanwhile, so the move is kept short: 16 buckets (about 14 entries,
/// each a cold read of its id where the entry carries no hash) an insertion empty the old table
/// within 7% more entries. With 4, a server filled with 10^6 jobs was still moving its 2^20
/// buckets there and held 5 bytes a job more.
const MOVE_BUCKETS: usize = 16;

/// Job ids to places of type `P`; `id_of` tells the id stored at a place ([`IdAt`]). Every
/// place in the index must hold its id for as long as it is in the index.
#[derive(Clone, Debug)]
pub(crate) struct IdIndex<P> {
    table: HashTable<P>,
    /// The table `table` replaced when it filled, emptied into it a few buckets at a time.
    old: HashTable<P>,
    /// The next bucket of `old` to empty.
    cursor: usize,
}

impl<P> Default for IdIndex<P> {
    fn default() -> Self {
        IdIndex {
            table: HashTable::new(),
            old: HashTable::new(),
            cursor: 0,
        }
    }
}

impl<P> IdIndex<P> {
    /// An index with room for `n` ids before it first grows. A restore, which knows how many
    /// it will index, starts this way: growing moves every entry, and moving an entry that
    /// carries no hash reads its id from a record (at 10^6 jobs restored, 1 s of a restart's
    /// CPU on machine J was those reads).
    pub fn with_capacity(n: usize) -> Self {
        IdIndex {
            table: HashTable::with_capacity(n),
            old: HashTable::new(),
            cursor: 0,
        }
    }
}

impl<P: Entry> IdIndex<P> {
    /// The place of `id`.
    pub fn get<I: IdAt>(&self, id: &str, id_of: impl Fn(P) -> I) -> Option<P> {
        let hash = id_hash(id);
        let found = self.table.find(hash, |&p| id_of(p).is(id));
        if found.is_none() && !self.old.is_empty() {
            return self.old.find(hash, |&p| id_of(p).is(id)).copied();
        }
        found.copied()
    }

    /// Reads the control bytes where an id of hash `hash` would sit, as a search for an id
    /// that is not there does (no place is compared), so that inserting it soon after finds
    /// them in cache: a caller issues this ahead of other cold reads to overlap their misses.
    pub fn touch(&self, hash: u64) {
        std::hint::black_box(self.table.find(hash, |_| false));
    }

    /// Finds `place` where [`IdIndex::remove_entry`] will look for it, so that its removal
    /// soon after finds both its control bytes and its entry in cache (item 93).
    pub fn touch_entry(&self, place: P) {
        std::hint::black_box(self.table.find(carried_hash(place), |&p| p == place));
    }

    /// Points `id` at `place`, which must already hold it, replacing the place it had.
    pub fn insert<I: IdAt>(&mut self, id: &str, place: P, id_of: impl Fn(P) -> I) {
        let hash = place.hash().unwrap_or_else(|| id_hash(id));
        if let Some(p) = self.table.find_mut(hash, |&p| id_of(p).is(id)) {
            *p = place;
            return;
        }
        if !self.old.is_empty()
            && let Some(p) = self.old.find_mut(hash, |&p| id_of(p).is(id))
        {
            *p = place;
            return;
        }
        if self.table.len() == self.table.capacity() {
            self.start_growing(&id_of);
        }
        self.move_some(&id_of);
        self.table
            .insert_unique(hash, place, |&p| hash_of(p, &id_of));
    }

    /// Forgets `id` if it points at `place` (which need no longer hold it); whether it did.
    pub fn remove_at(&mut self, id: &str, place: P) -> bool {
        self.remove_hashed(place.hash().unwrap_or_else(|| id_hash(id)), place)
    }

    /// Takes out `place`, an entry that carries its id's hash, without reading the id.
    pub fn remove_entry(&mut self, place: P) -> bool {
        self.remove_hashed(carried_hash(place), place)
    }

    fn remove_hashed(&mut self, hash: u64, place: P) -> bool {
        for table in [&mut self.table, &mut self.old] {
            if let Ok(entry) = table.find_entry(hash, |&p| p == place) {
                entry.remove();
                return true;
            }
        }
        false
    }

    /// How many ids are indexed.
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.table.len() + self.old.len()
    }

    /// Whether a full table is set aside and being emptied into its successor.
    #[cfg(test)]
    pub fn is_growing(&self) -> bool {
        !self.old.is_empty()
    }

    /// Sets the full table aside and starts a table with room for twice its entries (a move
    /// still under way, which the sizing above rules out, is finished first).
    fn start_growing<I: IdAt>(&mut self, id_of: &impl Fn(P) -> I) {
        while !self.old.is_empty() {
            self.move_some(id_of);
        }
        let room = (2 * self.table.len()).max(16);
        self.old = std::mem::replace(&mut self.table, HashTable::with_capacity(room));
        self.cursor = 0;
    }

    /// Moves the entries of the next [`MOVE_BUCKETS`] buckets of the old table into the new.
    fn move_some<I: IdAt>(&mut self, id_of: &impl Fn(P) -> I) {
        if self.old.is_empty() {
            return;
        }
        let end = (self.cursor + MOVE_BUCKETS).min(self.old.num_buckets());
        // The entries are taken out, then their ids fetched, then hashed and inserted, each
        // step over all of them: reading an id means reading a record nobody has touched for
        // a while (and, for an id on the heap, its bytes), and as those reads do not depend on
        // one another the processor overlaps their misses instead of waiting out each in turn.
        let mut places = [None::<P>; MOVE_BUCKETS];
        let mut n = 0;
        for bucket in self.cursor..end {
            if let Ok(entry) = self.old.get_bucket_entry(bucket) {
                places[n] = Some(entry.remove().0);
                n += 1;
            }
        }
        let ids: [Option<I>; MOVE_BUCKETS] = std::array::from_fn(|i| match places[i] {
            Some(p) if p.hash().is_none() => {
                let id = id_of(p);
                id.prefetch();
                Some(id)
            }
            _ => None,
        });
        for (p, id) in places.into_iter().flatten().zip(ids) {
            let hash = p.hash().or(id.map(IdAt::hash)).expect("an id or its hash");
            self.table.insert_unique(hash, p, |&q| hash_of(q, id_of));
        }
        self.cursor = end;
        if self.old.is_empty() || self.cursor == self.old.num_buckets() {
            debug_assert!(self.old.is_empty(), "every bucket was emptied");
            self.old = HashTable::new();
            self.cursor = 0;
        }
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
            index.insert(n, i as u32, |p| names[p as usize].as_str());
        }
        assert_eq!(index.len(), names.len());
        for (i, n) in names.iter().enumerate() {
            assert_eq!(index.get(n, |p| names[p as usize].as_str()), Some(i as u32));
        }
        assert_eq!(index.get("10000", |p| names[p as usize].as_str()), None);
        assert_eq!(index.get("", |p| names[p as usize].as_str()), None);
    }

    // Proves: an index sized for its ids (a restore) indexes them all without ever growing,
    // so no entry is moved (and no id read again to move it); a default one does grow.
    #[test]
    fn an_index_sized_for_its_ids_never_moves_them() {
        let names: Vec<String> = (0..10_000).map(|i| format!("job-{i}")).collect();
        let id_of = |p: u32| names[p as usize].as_str();
        let mut sized = IdIndex::<u32>::with_capacity(names.len());
        let mut grown = IdIndex::<u32>::default();
        let mut grown_moved = false;
        for (i, n) in names.iter().enumerate() {
            sized.insert(n, i as u32, id_of);
            grown.insert(n, i as u32, id_of);
            assert!(!sized.is_growing(), "the sized index grew at {i}");
            grown_moved |= grown.is_growing();
        }
        assert!(grown_moved, "a default index grows on the way to 10,000");
        for (i, n) in names.iter().enumerate() {
            assert_eq!(sized.get(n, id_of), Some(i as u32));
        }
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

    // Proves: while the index grows (a move from the old table under way at most sizes),
    // every id is found, re-pointed, and removed wherever it sits, and nothing is lost or
    // found twice.
    #[test]
    fn ids_stay_found_while_the_index_grows() {
        let n = 5_000u32;
        let names: Vec<String> = (0..n).map(|i| format!("job-{i}")).collect();
        // Places k and k + n both hold id k.
        let id_of = |p: u32| names[(p % n) as usize].as_str();
        let mut index = IdIndex::<u32>::default();
        // Where each id should be found.
        let mut want: Vec<Option<u32>> = vec![None; n as usize];
        let mut checks_while_moving = 0;
        for i in 0..n {
            index.insert(&names[i as usize], i, id_of);
            want[i as usize] = Some(i);
            if i % 7 == 3 {
                let k = i / 2;
                index.insert(&names[k as usize], k + n, id_of);
                want[k as usize] = Some(k + n);
            }
            if i % 11 == 5 {
                let k = i / 3;
                if let Some(at) = want[k as usize].take() {
                    assert!(index.remove_at(&names[k as usize], at), "{k}");
                    assert!(!index.remove_at(&names[k as usize], at), "{k} twice");
                }
            }
            let live = want.iter().filter(|w| w.is_some()).count();
            assert_eq!(index.len(), live, "after {i}");
            if !index.old.is_empty() {
                checks_while_moving += 1;
            }
            for k in (0..=i).step_by(1 + i as usize / 50) {
                assert_eq!(
                    index.get(&names[k as usize], id_of),
                    want[k as usize],
                    "{k} at {i}"
                );
            }
        }
        assert!(checks_while_moving > 300, "{checks_while_moving}");
    }
}
