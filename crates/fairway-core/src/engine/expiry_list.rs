//! Slots in the order their timers run out: a doubly linked list threaded through links that
//! the owner keeps, one per slot (a worker's in an array by worker slot, a running attempt's in
//! the attempt). The list reads each slot's expiry from its owner (a lease's end is the
//! attempt's `expires`), so there is one copy of it: the owner changes a listed slot's expiry
//! only by taking the slot off, changing it and putting it back.
//!
//! The engine's time never goes back and a timer's length rarely changes, so a timer set now
//! runs out last: putting a slot at its place is O(1) from the end, and taking one off is O(1),
//! where a `BTreeSet<(Time, slot)>` descends its tree twice for a move and allocates a node
//! whenever it goes from empty to one. An expiry earlier than the last one's walks back from the
//! end to its place: correct always, short as long as such expiries are few. Timers of several
//! lengths each get a list of their own ([`ExpiryLanes`]), so that no list walks back over
//! another length's timers.
//!
//! Slots due at the same instant sit in the order their timers were set; the `take_due`
//! functions hand them out in `(expiry, slot)` order, the order the tree gave.

use crate::time::Time;

/// No slot, no list.
const NONE: u32 = u32::MAX;

/// A slot's place in a list.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Link {
    prev: u32,
    next: u32,
    /// The list the slot is on (its owner's number for it), `NONE` if none.
    list: u32,
}

impl Link {
    /// On no list.
    pub const UNLISTED: Link = Link {
        prev: NONE,
        next: NONE,
        list: NONE,
    };

    /// The owner's number of the list the slot is on.
    pub fn list(&self) -> Option<u32> {
        (self.list != NONE).then_some(self.list)
    }
}

/// Where a list's links and expiries live: one of each per slot. These may panic for a slot
/// that has none (a list asks only for the slots on it, and for the one it is putting on it).
pub(crate) trait Links {
    /// When the slot's timer runs out: not to change while the slot is listed.
    fn at(&self, slot: u32) -> Time;
    fn link(&self, slot: u32) -> &Link;
    fn link_mut(&mut self, slot: u32) -> &mut Link;
}

/// A slot's expiry and link, for owners that keep no expiry of their own (workers).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Timed {
    pub at: Time,
    pub link: Link,
}

impl Timed {
    /// No expiry, on no list.
    pub const UNLISTED: Timed = Timed {
        at: Time::ZERO,
        link: Link::UNLISTED,
    };
}

/// Expiries and links by slot in an array; a slot past the end has none.
impl Links for Vec<Timed> {
    fn at(&self, slot: u32) -> Time {
        self[slot as usize].at
    }

    fn link(&self, slot: u32) -> &Link {
        &self[slot as usize].link
    }

    fn link_mut(&mut self, slot: u32) -> &mut Link {
        &mut self[slot as usize].link
    }
}

/// One list, earliest expiry first.
#[derive(Clone, Copy, Debug)]
pub(crate) struct ExpiryList {
    head: u32,
    tail: u32,
    len: usize,
}

impl Default for ExpiryList {
    fn default() -> Self {
        ExpiryList {
            head: NONE,
            tail: NONE,
            len: 0,
        }
    }
}

impl ExpiryList {
    /// The earliest expiry and its slot, if any slot is listed.
    pub fn first(&self, links: &impl Links) -> Option<(Time, u32)> {
        (self.head != NONE).then(|| (links.at(self.head), self.head))
    }

    /// Lists `slot` (on no list now) at its expiry, on this list, numbered `id` by its owner:
    /// after the last slot expiring no later.
    pub fn push(&mut self, links: &mut impl Links, id: u32, slot: u32) {
        debug_assert_eq!(links.link(slot).list, NONE, "a slot on one list at a time");
        let at = links.at(slot);
        let mut after = self.tail;
        while after != NONE && links.at(after) > at {
            after = links.link(after).prev;
        }
        let before = match after {
            NONE => self.head,
            a => links.link(a).next,
        };
        *links.link_mut(slot) = Link {
            prev: after,
            next: before,
            list: id,
        };
        match after {
            NONE => self.head = slot,
            a => links.link_mut(a).next = slot,
        }
        match before {
            NONE => self.tail = slot,
            b => links.link_mut(b).prev = slot,
        }
        self.len += 1;
    }

    /// Takes `slot`, which is on this list, off it.
    pub fn unlink(&mut self, links: &mut impl Links, slot: u32) {
        let link = std::mem::replace(links.link_mut(slot), Link::UNLISTED);
        self.close(links, link);
    }

