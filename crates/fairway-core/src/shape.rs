//! Shapes, placement groups and workers.
//!
//! A **shape** is everything about a job that matters for placement: its demand per member, its
//! label requirements, its class (for reserves), whether it is preemptible, and its gang size.
//! Jobs of one shape are interchangeable for placement, so the engine indexes waiting work by
//! shape and asks "does this shape fit?" once per shape, not once per job.
//!
//! A **group** is a set of live workers with the same pool, labels and capacity. Whether a shape
//! can ever run in a group is a fixed property (cached); whether it fits now depends on the free
//! capacity of the group's workers that are asking for work.

use crate::hash::FxHashMap;
use crate::ids::{GroupId, PoolIdx, ShapeId, WorkerIdx};
use crate::resources::ResVec;
use crate::time::Time;
use std::collections::hash_map::Entry;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

/// The most shapes alive at once; beyond it, admission refuses new shapes (retryable).
pub const MAX_SHAPES: usize = 65_536;
/// The most placement groups.
pub const MAX_GROUPS: usize = 4_096;
/// The most workers the engine tracks.
pub const MAX_WORKERS: usize = 100_000;

/// The placement-relevant part of a job.
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub struct ShapeKey {
    /// Demand of one member.
    pub demand: ResVec,
    /// Required labels, sorted by key.
    pub requires: Vec<(String, String)>,
    /// Class index.
    pub class: u16,
    /// Whether the job may be preempted.
    pub preemptible: bool,
    /// Members wanted.
    pub gang: u32,
    /// Fewest members it may start with.
    pub gang_min: u32,
}

/// An interned shape with the number of live jobs using it.
#[derive(Clone, Debug)]
pub struct Shape {
    /// What it is.
    pub key: ShapeKey,
    refs: u32,
}

/// Interned shapes, recycled when no job uses them.
#[derive(Clone, Debug, Default)]
pub struct ShapeTable {
    shapes: Vec<Option<Shape>>,
    free: Vec<u32>,
    by_key: FxHashMap<ShapeKey, ShapeId>,
}

impl ShapeTable {
    /// The shape for `key`, taking a reference, and whether it was interned by this call;
    /// `None` when the table is full. The key is hashed once.
    pub fn acquire(&mut self, key: ShapeKey) -> Option<(ShapeId, bool)> {
        let full = self.by_key.len() >= MAX_SHAPES;
        match self.by_key.entry(key) {
            Entry::Occupied(e) => {
                let id = *e.get();
                self.shapes[id.ix()]
                    .as_mut()
                    .expect("interned shape exists")
                    .refs += 1;
                Some((id, false))
            }
            Entry::Vacant(_) if full => None,
            Entry::Vacant(e) => {
                let id = match self.free.pop() {
                    Some(i) => ShapeId(i),
                    None => {
                        self.shapes.push(None);
                        ShapeId(self.shapes.len() as u32 - 1)
                    }
                };
                let key = e.key().clone();
                e.insert(id);
                self.shapes[id.ix()] = Some(Shape { key, refs: 1 });
                Some((id, true))
            }
        }
    }

    /// Drops a reference; returns the shape's description when this freed it.
    pub fn release(&mut self, id: ShapeId) -> Option<ShapeKey> {
        let shape = self.shapes[id.ix()]
            .as_mut()
            .expect("released shape exists");
        assert!(
            shape.refs > 0,
            "shape {id:?} released more often than acquired"
        );
        shape.refs -= 1;
        if shape.refs > 0 {
            return None;
        }
        let shape = self.shapes[id.ix()].take().expect("shape exists");
        self.by_key.remove(&shape.key);
        self.free.push(id.0);
        Some(shape.key)
    }

    /// The id of `key` if it is interned.
    pub fn lookup(&self, key: &ShapeKey) -> Option<ShapeId> {
        self.by_key.get(key).copied()
    }

    /// Whether a new shape can be interned (or `key` already is).
    pub fn has_room_for(&self, key: &ShapeKey) -> bool {
        self.by_key.len() < MAX_SHAPES || self.by_key.contains_key(key)
    }

    /// The shape `id`.
    #[inline]
    pub fn get(&self, id: ShapeId) -> &ShapeKey {
        &self.shapes[id.ix()].as_ref().expect("live shape").key
    }

    /// How many shapes are alive.
    pub fn len(&self) -> usize {
        self.by_key.len()
    }

    /// Whether no shape is alive.
    pub fn is_empty(&self) -> bool {
        self.by_key.is_empty()
    }

    /// The capacity of the id space (ids are below this).
    pub fn id_bound(&self) -> usize {
        self.shapes.len()
    }
}

/// Workers that share a pool, labels and capacity.
#[derive(Clone, Debug)]
pub struct Group {
    /// Pool name.
    pub pool: String,
    /// Labels, including the implicit `pool` label.
    pub labels: BTreeMap<String, String>,
    /// Capacity of each worker.
    pub capacity: ResVec,
    /// Live workers.
    pub workers: BTreeSet<WorkerIdx>,
    compat: Vec<u8>,
}

