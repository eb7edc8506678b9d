//! Random sequences of pushes, source openings and drops, and pops, checked against a plain
//! model of what the scheduler holds. Each pop must return the oldest task of the band and
//! source it came from, respect the policy's band rule, and the scheduler's counters must
//! match the model after every step; at the end, draining returns every task exactly once.

use std::collections::VecDeque;

use fairway_core::Weight;
use fairway_local::{Config, MinorSource, Policy, Scheduler, Stats};
use proptest::prelude::*;

#[derive(Clone, Debug)]
enum Op {
    PushMajor,
    Open { weight_tenths: u64 },
    PushMinor { source: usize },
    Drop { source: usize },
    Pop,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => Just(Op::PushMajor),
        1 => (1u64..40).prop_map(|weight_tenths| Op::Open { weight_tenths }),
        4 => any::<usize>().prop_map(|source| Op::PushMinor { source }),
        1 => any::<usize>().prop_map(|source| Op::Drop { source }),
        5 => Just(Op::Pop),
    ]
}

fn policy() -> impl Strategy<Value = Policy> {
    prop_oneof![
        Just(Policy::Absolute),
        (1u64..20, 1u64..20).prop_map(|(major, minor)| Policy::Weighted {
            major: Weight::from_units(major).unwrap(),
            minor: Weight::from_units(minor).unwrap(),
        }),
    ]
}

/// A task: which queue it was pushed into (`None` for major) and its sequence number.
type Task = (Option<usize>, u64);

#[derive(Default)]
struct Model {
    major: VecDeque<u64>,
    /// Per source ever opened: its queued sequence numbers and whether its handle is alive.
    minors: Vec<(VecDeque<u64>, bool)>,
}

impl Model {
    fn stats(&self) -> Stats {
        let busy = self.minors.iter().filter(|(q, _)| !q.is_empty()).count();
        Stats {
            major_tasks: self.major.len(),
            minor_tasks: self.minors.iter().map(|(q, _)| q.len()).sum(),
            sources_active: busy,
            sources_live: self
                .minors
                .iter()
                .filter(|(q, open)| *open || !q.is_empty())
                .count(),
        }
    }

    /// Checks a popped task against the model and removes it.
    fn check_pop(&mut self, policy: Policy, popped: Option<Task>) -> Result<(), TestCaseError> {
        let before = self.stats();
        let Some((queue, seq)) = popped else {
            prop_assert_eq!((before.major_tasks, before.minor_tasks), (0, 0));
            return Ok(());
        };
        match queue {
            None => {
                prop_assert_eq!(self.major.pop_front(), Some(seq), "major FIFO");
            }
            Some(index) => {
                if policy == Policy::Absolute {
                    prop_assert_eq!(before.major_tasks, 0, "minor served before major");
                }
                prop_assert_eq!(self.minors[index].0.pop_front(), Some(seq), "source FIFO");
            }
        }
        Ok(())
    }
}

proptest! {
    #[test]
    fn scheduler_matches_the_model(
        policy in policy(),
        ops in proptest::collection::vec(op(), 1..300),
    ) {
        let scheduler: Scheduler<Task> = Scheduler::new(Config::new(policy));
        let mut handles: Vec<Option<MinorSource<Task>>> = Vec::new();
        let mut model = Model::default();
        let mut seq = 0u64;
        for op in ops {
            match op {
                Op::PushMajor => {
                    seq += 1;
                    scheduler.push_major((None, seq)).unwrap();
                    model.major.push_back(seq);
                }
                Op::Open { weight_tenths } => {
                    let weight = Weight::from_f64(weight_tenths as f64 / 10.0).unwrap();
                    handles.push(Some(scheduler.minor_source(weight).unwrap()));
                    model.minors.push((VecDeque::new(), true));
                }
                Op::PushMinor { source } if !handles.is_empty() => {
                    let index = source % handles.len();
                    if let Some(handle) = &handles[index] {
                        seq += 1;
                        handle.push((Some(index), seq)).unwrap();
                        model.minors[index].0.push_back(seq);
                    }
                }
                Op::Drop { source } if !handles.is_empty() => {
                    let index = source % handles.len();
                    handles[index] = None;
                    model.minors[index].1 = false;
                }
                Op::PushMinor { .. } | Op::Drop { .. } => {}
                Op::Pop => model.check_pop(policy, scheduler.try_pop())?,
            }
            prop_assert_eq!(scheduler.stats(), model.stats());
        }
        // Drain: everything comes out, once, and retired sources are freed by the last pop.
        handles.clear();
        for minor in &mut model.minors {
            minor.1 = false;
        }
        loop {
            let popped = scheduler.try_pop();
            let done = popped.is_none();
            model.check_pop(policy, popped)?;
            prop_assert_eq!(scheduler.stats(), model.stats());
            if done {
                break;
            }
        }
        prop_assert_eq!(scheduler.stats(), Stats::default());
    }
}
