//! Data parallel routing: which engine takes the next request.
//!
//! An engine's load is what it last reported (running + waiting, from the
//! `SchedulerStats` on the wire) plus what this frontend has in flight there. The
//! in-flight count moves with every submit, so a burst spreads over the engines before
//! any stats arrive; the reported counts bring in what the engine has queued that the
//! count cannot see (work still being prefilled, a slow step). Ties go round-robin.

/// One engine's load as the router sees it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Load {
    /// `num_running` of the engine's latest stats.
    pub running: u64,
    /// `num_waiting` of the engine's latest stats.
    pub waiting: u64,
    /// Requests this frontend sent there that have not finished.
    pub in_flight: usize,
}

impl Load {
    /// The number compared between engines (smaller is less loaded).
    pub fn score(&self) -> u64 {
        self.running + self.waiting + self.in_flight as u64
    }
}

/// The position in `loads` of the least-loaded engine; among equals, the first at or
/// after `turn % loads.len()` (callers pass a counter that grows per request). `None`
/// when `loads` is empty.
pub fn least_loaded(loads: &[Load], turn: usize) -> Option<usize> {
    let n = loads.len();
    if n == 0 {
        return None;
    }
    let start = turn % n;
    (0..n)
        .map(|offset| (start + offset) % n)
        .min_by_key(|&i| loads[i].score())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load(running: u64, waiting: u64, in_flight: usize) -> Load {
        Load {
            running,
            waiting,
            in_flight,
        }
    }

    #[test]
    fn empty_has_no_choice() {
        assert_eq!(least_loaded(&[], 0), None);
    }

    #[test]
    fn picks_the_smallest_sum() {
        let loads = [load(4, 0, 4), load(1, 1, 2), load(0, 3, 3)];
        assert_eq!(least_loaded(&loads, 0), Some(1));
        assert_eq!(least_loaded(&loads, 2), Some(1));
    }

    #[test]
    fn waiting_counts_as_load() {
        // Same in flight; the engine with a queue is avoided.
        let loads = [load(2, 5, 7), load(2, 0, 7)];
        assert_eq!(least_loaded(&loads, 0), Some(1));
    }

    #[test]
    fn ties_rotate_with_the_turn() {
        let loads = [Load::default(); 3];
        let picks: Vec<_> = (0..6).filter_map(|t| least_loaded(&loads, t)).collect();
        assert_eq!(picks, [0, 1, 2, 0, 1, 2]);
    }

    #[test]
    fn a_burst_spreads_before_stats_arrive() {
        // No stats yet: only the frontend's own counts move.
        let mut loads = [Load::default(); 2];
        for turn in 0..10 {
            let i = least_loaded(&loads, turn).unwrap_or(0);
            loads[i].in_flight += 1;
        }
        assert_eq!(loads[0].in_flight, 5);
        assert_eq!(loads[1].in_flight, 5);
    }

    #[test]
    fn reported_backlog_steers_new_work_away() {
        // Engine 0 reports a long queue the frontend does not know of (another client
        // of it, or work still in prefill): the next requests go to engine 1.
        let mut loads = [load(8, 20, 0), load(0, 0, 0)];
        for turn in 0..5 {
            let i = least_loaded(&loads, turn).unwrap_or(0);
            loads[i].in_flight += 1;
        }
        assert_eq!(loads[1].in_flight, 5);
    }
}
