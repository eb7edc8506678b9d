//! The report of one run or of several runs side by side: SVG plots drawn with plotters, an
//! HTML page around them, and the comparison table of `fairway sim --compare`.
//!
//! The plots are (1) each tenant's share of the service delivered over time against its
//! entitlement, (2) wait-time CDFs per tenant and (3) per class, (4) utilization over time and
//! (5) admission outcomes. The time series come from a [`Timeline`] that [`Metrics`] records
//! during the run; its size is bounded by [`MAX_BUCKETS`] whatever the run's length, and every
//! plot draws a bounded number of points and series, so a report of a year-long trace is as
//! small as one of a minute.
//!
//! Runs compared on one page share their axes (time, wait, job counts), so that a curve's
//! height or position can be read across panels.

use crate::metrics::Metrics;
use fairway_core::Time;
use plotters::coord::Shift;
use plotters::coord::ranged1d::SegmentValue;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::fs::File;
use std::io::{self, Write as _};
use std::path::{Path, PathBuf};

/// The most buckets a [`Timeline`] keeps: when a run outgrows them, neighbouring buckets merge
/// and the bucket width doubles, so a timeline holds between half and all of this many.
pub const MAX_BUCKETS: usize = 256;

/// How many buckets a timeline aims at over its expected length.
const TARGET_BUCKETS: u64 = 200;

/// The narrowest bucket, in nanoseconds (1 µs).
const MIN_BUCKET_NS: u64 = 1_000;

/// The smallest of 1, 2 or 5 times a power of ten nanoseconds that is at least `ns`: round
/// widths, so that buckets do not beat against round arrival periods.
fn round_width_ns(ns: u64) -> u64 {
    let mut unit = MIN_BUCKET_NS;
    loop {
        for m in [1, 2, 5] {
            if unit.saturating_mul(m) >= ns {
                return unit.saturating_mul(m);
            }
        }
        if unit > u64::MAX / 10 {
            return unit;
        }
        unit *= 10;
    }
}

/// What a run did per time bucket, from time zero to its end: each tenant's service (its
/// dominant share of a pool times seconds, the unit of the JSON's `service_share`), each
/// tenant's backlogged seconds (with at least one job waiting), and the utilization-seconds of
/// the fleet (the most-used resource's fraction, as the JSON's `utilization`).
///
/// Memory is `MAX_BUCKETS × (2 × tenants + 1)` numbers at most, whatever the run's length.
#[derive(Clone, Debug)]
pub struct Timeline {
    tenants: usize,
    /// The bucket width, in nanoseconds: a round width times a power of two.
    width_ns: u64,
    /// Buckets in use.
    len: usize,
    /// `[bucket * tenants + tenant]`.
    service: Vec<f64>,
    /// `[bucket * tenants + tenant]`.
    backlog: Vec<f64>,
    /// `[bucket]`.
    busy: Vec<f64>,
    end: Time,
}

impl Timeline {
    /// An empty timeline for `tenants` tenants, with buckets sized for a run of about
    /// `expected` (1 ms buckets when unknown); a longer run merges them.
    pub fn new(tenants: usize, expected: Option<Time>) -> Timeline {
        let width_ns = match expected {
            Some(t) => round_width_ns(t.0 / TARGET_BUCKETS),
            None => 1_000_000,
        };
        Timeline {
            tenants,
            width_ns,
            len: 0,
            service: Vec::new(),
            backlog: Vec::new(),
            busy: Vec::new(),
            end: Time::ZERO,
        }
    }

    /// Makes room for instants up to `to`: merges pairs of buckets until `to` falls within
    /// `MAX_BUCKETS` of them, then extends the buckets in use.
    fn reach(&mut self, to: Time) {
        if to.0 == 0 {
            return;
        }
        let last = |width: u64| ((to.0 - 1) / width) as usize;
        while last(self.width_ns) >= MAX_BUCKETS {
            let merged = self.len.div_ceil(2);
            let n = self.tenants;
            for b in 0..merged {
                let (lo, hi) = (2 * b, (2 * b + 1).min(self.len - 1));
                let pair =
                    |v: &[f64], i: usize| v[lo * n + i] + if hi > lo { v[hi * n + i] } else { 0.0 };
                for i in 0..n {
                    self.service[b * n + i] = pair(&self.service, i);
                    self.backlog[b * n + i] = pair(&self.backlog, i);
                }
                self.busy[b] = self.busy[lo] + if hi > lo { self.busy[hi] } else { 0.0 };
            }
            self.len = merged;
            self.service.truncate(merged * n);
            self.backlog.truncate(merged * n);
            self.busy.truncate(merged);
            self.width_ns = self.width_ns.saturating_mul(2);
        }
        let needed = last(self.width_ns) + 1;
        if needed > self.len {
            self.len = needed;
            self.service.resize(needed * self.tenants, 0.0);
            self.backlog.resize(needed * self.tenants, 0.0);
            self.busy.resize(needed, 0.0);
        }
        debug_assert!(self.len <= MAX_BUCKETS);
    }

    /// Calls `add(bucket, seconds)` for every bucket that `[from, to)` overlaps.
    fn spread(&mut self, from: Time, to: Time, mut add: impl FnMut(&mut Timeline, usize, f64)) {
        if to <= from {
            return;
        }
        self.reach(to);
        let mut t = from.0;
        while t < to.0 {
            let b = (t / self.width_ns) as usize;
            let bucket_end = (b as u64 + 1).saturating_mul(self.width_ns).min(to.0);
            add(self, b, (bucket_end - t) as f64 / 1e9);
            t = bucket_end;
        }
    }

    /// `tenant` received service at `rate` (a dominant share) during `[from, to)`.
    pub fn add_service(&mut self, tenant: usize, rate: f64, from: Time, to: Time) {
        if rate == 0.0 {
            return;
        }
        let n = self.tenants;
        self.spread(from, to, |tl, b, s| tl.service[b * n + tenant] += rate * s);
    }

    /// `tenant` had work waiting during `[from, to)`.
    pub fn add_backlog(&mut self, tenant: usize, from: Time, to: Time) {
        let n = self.tenants;
        self.spread(from, to, |tl, b, s| tl.backlog[b * n + tenant] += s);
    }