    /// Joins the neighbours of a slot taken off this list, `link` its place there (the slot's
    /// own link already reset: one look-up of it, not two).
    fn close(&mut self, links: &mut impl Links, link: Link) {
        match link.prev {
            NONE => self.head = link.next,
            p => links.link_mut(p).next = link.next,
        }
        match link.next {
            NONE => self.tail = link.prev,
            n => links.link_mut(n).prev = link.prev,
        }
        self.len -= 1;
    }

    /// Takes off every slot expiring at `now` or earlier, adding `(expiry, slot)` to `due` in
    /// list order.
    pub fn take_due(&mut self, links: &mut impl Links, now: Time, due: &mut Vec<(Time, u32)>) {
        while let Some((at, slot)) = self.first(links) {
            if at > now {
                break;
            }
            due.push((at, slot));
            self.unlink(links, slot);
        }
    }

    /// The listed slots and their expiries, earliest first.
    pub fn iter<'a>(&self, links: &'a impl Links) -> impl Iterator<Item = (Time, u32)> + 'a {
        let mut slot = self.head;
        std::iter::from_fn(move || {
            if slot == NONE {
                return None;
            }
            let item = (links.at(slot), slot);
            slot = links.link(slot).next;
            Some(item)
        })
    }

    /// How many slots are listed.
    pub fn len(&self) -> usize {
        self.len
    }
}

/// Several lists, one per timer length (`K`: the length, or whatever else groups timers that
/// are set in expiry order), earliest expiry first across them. A list left empty is reused for
/// the next length not listed, so there are never more lists than lengths with timers running.
#[derive(Clone, Debug)]
pub(crate) struct ExpiryLanes<K> {
    lanes: Vec<(K, ExpiryList)>,
}

impl<K> Default for ExpiryLanes<K> {
    fn default() -> Self {
        ExpiryLanes { lanes: Vec::new() }
    }
}

impl<K: Copy + Eq> ExpiryLanes<K> {
    /// The earliest expiry, if any slot is listed.
    pub fn first_at(&self, links: &impl Links) -> Option<Time> {
        self.lanes
            .iter()
            .filter_map(|(_, list)| list.first(links).map(|(at, _)| at))
            .min()
    }

    /// Lists `slot` (on no list now) at its expiry, among the timers of length `key`.
    pub fn push(&mut self, links: &mut impl Links, slot: u32, key: K) {
        let lane = match self.lanes.iter().position(|(k, _)| *k == key) {
            Some(lane) => lane,
            None => match self.lanes.iter().position(|(_, list)| list.len() == 0) {
                Some(lane) => {
                    self.lanes[lane].0 = key;
                    lane
                }
                None => {
                    self.lanes.push((key, ExpiryList::default()));
                    self.lanes.len() - 1
                }
            },
        };
        self.lanes[lane].1.push(links, lane as u32, slot);
    }

    /// Takes `slot` off its list (nothing if it is on none).
    pub fn remove(&mut self, links: &mut impl Links, slot: u32) {
        let link = links.link_mut(slot);
        if link.list != NONE {
            let link = std::mem::replace(link, Link::UNLISTED);
            self.lanes[link.list as usize].1.close(links, link);
        }
    }

    /// Takes off every slot expiring at `now` or earlier and returns them in `(expiry, slot)`
    /// order.
    pub fn take_due(&mut self, links: &mut impl Links, now: Time) -> Vec<(Time, u32)> {
        let mut due = Vec::new();
        for (_, list) in &mut self.lanes {
            list.take_due(links, now, &mut due);
        }
        due.sort_unstable();
        due
    }

    /// The lists, each earliest first, with their lengths' keys.
    pub fn lists(&self) -> impl Iterator<Item = (K, &ExpiryList)> + '_ {
        self.lanes.iter().map(|(k, list)| (*k, list))
    }

    /// How many slots are listed.
    pub fn len(&self) -> usize {
        self.lanes.iter().map(|(_, list)| list.len()).sum()
    }
}

/// A model test's driver: random settings (mostly later than every expiry of their length, as
/// the engine makes them, sometimes earlier), removals and takes, each followed by a check
/// against a `BTreeSet<(Time, slot)>`, the structure these lists replace.
#[cfg(test)]
pub(crate) mod model {
    use super::*;
    use std::collections::BTreeSet;

    use crate::xorshift as next;

