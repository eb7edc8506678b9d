//! An ordered map for the few entries a tree node keeps per (group, shape).
//!
//! A node's counts, keys and child indexes, and a leaf's sub-queues, usually hold one entry: one
//! placement group, one job shape. As `BTreeMap`s each was a heap node of its own, and reaching
//! it was a cache miss of its own; with 10^4 tenants every decision serves a tenant that is cold
//! in the cache, so a decision paid those misses one after the other. One entry lives here
//! inline, in the node itself; more spill to a `BTreeMap`, so that a node with thousands of
//! (group, shape) entries (the root, when jobs come in many shapes) keeps O(log n) operations.
//! Iteration is in key order either way. A leaf's list of head shapes is kept the same way
//! ([`SmallList`]).

use std::collections::BTreeMap;
use std::collections::btree_map;

/// A map ordered by key: one entry inline, more in a `BTreeMap`.
#[derive(Clone, Debug)]
pub(crate) enum SmallMap<K, V> {
    /// No entry or one, without a heap allocation.
    One(Option<(K, V)>),
    /// Two entries or more.
    Many(BTreeMap<K, V>),
}

impl<K, V> Default for SmallMap<K, V> {
    fn default() -> Self {
        SmallMap::One(None)
    }
}

impl<K: Ord + Copy, V> SmallMap<K, V> {
    pub fn len(&self) -> usize {
        match self {
            SmallMap::One(e) => e.is_some() as usize,
            SmallMap::Many(m) => m.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    #[inline]
    pub fn get(&self, key: &K) -> Option<&V> {
        match self {
            SmallMap::One(Some((k, v))) if k == key => Some(v),
            SmallMap::One(_) => None,
            SmallMap::Many(m) => m.get(key),
        }
    }

    #[inline]
    pub fn get_mut(&mut self, key: &K) -> Option<&mut V> {
        match self {
            SmallMap::One(Some((k, v))) if k == key => Some(v),
            SmallMap::One(_) => None,
            SmallMap::Many(m) => m.get_mut(key),
        }
    }

    pub fn contains_key(&self, key: &K) -> bool {
        self.get(key).is_some()
    }

    /// The value of `key`, inserting `make()` first if it has none.
    pub fn get_or_insert_with(&mut self, key: K, make: impl FnOnce() -> V) -> &mut V {
        self.make_room(&key);
        match self {
            SmallMap::One(slot) => &mut slot.get_or_insert_with(|| (key, make())).1,
            SmallMap::Many(m) => m.entry(key).or_insert_with(make),
        }
    }

    /// Sets `key` to `value`; the value it had, if any.
    pub fn insert(&mut self, key: K, value: V) -> Option<V> {
        self.make_room(&key);
        match self {
            SmallMap::One(slot) => slot.replace((key, value)).map(|(_, v)| v),
            SmallMap::Many(m) => m.insert(key, value),
        }
    }

    /// Before `key` is set: an inline entry under another key moves into a `BTreeMap`.
    fn make_room(&mut self, key: &K) {
        if let SmallMap::One(slot @ Some(_)) = self
            && slot.as_ref().is_some_and(|(k, _)| k != key)
        {
            let m: BTreeMap<K, V> = slot.take().into_iter().collect();
            *self = SmallMap::Many(m);
        }
    }

    /// Removes `key`; the value it had, if any. A map left with one entry keeps it inline.
    pub fn remove(&mut self, key: &K) -> Option<V> {
        match self {
            SmallMap::One(slot) => match slot {
                Some((k, _)) if k == key => slot.take().map(|(_, v)| v),
                _ => None,
            },
            SmallMap::Many(m) => {
                let value = m.remove(key)?;
                if m.len() <= 1 {
                    *self = SmallMap::One(m.pop_first());
                }
                Some(value)
            }
        }
    }

    /// Moves the value of `old` to the key `new` (`new` must be absent or `old`); false when
    /// `old` has none. The map keeps its form: a re-key in a map of two entries neither frees
    /// nor allocates, as a removal and an insertion would.
    pub fn replace_key(&mut self, old: &K, new: K) -> bool {
        match self {
            SmallMap::One(Some((k, _))) if k == old => {
                *k = new;
                true
            }
            SmallMap::One(_) => false,
            // The key moved is most often at one end (the child just served, charged for
            // it): taken from there without a search.
            SmallMap::Many(m) if m.last_key_value().is_some_and(|(k, _)| k == old) => {
                let (_, value) = m.pop_last().expect("a last entry");
                m.insert(new, value);
                true
            }
            SmallMap::Many(m) if m.first_key_value().is_some_and(|(k, _)| k == old) => {
                let (_, value) = m.pop_first().expect("a first entry");
                m.insert(new, value);
                true
            }
            SmallMap::Many(m) => match m.remove(old) {
                Some(value) => {
                    m.insert(new, value);
                    true
                }
                None => false,
            },
        }
    }

    /// The largest key.
    #[inline]
    pub fn last_key(&self) -> Option<&K> {
        match self {
            SmallMap::One(e) => e.as_ref().map(|(k, _)| k),
            SmallMap::Many(m) => m.last_key_value().map(|(k, _)| k),
        }
    }

    /// The keys in order.
    pub fn keys(&self) -> impl Iterator<Item = &K> {
        self.into_iter().map(|(k, _)| k)
    }

    /// The entries with keys from `low` to `high`, both included, in key order.
    pub fn range(&self, low: &K, high: &K) -> SmallIter<'_, K, V> {
        match self {
            SmallMap::One(e) => SmallIter::One(
                e.as_ref()
                    .filter(|(k, _)| low <= k && k <= high)
                    .map(|(k, v)| (k, v)),
            ),
            SmallMap::Many(m) => SmallIter::Range(m.range(*low..=*high)),
        }
    }
}

/// The entries of a [`SmallMap`], or of a range of its keys, in key order.
pub(crate) enum SmallIter<'a, K, V> {
    One(Option<(&'a K, &'a V)>),
    All(btree_map::Iter<'a, K, V>),
    Range(btree_map::Range<'a, K, V>),
}

impl<'a, K, V> Iterator for SmallIter<'a, K, V> {
    type Item = (&'a K, &'a V);

    #[inline]
    fn next(&mut self) -> Option<Self::Item> {
        match self {
            SmallIter::One(e) => e.take(),
            SmallIter::All(it) => it.next(),
            SmallIter::Range(it) => it.next(),
        }
    }
}

impl<K, V> DoubleEndedIterator for SmallIter<'_, K, V> {
    #[inline]
    fn next_back(&mut self) -> Option<Self::Item> {
        match self {
            SmallIter::One(e) => e.take(),
            SmallIter::All(it) => it.next_back(),
            SmallIter::Range(it) => it.next_back(),
        }
    }
}

impl<'a, K: Ord + Copy, V> IntoIterator for &'a SmallMap<K, V> {
    type Item = (&'a K, &'a V);
    type IntoIter = SmallIter<'a, K, V>;