    /// The fleet was `fraction` busy during `[from, to)`.
    pub fn add_busy(&mut self, fraction: f64, from: Time, to: Time) {
        if fraction == 0.0 {
            return;
        }
        self.spread(from, to, |tl, b, s| tl.busy[b] += fraction * s);
    }

    /// The run ended at `end`: the buckets cover `[0, end)`.
    pub fn close(&mut self, end: Time) {
        self.reach(end);
        self.end = end;
    }

    /// The number of buckets.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the timeline has no buckets (the run ended at time zero).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Bucket `b`'s start and end in seconds (the last one ends with the run).
    pub fn span_s(&self, b: usize) -> (f64, f64) {
        let start = b as u64 * self.width_ns;
        let end = (start + self.width_ns).min(self.end.0.max(start));
        (start as f64 / 1e9, end as f64 / 1e9)
    }

    /// The service `tenant` received in bucket `b` (dominant-share-seconds).
    pub fn service(&self, b: usize, tenant: usize) -> f64 {
        self.service[b * self.tenants + tenant]
    }

    /// The seconds of bucket `b` during which `tenant` had work waiting.
    pub fn backlog_s(&self, b: usize, tenant: usize) -> f64 {
        self.backlog[b * self.tenants + tenant]
    }

    /// The fleet's utilization-seconds in bucket `b`.
    pub fn busy(&self, b: usize) -> f64 {
        self.busy[b]
    }
}

/// The waits of one tenant's or one class's accepted jobs: those that started, and how many
/// never did before the run ended (their waits are unknown, at least the rest of the run).
#[derive(Clone, Debug)]
pub struct WaitSample<'a> {
    /// The tenant or class.
    pub name: &'a str,
    /// Waits from arrival to first start, in seconds, of the jobs that started.
    pub waits_s: &'a [f64],
    /// Accepted jobs that had not started when the run ended.
    pub unstarted: u64,
}

/// One run in a report.
pub struct Run {
    /// What tells it apart on the page: the policy, and the backfill mode when several are
    /// compared (`fair+easy`).
    pub label: String,
    /// What it measured.
    pub metrics: Metrics,
    /// Its JSON document ([`Metrics::to_json`], with any trace section added).
    pub doc: Value,
}

/// One plot: an SVG document and what the page says about it.
#[derive(Clone, Debug)]
pub struct Figure {
    /// The plot's id on the page and its file name (`ID.svg`).
    pub id: &'static str,
    /// The heading.
    pub title: &'static str,
    /// How to read it.
    pub caption: String,
    /// The SVG document.
    pub svg: String,
}

/// The most tenants drawn by name; with more, the rest are drawn together as "others".
const MAX_NAMED: usize = 7;
/// Points per wait-time CDF curve.
const CDF_POINTS: usize = 200;
/// Waits below this are drawn at it on the log scale (seconds).
const WAIT_FLOOR_S: f64 = 1e-3;

const PANEL_W: u32 = 640;
const PANEL_H: u32 = 380;
const LEGEND_W: u32 = 180;
const TITLE_H: u32 = 34;
const FONT: &str = "sans-serif";

/// Okabe and Ito's colour-blind-safe palette (yellow darkened to read on white).
const PALETTE: [RGBColor; 7] = [
    RGBColor(0x00, 0x72, 0xB2),
    RGBColor(0xE6, 0x9F, 0x00),
    RGBColor(0x00, 0x9E, 0x73),
    RGBColor(0xD5, 0x5E, 0x00),
    RGBColor(0xCC, 0x79, 0xA7),
    RGBColor(0x56, 0xB4, 0xE9),
    RGBColor(0x8C, 0x7A, 0x00),
];
const OTHERS: RGBColor = RGBColor(0x88, 0x88, 0x88);
const OUTSIDE_WINDOW: RGBColor = RGBColor(0xF0, 0xF0, 0xF0);

fn err(e: impl std::fmt::Display) -> String {
    e.to_string()
}

/// A time-axis tick: whole seconds without decimals.
fn time_tick(x: &f64) -> String {
    if x.fract() == 0.0 {
        format!("{x:.0}")
    } else {
        format!("{x}")
    }
}

/// A count-axis tick: ten thousand and more in thousands (`20k`).
fn count_tick(x: &f64) -> String {
    if *x >= 10_000.0 && (x / 1000.0).fract() == 0.0 {
        format!("{:.0}k", x / 1000.0)
    } else {
        format!("{x:.0}")
    }
}

fn percent(y: &f64) -> String {
    format!("{:.0}%", y * 100.0)
}

fn seconds(x: &f64) -> String {
    if *x >= 1.0 || *x == 0.0 {
        format!("{x}")
    } else {
        // Log-scale ticks such as 0.001 and 0.01, without float noise.
        let digits = (-x.log10()).ceil().max(0.0) as usize;
        format!("{x:.digits$}")
    }
}

/// Cuts a name to fit a legend or an axis.
fn short(name: &str, chars: usize) -> String {
    if name.chars().count() <= chars {
        name.to_string()
    } else {
        let mut s: String = name.chars().take(chars - 1).collect();
        s.push('…');
        s
    }
}

/// The tenants drawn by name, chosen over every run (largest service share first, then most
/// submissions), in name order, each with its colour; and whether the rest are drawn as
/// "others".
fn named_tenants(runs: &[Run]) -> (Vec<(String, RGBColor)>, bool) {
    let mut rank: BTreeMap<String, (f64, u64)> = BTreeMap::new();
    for run in runs {
        if let Some(tenants) = run.doc["tenants"].as_object() {
            for (name, t) in tenants {
                let e = rank.entry(name.clone()).or_insert((0.0, 0));
                e.0 = e.0.max(t["service_share"].as_f64().unwrap_or(0.0));
                e.1 = e.1.max(t["submitted"].as_u64().unwrap_or(0));
            }
        }
    }
    let all = rank.len();
    let keep = if all <= MAX_NAMED + 1 { all } else { MAX_NAMED };
    let mut ranked: Vec<(String, (f64, u64))> = rank.into_iter().collect();
    ranked.sort_by(|a, b| b.1.0.total_cmp(&a.1.0).then(b.1.1.cmp(&a.1.1)));
    let mut names: Vec<String> = ranked.into_iter().take(keep).map(|(n, _)| n).collect();
    names.sort();
    let named = names
        .into_iter()
        .enumerate()
        .map(|(i, n)| (n, PALETTE[i % PALETTE.len()]))
        .collect();
    (named, all > keep)
}

