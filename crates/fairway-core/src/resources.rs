//! Named resources and resource vectors.
//!
//! A job's demand, a worker's capacity, a tenant's guarantee and limit are all vectors over named
//! resources (`cpu`, `mem`, `gpu`, or any downstream slot such as `db_conn`). Names are interned
//! into small ids in the order they are first seen, and amounts are fixed-point millionths, so
//! that adding and removing allocations never drifts and capacity is never over-allocated by a
//! rounding error.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Millionths of a resource unit per unit.
pub const AMOUNT_SCALE: u64 = 1_000_000;
/// Parts per billion: the fixed-point scale of shares (fractions of a capacity).
pub const SHARE_SCALE: u64 = 1_000_000_000;

/// The interned id of a resource name.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug)]
pub struct ResourceId(pub u16);

/// The demand of a job that declares none.
pub(crate) const DEFAULT_DEMAND: [(&str, f64); 1] = [("cpu", 1.0)];

/// The names of all resources seen so far, in order of first appearance.
#[derive(Clone, Debug, Default)]
pub struct ResourceTable {
    names: Vec<String>,
    ids: BTreeMap<String, ResourceId>,
    /// [`DEFAULT_DEMAND`] as a vector, once built: most jobs declare no demand, and an
    /// interned id never changes.
    default_demand: Option<ResVec>,
}

/// The most resource names one engine accepts.
pub const MAX_RESOURCES: usize = 64;

impl ResourceTable {
    /// The id of `name`, registering it if new; `None` when the table is full.
    pub fn intern(&mut self, name: &str) -> Option<ResourceId> {
        if let Some(id) = self.ids.get(name) {
            return Some(*id);
        }
        if self.names.len() >= MAX_RESOURCES {
            return None;
        }
        let id = ResourceId(self.names.len() as u16);
        self.names.push(name.to_string());
        self.ids.insert(name.to_string(), id);
        Some(id)
    }

    /// The demand of a job that declares none (`cpu = 1`) as a vector, registering its names
    /// the first time.
    pub fn default_demand(&mut self) -> Result<ResVec, String> {
        if let Some(v) = &self.default_demand {
            return Ok(v.clone());
        }
        let v = self.vector_of(DEFAULT_DEMAND)?;
        self.default_demand = Some(v.clone());
        Ok(v)
    }

    /// The id of `name`, if it was registered.
    pub fn get(&self, name: &str) -> Option<ResourceId> {
        self.ids.get(name).copied()
    }

    /// The name of `id`.
    pub fn name(&self, id: ResourceId) -> &str {
        &self.names[id.0 as usize]
    }

    /// How many resources are registered.
    pub fn len(&self) -> usize {
        self.names.len()
    }

    /// Whether no resource is registered.
    pub fn is_empty(&self) -> bool {
        self.names.is_empty()
    }

    /// Converts a named map of decimal amounts into a vector, registering new names.
    pub fn vector(&mut self, amounts: &BTreeMap<String, f64>) -> Result<ResVec, String> {
        self.vector_of(
            amounts
                .iter()
                .map(|(name, amount)| (name.as_str(), *amount)),
        )
    }

    /// [`ResourceTable::vector`] of named amounts however they are held (no map built for
    /// them).
    pub fn vector_of<'a>(
        &mut self,
        amounts: impl IntoIterator<Item = (&'a str, f64)>,
    ) -> Result<ResVec, String> {
        let mut v = ResVec::default();
        for (name, amount) in amounts {
            let id = self.intern(name).ok_or_else(|| {
                format!("too many distinct resource names (at most {MAX_RESOURCES})")
            })?;
            v.set(
                id,
                amount_from_f64(amount).ok_or_else(|| {
                    format!("resource {name:?}: amount {amount} must be a finite number >= 0")
                })?,
            );
        }
        Ok(v)
    }

    /// A named map of decimal amounts (for reports and explanations).
    pub fn named(&self, v: &ResVec) -> BTreeMap<String, f64> {
        v.iter()
            .filter(|(_, a)| *a > 0)
            .map(|(id, a)| (self.name(id).to_string(), amount_to_f64(a)))
            .collect()
    }
}

/// A decimal amount as fixed-point millionths; `None` if negative, NaN or absurdly large.
pub fn amount_from_f64(value: f64) -> Option<u64> {
    if !value.is_finite() || value < 0.0 {
        return None;
    }
    let micros = (value * AMOUNT_SCALE as f64).round();
    if micros > 1e18 {
        return None;
    }
    Some(micros as u64)
}

