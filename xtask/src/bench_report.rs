//! `cargo xtask bench-report`: the charts of `docs/performance.md`, drawn
//! from the `agent-session --json bench --compare raw` outputs in `docs/bench/`.
//!
//! - `docs/bench/ratio-to-raw.svg`: each store's speed relative to its raw
//!   engine per workload (median of the pairs, with their range);
//! - `docs/bench/reads-by-length.svg`: the last 20 events and a full read
//!   against the session's length, per store;
//! - and, through `bench_tables`, the page's tables of the same figures.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use plotters::prelude::*;
use serde_json::Value;

/// One store's run: its name and its result rows.
pub(crate) struct Run {
    /// The store's name: its file's, less a `-16-clients` suffix (the
    /// files of one store merge; OpenSearch's runs name their backend
    /// `elasticsearch`, so the name cannot come from inside).
    pub(crate) name: String,
    /// The bench's result rows.
    pub(crate) results: Vec<Value>,
}

/// The runs in `dir` (`*.json`), by file name.
fn runs(dir: &Path) -> Result<Vec<Run>, String> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(|e| format!("cannot read {}: {e}", dir.display()))?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    files.sort();
    let mut out = Vec::new();
    for f in files {
        let text = std::fs::read_to_string(&f).map_err(|e| format!("{}: {e}", f.display()))?;
        let doc: Value =
            serde_json::from_str(&text).map_err(|e| format!("{}: {e}", f.display()))?;
        let stem = f.file_stem().and_then(|s| s.to_str()).unwrap_or("?");
        let name = stem.trim_end_matches("-16-clients").to_owned();
        let results = doc["results"].as_array().cloned().unwrap_or_default();
        out.push(Run { name, results });
    }
    Ok(out)
}

/// The chart category of a workload row, if it has one.
pub(crate) fn category(workload: &str) -> Option<&'static str> {
    if workload.starts_with("W1 append") {
        Some("W1 append")
    } else if workload.starts_with("W2 append") && workload.ends_with(" 1 client") {
        Some("W2 append, 1 client")
    } else if workload.starts_with("W2 append") && workload.ends_with("16 clients") {
        Some("W2 append, 16 clients")
    } else if workload.starts_with("W3 full read") {
        Some("W3 full read")
    } else if workload.starts_with("W3 last 20") {
        Some("W3 last 20")
    } else {
        None
    }
}

pub(crate) const CATEGORIES: [&str; 5] = [
    "W1 append",
    "W2 append, 1 client",
    "W2 append, 16 clients",
    "W3 full read",
    "W3 last 20",
];

/// A small index as a chart coordinate.
fn coord(i: usize) -> f64 {
    f64::from(u32::try_from(i).unwrap_or(u32::MAX))
}

/// The category whose label sits at `x` (the middle of its slot), if any.
fn label_at(x: f64) -> String {
    CATEGORIES
        .iter()
        .enumerate()
        .find(|(i, _)| (coord(*i) + 0.5 - x).abs() < 1e-6)
        .map_or_else(String::new, |(_, c)| (*c).to_owned())
}

fn draw_err<E: std::fmt::Display>(e: E) -> String {
    format!("drawing failed: {e}")
}

/// The colour of the `i`th store.
fn colour(i: usize) -> RGBColor {
    const C: [RGBColor; 6] = [
        RGBColor(31, 119, 180),
        RGBColor(255, 127, 14),
        RGBColor(44, 160, 44),
        RGBColor(214, 39, 40),
        RGBColor(148, 103, 189),
        RGBColor(140, 86, 75),
    ];
    C[i % C.len()]
}

/// Bars of speed ÷ raw per category and store, with the pairs' range.
fn ratio_chart(runs: &[Run], path: &Path) -> Result<(), String> {
    // store -> category -> (median, min, max)
    let mut by_store: BTreeMap<String, BTreeMap<&str, (f64, f64, f64)>> = BTreeMap::new();
    for run in runs {
        for r in &run.results {
            let (Some(cat), Some(ratio)) = (
                category(r["workload"].as_str().unwrap_or("")),
                r["ratio"].as_object(),
            ) else {
                continue;
            };
            let get = |k: &str| ratio.get(k).and_then(Value::as_f64).unwrap_or(0.0);
            by_store
                .entry(run.name.clone())
                .or_default()
                .insert(cat, (get("median"), get("min"), get("max")));
        }
    }
    let stores: Vec<&String> = by_store.keys().collect();
    let top = by_store
        .values()
        .flat_map(|m| m.values().map(|v| v.2))
        .fold(1.2_f64, f64::max)
        .min(4.0);
    let root = SVGBackend::new(path, (960, 520)).into_drawing_area();
    root.fill(&WHITE).map_err(draw_err)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(
            "Speed ÷ raw engine (median of interleaved pairs; whiskers: min–max)",
            ("sans-serif", 18),
        )
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(50)
        .build_cartesian_2d(0.0..coord(CATEGORIES.len()), 0.0..top)
        .map_err(draw_err)?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(CATEGORIES.len() * 2 + 1)
        .x_label_formatter(&|x| label_at(*x))
        .y_desc("store speed ÷ raw speed (1 = as fast as raw)")
        .draw()
        .map_err(draw_err)?;
    chart
        .draw_series(LineSeries::new(
            [(0.0, 1.0), (coord(CATEGORIES.len()), 1.0)],
            BLACK.stroke_width(1),
        ))
        .map_err(draw_err)?;
    let width = 0.8 / coord(stores.len().max(1));
    for (j, store) in stores.iter().enumerate() {
        let c = colour(j);
        let bars: Vec<(f64, (f64, f64, f64))> = CATEGORIES
            .iter()
            .enumerate()
            .filter_map(|(i, cat)| {
                let v = by_store.get(*store)?.get(cat)?;
                Some((coord(i) + 0.1 + coord(j) * width, *v))
            })
            .collect();
        chart
            .draw_series(bars.iter().map(|(x, (m, _, _))| {
                Rectangle::new([(*x, 0.0), (*x + width * 0.9, m.min(top))], c.filled())
            }))
            .map_err(draw_err)?
            .label(store.as_str())
            .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 12, y + 5)], c.filled()));
        chart
            .draw_series(bars.iter().map(|(x, (_, lo, hi))| {
                let mid = *x + width * 0.45;
                PathElement::new(vec![(mid, lo.min(top)), (mid, hi.min(top))], BLACK)
            }))
            .map_err(draw_err)?;
    }
    chart
        .configure_series_labels()
        .border_style(BLACK)
        .background_style(WHITE.mix(0.9))
        .position(SeriesLabelPosition::UpperRight)
        .draw()
        .map_err(draw_err)?;
    root.present().map_err(draw_err)
}