/// The columns of a grid of `n` panels.
fn columns(n: usize) -> usize {
    match n {
        0..=3 => n.max(1),
        4 => 2,
        _ => 3,
    }
}

type Area<'a> = DrawingArea<SVGBackend<'a>, Shift>;

/// A legend entry: a line (dashed or not) or a filled box, and its text.
enum Mark {
    Line(RGBColor, bool),
    Box(RGBColor),
}

/// Draws one SVG with a title and a grid of `n` panels; `draw(i, plot, legend)` fills panel
/// `i`'s plot area and returns its legend, drawn in a column to the plot's right.
fn panels<F>(title: &str, labels: &[String], mut draw: F) -> Result<String, String>
where
    F: FnMut(usize, &Area<'_>) -> Result<Vec<(String, Mark)>, String>,
{
    let n = labels.len().max(1);
    let cols = columns(n);
    let rows = n.div_ceil(cols);
    let size = (cols as u32 * PANEL_W, rows as u32 * PANEL_H + TITLE_H);
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, size).into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        let body = root.titled(title, (FONT, 20)).map_err(err)?;
        for (i, panel) in body.split_evenly((rows, cols)).iter().enumerate() {
            let Some(label) = labels.get(i) else { break };
            let panel = panel
                .titled(label, (FONT, 17).into_font().style(FontStyle::Bold))
                .map_err(err)?;
            let (plot, legend) = panel.split_horizontally(PANEL_W - LEGEND_W);
            let entries = draw(i, &plot)?;
            draw_legend(&legend, &entries)?;
        }
        root.present().map_err(err)?;
    }
    Ok(svg)
}

/// Draws a legend: one entry per line, with an optional second line of detail in grey (the
/// text after a newline).
fn draw_legend(area: &Area<'_>, entries: &[(String, Mark)]) -> Result<(), String> {
    let text = (FONT, 13).into_font();
    let detail_style = (FONT, 11).into_font().color(&RGBColor(0x66, 0x66, 0x66));
    let mut y = 24;
    for (label, mark) in entries {
        let (label, detail) = match label.split_once('\n') {
            Some((l, d)) => (l, Some(d)),
            None => (label.as_str(), None),
        };
        match mark {
            Mark::Line(color, false) => area
                .draw(&PathElement::new(
                    vec![(4, y), (30, y)],
                    color.stroke_width(3),
                ))
                .map_err(err)?,
            Mark::Line(color, true) => area
                .draw(&PathElement::new(
                    vec![(4, y), (12, y)],
                    color.stroke_width(2),
                ))
                .and_then(|_| {
                    area.draw(&PathElement::new(
                        vec![(18, y), (26, y)],
                        color.stroke_width(2),
                    ))
                })
                .map_err(err)?,
            Mark::Box(color) => area
                .draw(&Rectangle::new([(6, y - 6), (28, y + 6)], color.filled()))
                .map_err(err)?,
        }
        area.draw(&Text::new(short(label, 22), (36, y - 7), text.clone()))
            .map_err(err)?;
        if let Some(detail) = detail {
            area.draw(&Text::new(
                short(detail, 26),
                (36, y + 8),
                detail_style.clone(),
            ))
            .map_err(err)?;
            y += 14;
        }
        y += 22;
    }
    Ok(())
}

/// Splits a series with gaps into the runs of points it draws as lines.
fn segments(points: &[Option<(f64, f64)>]) -> Vec<Vec<(f64, f64)>> {
    let mut out: Vec<Vec<(f64, f64)>> = Vec::new();
    let mut current = Vec::new();
    for p in points {
        match p {
            Some(p) => current.push(*p),
            None if !current.is_empty() => out.push(std::mem::take(&mut current)),
            None => {}
        }
    }
    if !current.is_empty() {
        out.push(current);
    }
    out
}

/// The measurement window of a run, in seconds.
fn window_s(doc: &Value) -> (f64, f64) {
    let m = &doc["measure_s"];
    (m[0].as_f64().unwrap_or(0.0), m[1].as_f64().unwrap_or(0.0))
}

/// The time axis the runs share: to the latest end, in a unit that keeps its ticks readable.
struct TimeAxis {
    unit: &'static str,
    /// Seconds per unit.
    per_s: f64,
    /// The axis' end, in the unit.
    max: f64,
}

impl TimeAxis {
    fn of(runs: &[Run]) -> TimeAxis {
        let end_s = runs
            .iter()
            .map(|r| r.doc["sim_seconds"].as_f64().unwrap_or(0.0))
            .fold(0.0, f64::max)
            .max(1e-3);
        let (unit, per_s) = match end_s {
            s if s > 3.0 * 86_400.0 => ("days", 86_400.0),
            s if s > 3.0 * 3_600.0 => ("h", 3_600.0),
            s if s > 3.0 * 60.0 => ("min", 60.0),
            _ => ("s", 1.0),
        };
        TimeAxis {
            unit,
            per_s,
            max: end_s / per_s,
        }
    }

    /// `seconds` in the axis' unit.
    fn at(&self, seconds: f64) -> f64 {
        seconds / self.per_s
    }

    fn desc(&self) -> String {
        format!("simulated time ({})", self.unit)
    }
}

/// Per bucket: each named tenant's (and the others') share of the service delivered, and its
/// entitlement when it was backlogged for most of the bucket.
struct Shares {
    mid_s: Vec<f64>,
    /// `[series][bucket]`: share, or None when nobody received service.
    share: Vec<Vec<Option<f64>>>,
    /// `[series][bucket]`: entitlement, or None when the tenant (every other) was not
    /// backlogged.
    entitled: Vec<Vec<Option<f64>>>,
}