/// Fixed-point millionths as a decimal amount.
pub fn amount_to_f64(micros: u64) -> f64 {
    micros as f64 / AMOUNT_SCALE as f64
}

/// Vectors of up to this many resources live inline, without a heap allocation.
const INLINE: usize = 4;

/// The storage of a [`ResVec`]: inline for the common case of a few resources. Inline, the
/// entries past the length are always zero, so that arithmetic on two inline vectors can work
/// on the whole arrays, without bounds or lengths to reconcile, and recompute the length after.
#[derive(Clone)]
enum Amounts {
    Inline(u8, [u64; INLINE]),
    Heap(Vec<u64>),
}

impl Amounts {
    #[inline]
    fn as_slice(&self) -> &[u64] {
        match self {
            Amounts::Inline(n, a) => &a[..*n as usize],
            Amounts::Heap(v) => v,
        }
    }

    #[inline]
    fn as_mut_slice(&mut self) -> &mut [u64] {
        match self {
            Amounts::Inline(n, a) => &mut a[..*n as usize],
            Amounts::Heap(v) => v,
        }
    }

    /// Grows (with zeros) or shrinks to `len` entries.
    fn resize(&mut self, len: usize) {
        match self {
            Amounts::Inline(n, a) if len <= INLINE => {
                for x in a.iter_mut().take(len).skip(*n as usize) {
                    *x = 0;
                }
                *n = len as u8;
            }
            Amounts::Inline(n, a) => {
                let mut v = a[..*n as usize].to_vec();
                v.resize(len, 0);
                *self = Amounts::Heap(v);
            }
            Amounts::Heap(v) => v.resize(len, 0),
        }
    }

    /// The canonical length of inline amounts: one past the last non-zero entry.
    #[inline]
    fn inline_len(a: &[u64; INLINE]) -> u8 {
        let mut n = INLINE;
        while n > 0 && a[n - 1] == 0 {
            n -= 1;
        }
        n as u8
    }

    fn from_slice(values: &[u64]) -> Amounts {
        if values.len() <= INLINE {
            let mut a = [0; INLINE];
            a[..values.len()].copy_from_slice(values);
            Amounts::Inline(values.len() as u8, a)
        } else {
            Amounts::Heap(values.to_vec())
        }
    }
}

/// Panics for the first resource where `take` exceeds `held`: the engine's books are wrong.
#[cold]
#[inline(never)]
fn underflow(held: &[u64], take: &[u64]) -> ! {
    let (i, (t, h)) = take
        .iter()
        .zip(held)
        .enumerate()
        .find(|(_, (t, h))| t > h)
        .expect("an amount taken exceeds the amount held");
    panic!("resource accounting underflow: releasing {t} of resource {i} with {h} held")
}

/// `amount` as a share of `capacity` in parts per billion; `u64::MAX` when there is no capacity.
#[inline]
fn share_ppb(amount: u64, capacity: u64) -> u64 {
    if capacity == 0 {
        return u64::MAX;
    }
    u64::try_from(amount as u128 * SHARE_SCALE as u128 / capacity as u128).unwrap_or(u64::MAX)
}

/// A cap on some resources: those it names are capped at their amounts (zero included); the
/// others are not limited. A tenant's `limit = { cpu = 24 }` caps CPU and leaves GPUs alone.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Limit {
    amounts: ResVec,
    /// Bit `i` set: resource `i` is capped.
    named: u64,
}

impl Limit {
    /// Caps resource `id` at `amount`.
    pub fn set(&mut self, id: ResourceId, amount: u64) {
        self.amounts.set(id, amount);
        self.named |= 1u64 << id.0;
    }

    /// Whether `usage` plus `times` copies of `extra` stays within the cap.
    pub fn admits(&self, usage: &ResVec, extra: &ResVec, times: u64) -> bool {
        self.capped().all(|(id, cap)| {
            usage
                .get(id)
                .saturating_add(extra.get(id).saturating_mul(times))
                <= cap
        })
    }

    /// How many copies of `demand` fit on top of `usage` under the cap (`u64::MAX` when it caps
    /// nothing `demand` asks for; zero when `usage` is already over it).
    pub fn copies_within(&self, usage: &ResVec, demand: &ResVec) -> u64 {
        let mut copies = u64::MAX;
        for (id, cap) in self.capped() {
            let Some(left) = cap.checked_sub(usage.get(id)) else {
                return 0;
            };
            if let Some(fit) = left.checked_div(demand.get(id)) {
                copies = copies.min(fit);
            }
        }
        copies
    }

