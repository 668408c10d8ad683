//! The live numbers of a run, written as `progress` events: requests done and failed,
//! the seconds since the start, and the current median and p99 of TTFT and E2EL over the
//! requests done so far (what the `vrs bench serve` display shows while it runs).

use serde_json::{json, Map, Value};
use tokio::time::{Duration, Instant};

use crate::events;
use crate::metrics::{percentile, RequestRecord};

/// How often progress events are written.
pub const PROGRESS_EVERY: Duration = Duration::from_millis(100);

/// Requests done so far, and their TTFT and E2EL (ms) for the running percentiles.
pub struct Tally {
    start: Instant,
    total: usize,
    pub completed: usize,
    pub failed: usize,
    ttft_ms: Vec<f64>,
    e2el_ms: Vec<f64>,
    /// `completed + failed` when the last event was written.
    reported: Option<usize>,
}

impl Tally {
    pub fn new(start: Instant, total: usize) -> Self {
        Self {
            start,
            total,
            completed: 0,
            failed: 0,
            ttft_ms: Vec::new(),
            e2el_ms: Vec::new(),
            reported: None,
        }
    }

    pub fn done(&self) -> usize {
        self.completed + self.failed
    }

    /// Requests that will not be sent after all (a conversation's turns after a failed
    /// one): the total shrinks.
    pub fn drop_pending(&mut self, count: usize) {
        self.total -= count.min(self.total - self.done());
    }

    pub fn total(&self) -> usize {
        self.total
    }

    pub fn add(&mut self, record: &RequestRecord) {
        if record.success {
            self.completed += 1;
            self.ttft_ms.push(record.ttft * 1000.0);
            self.e2el_ms.push(record.latency * 1000.0);
        } else {
            self.failed += 1;
        }
    }

    /// The event's fields; the percentiles are null before the first success.
    pub fn fields(&mut self) -> Map<String, Value> {
        let mut fields = Map::new();
        fields.insert("completed".into(), json!(self.completed));
        fields.insert("failed".into(), json!(self.failed));
        fields.insert("total".into(), json!(self.total));
        fields.insert(
            "elapsed_s".into(),
            json!(self.start.elapsed().as_secs_f64()),
        );
        for (name, values) in [("ttft", &mut self.ttft_ms), ("e2el", &mut self.e2el_ms)] {
            values.sort_by(f64::total_cmp);
            for p in [50, 99] {
                let value = (!values.is_empty()).then(|| percentile(values, f64::from(p)));
                fields.insert(format!("p{p}_{name}_ms"), json!(value));
            }
        }
        fields
    }

    /// Writes a progress event when something was done since the last one (`force`:
    /// always, the last one).
    pub fn report(&mut self, force: bool) {
        if force || self.reported != Some(self.done()) {
            self.reported = Some(self.done());
            events::emit("progress", self.fields());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_fields_count_and_take_percentiles_of_successes() {
        let mut tally = Tally::new(Instant::now(), 4);
        let empty = tally.fields();
        assert_eq!(empty["p50_ttft_ms"], Value::Null);
        for ttft in [0.1, 0.2, 0.3] {
            tally.add(&RequestRecord {
                success: true,
                ttft,
                latency: ttft * 2.0,
                ..Default::default()
            });
        }
        tally.add(&RequestRecord::default());
        let fields = tally.fields();
        assert_eq!(
            (fields["completed"].clone(), fields["failed"].clone()),
            (json!(3), json!(1))
        );
        let p50 = fields["p50_ttft_ms"].as_f64().unwrap();
        assert!((p50 - 200.0).abs() < 1e-9, "{p50}");
        let p99 = fields["p99_e2el_ms"].as_f64().unwrap();
        assert!((p99 - 596.0).abs() < 1e-9, "{p99}");
        tally.drop_pending(5);
        assert_eq!(tally.total(), 4);
    }
}