fn shares(run: &Run, named: &[(String, RGBColor)], others: bool) -> Shares {
    let m = &run.metrics;
    let tl = m.timeline();
    let names = m.tenant_names();
    // Which series each tenant is drawn in.
    let series_of: Vec<Option<usize>> = names
        .iter()
        .map(|n| match named.iter().position(|(x, _)| x == n) {
            Some(i) => Some(i),
            None if others => Some(named.len()),
            None => None,
        })
        .collect();
    let count = named.len() + usize::from(others);
    let mut out = Shares {
        mid_s: Vec::with_capacity(tl.len()),
        share: vec![Vec::with_capacity(tl.len()); count],
        entitled: vec![Vec::with_capacity(tl.len()); count],
    };
    for b in 0..tl.len() {
        let (start, end) = tl.span_s(b);
        out.mid_s.push((start + end) / 2.0);
        let total: f64 = (0..names.len()).map(|i| tl.service(b, i)).sum();
        let mut share = vec![None; count];
        let mut entitled = vec![None; count];
        if total > 0.0 {
            let by_name: BTreeMap<String, f64> = names
                .iter()
                .enumerate()
                .map(|(i, n)| (n.clone(), tl.service(b, i) / total))
                .collect();
            // Backlogged as the JSON's entitlement counts it: for 90% of the time.
            let backlogged: BTreeSet<String> = names
                .iter()
                .enumerate()
                .filter(|(i, _)| end > start && tl.backlog_s(b, *i) >= 0.9 * (end - start))
                .map(|(_, n)| n.clone())
                .collect();
            let entitlements = m.entitled_among(&by_name, &backlogged);
            for (i, name) in names.iter().enumerate() {
                let Some(s) = series_of[i] else { continue };
                *share[s].get_or_insert(0.0) += by_name[name];
                if let Some(e) = entitlements.get(name) {
                    *entitled[s].get_or_insert(0.0) += e;
                }
            }
        }
        for s in 0..count {
            out.share[s].push(share[s]);
            out.entitled[s].push(entitled[s]);
        }
    }
    out
}

/// Shades what lies outside the measurement window, where the key numbers do not look.
fn shade_outside<DB: DrawingBackend>(
    chart: &mut ChartContext<
        '_,
        DB,
        Cartesian2d<plotters::coord::types::RangedCoordf64, plotters::coord::types::RangedCoordf64>,
    >,
    window: (f64, f64),
    t_max: f64,
    y_max: f64,
) -> Result<(), String> {
    let mut boxes = Vec::new();
    if window.0 > 0.0 {
        boxes.push([(0.0, 0.0), (window.0, y_max)]);
    }
    if window.1 < t_max {
        boxes.push([(window.1, 0.0), (t_max, y_max)]);
    }
    chart
        .draw_series(
            boxes
                .into_iter()
                .map(|b| Rectangle::new(b, OUTSIDE_WINDOW.filled())),
        )
        .map_err(err)?;
    Ok(())
}

/// (1) Each tenant's share of the service delivered over time, against its entitlement.
fn share_figure(runs: &[Run]) -> Result<Figure, String> {
    let (named, others) = named_tenants(runs);
    let axis = TimeAxis::of(runs);
    let labels: Vec<String> = runs.iter().map(|r| r.label.clone()).collect();
    let y_max = 1.05;
    let svg = panels(
        "Service share per tenant over time, against entitlement",
        &labels,
        |i, area| {
            let run = &runs[i];
            let s = shares(run, &named, others);
            let mut chart = ChartBuilder::on(area)
                .margin(10)
                .x_label_area_size(42)
                .y_label_area_size(56)
                .build_cartesian_2d(0f64..axis.max, 0f64..y_max)
                .map_err(err)?;
            let (w0, w1) = window_s(&run.doc);
            shade_outside(&mut chart, (axis.at(w0), axis.at(w1)), axis.max, y_max)?;
            chart
                .configure_mesh()
                .x_desc(axis.desc())
                .x_label_formatter(&time_tick)
                .y_desc("share of service delivered")
                .y_label_formatter(&percent)
                .light_line_style(BLACK.mix(0.04))
                .bold_line_style(BLACK.mix(0.12))
                .label_style((FONT, 13))
                .axis_desc_style((FONT, 14))
                .draw()
                .map_err(err)?;
            let mut legend = Vec::new();
            let colors: Vec<(String, RGBColor)> = named
                .iter()
                .cloned()
                .chain(others.then(|| ("others".to_string(), OTHERS)))
                .collect();
            for (k, (name, color)) in colors.iter().enumerate() {
                let points = |v: &[Option<f64>]| -> Vec<Option<(f64, f64)>> {
                    s.mid_s
                        .iter()
                        .zip(v)
                        .map(|(t, y)| y.map(|y| (axis.at(*t), y)))
                        .collect()
                };
                for seg in segments(&points(&s.entitled[k])) {
                    chart
                        .draw_series(DashedLineSeries::new(
                            seg,
                            6,
                            4,
                            color.mix(0.9).stroke_width(2),
                        ))
                        .map_err(err)?;
                }
                for seg in segments(&points(&s.share[k])) {
                    chart
                        .draw_series(LineSeries::new(seg, color.stroke_width(2)))
                        .map_err(err)?;
                }
                legend.push((name.clone(), Mark::Line(*color, false)));
            }
            legend.push((
                "entitlement (dashed)".to_string(),
                Mark::Line(RGBColor(0x44, 0x44, 0x44), true),
            ));
            legend.push((
                "outside measure window".to_string(),
                Mark::Box(RGBColor(0xE0, 0xE0, 0xE0)),
            ));
            Ok(legend)
        },
    )?;
    Ok(Figure {
        id: "share",
        title: "Service share over time",
        caption: format!(
            "Each tenant's share of the service delivered in each time bucket (solid; service is \
             a job's dominant share of its pool times its run time), against its entitlement \
             (dashed, drawn while the tenant is backlogged for 90% of the bucket): the share of \
             what the other tenants did not use that weights, guarantees and limits give it. \
             Buckets are {} wide; the key numbers count the white part only.",
            runs.first()
                .map(|r| {
                    let (a, b) = r.metrics.timeline().span_s(0);
                    format!("{:.3} s", b - a)
                })
                .unwrap_or_default()
        ),
        svg,
    })
}

