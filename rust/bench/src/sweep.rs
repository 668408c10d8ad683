//! `vrs-rs bench sweep`: `bench serve` at each point of a list of concurrencies or request
//! rates, against one or more labelled servers, in this one process (the runner of
//! [`crate::runner`], one async runtime). Each point's result goes to
//! `<output_dir>/<label>/<c16|r2.5>.json`, then `<output_dir>/summary.csv` is rebuilt from
//! every result file there. A point whose complete result exists is skipped (resume);
//! the sweep of a server stops early when a point cannot run, fails too many requests, or
//! passes an SLO ([`stop`]).
//!
//! Events (JSON lines, see [`crate::events`]): `sweep` (the plan), then per point `point`
//! (starting; the serve events follow) and `point_result` (headline numbers and file), or
//! `point_skipped` (resumed), `point_error` (could not run); `stop` when a server's sweep
//! ends early; `summary` (the CSV) last.

pub mod point;
pub mod stop;
pub mod summary;

use std::path::PathBuf;
use std::time::{SystemTime, UNIX_EPOCH};

use serde::Deserialize;
use serde_json::{json, Map, Value};

use crate::args::BenchArgs;
use crate::events;
use crate::runner;
use point::{Axis, Load};
use stop::Slo;

fn default_max_failed_ratio() -> f64 {
    0.05
}
fn default_resume() -> bool {
    true
}

/// The `--args-json` document of `bench sweep`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSweep {
    base_urls: Vec<String>,
    #[serde(default)]
    labels: Vec<String>,
    /// e.g. "1,4,16,64"
    #[serde(default)]
    max_concurrency: Option<String>,
    /// e.g. "1,2,4" or "inf"
    #[serde(default)]
    request_rate: Option<String>,
    output_dir: String,
    #[serde(default = "default_resume")]
    resume: bool,
    #[serde(default)]
    stop_at_slo: Vec<String>,
    #[serde(default = "default_max_failed_ratio")]
    max_failed_ratio: f64,
    /// Every `bench serve` key but base_url, label, max_concurrency and request_rate.
    #[serde(default)]
    serve: Map<String, Value>,
}

/// One point: a server and a load, with its checked `bench serve` settings.
#[derive(Debug)]
pub struct Point {
    pub label: String,
    pub load: Load,
    pub path: PathBuf,
    pub args: BenchArgs,
}

/// A checked sweep: every point's settings were parsed before anything runs.
#[derive(Debug)]
pub struct Sweep {
    pub axis: Axis,
    pub labels: Vec<String>,
    /// Point by point, server after server (each server's loads in the given order).
    pub points: Vec<Point>,
    pub output_dir: PathBuf,
    pub resume: bool,
    pub slos: Vec<Slo>,
    pub max_failed_ratio: f64,
}

impl Sweep {
    /// Parses and checks the whole document; errors name the key.
    pub fn from_json(text: &str) -> Result<Sweep, String> {
        let raw: RawSweep =
            serde_json::from_str(text).map_err(|e| format!("invalid --args-json: {e}"))?;
        if raw.base_urls.is_empty() {
            return Err("base_urls: give at least one --base-url".into());
        }
        let labels = point::labels(&raw.base_urls, &raw.labels)?;
        let (axis, loads) =
            point::loads(raw.max_concurrency.as_deref(), raw.request_rate.as_deref())?;
        let slos = raw
            .stop_at_slo
            .iter()
            .flat_map(|s| s.split_whitespace())
            .map(Slo::parse)
            .collect::<Result<Vec<_>, _>>()?;
        let ratio = raw.max_failed_ratio;
        if !(0.0..=1.0).contains(&ratio) {
            return Err(format!("max_failed_ratio must be within 0..1, got {ratio}"));
        }
        for key in ["base_url", "label", "max_concurrency", "request_rate"] {
            if raw.serve.contains_key(key) {
                return Err(format!(
                    "serve.{key}: a sweep sets it per point (base_urls, labels, \
                     max_concurrency, request_rate)"
                ));
            }
        }
        let serve = with_percentiles(raw.serve, &slos)?;
        let output_dir = PathBuf::from(raw.output_dir);
        let mut points = Vec::new();
        for (base_url, label) in raw.base_urls.iter().zip(&labels) {
            for load in &loads {
                let mut doc = serve.clone();
                doc.insert("base_url".into(), json!(base_url));
                doc.insert("label".into(), json!(label));
                doc.insert("max_concurrency".into(), json!(load.max_concurrency));
                doc.insert("request_rate".into(), json!(load.request_rate));
                let args = BenchArgs::from_json(&Value::Object(doc).to_string())?;
                let path = point::result_path(&output_dir, label, &load.stem(axis));
                points.push(Point {
                    label: label.clone(),
                    load: *load,
                    path,
                    args,
                });
            }
        }
        if let Some(first) = points.first() {
            for slo in &slos {
                if !first.args.percentile_metrics.contains(&slo.metric) {
                    return Err(format!(
                        "stop_at_slo {}: {} is not reported; add it to --percentile-metrics",
                        slo.describe(),
                        slo.metric.key()
                    ));
                }
            }
        }
        Ok(Sweep {
            axis,
            labels,
            points,
            output_dir,
            resume: raw.resume,
            slos,
            max_failed_ratio: ratio,
        })
    }
}

