//! Fairway's scheduling engine.
//!
//! A fully deterministic implementation of admission, fair ordering, placement, leases and
//! accounting for durable work. It contains no I/O, reads no clock and draws no randomness:
//! every time-dependent call takes `now`, so the same inputs in the same order give the same
//! outputs, bit for bit.

#![warn(missing_docs)]

pub mod weight;

pub use weight::Weight;