    /// A list under test, by slot.
    pub(crate) trait UnderTest {
        /// Lists `slot` (in place of its earlier expiry if any) as expiring at `at`, a timer of
        /// `length`.
        fn set(&mut self, slot: u32, at: Time, length: u64);
        fn remove(&mut self, slot: u32);
        /// Takes off the slots due by `now`, in `(expiry, slot)` order.
        fn take_due(&mut self, now: Time) -> Vec<(Time, u32)>;
        fn first_at(&self) -> Option<Time>;
        fn len(&self) -> usize;
        /// Every list, earliest first.
        fn lists(&self) -> Vec<Vec<(Time, u32)>>;
    }

    /// Runs 50 rounds of 2,000 random operations over 40 slots and timers of `lengths`,
    /// asserting after each that `fresh()`'s list holds what the set holds: the same earliest
    /// expiry and count, the same members, each list in time order, the same slots due in the
    /// same order.
    pub(crate) fn agrees_with_an_ordered_set<L: UnderTest>(
        mut state: u64,
        lengths: &[u64],
        fresh: impl Fn() -> L,
    ) {
        for _ in 0..50 {
            let mut list = fresh();
            let mut model: BTreeSet<(Time, u32)> = BTreeSet::new();
            let mut expiry: Vec<Option<Time>> = vec![None; 40];
            let mut now = 0u64;
            for _ in 0..2_000 {
                let slot = (next(&mut state) % 40) as u32;
                match next(&mut state) % 10 {
                    0..=5 => {
                        now += next(&mut state) % 3;
                        let length = lengths[(next(&mut state) % lengths.len() as u64) as usize];
                        let at = if next(&mut state).is_multiple_of(8) {
                            now.saturating_sub(next(&mut state) % 50)
                        } else {
                            now + length
                        };
                        if let Some(old) = expiry[slot as usize] {
                            model.remove(&(old, slot));
                        }
                        model.insert((Time(at), slot));
                        expiry[slot as usize] = Some(Time(at));
                        list.set(slot, Time(at), length);
                    }
                    6 | 7 => {
                        if let Some(old) = expiry[slot as usize].take() {
                            model.remove(&(old, slot));
                        }
                        list.remove(slot);
                    }
                    _ => {
                        let due: Vec<(Time, u32)> = model
                            .iter()
                            .take_while(|(at, _)| at.0 <= now)
                            .copied()
                            .collect();
                        for &(at, s) in &due {
                            model.remove(&(at, s));
                            expiry[s as usize] = None;
                        }
                        assert_eq!(list.take_due(Time(now)), due);
                    }
                }
                assert_eq!(list.first_at(), model.first().map(|e| e.0));
                assert_eq!(list.len(), model.len());
                let mut listed: Vec<(Time, u32)> = Vec::new();
                for items in list.lists() {
                    assert!(
                        items.windows(2).all(|w| w[0].0 <= w[1].0),
                        "a list in order"
                    );
                    listed.extend(items);
                }
                listed.sort_unstable();
                assert!(listed.iter().eq(model.iter()));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::model::{UnderTest, agrees_with_an_ordered_set};
    use super::*;

    struct Lanes {
        links: Vec<Timed>,
        lanes: ExpiryLanes<u64>,
    }

    impl UnderTest for Lanes {
        fn set(&mut self, slot: u32, at: Time, length: u64) {
            self.lanes.remove(&mut self.links, slot);
            self.links[slot as usize].at = at;
            self.lanes.push(&mut self.links, slot, length);
        }

        fn remove(&mut self, slot: u32) {
            self.lanes.remove(&mut self.links, slot);
        }

        fn take_due(&mut self, now: Time) -> Vec<(Time, u32)> {
            self.lanes.take_due(&mut self.links, now)
        }

        fn first_at(&self) -> Option<Time> {
            self.lanes.first_at(&self.links)
        }

        fn len(&self) -> usize {
            self.lanes.len()
        }

        fn lists(&self) -> Vec<Vec<(Time, u32)>> {
            let lists: Vec<Vec<(Time, u32)>> = self
                .lanes
                .lists()
                .map(|(_, list)| {
                    let items: Vec<(Time, u32)> = list.iter(&self.links).collect();
                    assert_eq!(items.len(), list.len());
                    items
                })
                .collect();
            assert!(lists.len() <= 3, "an emptied lane is reused");
            lists
        }
    }

    // Proves: lanes agree with the ordered set they replace over three timer lengths (earlier
    // expiries, removals and takes included), and an emptied lane is reused, so lanes never
    // outnumber lengths.
    #[test]
    fn lanes_agree_with_an_ordered_set() {
        agrees_with_an_ordered_set(0x2545_F491_4F6C_DD1D, &[5, 20, 60], || Lanes {
            links: vec![Timed::UNLISTED; 40],
            lanes: ExpiryLanes::default(),
        });
    }
}