/// The serve document with 99 and every SLO's percentile in `metric_percentiles` (the
/// CSV has p99 columns; an SLO reads its percentile's key).
fn with_percentiles(
    mut serve: Map<String, Value>,
    slos: &[Slo],
) -> Result<Map<String, Value>, String> {
    let mut percentiles: Vec<f64> = match serve.get("metric_percentiles") {
        None | Some(Value::Null) => vec![99.0],
        Some(value) => serde_json::from_value(value.clone())
            .map_err(|e| format!("serve.metric_percentiles: {e}"))?,
    };
    let wanted = slos.iter().filter_map(|s| match s.stat {
        stop::Stat::Percentile(p) => Some(p),
        _ => None,
    });
    for p in std::iter::once(99.0).chain(wanted) {
        if !percentiles.contains(&p) {
            percentiles.push(p);
        }
    }
    serve.insert("metric_percentiles".into(), json!(percentiles));
    Ok(serve)
}

/// `YYYYmmdd-HHMMSS` in UTC, the `date` key of a result file.
pub fn utc_date(now: SystemTime) -> String {
    let secs = now.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let (days, rest) = ((secs / 86_400) as i64, secs % 86_400);
    // Days since 1970-01-01 to a civil date (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}{month:02}{day:02}-{:02}{:02}{:02}",
        rest / 3600,
        rest % 3600 / 60,
        rest % 60
    )
}

/// The numbers a `point_result` event shows.
fn headline(result: &Map<String, Value>) -> Map<String, Value> {
    summary::COLUMNS
        .iter()
        .filter_map(|&key| result.get(key).map(|v| (key.to_string(), v.clone())))
        .collect()
}

fn point_fields(sweep: &Sweep, index: usize, point: &Point) -> Map<String, Value> {
    let (concurrency, rate) = point.load.keys();
    let mut fields = Map::new();
    fields.insert("index".into(), json!(index + 1));
    fields.insert("total".into(), json!(sweep.points.len()));
    fields.insert("label".into(), json!(point.label));
    fields.insert("axis".into(), json!(sweep.axis.key()));
    fields.insert("max_concurrency".into(), concurrency);
    fields.insert("request_rate".into(), rate);
    fields.insert("path".into(), json!(point.path.display().to_string()));
    fields
}

/// Runs the sweep; `Ok(true)` when every server's sweep ran to its end or stopped on its
/// results, `Ok(false)` when a point could not run.
pub async fn run(sweep: Sweep) -> Result<bool, String> {
    std::fs::create_dir_all(&sweep.output_dir)
        .map_err(|e| format!("cannot create {}: {e}", sweep.output_dir.display()))?;
    let mut plan = Map::new();
    plan.insert("labels".into(), json!(sweep.labels));
    plan.insert("axis".into(), json!(sweep.axis.key()));
    plan.insert("points".into(), json!(sweep.points.len()));
    plan.insert(
        "output_dir".into(),
        json!(sweep.output_dir.display().to_string()),
    );
    events::emit("sweep", plan);
    let mut all_ran = true;
    let mut stopped: Option<&str> = None;
    for (index, point) in sweep.points.iter().enumerate() {
        if stopped == Some(point.label.as_str()) {
            continue;
        }
        let mut fields = point_fields(&sweep, index, point);
        let keys = point.load.keys();
        let stored = if sweep.resume {
            summary::complete_result(&point.path, &point.label, &keys)
        } else {
            None
        };
        let (result, resumed) = match stored {
            Some(result) => {
                fields.extend(headline(&result));
                events::emit("point_skipped", fields.clone());
                (result, true)
            }
            None => {
                events::emit("point", fields.clone());
                match runner::bench(point.args.clone()).await {
                    Ok(result) => {
                        let mut stored = Map::new();
                        stored.insert("date".into(), json!(utc_date(SystemTime::now())));
                        stored.extend(result);
                        summary::write_json(&point.path, &stored)?;
                        fields.extend(headline(&stored));
                        events::emit("point_result", fields.clone());
                        (stored, false)
                    }
                    Err(message) => {
                        all_ran = false;
                        fields.insert("message".into(), json!(message));
                        events::emit("point_error", fields.clone());
                        let reason = format!("the point could not run: {message}");
                        emit_stop(&sweep, index, point, &reason, false);
                        stopped = Some(point.label.as_str());
                        continue;
                    }
                }
            }
        };
        if let Some(reason) = stop::stop_reason(&result, sweep.max_failed_ratio, &sweep.slos) {
            emit_stop(&sweep, index, point, &reason, resumed);
            stopped = Some(point.label.as_str());
        }
    }
    let (path, rows) = summary::write_csv(&sweep.output_dir, &sweep.labels)?;
    let mut done = Map::new();
    done.insert("path".into(), json!(path.display().to_string()));
    done.insert("rows".into(), json!(rows));
    events::emit("summary", done);
    Ok(all_ran)
}

/// The `stop` event: the server, the point it stopped at, why, and how many of its
/// points are left out.
fn emit_stop(sweep: &Sweep, index: usize, point: &Point, reason: &str, resumed: bool) {
    let skipped = sweep.points[index + 1..]
        .iter()
        .filter(|p| p.label == point.label)
        .count();
    let mut fields = point_fields(sweep, index, point);
    fields.insert("reason".into(), json!(reason));
    fields.insert("skipped".into(), json!(skipped));
    fields.insert("resumed".into(), json!(resumed));
    events::emit("stop", fields);
}

#[cfg(test)]
mod tests;
