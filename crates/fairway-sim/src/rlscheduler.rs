//! The decision rules of the RLScheduler (SC'20) simulator, reproduced exactly.