    fn into_iter(self) -> SmallIter<'a, K, V> {
        match self {
            SmallMap::One(e) => SmallIter::One(e.as_ref().map(|(k, v)| (k, v))),
            SmallMap::Many(m) => SmallIter::All(m.iter()),
        }
    }
}

/// A short list, usually of one item (a leaf's head shapes, one per placement group): one item
/// lives inline, more in a vector. It is set whole and read as a slice.
#[derive(Clone, Debug)]
pub(crate) enum SmallList<T> {
    One(Option<T>),
    Many(Vec<T>),
}

impl<T> Default for SmallList<T> {
    fn default() -> Self {
        SmallList::One(None)
    }
}

impl<T> From<Vec<T>> for SmallList<T> {
    fn from(mut items: Vec<T>) -> Self {
        if items.len() <= 1 {
            SmallList::One(items.pop())
        } else {
            SmallList::Many(items)
        }
    }
}

impl<T> FromIterator<T> for SmallList<T> {
    /// One item stays inline with no allocation; a second moves them all to a vector.
    fn from_iter<I: IntoIterator<Item = T>>(iter: I) -> Self {
        let mut iter = iter.into_iter();
        let Some(first) = iter.next() else {
            return SmallList::One(None);
        };
        let Some(second) = iter.next() else {
            return SmallList::One(Some(first));
        };
        let mut items = vec![first, second];
        items.extend(iter);
        SmallList::Many(items)
    }
}