/// Lines of ms per read against the session's length, one panel per read.
fn length_chart(runs: &[Run], path: &Path) -> Result<(), String> {
    let root = SVGBackend::new(path, (960, 420)).into_drawing_area();
    root.fill(&WHITE).map_err(draw_err)?;
    let (left, right) = root.split_horizontally(480);
    for (panel, prefix, title) in [
        (&left, "last 20 of ", "Last 20 events"),
        (&right, "full read of ", "Full read"),
    ] {
        let mut lines: BTreeMap<String, Vec<(f64, f64)>> = BTreeMap::new();
        for run in runs {
            for r in &run.results {
                let w = r["workload"].as_str().unwrap_or("");
                let (Some(n), Some(ms)) =
                    (r["extra"]["session_events"].as_f64(), r["library"].as_f64())
                else {
                    continue;
                };
                if w.starts_with(prefix) {
                    lines.entry(run.name.clone()).or_default().push((n, ms));
                }
            }
        }
        let xs = lines.values().flatten().map(|p| p.0);
        let (lo_x, hi_x) = xs.fold((f64::MAX, 1.0_f64), |(lo, hi), x| (lo.min(x), hi.max(x)));
        let ys = lines.values().flatten().map(|p| p.1);
        let (lo_y, hi_y) = ys.fold((f64::MAX, 1e-3_f64), |(lo, hi), y| (lo.min(y), hi.max(y)));
        let mut chart = ChartBuilder::on(panel)
            .caption(
                format!("{title}: ms per read by session length"),
                ("sans-serif", 16),
            )
            .margin(12)
            .x_label_area_size(36)
            .y_label_area_size(56)
            .build_cartesian_2d(
                (lo_x.min(hi_x) * 0.8..hi_x * 1.25).log_scale(),
                // Headroom above the lines for the legend.
                (lo_y.min(hi_y) * 0.5..hi_y * 20.0).log_scale(),
            )
            .map_err(draw_err)?;
        chart
            .configure_mesh()
            .x_desc("events in the session")
            .x_label_formatter(&|x| format!("{x:.0}"))
            .y_desc("ms")
            .draw()
            .map_err(draw_err)?;
        for (j, (store, mut points)) in lines.into_iter().enumerate() {
            points.sort_by(|a, b| a.0.total_cmp(&b.0));
            let c = colour(j);
            chart
                .draw_series(LineSeries::new(points.clone(), c.stroke_width(2)))
                .map_err(draw_err)?
                .label(store)
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 16, y)], c.stroke_width(2))
                });
            chart
                .draw_series(points.into_iter().map(|p| Circle::new(p, 3, c.filled())))
                .map_err(draw_err)?;
        }
        chart
            .configure_series_labels()
            .border_style(BLACK)
            .background_style(WHITE.mix(0.9))
            .position(SeriesLabelPosition::UpperLeft)
            .draw()
            .map_err(draw_err)?;
    }
    root.present().map_err(draw_err)
}

/// Draws both charts from `docs/bench/*.json` into `docs/bench/`; the
/// runs they were drawn from, for the tables.
pub(crate) fn run() -> Result<Vec<Run>, String> {
    let dir = Path::new("docs/bench");
    let runs = runs(dir)?;
    if runs.is_empty() {
        return Err(format!(
            "no bench results in {}: run `agent-session --json --store URL bench --compare raw > {}/NAME.json` first",
            dir.display(),
            dir.display()
        ));
    }
    ratio_chart(&runs, &dir.join("ratio-to-raw.svg"))?;
    length_chart(&runs, &dir.join("reads-by-length.svg"))?;
    eprintln!(
        "xtask: drew {} and {} from {} runs",
        dir.join("ratio-to-raw.svg").display(),
        dir.join("reads-by-length.svg").display(),
        runs.len()
    );
    Ok(runs)
}
