//! `date_trunc` on the lake's UTC timestamps by arithmetic on days.
//!
//! DataFusion 55 truncates a timestamp with a time zone to an hour, day, week, month, quarter or
//! year through chrono-tz, one value at a time: it looks the zone's offset up twice for each
//! value, even for UTC. Every timestamp in the lake is UTC, and the monthly aggregate over the
//! 10.6M-row lake spent most of its time there (`general_date_trunc` and chrono-tz, a third of
//! the profile). [`udf`] is `date_trunc` with the same signature and answers: a microsecond
//! timestamp array in UTC, or without a zone, is truncated by integer arithmetic on its days (a
//! run of values on one day is computed once); anything else goes to DataFusion's own function.

use chrono::{Datelike, NaiveDate};
use datafusion::arrow::array::{Array, AsArray, TimestampMicrosecondArray};
use datafusion::arrow::compute::{max, min};
use datafusion::arrow::datatypes::{DataType, FieldRef, TimeUnit, TimestampMicrosecondType};
use datafusion::common::ScalarValue;
use datafusion::error::Result;
use datafusion::logical_expr::sort_properties::{ExprProperties, SortProperties};
use datafusion::logical_expr::{
    ColumnarValue, Documentation, ReturnFieldArgs, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl,
    Signature,
};
use std::cell::Cell;
use std::sync::Arc;

const MICROS_PER_HOUR: i64 = 3_600_000_000;
const MICROS_PER_DAY: i64 = 24 * MICROS_PER_HOUR;
/// Days from 0001-01-01 (chrono's day 1 of the common era) to 1970-01-01.
const UNIX_EPOCH_FROM_CE: i64 = 719_163;
/// DataFusion truncates in nanoseconds and refuses a timestamp it cannot multiply to them: an
/// array with a value outside this range goes to it, so it gives its error.
const NANOSECOND_RANGE: std::ops::RangeInclusive<i64> = (i64::MIN / 1_000)..=(i64::MAX / 1_000);

/// DataFusion's `date_trunc`, with the fast path of the module's doc.
pub fn udf() -> ScalarUDF {
    ScalarUDF::new_from_impl(UtcDateTrunc {
        inner: datafusion::functions::datetime::date_trunc(),
    })
}

/// The granularities truncated here: those DataFusion sends through chrono-tz.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Unit {
    Hour,
    Day,
    Week,
    Month,
    Quarter,
    Year,
}

impl Unit {
    fn parse(granularity: &str) -> Option<Self> {
        Some(match granularity.to_lowercase().as_str() {
            "hour" => Self::Hour,
            "day" => Self::Day,
            "week" => Self::Week,
            "month" => Self::Month,
            "quarter" => Self::Quarter,
            "year" => Self::Year,
            _ => return None,
        })
    }

    /// The first day of the unit holding `days` (days since 1970-01-01), for units of a day or
    /// more.
    fn first_day(self, days: i64) -> Option<i64> {
        let date =
            NaiveDate::from_num_days_from_ce_opt(i32::try_from(days + UNIX_EPOCH_FROM_CE).ok()?)?;
        let first = match self {
            Self::Hour | Self::Day => date,
            // 1970-01-01 was a Thursday: Monday starts the week, as in DataFusion.
            Self::Week => return Some(days - (days + 3).rem_euclid(7)),
            Self::Month => date.with_day(1)?,
            Self::Quarter => date.with_day(1)?.with_month(1 + 3 * (date.month0() / 3))?,
            Self::Year => date.with_ordinal(1)?,
        };
        Some(i64::from(first.num_days_from_ce()) - UNIX_EPOCH_FROM_CE)
    }

    /// `micros` truncated, or `None` when chrono cannot represent its date.
    /// `last` holds the previous value's day and its unit's first day.
    fn truncate(self, micros: i64, last: &Cell<Option<(i64, i64)>>) -> Option<i64> {
        if self == Self::Hour {
            return Some(micros - micros.rem_euclid(MICROS_PER_HOUR));
        }
        let days = micros.div_euclid(MICROS_PER_DAY);
        let first = match last.get() {
            Some((day, first)) if day == days => first,
            _ => {
                let first = self.first_day(days)?;
                last.set(Some((days, first)));
                first
            }
        };
        Some(first * MICROS_PER_DAY)
    }
}

/// `date_trunc` that truncates UTC microsecond arrays itself (see the module's doc).
#[derive(Debug, PartialEq, Eq, Hash)]
struct UtcDateTrunc {
    inner: Arc<ScalarUDF>,
}

impl UtcDateTrunc {
    /// The truncated array, when the arguments are what the fast path takes.
    fn fast(args: &[ColumnarValue]) -> Option<TimestampMicrosecondArray> {
        let [
            ColumnarValue::Scalar(granularity),
            ColumnarValue::Array(array),
        ] = args
        else {
            return None;
        };
        let unit = match granularity {
            ScalarValue::Utf8(Some(g))
            | ScalarValue::Utf8View(Some(g))
            | ScalarValue::LargeUtf8(Some(g)) => Unit::parse(g)?,
            _ => return None,
        };
        let DataType::Timestamp(TimeUnit::Microsecond, zone) = array.data_type() else {
            return None;
        };
        if !matches!(zone.as_deref(), None | Some("UTC" | "+00:00")) {
            return None;
        }
        let array = array.as_primitive::<TimestampMicrosecondType>();
        let (least, greatest) = (min(array), max(array));
        if [least, greatest]
            .into_iter()
            .flatten()
            .any(|v| !NANOSECOND_RANGE.contains(&v))
        {
            return None;
        }
        let last = Cell::new(None);
        let truncated: TimestampMicrosecondArray = array
            .try_unary(|micros| unit.truncate(micros, &last).ok_or(()))
            .ok()?;
        Some(truncated.with_timezone_opt(zone.clone()))
    }
}