/// A CDF curve of waits: at most `CDF_POINTS` points, over every accepted job (unstarted jobs
/// keep the curve below 100%), ending at `x_max`.
fn cdf_points(sample: &WaitSample<'_>, x_max: f64) -> Vec<(f64, f64)> {
    let total = sample.waits_s.len() as u64 + sample.unstarted;
    if total == 0 {
        return Vec::new();
    }
    let mut waits = sample.waits_s.to_vec();
    waits.sort_by(f64::total_cmp);
    let n = waits.len();
    let mut points = vec![(WAIT_FLOOR_S, 0.0)];
    let steps = CDF_POINTS.min(n);
    for k in 1..=steps {
        let rank = (k * n).div_ceil(steps);
        let x = waits[rank - 1].max(WAIT_FLOOR_S);
        points.push((x, rank as f64 / total as f64));
    }
    let last = points.last().map(|p| p.1).unwrap_or(0.0);
    points.push((x_max, last));
    points
}

fn legend_of(sample: &WaitSample<'_>) -> String {
    let started = sample.waits_s.len() as u64;
    let total = started + sample.unstarted;
    if sample.unstarted > 0 {
        format!("{}\n{started} of {total} started", sample.name)
    } else {
        format!("{}\n{total} jobs, all started", sample.name)
    }
}

/// The wait samples a CDF panel draws, each with its colour: the named tenants, or the first
/// classes with accepted jobs.
fn wait_samples<'a>(
    run: &'a Run,
    named: &[(String, RGBColor)],
    by_class: bool,
) -> Vec<(WaitSample<'a>, RGBColor)> {
    if by_class {
        run.metrics
            .waits_by_class()
            .into_iter()
            .filter(|s| !s.waits_s.is_empty() || s.unstarted > 0)
            .take(PALETTE.len())
            .enumerate()
            .map(|(i, s)| (s, PALETTE[i]))
            .collect()
    } else {
        run.metrics
            .waits_by_tenant()
            .into_iter()
            .filter_map(|s| {
                let color = named.iter().find(|(n, _)| n == s.name)?.1;
                Some((s, color))
            })
            .collect()
    }
}

/// (2, 3) Wait-time CDFs, by tenant or by class.
fn wait_figure(runs: &[Run], by_class: bool) -> Result<Figure, String> {
    let (named, _) = named_tenants(runs);
    let longest = runs
        .iter()
        .flat_map(|r| {
            wait_samples(r, &named, by_class)
                .into_iter()
                .flat_map(|(s, _)| s.waits_s.iter().copied())
        })
        .fold(0.0, f64::max);
    let x_max = (longest * 1.5).max(WAIT_FLOOR_S * 10.0);
    let labels: Vec<String> = runs.iter().map(|r| r.label.clone()).collect();
    let title = if by_class {
        "Wait-time CDF per class"
    } else {
        "Wait-time CDF per tenant"
    };
    let svg = panels(title, &labels, |i, area| {
        let mut chart = ChartBuilder::on(area)
            .margin(10)
            .x_label_area_size(42)
            .y_label_area_size(56)
            .build_cartesian_2d((WAIT_FLOOR_S / 2.0..x_max).log_scale(), 0f64..1.05)
            .map_err(err)?;
        chart
            .configure_mesh()
            .x_desc("wait from arrival to first start (s, log scale)")
            .y_desc("accepted jobs started within the wait")
            .x_label_formatter(&seconds)
            .y_label_formatter(&percent)
            .light_line_style(BLACK.mix(0.04))
            .bold_line_style(BLACK.mix(0.12))
            .label_style((FONT, 13))
            .axis_desc_style((FONT, 14))
            .draw()
            .map_err(err)?;
        let mut legend = Vec::new();
        for (sample, color) in wait_samples(&runs[i], &named, by_class) {
            chart
                .draw_series(LineSeries::new(
                    cdf_points(&sample, x_max),
                    color.stroke_width(2),
                ))
                .map_err(err)?;
            legend.push((legend_of(&sample), Mark::Line(color, false)));
        }
        Ok(legend)
    })?;
    let what = if by_class { "class" } else { "tenant" };
    Ok(Figure {
        id: if by_class {
            "wait-class"
        } else {
            "wait-tenant"
        },
        title,
        caption: format!(
            "For each {what}, the fraction of its accepted jobs that started within a given wait \
             (from arrival to first start). Jobs still waiting when the run ended keep the curve \
             below 100%; waits under {} ms are drawn at {} ms.",
            WAIT_FLOOR_S * 1e3,
            WAIT_FLOOR_S * 1e3
        ),
        svg,
    })
}

/// (4) Utilization over time.
fn utilization_figure(runs: &[Run]) -> Result<Figure, String> {
    let axis = TimeAxis::of(runs);
    let labels: Vec<String> = runs.iter().map(|r| r.label.clone()).collect();
    let y_max = 1.05;
    let color = PALETTE[0];
    let mean_color = RGBColor(0x44, 0x44, 0x44);
    let svg = panels("Utilization over time", &labels, |i, area| {
        let run = &runs[i];
        let tl = run.metrics.timeline();
        let mut chart = ChartBuilder::on(area)
            .margin(10)
            .x_label_area_size(42)
            .y_label_area_size(56)
            .build_cartesian_2d(0f64..axis.max, 0f64..y_max)
            .map_err(err)?;
        let (w0, w1) = window_s(&run.doc);
        let window = (axis.at(w0), axis.at(w1));
        shade_outside(&mut chart, window, axis.max, y_max)?;
        chart
            .configure_mesh()
            .x_desc(axis.desc())
            .x_label_formatter(&time_tick)
            .y_desc("busy fraction of the fleet")
            .y_label_formatter(&percent)
            .light_line_style(BLACK.mix(0.04))
            .bold_line_style(BLACK.mix(0.12))
            .label_style((FONT, 13))
            .axis_desc_style((FONT, 14))
            .draw()
            .map_err(err)?;
        let points: Vec<(f64, f64)> = (0..tl.len())
            .filter_map(|b| {
                let (start, end) = tl.span_s(b);
                (end > start).then(|| (axis.at((start + end) / 2.0), tl.busy(b) / (end - start)))
            })
            .collect();
        chart
            .draw_series(LineSeries::new(points, color.stroke_width(2)))
            .map_err(err)?;
        let mean = run.doc["utilization"].as_f64().unwrap_or(0.0);
        if window.1 > window.0 {
            chart
                .draw_series(DashedLineSeries::new(
                    vec![(window.0, mean), (window.1, mean)],
                    6,
                    4,
                    mean_color.stroke_width(2),
                ))
                .map_err(err)?;
        }
        Ok(vec![
            ("utilization".to_string(), Mark::Line(color, false)),
            (
                format!("window mean {:.1}%", mean * 100.0),
                Mark::Line(mean_color, true),
            ),
            (
                "outside measure window".to_string(),
                Mark::Box(RGBColor(0xE0, 0xE0, 0xE0)),
            ),
        ])
    })?;
    Ok(Figure {
        id: "utilization",
        title: "Utilization over time",
        caption: "The busy fraction of the fleet in each time bucket: the most-used resource's \
                  share of the capacity, as the JSON's `utilization`; dashed, its mean over the \
                  measurement window."
            .to_string(),
        svg,
    })
}

