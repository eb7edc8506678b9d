//! An ordered map for the few entries a tree node keeps per (group, shape).
//!
//! A node's counts, keys and child indexes, and a leaf's sub-queues, usually hold one entry: one
//! placement group, one job shape. As `BTreeMap`s each was a heap node of its own, and reaching
//! it was a cache miss of its own; with 10^4 tenants every decision serves a tenant that is cold
//! in the cache, so a decision paid those misses one after the other. One entry lives here
//! inline, in the node itself; more spill to a vector sorted by key, searched by bisection.
//! Iteration is in key order, as a `BTreeMap`'s. A leaf's list of head shapes is kept the same
//! way ([`SmallList`]).

/// A map ordered by key: one entry inline, more in a sorted vector.
#[derive(Clone, Debug)]
pub(crate) enum SmallMap<K, V> {
    /// No entry or one, without a heap allocation.
    One(Option<(K, V)>),
    /// Two entries or more, sorted by key, each key once.
    Many(Vec<(K, V)>),
}

impl<K, V> Default for SmallMap<K, V> {
    fn default() -> Self {
        SmallMap::One(None)
    }
}

impl<K: Ord + Copy, V> SmallMap<K, V> {
    /// The entries in key order.
    #[inline]
    pub fn as_slice(&self) -> &[(K, V)] {
        match self {
            SmallMap::One(None) => &[],
            SmallMap::One(Some(e)) => std::slice::from_ref(e),
            SmallMap::Many(v) => v,
        }
    }

    #[inline]
    fn as_mut_slice(&mut self) -> &mut [(K, V)] {
        match self {
            SmallMap::One(None) => &mut [],
            SmallMap::One(Some(e)) => std::slice::from_mut(e),
            SmallMap::Many(v) => v,
        }
    }

    #[inline]
    fn find(&self, key: &K) -> Result<usize, usize> {
        self.as_slice().binary_search_by(|(k, _)| k.cmp(key))
    }

    pub fn len(&self) -> usize {
        self.as_slice().len()
    }

    #[inline]
    pub fn get(&self, key: &K) -> Option<&V> {
        let i = self.find(key).ok()?;
        Some(&self.as_slice()[i].1)
    }

    #[inline]
    pub fn get_mut(&mut self, key: &K) -> Option<&mut V> {
        let i = self.find(key).ok()?;
        Some(&mut self.as_mut_slice()[i].1)
    }

    pub fn contains_key(&self, key: &K) -> bool {
        self.find(key).is_ok()
    }

    /// The value of `key`, inserting `make()` first if it has none.
    pub fn get_or_insert_with(&mut self, key: K, make: impl FnOnce() -> V) -> &mut V {
        let i = match self.find(&key) {
            Ok(i) => i,
            Err(i) => {
                self.insert_at(i, key, make());
                i
            }
        };
        &mut self.as_mut_slice()[i].1
    }

    /// Sets `key` to `value`; the value it had, if any.
    pub fn insert(&mut self, key: K, value: V) -> Option<V> {
        match self.find(&key) {
            Ok(i) => Some(std::mem::replace(&mut self.as_mut_slice()[i].1, value)),
            Err(i) => {
                self.insert_at(i, key, value);
                None
            }
        }
    }

    /// Puts a new entry at position `i` of the key order.
    fn insert_at(&mut self, i: usize, key: K, value: V) {
        match self {
            SmallMap::One(slot @ None) => *slot = Some((key, value)),
            SmallMap::One(Some(_)) => {
                let SmallMap::One(Some(first)) = std::mem::take(self) else {
                    unreachable!("one entry")
                };
                let mut v = Vec::with_capacity(2);
                v.push(first);
                v.insert(i, (key, value));
                *self = SmallMap::Many(v);
            }
            SmallMap::Many(v) => v.insert(i, (key, value)),
        }
    }

    /// Removes `key`; the value it had, if any. A map left with one entry keeps it inline.
    pub fn remove(&mut self, key: &K) -> Option<V> {
        let i = self.find(key).ok()?;
        match self {
            SmallMap::One(slot) => slot.take().map(|(_, v)| v),
            SmallMap::Many(v) => {
                let (_, value) = v.remove(i);
                if v.len() <= 1 {
                    *self = SmallMap::One(v.pop());
                }
                Some(value)
            }
        }
    }

    /// The keys in order.
    pub fn keys(&self) -> impl Iterator<Item = &K> {
        self.as_slice().iter().map(|(k, _)| k)
    }

    /// The entries with keys from `low` to `high`, both included, in key order.
    pub fn range(&self, low: &K, high: &K) -> impl Iterator<Item = (&K, &V)> {
        let entries = self.as_slice();
        let from = entries.partition_point(|(k, _)| k < low);
        entries[from..]
            .iter()
            .take_while(move |(k, _)| k <= high)
            .map(|(k, v)| (k, v))
    }
}

impl<'a, K: Ord + Copy, V> IntoIterator for &'a SmallMap<K, V> {
    type Item = (&'a K, &'a V);
    type IntoIter = std::iter::Map<std::slice::Iter<'a, (K, V)>, fn(&'a (K, V)) -> (&'a K, &'a V)>;

    fn into_iter(self) -> Self::IntoIter {
        self.as_slice().iter().map(|(k, v)| (k, v))
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
    }

    fn op() -> impl Strategy<Value = Op> {
        // Few keys, so that maps grow past one entry and shrink back to it and to none.
        prop_oneof![
            (0u8..5, any::<u32>()).prop_map(|(k, v)| Op::Insert(k, v)),
            (0u8..5).prop_map(Op::Remove),
            (0u8..5).prop_map(Op::Bump),
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
        // Proves: every operation answers as a BTreeMap's does, and the map then holds the
        // same entries in the same order, inline or spilled.
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
                }
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
