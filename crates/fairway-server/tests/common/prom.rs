//! A strict parser of the Prometheus text exposition format (0.0.4), for tests: it refuses
//! what a Prometheus server would refuse, and checks what the format promises.
//!
//! Checked: metric and label names are valid; label values use only the `\\`, `\"` and `\n`
//! escapes; every sample belongs to a family declared by a `# TYPE` line before it (a
//! counter's samples end in `_total`, a histogram's are `_bucket` with `le`, `_sum` and
//! `_count`); a family's samples are contiguous; no series appears twice; values are numbers;
//! counters are finite and non-negative; histogram buckets are cumulative and their `+Inf`
//! bucket equals `_count`.

use std::collections::{BTreeMap, BTreeSet};

/// One sample.
#[derive(Clone, Debug, PartialEq)]
pub struct Sample {
    pub name: String,
    pub labels: BTreeMap<String, String>,
    pub value: f64,
}

/// One family: its type, help and samples.
#[derive(Clone, Debug, Default)]
pub struct Family {
    pub kind: String,
    pub help: String,
    pub samples: Vec<Sample>,
}

/// A parsed scrape.
#[derive(Debug, Default)]
pub struct Scrape {
    pub families: BTreeMap<String, Family>,
}

impl Scrape {
    /// Every sample named `name` whose labels include all of `labels`.
    pub fn find(&self, name: &str, labels: &[(&str, &str)]) -> Vec<&Sample> {
        self.families
            .values()
            .flat_map(|f| &f.samples)
            .filter(|s| {
                s.name == name
                    && labels
                        .iter()
                        .all(|(k, v)| s.labels.get(*k).map(String::as_str) == Some(*v))
            })
            .collect()
    }

    /// The value of the one sample named `name` with exactly these labels.
    pub fn value(&self, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
        let found: Vec<&Sample> = self
            .find(name, labels)
            .into_iter()
            .filter(|s| s.labels.len() == labels.len())
            .collect();
        match found.as_slice() {
            [one] => Some(one.value),
            _ => None,
        }
    }

    /// The sum over every sample named `name` whose labels include `labels`.
    pub fn sum(&self, name: &str, labels: &[(&str, &str)]) -> f64 {
        self.find(name, labels).iter().map(|s| s.value).sum()
    }
}

fn valid_metric_name(name: &str) -> bool {
    let mut chars = name.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_' || c == ':')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':')
}

fn valid_label_name(name: &str) -> bool {
    let mut chars = name.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
        && !name.starts_with("__")
}

fn parse_value(text: &str) -> Result<f64, String> {
    match text {
        "+Inf" => Ok(f64::INFINITY),
        "-Inf" => Ok(f64::NEG_INFINITY),
        "NaN" => Ok(f64::NAN),
        _ => text
            .parse::<f64>()
            .map_err(|_| format!("`{text}` is not a number")),
    }
}

/// Parses `name{labels} value [timestamp]`.
fn parse_sample(line: &str) -> Result<Sample, String> {
    let name_end = line
        .find(['{', ' '])
        .ok_or_else(|| format!("no value in `{line}`"))?;
    let name = &line[..name_end];
    if !valid_metric_name(name) {
        return Err(format!("invalid metric name `{name}`"));
    }
    let mut labels = BTreeMap::new();
    let mut rest = &line[name_end..];
    if let Some(after) = rest.strip_prefix('{') {
        let mut chars = after.char_indices().peekable();
        let end;
        loop {
            // A label name, `=`, a quoted value, then `,` or `}`.
            let Some(&(start, c)) = chars.peek() else {
                return Err(format!("unterminated labels in `{line}`"));
            };
            if c == '}' {
                end = start + 1;
                break;
            }
            let mut key = String::new();
            while let Some(&(_, c)) = chars.peek() {
                if c == '=' {
                    break;
                }
                key.push(c);
                chars.next();
            }
            if chars.next().map(|(_, c)| c) != Some('=') || !valid_label_name(&key) {
                return Err(format!("invalid label name `{key}` in `{line}`"));
            }
            if chars.next().map(|(_, c)| c) != Some('"') {
                return Err(format!("label `{key}` is not quoted in `{line}`"));
            }
            let mut value = String::new();
            loop {
                match chars.next() {
                    None => return Err(format!("unterminated label value in `{line}`")),
                    Some((_, '"')) => break,
                    Some((_, '\\')) => match chars.next().map(|(_, c)| c) {
                        Some('\\') => value.push('\\'),
                        Some('"') => value.push('"'),
                        Some('n') => value.push('\n'),
                        other => return Err(format!("bad escape {other:?} in `{line}`")),
                    },
                    Some((_, '\n')) => return Err(format!("raw newline in `{line}`")),
                    Some((_, c)) => value.push(c),
                }
            }
            if labels.insert(key.clone(), value).is_some() {
                return Err(format!("label `{key}` twice in `{line}`"));
            }
            match chars.next() {
                Some((_, ',')) => {}
                Some((i, '}')) => {
                    end = i + 1;
                    break;
                }
                other => return Err(format!("expected , or }} after a label, got {other:?}")),
            }
        }
        rest = &after[end..];
    }
    let mut fields = rest
        .strip_prefix(' ')
        .ok_or_else(|| format!("no space before the value in `{line}`"))?
        .split(' ');
    let value = parse_value(fields.next().unwrap_or(""))?;
    if let Some(ts) = fields.next() {
        ts.parse::<i64>()
            .map_err(|_| format!("bad timestamp `{ts}` in `{line}`"))?;
    }
    if fields.next().is_some() {
        return Err(format!("trailing fields in `{line}`"));
    }
    Ok(Sample {
        name: name.to_string(),
        labels,
        value,
    })
}

