//! The tables of `docs/performance.md`, printed by `cargo xtask
//! bench-report` from the same bench files as the charts: the figures of
//! one run go into the page as they came out of it.

use serde_json::Value;

use crate::bench_report::{category, Run, CATEGORIES};

/// The stores of the main tables, in their columns' order (file names in `docs/bench/`).
const STORES: [&str; 5] = ["memory", "sqlite", "files", "redis", "postgres"];

/// The search engines, tabled apart (their bench runs other sizes).
const SEARCH_ENGINES: [&str; 2] = ["elasticsearch", "opensearch"];

/// The result rows of each named store present in `runs`, its files merged.
fn columns<'a>(runs: &'a [Run], names: &[&'static str]) -> Vec<(&'static str, Vec<&'a Value>)> {
    names
        .iter()
        .filter_map(|&name| {
            let rows: Vec<&Value> = runs
                .iter()
                .filter(|r| r.name == name)
                .flat_map(|r| r.results.iter())
                .collect();
            (!rows.is_empty()).then_some((name, rows))
        })
        .collect()
}

fn workload(row: &Value) -> &str {
    row["workload"].as_str().unwrap_or("")
}

/// `digits` with a comma between each three.
fn thousands(digits: &str) -> String {
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// `text` with every number of four digits or more written with commas.
fn with_thousands(text: &str) -> String {
    let mut out = String::new();
    let mut number = String::new();
    let flush = |number: &mut String, out: &mut String| {
        if number.len() >= 4 {
            out.push_str(&thousands(number));
        } else {
            out.push_str(number);
        }
        number.clear();
    };
    for c in text.chars() {
        if c.is_ascii_digit() {
            number.push(c);
        } else {
            flush(&mut number, &mut out);
            out.push(c);
        }
    }
    flush(&mut number, &mut out);
    out
}

/// A row's label in a table: its workload, numbers with commas.
fn label(workload: &str) -> String {
    with_thousands(&workload.replacen(": ", ", ", 1))
}

/// A figure in the row's unit.
fn figure(value: f64, unit: &str) -> String {
    match unit {
        "events/s" if value >= 100.0 => format!("{}/s", thousands(&format!("{value:.0}"))),
        "events/s" => format!("{value:.1}/s"),
        "ms/op" | "ms/search" if value < 0.05 => format!("{:.1} µs", value * 1000.0),
        "ms/op" | "ms/search" if value >= 1000.0 => {
            format!("{} ms", thousands(&format!("{value:.0}")))
        }
        "ms/op" | "ms/search" => format!("{value:.2} ms"),
        "×" => format!("{value:.2}×"),
        other => format!("{value:.1} {other}"),
    }
}

/// The store's figure of `row`, or the raw engine's.
fn side(row: &Value, key: &str) -> Option<String> {
    let unit = row["unit"].as_str().unwrap_or("");
    row[key].as_f64().map(|v| figure(v, unit))
}

/// A store-vs-raw cell: both figures and the median ratio of the pairs with its range.
fn pair_cell(row: &Value) -> String {
    let ratio = |k: &str| row["ratio"][k].as_f64().unwrap_or(f64::NAN);
    match (side(row, "library"), side(row, "raw")) {
        (Some(lib), Some(raw)) => format!(
            "{lib} vs {raw}: **{:.2}** ({:.2}–{:.2})",
            ratio("median"),
            ratio("min"),
            ratio("max")
        ),
        (Some(lib), None) => lib,
        _ => "—".to_owned(),
    }
}

/// A markdown table: the header, then each label's cells across `columns`.
fn table(corner: &str, columns: &[(&str, Vec<&Value>)], rows: &[(String, Vec<String>)]) -> String {
    let mut out = format!("| {corner} |");
    for (name, _) in columns {
        out.push_str(&format!(" {name} |"));
    }
    out.push_str("\n|---|");
    out.push_str(&"---|".repeat(columns.len()));
    for (label, cells) in rows {
        out.push_str(&format!("\n| {label} | {} |", cells.join(" | ")));
    }
    out.push('\n');
    out
}

/// The rows whose workload passes `pick`, labelled by the first store
/// holding each, with each store's cell (`—` where it has none).
fn rows_where(
    columns: &[(&str, Vec<&Value>)],
    pick: impl Fn(&str) -> bool,
    cell: impl Fn(&Value) -> String,
) -> Vec<(String, Vec<String>)> {
    let mut labels: Vec<&str> = Vec::new();
    for (_, rows) in columns {
        for row in rows {
            let w = workload(row);
            if pick(w) && !labels.iter().any(|l| same_row(l, w)) {
                labels.push(w);
            }
        }
    }
    labels
        .into_iter()
        .map(|w| {
            let cells: Vec<String> = columns
                .iter()
                .map(|(_, rows)| {
                    rows.iter()
                        .find(|r| same_row(workload(r), w))
                        .map_or_else(|| "—".to_owned(), |r| cell(r))
                })
                .collect();
            (label(w), cells)
        })
        .filter(|(_, cells)| cells.iter().any(|c| c != "—"))
        .collect()
}

/// Whether two workloads are one row: the same text before any bracket
/// (a search's hit count, which differs between stores, stays out).
fn same_row(a: &str, b: &str) -> bool {
    let key = |w: &str| w.split(" (").next().unwrap_or(w).to_owned();
    key(a) == key(b)
}

/// The row of a store in the chart category `cat`.
fn of_category<'a>(rows: &[&'a Value], cat: &str) -> Option<&'a Value> {
    rows.iter()
        .find(|r| category(workload(r)) == Some(cat))
        .copied()
}

