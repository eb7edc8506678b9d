//! An in-process two-tier task scheduler.