impl Group {
    /// Whether shape `key` (id `id`) can ever run on a worker of this group.
    pub fn compatible(&mut self, id: ShapeId, key: &ShapeKey) -> bool {
        if self.compat.len() <= id.ix() {
            self.compat.resize(id.ix() + 1, 0);
        }
        match self.compat[id.ix()] {
            1 => true,
            2 => false,
            _ => {
                let ok = self.accepts(key);
                self.compat[id.ix()] = if ok { 1 } else { 2 };
                ok
            }
        }
    }

    /// Whether shape `key` can ever run on a worker of this group (uncached).
    pub fn accepts(&self, key: &ShapeKey) -> bool {
        key.demand.fits_in(&self.capacity)
            && key
                .requires
                .iter()
                .all(|(k, v)| self.labels.get(k) == Some(v))
    }

    /// Forgets the cached answer for a recycled shape id.
    pub fn forget_shape(&mut self, id: ShapeId) {
        if let Some(c) = self.compat.get_mut(id.ix()) {
            *c = 0;
        }
    }

    /// Which requirement of `key` this group fails, for explanations.
    pub fn mismatch(&self, key: &ShapeKey) -> Option<String> {
        for (k, v) in &key.requires {
            match self.labels.get(k) {
                Some(have) if have == v => {}
                Some(have) => {
                    return Some(format!(
                        "requires {k}={v}, pool {} has {k}={have}",
                        self.pool
                    ));
                }
                None => {
                    return Some(format!(
                        "requires {k}={v}, pool {} has no label {k}",
                        self.pool
                    ));
                }
            }
        }
        if !key.demand.fits_in(&self.capacity) {
            return Some(format!(
                "one member's demand exceeds the capacity of a worker of pool {}",
                self.pool
            ));
        }
        None
    }
}

/// Placement groups, keyed by their identity.
#[derive(Clone, Debug, Default)]
pub struct GroupTable {
    /// All groups ever seen (a group with no live worker stays, empty).
    pub groups: Vec<Group>,
    by_key: BTreeMap<(String, BTreeMap<String, String>, ResVec), GroupId>,
}

impl GroupTable {
    /// The group for workers of `pool` with `labels` and `capacity`; `None` when full.
    pub fn group_for(
        &mut self,
        pool: &str,
        labels: &BTreeMap<String, String>,
        capacity: &ResVec,
    ) -> Option<GroupId> {
        let mut labels = labels.clone();
        labels.insert("pool".to_string(), pool.to_string());
        let key = (pool.to_string(), labels.clone(), capacity.clone());
        if let Some(id) = self.by_key.get(&key) {
            return Some(*id);
        }
        if self.groups.len() >= MAX_GROUPS {
            return None;
        }
        let id = GroupId(self.groups.len() as u32);
        self.groups.push(Group {
            pool: pool.to_string(),
            labels,
            capacity: capacity.clone(),
            workers: BTreeSet::new(),
            compat: Vec::new(),
        });
        self.by_key.insert(key, id);
        Some(id)
    }

    /// Groups with at least one live worker, in id order.
    pub fn live(&self) -> impl Iterator<Item = GroupId> + '_ {
        self.groups
            .iter()
            .enumerate()
            .filter(|(_, g)| !g.workers.is_empty())
            .map(|(i, _)| GroupId(i as u32))
    }

    /// The group `id`.
    pub fn get(&self, id: GroupId) -> &Group {
        &self.groups[id.ix()]
    }

    /// The group `id`, mutable.
    pub fn get_mut(&mut self, id: GroupId) -> &mut Group {
        &mut self.groups[id.ix()]
    }
}

/// A worker the engine knows: either live (it asked for work recently) or only named by leases
/// that survived a restart.
#[derive(Clone, Debug)]
pub struct Worker {
    /// Its name (empty for a free slot), shared with its leases and placements.
    pub name: Arc<str>,
    /// Its pool, shared likewise.
    pub pool: Arc<str>,
    /// Its pool's slot in the engine's pool table, once an attempt's books first needed it
    /// (`None` until then, and again whenever `pool` changes).
    pub pool_slot: Option<PoolIdx>,
    /// Its group while live.
    pub group: Option<GroupId>,
    /// Its capacity (zero until it first asks for work).
    pub capacity: ResVec,
    /// Demand of the attempts it runs.
    pub used: ResVec,
    /// What it ran when it came back with less capacity than that: it keeps running it and
    /// starts nothing until back within its capacity. `None` when it fit then.
    pub shrink_grace: Option<ResVec>,
    /// Jobs it runs (attempts holding capacity on it), in slot order.
    pub(crate) jobs: crate::engine::job_set::JobSet,
    /// Whether it is waiting for work now.
    pub polling: bool,
    /// How many more leases it accepts in this poll.
    pub max_jobs_left: u32,
    /// When it was last heard from.
    pub last_seen: Time,
}

impl Worker {
    /// Free capacity.
    pub fn free(&self) -> ResVec {
        self.capacity.saturating_minus(&self.used)
    }
}
