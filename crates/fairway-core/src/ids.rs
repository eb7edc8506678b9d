//! Dense indices for the engine's tables. They are internal: outside the engine, jobs, tenants
//! and workers are named by strings.

macro_rules! index {
    ($(#[$m:meta])* $name:ident) => {
        $(#[$m])*
        #[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug, Default)]
        pub struct $name(pub u32);
        impl $name {
            /// The index as a `usize`.
            #[inline]
            pub fn ix(self) -> usize {
                self.0 as usize
            }
        }
    };
}

index!(
    /// A job's slot in the job table.
    JobIdx
);
index!(
    /// A node of the scheduling tree.
    NodeIdx
);
index!(
    /// An interned job shape.
    ShapeId
);
index!(
    /// A placement group: workers with the same pool, labels and capacity.
    GroupId
);
index!(
    /// A worker's slot in the worker table.
    WorkerIdx
);
index!(
    /// A tenant's slot in the tenant table.
    TenantIdx
);
index!(
    /// A pool's slot in the pool table (pools are never removed).
    PoolIdx
);

/// A short list kept inline (no heap allocation): a node's ancestors or a tenant's chain of
/// parents, whose length the tenant tree's depth bounds.
#[derive(Clone, Copy)]
pub struct Chain<T: Copy + Default, const N: usize> {
    len: u8,
    items: [T; N],
}

impl<T: Copy + Default, const N: usize> Default for Chain<T, N> {
    fn default() -> Self {
        Chain {
            len: 0,
            items: [T::default(); N],
        }
    }
}

impl<T: Copy + Default, const N: usize> Chain<T, N> {
    /// Appends `item`; the bound is an invariant of the tree's depth.
    pub fn push(&mut self, item: T) {
        assert!(
            (self.len as usize) < N,
            "chain longer than {N}: the tenant tree is deeper than its bound"
        );
        self.items[self.len as usize] = item;
        self.len += 1;
    }

    /// The items.
    pub fn as_slice(&self) -> &[T] {
        &self.items[..self.len as usize]
    }

    /// `len` copies of `value`.
    pub fn filled(value: T, len: usize) -> Self {
        let mut out = Chain::default();
        (0..len).for_each(|_| out.push(value));
        out
    }

    /// The items, mutably.
    pub fn as_mut_slice(&mut self) -> &mut [T] {
        &mut self.items[..self.len as usize]
    }

    /// Whether `item` is in the chain.
    pub fn contains(&self, item: &T) -> bool
    where
        T: PartialEq,
    {
        self.as_slice().contains(item)
    }
}

impl<T: Copy + Default, const N: usize> std::ops::Deref for Chain<T, N> {
    type Target = [T];

    fn deref(&self) -> &[T] {
        self.as_slice()
    }
}

impl<T: Copy + Default, const N: usize> FromIterator<T> for Chain<T, N> {
    /// Collects at most `N` items: more is a broken invariant, as for [`Chain::push`].
    fn from_iter<I: IntoIterator<Item = T>>(iter: I) -> Self {
        let mut out = Chain::default();
        iter.into_iter().for_each(|item| out.push(item));
        out
    }
}

impl<T: Copy + Default + PartialEq, const N: usize> PartialEq for Chain<T, N> {
    fn eq(&self, other: &Self) -> bool {
        self.as_slice() == other.as_slice()
    }
}

impl<T: Copy + Default + Eq, const N: usize> Eq for Chain<T, N> {}

impl<T: Copy + Default + std::fmt::Debug, const N: usize> std::fmt::Debug for Chain<T, N> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.as_slice()).finish()
    }
}

impl<T: Copy + Default, const N: usize> IntoIterator for Chain<T, N> {
    type Item = T;
    type IntoIter = std::iter::Take<std::array::IntoIter<T, N>>;

    fn into_iter(self) -> Self::IntoIter {
        self.items.into_iter().take(self.len as usize)
    }
}

/// The most links in a chain of tree nodes: tenant levels plus a band, with room to spare.
pub const CHAIN_MAX: usize = 12;
