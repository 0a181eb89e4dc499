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
/// Rotated (`--interleave`, `order = "rotated"`): interleaved, and round r starts at
/// configuration r (A B C, B C A, C A B), so over n rounds every configuration takes every
/// place in a round once: a drift within a round, or what the previous configuration
/// leaves behind, does not always fall on the same one.
pub fn schedule(study: &Study) -> Vec<Step> {
    let n = study.configs.len();
    let mut steps = Vec::with_capacity(n * study.repeats as usize);
    match study.order {
        Order::Rotated => {
            for round in 0..study.repeats {
                for config in rotated(n, round) {
                    steps.push(Step { round, config });
                }
            }
        }
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

/// The configurations `0..n` in round `round`'s rotated order: starting at `round mod n`.
pub fn rotated(n: usize, round: u32) -> impl Iterator<Item = usize> {
    let start = if n == 0 { 0 } else { round as usize % n };
    (0..n).map(move |i| (start + i) % n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rotated_rounds_put_every_configuration_in_every_place() {
        let order: Vec<Vec<usize>> = (0..4).map(|r| rotated(3, r).collect()).collect();
        assert_eq!(order, [[0, 1, 2], [1, 2, 0], [2, 0, 1], [0, 1, 2]]);
        for place in 0..3 {
            let mut seen: Vec<usize> = order[..3].iter().map(|r| r[place]).collect();
            seen.sort_unstable();
            assert_eq!(seen, [0, 1, 2]);
        }
        assert_eq!(rotated(0, 5).count(), 0);
    }
}