    /// The capped resources and their caps.
    pub fn capped(&self) -> impl Iterator<Item = (ResourceId, u64)> + '_ {
        (0..MAX_RESOURCES as u16)
            .filter(|i| self.named & (1u64 << i) != 0)
            .map(|i| (ResourceId(i), self.amounts.get(ResourceId(i))))
    }
}

/// A vector of amounts indexed by [`ResourceId`]; missing entries are zero. The stored form is
/// canonical (no trailing zeros) so that equal vectors compare and hash equal. Up to four
/// resources are stored inline, so that the engine's arithmetic on them does not allocate.
#[derive(Clone)]
pub struct ResVec(Amounts);

impl Default for ResVec {
    fn default() -> Self {
        ResVec(Amounts::Inline(0, [0; INLINE]))
    }
}

impl PartialEq for ResVec {
    fn eq(&self, other: &Self) -> bool {
        self.0.as_slice() == other.0.as_slice()
    }
}

impl Eq for ResVec {}

impl std::hash::Hash for ResVec {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.0.as_slice().hash(state);
    }
}

impl PartialOrd for ResVec {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for ResVec {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.0.as_slice().cmp(other.0.as_slice())
    }
}

impl std::fmt::Debug for ResVec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("ResVec").field(&self.0.as_slice()).finish()
    }
}

impl Serialize for ResVec {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        // The wire form of a newtype around a sequence of amounts.
        s.serialize_newtype_struct("ResVec", self.0.as_slice())
    }
}

impl<'de> Deserialize<'de> for ResVec {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(rename = "ResVec")]
        struct Wire(Vec<u64>);
        let Wire(v) = Wire::deserialize(d)?;
        let mut out = ResVec(Amounts::from_slice(&v));
        out.trim();
        Ok(out)
    }
}

impl ResVec {
    #[inline]
    fn slice(&self) -> &[u64] {
        self.0.as_slice()
    }

    /// The amount of resource `id`.
    #[inline]
    pub fn get(&self, id: ResourceId) -> u64 {
        self.slice().get(id.0 as usize).copied().unwrap_or(0)
    }

    /// Sets the amount of resource `id`.
    pub fn set(&mut self, id: ResourceId, amount: u64) {
        let i = id.0 as usize;
        if i >= self.slice().len() {
            if amount == 0 {
                return;
            }
            self.0.resize(i + 1);
        }
        self.0.as_mut_slice()[i] = amount;
        self.trim();
    }

    fn trim(&mut self) {
        if let Amounts::Inline(n, a) = &mut self.0 {
            *n = Amounts::inline_len(a);
            return;
        }
        let mut n = self.slice().len();
        while n > 0 && self.slice()[n - 1] == 0 {
            n -= 1;
        }
        if n != self.slice().len() {
            self.0.resize(n);
        }
    }

    /// Whether every amount is zero.
    pub fn is_zero(&self) -> bool {
        self.slice().is_empty()
    }