/// The admission outcomes, in the order they stack.
const OUTCOMES: [(&str, RGBColor); 4] = [
    ("accepted", RGBColor(0x00, 0x9E, 0x73)),
    ("deferred", RGBColor(0x56, 0xB4, 0xE9)),
    ("rejected, retryable", RGBColor(0xE6, 0x9F, 0x00)),
    ("rejected, final", RGBColor(0xD5, 0x5E, 0x00)),
];

/// A row of the admission chart: its name and its four counts.
fn admission_rows(
    run: &Run,
    named: &[(String, RGBColor)],
    others: bool,
) -> Vec<(String, [u64; 4])> {
    let counts = |v: &Value| -> [u64; 4] {
        let n = |k: &str| v[k].as_u64().unwrap_or(0);
        [
            n("accepted").saturating_sub(n("deferred")),
            n("deferred"),
            n("rejected_retryable"),
            n("rejected_final"),
        ]
    };
    let mut rows = Vec::new();
    let tenants = run.doc["tenants"].as_object();
    let mut rest = [0u64; 4];
    for (name, t) in tenants.into_iter().flatten() {
        let c = counts(t);
        if named.iter().any(|(n, _)| n == name) {
            rows.push((format!("tenant {}", short(name, 14)), c));
        } else {
            for k in 0..4 {
                rest[k] += c[k];
            }
        }
    }
    if others {
        rows.push(("other tenants".to_string(), rest));
    }
    for (name, c) in run.doc["classes"]
        .as_object()
        .into_iter()
        .flatten()
        .filter(|(_, c)| c["submitted"].as_u64().unwrap_or(0) > 0)
        .take(PALETTE.len())
    {
        rows.push((format!("class {}", short(name, 15)), counts(c)));
    }
    rows
}

/// (5) Admission outcomes per tenant and per class.
fn admission_figure(runs: &[Run]) -> Result<Figure, String> {
    let (named, others) = named_tenants(runs);
    let rows: Vec<Vec<(String, [u64; 4])>> = runs
        .iter()
        .map(|r| admission_rows(r, &named, others))
        .collect();
    let x_max = rows
        .iter()
        .flatten()
        .map(|(_, c)| c.iter().sum::<u64>())
        .max()
        .unwrap_or(0)
        .max(1) as f64
        * 1.15;
    let labels: Vec<String> = runs.iter().map(|r| r.label.clone()).collect();
    let svg = panels("Admission outcomes", &labels, |i, area| {
        let rows = &rows[i];
        let n = rows.len().max(1) as i32;
        let name_of = |v: &SegmentValue<i32>| match v {
            SegmentValue::CenterOf(k) | SegmentValue::Exact(k) => rows
                .get((n - 1 - k) as usize)
                .map(|r| r.0.clone())
                .unwrap_or_default(),
            SegmentValue::Last => String::new(),
        };
        let mut chart = ChartBuilder::on(area)
            .margin(10)
            .x_label_area_size(42)
            .y_label_area_size(130)
            .build_cartesian_2d(0f64..x_max, (0..n - 1).into_segmented())
            .map_err(err)?;
        chart
            .configure_mesh()
            .x_desc("jobs submitted")
            .y_labels(n as usize)
            .y_label_formatter(&name_of)
            .x_label_formatter(&count_tick)
            .x_labels(6)
            .disable_y_mesh()
            .light_line_style(BLACK.mix(0.04))
            .bold_line_style(BLACK.mix(0.12))
            .label_style((FONT, 13))
            .axis_desc_style((FONT, 14))
            .draw()
            .map_err(err)?;
        let mut bars = Vec::new();
        for (r, (_, counts)) in rows.iter().enumerate() {
            let y = n - 1 - r as i32;
            let mut x = 0.0;
            for (k, count) in counts.iter().enumerate() {
                if *count == 0 {
                    continue;
                }
                let next = x + *count as f64;
                let mut bar = Rectangle::new(
                    [
                        (x, SegmentValue::Exact(y)),
                        (next, SegmentValue::Exact(y + 1)),
                    ],
                    OUTCOMES[k].1.filled(),
                );
                bar.set_margin(6, 6, 0, 0);
                bars.push(bar);
                x = next;
            }
        }
        chart.draw_series(bars).map_err(err)?;
        // Each row's total at the end of its bar, where a thin bar would not show it.
        let style = TextStyle::from((FONT, 12).into_font()).pos(Pos::new(HPos::Left, VPos::Center));
        chart
            .draw_series(rows.iter().enumerate().map(|(r, (_, counts))| {
                let total: u64 = counts.iter().sum();
                let y = SegmentValue::CenterOf(n - 1 - r as i32);
                EmptyElement::at((total as f64, y))
                    + Text::new(format!("{total}"), (4, 0), style.clone())
            }))
            .map_err(err)?;
        Ok(OUTCOMES
            .iter()
            .map(|(name, color)| (name.to_string(), Mark::Box(*color)))
            .collect())
    })?;
    Ok(Figure {
        id: "admission",
        title: "Admission outcomes",
        caption: "Every submission's answer, per tenant and per class: accepted into a queue, \
                  accepted but deferred (not before a later time), rejected with a retry hint \
                  (over quota, busy), or rejected for good."
            .to_string(),
        svg,
    })
}

/// Every plot of the runs, in the order of the page.
pub fn figures(runs: &[Run]) -> Result<Vec<Figure>, String> {
    Ok(vec![
        share_figure(runs)?,
        wait_figure(runs, false)?,
        wait_figure(runs, true)?,
        utilization_figure(runs)?,
        admission_figure(runs)?,
    ])
}

fn num(v: &Value, decimals: usize) -> String {
    match v.as_f64() {
        Some(x) => format!("{x:.decimals$}"),
        None => "-".to_string(),
    }
}