impl ScalarUDFImpl for UtcDateTrunc {
    fn name(&self) -> &str {
        self.inner.name()
    }

    fn signature(&self) -> &Signature {
        self.inner.signature()
    }

    fn return_type(&self, arg_types: &[DataType]) -> Result<DataType> {
        self.inner.return_type(arg_types)
    }

    fn return_field_from_args(&self, args: ReturnFieldArgs) -> Result<FieldRef> {
        self.inner.return_field_from_args(args)
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        match Self::fast(&args.args) {
            Some(truncated) => Ok(ColumnarValue::Array(Arc::new(truncated))),
            None => self.inner.invoke_with_args(args),
        }
    }

    fn aliases(&self) -> &[String] {
        self.inner.aliases()
    }

    fn output_ordering(&self, input: &[ExprProperties]) -> Result<SortProperties> {
        self.inner.output_ordering(input)
    }

    fn documentation(&self) -> Option<&Documentation> {
        self.inner.documentation()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::arrow::array::{ArrayRef, RecordBatch};
    use datafusion::arrow::util::pretty::pretty_format_batches;
    use datafusion::prelude::SessionContext;

    /// The lake's kind of timestamps (UTC) and zoneless ones, from before 1970 to past the
    /// last one DataFusion can truncate (2262-04-11T23:47:16Z, i64 nanoseconds), and a null.
    fn timestamps(micros: &[Option<i64>]) -> SessionContext {
        let utc = TimestampMicrosecondArray::from(micros.to_vec()).with_timezone("UTC");
        let naive = TimestampMicrosecondArray::from(micros.to_vec());
        let batch = RecordBatch::try_from_iter([
            ("utc", Arc::new(utc) as ArrayRef),
            ("naive", Arc::new(naive) as ArrayRef),
        ])
        .unwrap_or_else(|e| panic!("{e}"));
        let ctx = SessionContext::new();
        ctx.register_batch("t", batch)
            .unwrap_or_else(|e| panic!("{e}"));
        ctx
    }

    async fn truncated(ctx: &SessionContext, granularity: &str) -> Result<String, String> {
        let sql = format!(
            "SELECT utc, date_trunc('{granularity}', utc) AS u, \
             date_trunc('{granularity}', naive) AS n FROM t"
        );
        let batches = ctx
            .sql(&sql)
            .await
            .map_err(|e| e.to_string())?
            .collect()
            .await
            .map_err(|e| e.to_string())?;
        Ok(pretty_format_batches(&batches)
            .map_err(|e| e.to_string())?
            .to_string())
    }

    #[tokio::test]
    async fn every_granularity_truncates_as_datafusion_does() {
        let within = [
            Some(1_711_929_599_999_999),  // 2024-03-31T23:59:59.999999Z
            Some(1_704_067_200_000_000),  // 2024-01-01T00:00:00Z
            Some(1_709_188_200_000_000),  // 2024-02-29T06:30:00Z, a Thursday
            Some(-3_600_000_000),         // 1969-12-31T23:00:00Z, a Wednesday
            Some(-2_203_891_077_000_000), // 1900-03-01T00:02:03Z
            Some(9_223_372_036_000_000),  // 2262-04-11T23:47:16Z
            None,
        ];
        let past_nanoseconds = [Some(1_704_067_200_000_000), Some(10_000_000_000_000_000)];
        for micros in [&within[..], &past_nanoseconds[..]] {
            let theirs = timestamps(micros);
            let ours = timestamps(micros);
            ours.register_udf(udf());
            for granularity in ["hour", "day", "week", "Month", "quarter", "year", "minute"] {
                assert_eq!(
                    truncated(&ours, granularity).await,
                    truncated(&theirs, granularity).await,
                    "{granularity} of {micros:?}"
                );
            }
        }
        // The comparison compared answers, not two errors.
        assert!(truncated(&timestamps(&within), "month").await.is_ok());
    }

    #[test]
    fn a_value_is_truncated_to_the_monday_the_first_of_its_month_quarter_and_year() {
        // 2024-02-29T06:30:00Z, a Thursday.
        let micros = 1_709_188_200_000_000;
        let day = |y, m, d| {
            NaiveDate::from_ymd_opt(y, m, d)
                .map(|d| (i64::from(d.num_days_from_ce()) - UNIX_EPOCH_FROM_CE) * MICROS_PER_DAY)
        };
        for (unit, expected) in [
            (Unit::Hour, Some(micros - 30 * 60 * 1_000_000)),
            (Unit::Day, day(2024, 2, 29)),
            (Unit::Week, day(2024, 2, 26)),
            (Unit::Month, day(2024, 2, 1)),
            (Unit::Quarter, day(2024, 1, 1)),
            (Unit::Year, day(2024, 1, 1)),
        ] {
            assert_eq!(
                unit.truncate(micros, &Cell::new(None)),
                expected,
                "{unit:?}"
            );
        }
    }
}