/// The family a sample belongs to, given the declared families.
fn family_of<'a>(name: &'a str, families: &BTreeMap<String, Family>) -> Option<&'a str> {
    if families.contains_key(name) {
        return Some(name);
    }
    for suffix in ["_bucket", "_sum", "_count"] {
        if let Some(base) = name.strip_suffix(suffix)
            && families.get(base).is_some_and(|f| f.kind == "histogram")
        {
            return Some(base);
        }
    }
    None
}

/// Parses and checks a scrape.
pub fn parse(text: &str) -> Result<Scrape, String> {
    let mut scrape = Scrape::default();
    let mut seen = BTreeSet::new();
    let mut finished: BTreeSet<String> = BTreeSet::new();
    let mut current: Option<String> = None;
    for (n, line) in text.lines().enumerate() {
        let at = |e: String| format!("line {}: {e}", n + 1);
        if line.is_empty() {
            continue;
        }
        if let Some(comment) = line.strip_prefix('#') {
            let mut parts = comment.trim_start().splitn(3, ' ');
            match (parts.next(), parts.next(), parts.next()) {
                (Some("TYPE"), Some(name), Some(kind)) => {
                    if !valid_metric_name(name) {
                        return Err(at(format!("invalid name `{name}`")));
                    }
                    if !["counter", "gauge", "histogram", "summary", "untyped"].contains(&kind) {
                        return Err(at(format!("unknown type `{kind}`")));
                    }
                    let family = scrape.families.entry(name.to_string()).or_default();
                    if !family.kind.is_empty() || !family.samples.is_empty() {
                        return Err(at(format!("TYPE of `{name}` twice or after its samples")));
                    }
                    family.kind = kind.to_string();
                }
                (Some("HELP"), Some(name), help) => {
                    let family = scrape.families.entry(name.to_string()).or_default();
                    if !family.help.is_empty() {
                        return Err(at(format!("HELP of `{name}` twice")));
                    }
                    family.help = help.unwrap_or("").to_string();
                }
                _ => {}
            }
            continue;
        }
        let sample = parse_sample(line).map_err(at)?;
        let family = family_of(&sample.name, &scrape.families)
            .ok_or_else(|| at(format!("`{}` has no TYPE before it", sample.name)))?
            .to_string();
        if current.as_deref() != Some(family.as_str()) {
            if let Some(previous) = current.take() {
                finished.insert(previous);
            }
            if finished.contains(&family) {
                return Err(at(format!("samples of `{family}` are not contiguous")));
            }
            current = Some(family.clone());
        }
        let key = format!("{}{:?}", sample.name, sample.labels);
        if !seen.insert(key.clone()) {
            return Err(at(format!("series {key} twice")));
        }
        let f = scrape.families.get_mut(&family).expect("found above");
        match f.kind.as_str() {
            "counter" => {
                if !sample.name.ends_with("_total") {
                    return Err(at(format!(
                        "counter sample `{}` without _total",
                        sample.name
                    )));
                }
                if !(sample.value.is_finite() && sample.value >= 0.0) {
                    return Err(at(format!("counter `{}` is {}", sample.name, sample.value)));
                }
            }
            "histogram"
                if sample.name.ends_with("_bucket") && !sample.labels.contains_key("le") =>
            {
                return Err(at(format!("bucket of `{family}` without le")));
            }
            _ => {}
        }
        f.samples.push(sample);
    }
    // Histograms: cumulative buckets, +Inf equal to _count.
    for (name, f) in &scrape.families {
        if f.kind != "histogram" {
            continue;
        }
        // Per label set (without `le`): the buckets (le, count) and the `_count`.
        type Buckets = (Vec<(f64, f64)>, Option<f64>);
        let mut series: BTreeMap<String, Buckets> = BTreeMap::new();
        for s in &f.samples {
            let mut labels = s.labels.clone();
            let le = labels.remove("le");
            let entry = series.entry(format!("{labels:?}")).or_default();
            if s.name.ends_with("_bucket") {
                let le = parse_value(&le.expect("checked"))?;
                entry.0.push((le, s.value));
            } else if s.name.ends_with("_count") {
                entry.1 = Some(s.value);
            }
        }
        for (labels, (mut buckets, count)) in series {
            buckets.sort_by(|a, b| a.0.total_cmp(&b.0));
            if buckets.windows(2).any(|w| w[1].1 < w[0].1) {
                return Err(format!("{name}{labels}: buckets are not cumulative"));
            }
            let inf = buckets.last().filter(|b| b.0.is_infinite()).map(|b| b.1);
            if inf.is_none() || inf != count {
                return Err(format!(
                    "{name}{labels}: +Inf bucket {inf:?} != count {count:?}"
                ));
            }
        }
    }
    Ok(scrape)
}

#[test]
fn the_parser_refuses_what_prometheus_refuses() {
    let ok = "# HELP a_total A.\n# TYPE a_total counter\na_total{x=\"1\"} 2\n";
    assert!(parse(ok).is_ok());
    for bad in [
        "a_total 1\n",
        "# TYPE a counter\na 1\n",
        "# TYPE a gauge\na{x=1} 1\n",
        "# TYPE a gauge\na{x=\"1\"} 1\na{x=\"1\"} 2\n",
        "# TYPE a gauge\n# TYPE b gauge\na 1\nb 1\na{y=\"2\"} 1\n",
        "# TYPE h histogram\nh_bucket{le=\"1\"} 2\nh_bucket{le=\"+Inf\"} 1\nh_count 1\n",
        "# TYPE a gauge\na{x=\"\\q\"} 1\n",
        "# TYPE a gauge\na one\n",
    ] {
        assert!(parse(bad).is_err(), "accepted: {bad}");
    }
}
