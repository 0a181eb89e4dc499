//! The order in which a study visits its configurations.

use crate::file::{Order, Study};

/// One visit: configuration `config` is built, every workload runs once on it, and it is
/// torn down. `round` counts repeats from 0.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Step {
    pub round: u32,
    pub config: usize,
}

/// Interleaved: round 0 visits every configuration, then round 1, ... (A B C A B C), so
/// drift in the machine (a warming host cache, a neighbour's load) touches every
/// configuration alike. Grouped: all rounds of A, then of B (A A B B), which needs fewer
/// context switches but lets drift look like a difference between configurations.
pub fn schedule(study: &Study) -> Vec<Step> {
    let n = study.configs.len();
    let mut steps = Vec::with_capacity(n * study.repeats as usize);
    match study.order {
        Order::Interleaved => {
            for round in 0..study.repeats {
                for config in 0..n {
                    steps.push(Step { round, config });
                }
            }
        }
        Order::Grouped => {
            for config in 0..n {
                for round in 0..study.repeats {
                    steps.push(Step { round, config });
                }
            }
        }
    }
    steps
}
