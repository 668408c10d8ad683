//! The one log line layout of vrs, in both languages:
//! `2026-12-01 20:15:07.123 INFO  [vrs-rs] message` (UTC, milliseconds, the level padded
//! to five). The Python side writes the same: engine/__main__.py and server/lifecycle/__init__.py
//! (`LOG_FORMAT`).

use std::fmt;
use std::time::{SystemTime, UNIX_EPOCH};

use tracing::{Event, Subscriber};
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields};
use tracing_subscriber::registry::LookupSpan;

/// The component named in brackets.
const COMPONENT: &str = "vrs-rs";

pub struct Layout;

impl<S, N> FormatEvent<S, N> for Layout
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    fn format_event(
        &self,
        ctx: &FmtContext<'_, S, N>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> fmt::Result {
        let since_epoch = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default();
        let level = event.metadata().level().as_str();
        write!(
            writer,
            "{} {level:<5} [{COMPONENT}] ",
            utc_timestamp(since_epoch.as_millis())
        )?;
        ctx.field_format().format_fields(writer.by_ref(), event)?;
        writeln!(writer)
    }
}

/// `YYYY-MM-DD HH:MM:SS.mmm` (UTC) of milliseconds since the Unix epoch.
pub fn utc_timestamp(millis: u128) -> String {
    let secs = (millis / 1000) as i64;
    let (days, rest) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    let (year, month, day) = civil_from_days(days);
    format!(
        "{year:04}-{month:02}-{day:02} {:02}:{:02}:{:02}.{:03}",
        rest / 3600,
        rest % 3600 / 60,
        rest % 60,
        millis % 1000
    )
}

/// The proleptic Gregorian date of a day count since 1970-01-01 (Howard Hinnant's
/// `civil_from_days`).
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_are_utc_calendar_dates() {
        assert_eq!(utc_timestamp(0), "1970-01-01 00:00:00.000");
        // 2000-02-29 (a leap day) 12:34:56.789
        assert_eq!(utc_timestamp(951_827_696_789), "2000-02-29 12:34:56.789");
        // 2026-12-01 20:15:07.123
        assert_eq!(utc_timestamp(1_796_156_107_123), "2026-12-01 20:15:07.123");
    }
}
