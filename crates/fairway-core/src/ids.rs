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