/// The most tenants or classes the comparison table lists.
const MAX_LISTED: usize = 20;

/// The comparison table of several runs: the headline numbers per run, then per tenant and per
/// class the runs one under another. It reads the runs' JSON documents only.
pub fn compare_text(runs: &[Run]) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{:<16} {:>7} {:>6} {:>8} {:>9} {:>9} {:>10} {:>10} {:>10}",
        "run",
        "util %",
        "Jain",
        "max err",
        "completed",
        "rejected",
        "wait p50 s",
        "wait p99 s",
        "wait max s"
    );
    for run in runs {
        let d = &run.doc;
        let j = &d["jobs"];
        let n = |k: &str| j[k].as_u64().unwrap_or(0);
        let _ = writeln!(
            out,
            "{:<16} {:>7.1} {:>6} {:>8} {:>9} {:>9} {:>10} {:>10} {:>10}",
            short(&run.label, 16),
            d["utilization"].as_f64().unwrap_or(0.0) * 100.0,
            num(&d["fairness"]["jain"], 3),
            num(&d["fairness"]["max_share_error"], 3),
            n("completed"),
            n("rejected_retryable") + n("rejected_final"),
            num(&d["wait_s"]["p50"], 3),
            num(&d["wait_s"]["p99"], 3),
            num(&d["wait_s"]["max"], 3),
        );
    }
    for (section, key) in [("tenant", "tenants"), ("class", "classes")] {
        // The union of names over the runs, largest share (or most completions) first.
        let mut rank: BTreeMap<String, (f64, u64)> = BTreeMap::new();
        for run in runs {
            for (name, t) in run.doc[key].as_object().into_iter().flatten() {
                let e = rank.entry(name.clone()).or_insert((0.0, 0));
                e.0 = e.0.max(t["service_share"].as_f64().unwrap_or(0.0));
                e.1 = e.1.max(t["completed"].as_u64().unwrap_or(0));
            }
        }
        let mut names: Vec<(String, (f64, u64))> = rank.into_iter().collect();
        let all = names.len();
        if all > MAX_LISTED {
            names.sort_by(|a, b| b.1.0.total_cmp(&a.1.0).then(b.1.1.cmp(&a.1.1)));
            names.truncate(MAX_LISTED);
            names.sort_by(|a, b| a.0.cmp(&b.0));
        }
        out.push('\n');
        let share_cols = key == "tenants";
        let _ = writeln!(
            out,
            "{:<16} {:>8} {:>8} {:>9} {:>9} {:>10} {:>10} {:>10}",
            section,
            if share_cols { "share" } else { "" },
            if share_cols { "entitled" } else { "" },
            "completed",
            if share_cols { "rejected" } else { "misses" },
            "wait p50 s",
            "wait p99 s",
            "wait max s"
        );
        for (name, _) in &names {
            let _ = writeln!(out, "{}", short(name, 40));
            for run in runs {
                let t = &run.doc[key][name];
                if t.is_null() {
                    continue;
                }
                let n = |k: &str| t[k].as_u64().unwrap_or(0);
                let _ = writeln!(
                    out,
                    "  {:<14} {:>8} {:>8} {:>9} {:>9} {:>10} {:>10} {:>10}",
                    short(&run.label, 14),
                    if share_cols {
                        num(&t["service_share"], 4)
                    } else {
                        String::new()
                    },
                    if share_cols {
                        num(&t["entitlement"], 4)
                    } else {
                        String::new()
                    },
                    n("completed"),
                    if share_cols {
                        n("rejected")
                    } else {
                        n("deadline_misses")
                    },
                    num(&t["wait_s"]["p50"], 3),
                    num(&t["wait_s"]["p99"], 3),
                    num(&t["wait_s"]["max"], 3),
                );
            }
        }
        if all > names.len() {
            let _ = writeln!(
                out,
                "({} more {key} by share in --format json)",
                all - names.len()
            );
        }
    }
    out
}

/// Escapes text for HTML.
fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// Drops the XML declaration an SVG document may start with, so it can sit inside HTML.
fn inline_svg(svg: &str) -> &str {
    match svg.find("<svg") {
        Some(i) => &svg[i..],
        None => svg,
    }
}

const STYLE: &str = "body{font-family:system-ui,sans-serif;margin:2em auto;max-width:1320px;\
padding:0 1em;color:#222}h1{font-size:1.6em}h2{margin-top:2em;border-bottom:1px solid #ddd}\
table{border-collapse:collapse;font-variant-numeric:tabular-nums}td,th{padding:.25em .7em;\
border-bottom:1px solid #eee;text-align:right}td:first-child,th:first-child{text-align:left}\
figure{margin:0}figure svg{max-width:100%;height:auto}figcaption{color:#555;max-width:60em}\
pre{background:#f6f6f6;padding:1em;overflow-x:auto;font-size:.85em}code{background:#f3f3f3}";

