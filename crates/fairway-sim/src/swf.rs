//! Standard Workload Format (SWF) traces.
