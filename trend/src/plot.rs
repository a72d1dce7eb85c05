//! One SVG per series: the observations in order (dated on the axis), the level between change points, and a line
//! at each change coloured by its kind. SVG keeps plotters free of font and image libraries.

use super::{Change, Observation, SeriesKey};
use crate::TrendError;
use chrono::{DateTime, Utc};
use plotters::prelude::*;
use std::path::Path;

fn date(micros: f64) -> String {
    DateTime::<Utc>::from_timestamp_micros(micros as i64)
        .map(|d| d.format("%Y-%m-%d").to_string())
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
) -> Result<(), TrendError> {
    let path = dir.join(file_name(&key));
    let fail = |e: &dyn std::fmt::Display| TrendError::Plot {
        path: path.to_owned(),
        reason: e.to_string(),
    };
    if observations.is_empty() {
        return Ok(());
    }
    // Observations by position, not by time: a report measures base and head at the same
    // moment and reports cluster within days, so a time axis would stack the points.
    let n = observations.len();
    let x1 = n.saturating_sub(1).max(1) as f64;
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
        .build_cartesian_2d(-0.5..(x1 + 0.5), (lo - pad)..(hi + pad))
        .map_err(|e| fail(&e))?;
    let day = |x: &f64| {
        let i = x.round().clamp(0.0, x1) as usize;
        observations
            .get(i)
            .map(|o| date(o.time as f64))
            .unwrap_or_default()
    };
    chart
        .configure_mesh()
        .x_labels(n.min(10))
        .x_label_formatter(&day)
        .y_desc(key.metric.as_str())
        .x_desc(key.params.chars().take(110).collect::<String>())
        .draw()
        .map_err(|e| fail(&e))?;
    chart
        .draw_series(
            observations
                .iter()
                .enumerate()
                .map(|(i, o)| Circle::new((i as f64, o.value), 3, BLUE.mix(0.7).filled())),
        )
        .map_err(|e| fail(&e))?;
    // Where each change falls: just before its first observation after.
    let at: Vec<f64> = changes
        .iter()
        .map(|c| {
            observations
                .iter()
                .position(|o| o.commit == c.first_commit_after && o.time == c.time)
                .map_or(0.0, |i| i as f64 - 0.5)
        })
        .collect();
    // The level of each segment between change points.
    let mut start = -0.5;
    let mut levels: Vec<(f64, f64, f64)> = Vec::new();
    for (c, &x) in changes.iter().zip(&at) {
        levels.push((start, x, c.mean_before));
        start = x;
    }
    if let Some(c) = changes.last() {
        levels.push((start, x1 + 0.5, c.mean_after));
    }
    for (a, b, level) in levels {
        chart
            .draw_series(LineSeries::new(
                [(a, level), (b, level)],
                BLACK.stroke_width(2),
            ))
            .map_err(|e| fail(&e))?;
    }
    for (c, &x) in changes.iter().zip(&at) {
        let colour = match c.kind.as_deref() {
            Some("regression") => RED,
            Some("improvement") => GREEN,
            _ => RGBColor(230, 140, 0),
        };
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