    /// `(id, amount)` for every stored entry, zeros included.
    pub fn iter(&self) -> impl Iterator<Item = (ResourceId, u64)> + '_ {
        self.slice()
            .iter()
            .enumerate()
            .map(|(i, a)| (ResourceId(i as u16), *a))
    }

    /// Whether `self <= other` in every resource.
    #[inline]
    pub fn fits_in(&self, other: &ResVec) -> bool {
        let o = other.slice();
        self.slice()
            .iter()
            .enumerate()
            .all(|(i, a)| *a <= o.get(i).copied().unwrap_or(0))
    }

    /// Whether `self` fits in what `used` leaves of `capacity`: `self <= capacity - used`,
    /// each amount, without building the difference (a scheduling pass asks it of every
    /// waiting worker).
    #[inline]
    pub fn fits_beside(&self, used: &ResVec, capacity: &ResVec) -> bool {
        if let (Amounts::Inline(_, d), Amounts::Inline(_, u), Amounts::Inline(_, c)) =
            (&self.0, &used.0, &capacity.0)
        {
            let mut fits = true;
            for i in 0..INLINE {
                fits &= d[i] <= c[i].saturating_sub(u[i]);
            }
            return fits;
        }
        let (u, c) = (used.slice(), capacity.slice());
        self.slice().iter().enumerate().all(|(i, d)| {
            let free = c.get(i).copied().unwrap_or(0);
            *d <= free.saturating_sub(u.get(i).copied().unwrap_or(0))
        })
    }

    /// Whether `self`, used of `capacity`, leaves nothing free: no amount of any resource.
    #[inline]
    pub fn exhausts(&self, capacity: &ResVec) -> bool {
        if let (Amounts::Inline(_, u), Amounts::Inline(_, c)) = (&self.0, &capacity.0) {
            let mut full = true;
            for i in 0..INLINE {
                full &= u[i] >= c[i];
            }
            return full;
        }
        let u = self.slice();
        capacity
            .slice()
            .iter()
            .enumerate()
            .all(|(i, c)| u.get(i).copied().unwrap_or(0) >= *c)
    }

    /// Adds `other`, saturating.
    pub fn add(&mut self, other: &ResVec) {
        self.add_times(other, 1);
    }

    /// Adds `other` times `n`, saturating.
    pub fn add_times(&mut self, other: &ResVec, n: u64) {
        if let (Amounts::Inline(len, a), Amounts::Inline(b_len, b)) = (&mut self.0, &other.0) {
            // Whole arrays, no branch per entry (the engine adds a demand a dozen times a
            // decision, mostly once over). Adding never zeroes an entry, so the length is the
            // longer of the two, or unchanged when nothing is added.
            if n == 1 {
                for i in 0..INLINE {
                    a[i] = a[i].saturating_add(b[i]);
                }
            } else {
                for i in 0..INLINE {
                    a[i] = a[i].saturating_add(b[i].saturating_mul(n));
                }
            }
            if n > 0 {
                *len = (*len).max(*b_len);
            }
            return;
        }
        let o = other.slice();
        if o.len() > self.slice().len() {
            self.0.resize(o.len());
        }
        for (x, a) in self.0.as_mut_slice().iter_mut().zip(o) {
            *x = x.saturating_add(a.saturating_mul(n));
        }
        self.trim();
    }

    /// Subtracts `other` times `n`. Panics if any amount would go negative: the engine never
    /// releases more than it allocated, and a violation means its books are wrong.
    pub fn sub_times(&mut self, other: &ResVec, n: u64) {
        if let (Amounts::Inline(len, a), Amounts::Inline(_, b)) = (&mut self.0, &other.0) {
            // Whole arrays: the amounts taken, one check over all of them, then the
            // subtraction, without a branch per entry.
            let mut take = *b;
            if n != 1 {
                for t in take.iter_mut() {
                    *t = t.saturating_mul(n);
                }
            }
            let mut under = false;
            for i in 0..INLINE {
                under |= take[i] > a[i];
            }
            if under {
                underflow(a, &take);
            }
            for i in 0..INLINE {
                a[i] -= take[i];
            }
            *len = Amounts::inline_len(a);
            return;
        }
        let o = other.slice();
        for (i, a) in o.iter().enumerate() {
            let take = a.saturating_mul(n);
            let have = self.slice().get(i).copied().unwrap_or(0);
            assert!(
                take <= have,
                "resource accounting underflow: releasing {take} of resource {i} with {have} held"
            );
            if take > 0 {
                self.0.as_mut_slice()[i] = have - take;
            }
        }
        self.trim();
    }

    /// `self - other` per resource, flooring at zero.
    pub fn saturating_minus(&self, other: &ResVec) -> ResVec {
        if let (Amounts::Inline(_, a), Amounts::Inline(_, b)) = (&self.0, &other.0) {
            let mut out = [0; INLINE];
            for ((o, x), y) in out.iter_mut().zip(a).zip(b) {
                *o = x.saturating_sub(*y);
            }
            return ResVec(Amounts::Inline(Amounts::inline_len(&out), out));
        }
        let mut out = self.clone();
        let o = other.slice();
        for (i, v) in out.0.as_mut_slice().iter_mut().enumerate() {
            *v = v.saturating_sub(o.get(i).copied().unwrap_or(0));
        }
        out.trim();
        out
    }

    /// `self` times `n`, saturating.
    pub fn times(&self, n: u64) -> ResVec {
        // A non-zero amount times a non-zero `n` stays non-zero: the length is kept.
        match n {
            0 => return ResVec::default(),
            1 => return self.clone(),
            _ => {}
        }
        let mut out = self.clone();
        for v in out.0.as_mut_slice() {
            *v = v.saturating_mul(n);
        }
        out
    }

    /// Each amount times `ppb / SHARE_SCALE`, rounded down.
    pub fn scaled_ppb(&self, ppb: u64) -> ResVec {
        let mut out = self.clone();
        for v in out.0.as_mut_slice() {
            *v = (*v as u128 * ppb as u128 / SHARE_SCALE as u128) as u64;
        }
        out.trim();
        out
    }

    /// The largest share of `capacity` this vector takes, in parts per billion: the dominant
    /// share. A resource demanded but absent from `capacity` counts as `u64::MAX`.
    pub fn dominant_share_ppb(&self, capacity: &ResVec) -> u64 {
        let cap = capacity.slice();
        let mut best = 0u64;
        for (i, a) in self.slice().iter().enumerate() {
            if *a == 0 {
                continue;
            }
            best = best.max(share_ppb(*a, cap.get(i).copied().unwrap_or(0)));
        }
        best
    }

    /// The dominant share of the part of this vector above `floor`, relative to `capacity`:
    /// `max over r of max(0, self[r] - floor[r]) / capacity[r]`, in parts per billion.
    pub fn dominant_share_above_ppb(&self, floor: &ResVec, capacity: &ResVec) -> u64 {
        let (cap, floor) = (capacity.slice(), floor.slice());
        let mut best = 0u64;
        for (i, a) in self.slice().iter().enumerate() {
            let above = a.saturating_sub(floor.get(i).copied().unwrap_or(0));
            if above > 0 {
                best = best.max(share_ppb(above, cap.get(i).copied().unwrap_or(0)));
            }
        }
        best
    }

    /// How many copies of `unit` fit in this vector (`u64::MAX` when `unit` is zero).
    pub fn copies_of(&self, unit: &ResVec) -> u64 {
        let have = self.slice();
        let mut n = u64::MAX;
        for (i, a) in unit.slice().iter().enumerate() {
            if *a == 0 {
                continue;
            }
            n = n.min(have.get(i).copied().unwrap_or(0) / a);
        }
        n
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(pairs: &[(u16, u64)]) -> ResVec {
        let mut out = ResVec::default();
        for (i, a) in pairs {
            out.set(ResourceId(*i), *a);
        }
        out
    }

    #[test]
    fn fits_beside_and_exhausts_read_the_free_capacity() {
        let cases = [
            (v(&[(0, 2)]), v(&[(0, 3)]), v(&[(0, 5)])),
            (v(&[(0, 3)]), v(&[(0, 3)]), v(&[(0, 5)])),
            (v(&[(0, 1), (1, 1)]), v(&[(0, 1)]), v(&[(0, 5)])),
            (v(&[]), v(&[(0, 9)]), v(&[(0, 5)])),
            (v(&[(0, 1)]), v(&[(1, 9)]), v(&[(0, 1), (1, 1)])),
            (v(&[(6, 1)]), v(&[(6, 1)]), v(&[(6, 2)])),
            (v(&[(6, 2)]), v(&[(6, 1)]), v(&[(6, 2)])),
        ];
        for (demand, used, capacity) in cases {
            let free = capacity.saturating_minus(&used);
            assert_eq!(
                used.exhausts(&capacity),
                free.is_zero(),
                "{used:?} of {capacity:?}"
            );
            assert_eq!(
                demand.fits_beside(&used, &capacity),
                demand.fits_in(&free),
                "{demand:?} beside {used:?} in {capacity:?}"
            );
        }
    }

    #[test]
    fn vectors_are_canonical_and_exact() {
        let mut a = v(&[(0, 5), (2, 0)]);
        assert_eq!(a, v(&[(0, 5)]));
        a.add(&v(&[(1, 3)]));
        a.sub_times(&v(&[(1, 3)]), 1);
        assert_eq!(a, v(&[(0, 5)]));
        assert!(v(&[(0, 2)]).fits_in(&v(&[(0, 2), (1, 1)])));
        assert!(!v(&[(1, 2)]).fits_in(&v(&[(0, 2)])));
        assert_eq!(v(&[(0, 9), (1, 4)]).copies_of(&v(&[(0, 2), (1, 1)])), 4);
    }

    #[test]
    fn dominant_share_is_the_largest_fraction() {
        let cap = v(&[(0, 9), (1, 18)]);
        // The DRF paper's user A task: <1 CPU, 4 GB> of <9 CPU, 18 GB>: dominant is memory, 2/9.
        assert_eq!(v(&[(0, 1), (1, 4)]).dominant_share_ppb(&cap), 222_222_222);
        assert_eq!(v(&[(2, 1)]).dominant_share_ppb(&cap), u64::MAX);
        assert_eq!(
            v(&[(0, 4)]).dominant_share_above_ppb(&v(&[(0, 3)]), &cap),
            111_111_111
        );
    }

    #[test]
    #[should_panic(expected = "underflow")]
    fn releasing_more_than_held_is_a_bug() {
        let mut a = v(&[(0, 1)]);
        a.sub_times(&v(&[(0, 2)]), 1);
    }

    #[test]
    #[should_panic(expected = "underflow")]
    fn releasing_more_than_held_is_a_bug_beside_a_larger_vector() {
        let mut a = v(&[(0, 1), (5, 1)]);
        a.sub_times(&v(&[(0, 2)]), 1);
    }

    /// Amounts as a plain vector, trailing zeros dropped: the reference the stored forms
    /// (inline and on the heap) must agree with.
    fn plain(v: &ResVec) -> Vec<u64> {
        let mut out: Vec<u64> = (0..8).map(|i| v.get(ResourceId(i))).collect();
        while out.last() == Some(&0) {
            out.pop();
        }
        out
    }

    fn from_plain(a: &[u64]) -> ResVec {
        let mut out = ResVec::default();
        for (i, x) in a.iter().enumerate() {
            out.set(ResourceId(i as u16), *x);
        }
        out
    }

    fn amounts() -> impl proptest::strategy::Strategy<Value = Vec<u64>> {
        use proptest::prelude::*;
        // Few distinct values, so that equal amounts, zeros and exact subtractions are common;
        // up to 7 resources, so that both stored forms (inline up to 4) meet.
        proptest::collection::vec(prop_oneof![Just(0u64), 1u64..4, Just(u64::MAX - 1)], 0..7)
    }

    proptest::proptest! {
        // Proves: the arithmetic's fast path for two inline vectors and its general path give
        // the same canonical vector as plain per-resource arithmetic, whichever forms meet.
        #[test]
        fn arithmetic_agrees_with_plain_amounts(a in amounts(), b in amounts(), n in 0u64..3) {
            let (va, vb) = (from_plain(&a), from_plain(&b));
            let at = |x: &[u64], i: usize| x.get(i).copied().unwrap_or(0);
            let width = a.len().max(b.len());
            let canonical = |mut x: Vec<u64>| {
                while x.last() == Some(&0) {
                    x.pop();
                }
                x
            };
            let mut sum = va.clone();
            sum.add_times(&vb, n);
            let want: Vec<u64> = (0..width)
                .map(|i| at(&a, i).saturating_add(at(&b, i).saturating_mul(n)))
                .collect();
            proptest::prop_assert_eq!(plain(&sum), canonical(want.clone()));
            proptest::prop_assert_eq!(&sum, &from_plain(&want), "canonical, so equal");

            let multiple: Vec<u64> = b.iter().map(|x| x.saturating_mul(n)).collect();
            proptest::prop_assert_eq!(&vb.times(n), &from_plain(&multiple), "canonical, so equal");

            let minus: Vec<u64> = (0..width).map(|i| at(&a, i).saturating_sub(at(&b, i))).collect();
            let got = va.saturating_minus(&vb);
            proptest::prop_assert_eq!(plain(&got), canonical(minus.clone()));
            proptest::prop_assert_eq!(&got, &from_plain(&minus));
            proptest::prop_assert_eq!(got.is_zero(), minus.iter().all(|x| *x == 0));

            let cap = v(&[(0, 2), (1, 4), (2, 1), (4, 8), (5, 3)]);
            proptest::prop_assert_eq!(
                va.dominant_share_above_ppb(&vb, &cap),
                got.dominant_share_ppb(&cap)
            );

            // Releasing what was added gives the vector back.
            let mut back = sum.clone();
            if want.iter().all(|x| *x != u64::MAX) {
                back.sub_times(&vb, n);
                proptest::prop_assert_eq!(&back, &va);
            }
            // Releasing less than is held (more panics: the two tests above).
            if (0..width).all(|i| at(&b, i).saturating_mul(n) <= at(&a, i)) {
                let mut x = va.clone();
                x.sub_times(&vb, n);
                let want: Vec<u64> =
                    (0..width).map(|i| at(&a, i) - at(&b, i).saturating_mul(n)).collect();
                proptest::prop_assert_eq!(&x, &from_plain(&want));
            }
        }
    }
}