/// The page: key numbers, the plots (inline), the comparison table and every run's text
/// report.
pub fn html(title: &str, command: &str, runs: &[Run], figures: &[Figure]) -> String {
    let mut out = String::new();
    let _ = write!(
        out,
        "<!doctype html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <title>{}</title>\n<style>{STYLE}</style>\n</head>\n<body>\n<h1>{}</h1>\n\
         <p>Made by <code>{}</code>. The same command gives the same page: the simulation is \
         deterministic for a seed.</p>\n",
        escape(title),
        escape(title),
        escape(command)
    );
    out.push_str(
        "<h2 id=\"key-numbers\">Key numbers</h2>\n<table>\n<tr><th>run</th><th>policy</th>\
                  <th>backfill</th><th>seed</th><th>simulated s</th><th>measured s</th>\
                  <th>utilization</th><th>Jain</th><th>max share error</th><th>submitted</th>\
                  <th>completed</th><th>rejected</th><th>wait p50 s</th><th>wait p99 s</th>\
                  <th>wait max s</th></tr>\n",
    );
    for run in runs {
        let d = &run.doc;
        let j = &d["jobs"];
        let n = |k: &str| j[k].as_u64().unwrap_or(0);
        let (w0, w1) = window_s(d);
        let _ = writeln!(
            out,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{w0}–{w1}</td>\
             <td>{:.1}%</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td>\
             <td>{}</td><td>{}</td></tr>",
            escape(&run.label),
            escape(d["policy"].as_str().unwrap_or("")),
            escape(d["backfill"].as_str().unwrap_or("")),
            d["seed"],
            num(&d["sim_seconds"], 3),
            d["utilization"].as_f64().unwrap_or(0.0) * 100.0,
            num(&d["fairness"]["jain"], 3),
            num(&d["fairness"]["max_share_error"], 3),
            n("submitted"),
            n("completed"),
            n("rejected_retryable") + n("rejected_final"),
            num(&d["wait_s"]["p50"], 3),
            num(&d["wait_s"]["p99"], 3),
            num(&d["wait_s"]["max"], 3),
        );
    }
    out.push_str("</table>\n");
    for f in figures {
        let _ = write!(
            out,
            "<h2>{}</h2>\n<figure id=\"{}\">\n{}\n<figcaption>{} (Also in <a href=\"{}.svg\">{}.svg</a>.)</figcaption>\n</figure>\n",
            escape(f.title),
            f.id,
            inline_svg(&f.svg),
            escape(&f.caption),
            f.id,
            f.id
        );
    }
    let _ = write!(
        out,
        "<h2 id=\"per-tenant\">Per tenant and per class</h2>\n<pre>{}</pre>\n",
        escape(&compare_text(runs))
    );
    out.push_str("<h2 id=\"text-reports\">Text reports</h2>\n");
    for run in runs {
        let _ = write!(
            out,
            "<h3>{}</h3>\n<pre>{}</pre>\n",
            escape(&run.label),
            escape(&run.metrics.to_text())
        );
    }
    out.push_str("</body>\n</html>\n");
    out
}

/// A report directory, made and found writable before a run starts, so that a long run does
/// not end in an unwritable path.
pub struct ReportDir {
    dir: PathBuf,
    /// The page, written under a temporary name and renamed into place when complete.
    page: File,
    page_tmp: PathBuf,
}

impl ReportDir {
    /// Creates `dir` (and its parents) and a temporary file in it.
    pub fn create(dir: &Path) -> io::Result<ReportDir> {
        std::fs::create_dir_all(dir)?;
        let page_tmp = dir.join(".index.html.tmp");
        let page = File::create(&page_tmp)?;
        Ok(ReportDir {
            dir: dir.to_path_buf(),
            page,
            page_tmp,
        })
    }

    /// Writes every figure as `ID.svg`, then `index.html`; returns the page's path.
    pub fn write(mut self, title: &str, command: &str, runs: &[Run]) -> io::Result<PathBuf> {
        let figures = figures(runs).map_err(io::Error::other)?;
        for f in &figures {
            std::fs::write(self.dir.join(format!("{}.svg", f.id)), &f.svg)?;
        }
        self.page
            .write_all(html(title, command, runs, &figures).as_bytes())?;
        self.page.sync_all()?;
        let index = self.dir.join("index.html");
        std::fs::rename(&self.page_tmp, &index)?;
        Ok(index)
    }
}

impl Drop for ReportDir {
    fn drop(&mut self) {
        // After a successful write the file is already renamed and this finds nothing.
        let _ = std::fs::remove_file(&self.page_tmp);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: u64 = 1_000_000_000;

    #[test]
    fn timeline_stays_bounded_and_keeps_its_totals() {
        let mut tl = Timeline::new(2, None);
        tl.add_service(0, 0.5, Time(0), Time(10 * S));
        tl.add_backlog(1, Time(S), Time(3 * S));
        tl.add_busy(1.0, Time(0), Time(10 * S));
        // A year later: the buckets merge until the year fits.
        tl.add_service(
            1,
            1.0,
            Time(365 * 86_400 * S),
            Time(365 * 86_400 * S + 7 * S),
        );
        tl.close(Time(365 * 86_400 * S + 7 * S));
        assert!(
            tl.len() <= MAX_BUCKETS && tl.len() > MAX_BUCKETS / 2,
            "{}",
            tl.len()
        );
        let total = |f: &dyn Fn(usize) -> f64| (0..tl.len()).map(f).sum::<f64>();
        assert!((total(&|b| tl.service(b, 0)) - 5.0).abs() < 1e-9);
        assert!((total(&|b| tl.service(b, 1)) - 7.0).abs() < 1e-9);
        assert!((total(&|b| tl.backlog_s(b, 1)) - 2.0).abs() < 1e-9);
        assert!((total(&|b| tl.busy(b)) - 10.0).abs() < 1e-9);
        let (start, end) = tl.span_s(tl.len() - 1);
        assert!(end > start && end <= 365.0 * 86_400.0 + 7.0 + 1e-6);
    }

    #[test]
    fn timeline_spreads_an_interval_over_the_buckets_it_overlaps() {
        let mut tl = Timeline::new(1, None);
        tl.close(Time(S / 10)); // 100 ms: 1 ms buckets.
        tl.add_busy(1.0, Time(S / 1000 / 2), Time(3 * S / 1000));
        assert_eq!(tl.span_s(0), (0.0, 0.001));
        assert!((tl.busy(0) - 0.0005).abs() < 1e-12);
        assert!((tl.busy(1) - 0.001).abs() < 1e-12);
        assert!((tl.busy(2) - 0.001).abs() < 1e-12);
        assert_eq!(tl.busy(3), 0.0);
    }

    #[test]
    fn cdf_is_bounded_and_stays_below_one_while_jobs_wait() {
        let waits: Vec<f64> = (0..10_000).map(|i| i as f64 / 100.0).collect();
        let sample = WaitSample {
            name: "t",
            waits_s: &waits,
            unstarted: 10_000,
        };
        let points = cdf_points(&sample, 200.0);
        assert!(points.len() <= CDF_POINTS + 2);
        assert!(
            points
                .windows(2)
                .all(|w| w[0].0 <= w[1].0 && w[0].1 <= w[1].1)
        );
        assert_eq!(points.last().copied(), Some((200.0, 0.5)));
        assert_eq!(points[0], (WAIT_FLOOR_S, 0.0));
    }

    #[test]
    fn log_ticks_read_as_plain_seconds() {
        assert_eq!(seconds(&0.001), "0.001");
        assert_eq!(seconds(&0.1), "0.1");
        assert_eq!(seconds(&10.0), "10");
    }
}