/// The store-vs-raw table: one row per chart category, in the charts' order.
fn ratio_table(columns: &[(&str, Vec<&Value>)]) -> String {
    let rows: Vec<(String, Vec<String>)> = CATEGORIES
        .iter()
        .filter_map(|&cat| {
            let first = columns
                .iter()
                .find_map(|(_, rows)| of_category(rows, cat))?;
            let cells = columns
                .iter()
                .map(|(_, rows)| of_category(rows, cat).map_or_else(|| "—".to_owned(), pair_cell))
                .collect();
            Some((label(workload(first)), cells))
        })
        .collect();
    table("workload", columns, &rows)
}

/// The reads against session length: the last 20, then the full reads,
/// each followed by its growth; the raw engine's growth last.
fn length_table(columns: &[(&str, Vec<&Value>)]) -> String {
    let store = |r: &Value| side(r, "library").unwrap_or_else(|| "—".to_owned());
    let mut rows = rows_where(columns, |w| w.starts_with("last 20 of"), store);
    rows.extend(
        rows_where(columns, |w| w.starts_with("last 20 growth"), store)
            .into_iter()
            .map(|(l, c)| (format!("**{l}** (target ≤ 1.5)"), c)),
    );
    rows.extend(rows_where(
        columns,
        |w| w.starts_with("full read of"),
        store,
    ));
    rows.extend(
        rows_where(columns, |w| w.starts_with("full read growth"), store)
            .into_iter()
            .map(|(l, c)| (format!("**{l}** (target ≤ 12)"), c)),
    );
    rows.extend(
        rows_where(
            columns,
            |w| w.starts_with("full read growth"),
            |r| side(r, "raw").unwrap_or_else(|| "—".to_owned()),
        )
        .into_iter()
        .map(|(_, c)| ("full read growth of the raw engine, same run".to_owned(), c)),
    );
    table("read", columns, &rows)
}

/// The rows of one kind, each store's figure alone.
fn figure_table(
    corner: &str,
    columns: &[(&str, Vec<&Value>)],
    pick: impl Fn(&str) -> bool,
) -> String {
    let store = |r: &Value| side(r, "library").unwrap_or_else(|| "—".to_owned());
    table(corner, columns, &rows_where(columns, pick, store))
}

/// Every table, markdown, each under a comment naming its section.
pub(crate) fn tables(runs: &[Run]) -> String {
    let mut out = String::new();
    let stores = columns(runs, &STORES);
    if !stores.is_empty() {
        out.push_str("<!-- Appends and reads next to the raw engine -->\n");
        out.push_str(&ratio_table(&stores));
        out.push_str("\n<!-- Reads against session length -->\n");
        out.push_str(&length_table(&stores));
        out.push_str("\n<!-- Compaction in a running agent's steady state -->\n");
        out.push_str(&figure_table("compaction", &stores, |w| {
            w.starts_with("compaction") || w.starts_with("offline summarizer")
        }));
        out.push_str("\n<!-- Search -->\n");
        out.push_str(&figure_table("W4 search, first page", &stores, |w| {
            w.starts_with("W4")
        }));
    }
    let engines = columns(runs, &SEARCH_ENGINES);
    if !engines.is_empty() {
        out.push_str("\n<!-- Elasticsearch and OpenSearch -->\n");
        out.push_str(&ratio_table(&engines));
        out.push('\n');
        out.push_str(&length_table(&engines));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_of_four_digits_or_more_get_commas() {
        assert_eq!(
            with_thousands("W2 append: 1000 sessions × 20, 16 clients"),
            "W2 append: 1,000 sessions × 20, 16 clients"
        );
        assert_eq!(with_thousands("100000 ÷ 10000"), "100,000 ÷ 10,000");
        assert_eq!(thousands("999"), "999");
    }

    #[test]
    fn figures_take_the_unit_of_the_row() {
        assert_eq!(figure(115_267.7, "events/s"), "115,268/s");
        assert_eq!(figure(18.51, "events/s"), "18.5/s");
        assert_eq!(figure(0.01076, "ms/op"), "10.8 µs");
        assert_eq!(figure(15.923, "ms/op"), "15.92 ms");
        assert_eq!(figure(5365.4, "ms/op"), "5,365 ms");
        assert_eq!(figure(12.686, "×"), "12.69×");
    }

    #[test]
    fn a_store_without_a_row_gets_a_dash_and_the_raw_engine_its_figure() {
        let run = |name: &str, rows: Value| Run {
            name: name.to_owned(),
            results: rows.as_array().cloned().unwrap_or_default(),
        };
        let w1 = serde_json::json!([{
            "workload": "W1 append: 10000 events to 1 session", "unit": "events/s",
            "library": 5000.0, "raw": 10000.0,
            "ratio": {"median": 0.5, "min": 0.4, "max": 0.6}
        }]);
        let runs = [run("memory", w1), run("sqlite", serde_json::json!([]))];
        let text = tables(&runs);
        assert!(
            text.contains("| W1 append, 10,000 events to 1 session | 5,000/s vs 10,000/s: **0.50** (0.40–0.60) |"),
            "{text}"
        );
        assert!(
            !text.contains("sqlite"),
            "a store without rows has no column: {text}"
        );
    }
}
