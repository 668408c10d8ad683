//! vLLM's peak lines (`vllm bench serve`, vllm/benchmarks/serve.py `calculate_metrics`):
//! "Peak output token throughput (tok/s)" is the most output tokens that arrived within
//! one whole second of the run (one-second buckets from the first request's start, each
//! token timed at start + TTFT + the ITL gaps before it); "Peak concurrent requests" is
//! the most successful requests in flight at one instant (half-open [start, end)).

use super::RequestRecord;

/// The most output tokens in one one-second bucket of the run; 0 without successes.
pub fn max_output_tokens_per_s(records: &[RequestRecord]) -> f64 {
    let ok: Vec<&RequestRecord> = records.iter().filter(|r| r.success).collect();
    let Some(first) = ok.iter().map(|r| r.start).min_by(f64::total_cmp) else {
        return 0.0;
    };
    let last = ok
        .iter()
        .map(|r| r.start + r.latency)
        .max_by(f64::total_cmp)
        .unwrap_or(first);
    let buckets = (last - first).ceil().max(0.0) as usize + 1;
    let mut tokens = vec![0usize; buckets];
    for record in ok {
        let mut at = record.start + record.ttft;
        let times = std::iter::once(at).chain(record.itl.iter().map(|gap| {
            at += gap;
            at
        }));
        for time in times {
            let offset = time - first;
            if offset >= 0.0 {
                if let Some(count) = tokens.get_mut(offset as usize) {
                    *count += 1;
                }
            }
        }
    }
    tokens.into_iter().max().unwrap_or(0) as f64
}

/// The most successful requests in flight at one instant; a request ending exactly when
/// another starts does not overlap it.
pub fn max_concurrent_requests(records: &[RequestRecord]) -> usize {
    let mut events: Vec<(f64, i32)> = records
        .iter()
        .filter(|r| r.success)
        .flat_map(|r| [(r.start, 1), (r.start + r.latency, -1)])
        .collect();
    events.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
    let (mut now, mut peak) = (0i64, 0i64);
    for (_, delta) in events {
        now += i64::from(delta);
        peak = peak.max(now);
    }
    peak as usize
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(start: f64, ttft: f64, itl: &[f64]) -> RequestRecord {
        RequestRecord {
            success: true,
            output_tokens: itl.len() + 1,
            start,
            ttft,
            latency: ttft + itl.iter().sum::<f64>(),
            itl: itl.to_vec(),
            ..Default::default()
        }
    }

    #[test]
    fn tokens_fall_into_one_second_buckets_from_the_first_start() {
        // Tokens at 0.5, 0.9, 1.2 (first) and 1.1, 1.3, 1.4, 2.5 (second): bucket 1 has 4.
        let records = [
            at(0.0, 0.5, &[0.4, 0.3]),
            at(1.0, 0.1, &[0.2, 0.1, 1.1]),
            RequestRecord::default(),
        ];
        assert_eq!(max_output_tokens_per_s(&records), 4.0);
        assert_eq!(max_output_tokens_per_s(&[RequestRecord::default()]), 0.0);
    }

    #[test]
    fn concurrency_is_a_sweep_over_half_open_intervals() {
        let records = [
            at(0.0, 1.0, &[]), // [0, 1)
            at(1.0, 1.0, &[]), // [1, 2): touches the first, no overlap
            at(0.5, 1.0, &[]), // [0.5, 1.5): overlaps both
            at(1.2, 0.1, &[]), // [1.2, 1.3): inside the second and third
        ];
        assert_eq!(max_concurrent_requests(&records), 3);
        assert_eq!(max_concurrent_requests(&records[..2]), 1);
        let failed = RequestRecord {
            latency: 9.0,
            ..Default::default()
        };
        assert_eq!(max_concurrent_requests(&[failed]), 0);
    }
}