impl<'a, T> IntoIterator for &'a SmallList<T> {
    type Item = &'a T;
    type IntoIter = std::slice::Iter<'a, T>;

    fn into_iter(self) -> Self::IntoIter {
        self.iter()
    }
}

impl<T> std::ops::Deref for SmallList<T> {
    type Target = [T];

    #[inline]
    fn deref(&self) -> &[T] {
        match self {
            SmallList::One(None) => &[],
            SmallList::One(Some(item)) => std::slice::from_ref(item),
            SmallList::Many(items) => items,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeMap;

    #[derive(Clone, Debug)]
    enum Op {
        Insert(u8, u32),
        Remove(u8),
        Bump(u8),
        Rekey(u8, u8),
    }

    fn op() -> impl Strategy<Value = Op> {
        // Few keys, so that maps grow past one entry and shrink back to it and to none.
        prop_oneof![
            (0u8..5, any::<u32>()).prop_map(|(k, v)| Op::Insert(k, v)),
            (0u8..5).prop_map(Op::Remove),
            (0u8..5).prop_map(Op::Bump),
            (0u8..5, 0u8..5).prop_map(|(old, new)| Op::Rekey(old, new)),
        ]
    }

    #[test]
    fn a_list_reads_back_what_it_was_set_to() {
        for n in 0..4u32 {
            let items: Vec<u32> = (0..n).collect();
            let list = SmallList::from(items.clone());
            assert_eq!(&*list, &items[..]);
            assert_eq!(matches!(list, SmallList::Many(_)), n > 1);
        }
    }

    proptest! {
        // Proves: every operation answers as a BTreeMap's does (a re-key as a removal and an
        // insertion), and the map then holds the same entries in the same order, inline or
        // spilled, with the same largest key, and reads back the same way.
        #[test]
        fn behaves_as_an_ordered_map(ops in proptest::collection::vec(op(), 0..40)) {
            let mut small = SmallMap::<u8, u32>::default();
            let mut model = BTreeMap::<u8, u32>::new();
            for op in ops {
                match op {
                    Op::Insert(k, v) => prop_assert_eq!(small.insert(k, v), model.insert(k, v)),
                    Op::Remove(k) => prop_assert_eq!(small.remove(&k), model.remove(&k)),
                    Op::Bump(k) => {
                        *small.get_or_insert_with(k, || 0) += 1;
                        *model.entry(k).or_insert(0) += 1;
                    }
                    // A re-key moves an entry to a key no other entry has.
                    Op::Rekey(old, new) if new == old || !model.contains_key(&new) => {
                        let moved = model.remove(&old).map(|v| model.insert(new, v)).is_some();
                        prop_assert_eq!(small.replace_key(&old, new), moved);
                    }
                    Op::Rekey(..) => {}
                }
                prop_assert_eq!(small.last_key(), model.last_key_value().map(|(k, _)| k));
                let backwards: Vec<u8> = (&small).into_iter().rev().map(|(k, _)| *k).collect();
                prop_assert_eq!(backwards, model.keys().rev().copied().collect::<Vec<u8>>());
                let entries: Vec<(u8, u32)> = (&small).into_iter().map(|(k, v)| (*k, *v)).collect();
                let want: Vec<(u8, u32)> = model.iter().map(|(k, v)| (*k, *v)).collect();
                prop_assert_eq!(&entries, &want);
                prop_assert_eq!(small.len(), model.len());
                prop_assert_eq!(matches!(small, SmallMap::Many(_)), model.len() > 1, "inline when it can be");
                for k in 0..6 {
                    prop_assert_eq!(small.get(&k), model.get(&k));
                    prop_assert_eq!(small.contains_key(&k), model.contains_key(&k));
                    for high in k..6 {
                        let got: Vec<u8> = small.range(&k, &high).map(|(k, _)| *k).collect();
                        let want: Vec<u8> = model.range(k..=high).map(|(k, _)| *k).collect();
                        prop_assert_eq!(got, want);
                    }
                }
            }
        }
    }
}
