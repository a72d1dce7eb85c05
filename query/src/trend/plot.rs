//! One SVG per series: the observations over time, the level between change points, and a line
//! at each change coloured by its kind. SVG keeps plotters free of font and image libraries.

use super::{Change, Observation, SeriesKey};
use crate::error::QueryError;
use chrono::{DateTime, Utc};
use plotters::prelude::*;
use std::path::Path;

fn date(micros: f64) -> String {
    DateTime::<Utc>::from_timestamp_micros(micros as i64)
        .map(|d| d.format("%Y-%m").to_string())
        .unwrap_or_default()
}

/// A file name for the series: readable, and unique through a short hash of the whole key.
fn file_name(key: &SeriesKey) -> String {
    let readable: String = format!("{}_{}_{}", key.testcase, key.machine, key.metric)
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '.' {
                c
            } else {
                '_'
            }
        })
        .take(120)
        .collect();
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for b in key.params.bytes().chain(key.to_string().bytes()) {
        hash = (hash ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
    }
    format!("{readable}_{:08x}.svg", hash & 0xffff_ffff)
}

pub fn draw(
    dir: &Path,
    key: SeriesKey,
    observations: &[Observation],
    changes: &[Change],
) -> Result<(), QueryError> {
    let path = dir.join(file_name(&key));
    let fail =
        |e: &dyn std::fmt::Display| QueryError::Config(format!("drawing {}: {e}", path.display()));
    let (Some(first), Some(last)) = (observations.first(), observations.last()) else {
        return Ok(());
    };
    let (x0, x1) = (
        first.time as f64,
        (last.time as f64).max(first.time as f64 + 1.0),
    );
    let (lo, hi) = observations
        .iter()
        .map(|o| o.value)
        .filter(|v| v.is_finite())
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), v| {
            (lo.min(v), hi.max(v))
        });
    if !lo.is_finite() {
        return Ok(());
    }
    let pad = ((hi - lo) * 0.08).max(hi.abs() * 0.01).max(1e-9);
    let root = SVGBackend::new(&path, (1000, 420)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| fail(&e))?;
    let mut chart = ChartBuilder::on(&root)
        .caption(
            format!("{} / {} / {}", key.testcase, key.machine, key.metric),
            ("sans-serif", 20),
        )
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(90)
        .build_cartesian_2d(x0..x1, (lo - pad)..(hi + pad))
        .map_err(|e| fail(&e))?;
    chart
        .configure_mesh()
        .x_labels(8)
        .x_label_formatter(&|x| date(*x))
        .y_desc(key.metric.as_str())
        .x_desc(key.params.chars().take(110).collect::<String>())
        .draw()
        .map_err(|e| fail(&e))?;
    chart
        .draw_series(
            observations
                .iter()
                .map(|o| Circle::new((o.time as f64, o.value), 2, BLUE.mix(0.6).filled())),
        )
        .map_err(|e| fail(&e))?;
    // The level of each segment between change points.
    let mut bounds: Vec<(f64, f64, f64)> = Vec::new();
    let mut start = x0;
    for c in changes {
        bounds.push((start, c.time_before as f64, c.mean_before));
        start = c.time as f64;
    }
    if let Some(c) = changes.last() {
        bounds.push((start, x1, c.mean_after));
    }
    for (a, b, level) in bounds {
        chart
            .draw_series(LineSeries::new(
                [(a, level), (b, level)],
                BLACK.stroke_width(2),
            ))
            .map_err(|e| fail(&e))?;
    }
    for c in changes {
        let colour = match c.kind.as_deref() {
            Some("regression") => RED,
            Some("improvement") => GREEN,
            _ => RGBColor(230, 140, 0),
        };
        let x = (c.time_before as f64 + c.time as f64) / 2.0;
        chart
            .draw_series(LineSeries::new(
                [(x, lo - pad), (x, hi + pad)],
                colour.stroke_width(2),
            ))
            .map_err(|e| fail(&e))?
            .label(format!(
                "{} {:+.1}% ({}..{})",
                c.kind.as_deref().unwrap_or("change"),
                c.change_pct,
                &c.last_commit_before.chars().take(10).collect::<String>(),
                &c.first_commit_after.chars().take(10).collect::<String>()
            ))
            .legend(move |(x, y)| PathElement::new([(x, y), (x + 16, y)], colour.stroke_width(2)));
    }
    if !changes.is_empty() {
        chart
            .configure_series_labels()
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .draw()
            .map_err(|e| fail(&e))?;
    }
    root.present().map_err(|e| fail(&e))?;
    Ok(())
}
