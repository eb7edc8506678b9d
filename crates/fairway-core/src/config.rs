//! Policy files: the TOML sections `[policy]`, `[[pool]]`, `[[tenant]]` and `[[class]]`.
//!
//! The same sections open every scenario file (the simulator adds its own around them) and make
//! up the policy a server publishes. Unknown keys are errors; every error names the line and,
//! where there is one, the key.

use crate::time::Dur;
use serde::de::{self, Deserializer};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt;
use std::ops::Range;
use toml::Spanned;

/// A duration written with a unit, such as `"250ms"` or `"5s"`.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub struct DurStr(pub Dur);

impl<'de> Deserialize<'de> for DurStr {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl de::Visitor<'_> for V {
            type Value = DurStr;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a duration with a unit, such as \"250ms\", \"5s\", \"2m\" or \"1h\"")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<DurStr, E> {
                Dur::parse(v).map(DurStr).map_err(E::custom)
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<DurStr, E> {
                Err(E::custom(format!(
                    "duration {v} has no unit: write it as a string such as \"{v}s\" or \"{v}ms\""
                )))
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<DurStr, E> {
                Err(E::custom(format!(
                    "duration {v} has no unit: write it as a string such as \"{v}s\""
                )))
            }
        }
        d.deserialize_any(V)
    }
}

impl Serialize for DurStr {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.0.to_string())
    }
}

/// The scheduling policies, selectable by name.
#[derive(
    Clone, Copy, PartialEq, Eq, Debug, Default, Deserialize, Serialize, PartialOrd, Ord, Hash,
)]
#[serde(rename_all = "kebab-case")]
pub enum PolicyName {
    /// One queue in arrival order.
    Fifo,
    /// Absolute priority: the highest class and job priority first (seed 002's two tiers).
    Strict,
    /// One job per tenant per turn: item count, not cost.
    RoundRobin,
    /// Deficit round robin over tenants, quantum in worker-seconds per unit of weight.
    Drr,
    /// Weighted fair queueing: virtual finish times on GPS virtual time.
    Wfq,
    /// Weighted dominant resource fairness over current allocations.
    Drf,
    /// Shortest (estimated) job first.
    Sjf,
    /// Hierarchical: tenant entitlement, then class bands, then deadline, aged priority, arrival.
    #[default]
    Fair,
}

impl PolicyName {
    /// Every policy, in a stable order.
    pub const ALL: [PolicyName; 8] = [
        PolicyName::Fifo,
        PolicyName::Strict,
        PolicyName::RoundRobin,
        PolicyName::Drr,
        PolicyName::Wfq,
        PolicyName::Drf,
        PolicyName::Sjf,
        PolicyName::Fair,
    ];

    /// The name as written in files.
    pub fn as_str(self) -> &'static str {
        match self {
            PolicyName::Fifo => "fifo",
            PolicyName::Strict => "strict",
            PolicyName::RoundRobin => "round-robin",
            PolicyName::Drr => "drr",
            PolicyName::Wfq => "wfq",
            PolicyName::Drf => "drf",
            PolicyName::Sjf => "sjf",
            PolicyName::Fair => "fair",
        }
    }

    /// Parses a policy name.
    pub fn parse(text: &str) -> Result<PolicyName, String> {
        PolicyName::ALL
            .into_iter()
            .find(|p| p.as_str() == text)
            .ok_or_else(|| {
                let names: Vec<_> = PolicyName::ALL.iter().map(|p| p.as_str()).collect();
                format!(
                    "unknown policy {text:?} (expected one of {})",
                    names.join(", ")
                )
            })
    }
}

impl fmt::Display for PolicyName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Backfilling: may a later job start before the job the policy would run first?
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Backfill {
    /// No reservations: a job waiting for capacity blocks later jobs of its own queue; other
    /// queues (tenants) whose next job fits pass it.
    #[default]
    None,
    /// EASY: the first job that cannot start holds a reservation; later jobs start only if they
    /// do not delay it.
    Easy,
    /// Conservative: every waiting job (up to the reservation depth) holds a reservation.
    Conservative,
}

impl Backfill {
    /// Parses a backfill mode.
    pub fn parse(text: &str) -> Result<Backfill, String> {
        match text {
            "none" => Ok(Backfill::None),
            "easy" => Ok(Backfill::Easy),
            "conservative" => Ok(Backfill::Conservative),
            _ => Err(format!(
                "unknown backfill {text:?} (expected none, easy or conservative)"
            )),
        }
    }

    /// The name as written in files.
    pub fn as_str(self) -> &'static str {
        match self {
            Backfill::None => "none",
            Backfill::Easy => "easy",
            Backfill::Conservative => "conservative",
        }
    }
}

/// What happens to a queued job whose deadline can no longer be met.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum DeadlinePolicy {
    /// Keep it, in deadline order; it runs late.
    #[default]
    RunLate,
    /// Expire it: it ends in state `expired` and is never started.
    Drop,
    /// Keep it, but order it as a job without a deadline.
    Downgrade,
}

/// What admission does with a job it predicts would wait past its class's maximum age.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum OverloadPolicy {
    /// Reject it, retryable, with a hint of when to retry.
    #[default]
    Reject,
    /// Accept it deferred to the window in which it is predicted to start in time.
    Defer,
}

/// The `[policy]` section.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct PolicySection {
    /// The policy by name.
    #[serde(default)]
    pub name: PolicyName,
    /// Backfilling mode.
    #[serde(default)]
    pub backfill: Backfill,
    /// May the policy preempt preemptible running work (to restore reserves and guarantees)?
    #[serde(default)]
    pub preemption: bool,
    /// DRR quantum, in worker-seconds per unit of weight.
    #[serde(default = "default_quantum")]
    pub quantum: f64,
    /// How many waiting jobs hold reservations under conservative backfill.
    pub reservation_depth: Option<u32>,
    /// How many jobs one scheduling pass may examine and pass over while backfilling.
    pub backfill_window: Option<u32>,
    /// Lease length: how long a worker holds a job without a heartbeat.
    pub lease: Option<DurStr>,
    /// How long a preempted or canceled attempt may take to stop before it is fenced.
    pub preempt_grace: Option<DurStr>,
    /// Estimate used for a job that declares none and whose class has no default.
    pub default_estimate: Option<DurStr>,
    /// Extra charge on underestimated work, as a fraction of the overrun, once a tenant
    /// underestimates repeatedly.
    pub debt_penalty: Option<f64>,
}

fn default_quantum() -> f64 {
    1.0
}

impl Default for PolicySection {
    fn default() -> Self {
        PolicySection {
            name: PolicyName::Fair,
            backfill: Backfill::None,
            preemption: false,
            quantum: 1.0,
            reservation_depth: None,
            backfill_window: None,
            lease: None,
            preempt_grace: None,
            default_estimate: None,
            debt_penalty: None,
        }
    }
}

/// A `[[pool]]` of workers.
#[derive(Clone, Debug, Deserialize, Serialize, Default)]
#[serde(deny_unknown_fields)]
pub struct PoolSpec {
    /// The pool's name.
    pub name: String,
    /// How many workers (the simulator starts them; a server learns them from live workers).
    pub workers: Option<u32>,
    /// Capacity per worker.
    #[serde(default)]
    pub capacity: BTreeMap<String, f64>,
    /// Labels of every worker of the pool, matched against jobs' requirements.
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
}

/// A `[[tenant]]`.
#[derive(Clone, Debug, Deserialize, Serialize, Default)]
#[serde(deny_unknown_fields)]
pub struct TenantSpec {
    /// The name; `org/team` makes a tree.
    pub name: String,
    /// Weight relative to siblings.
    pub weight: Option<f64>,
    /// Capacity that is the tenant's own whenever it has demand.
    #[serde(default)]
    pub guarantee: BTreeMap<String, f64>,
    /// Capacity the tenant never exceeds.
    #[serde(default)]
    pub limit: BTreeMap<String, f64>,
    /// Classes the tenant may submit to; absent means all.
    pub classes: Option<Vec<String>>,
    /// Outstanding-work envelope: accepted, unfinished work, in worker-seconds.
    pub max_outstanding: Option<f64>,
    /// Burst quota: work accepted at once, in worker-seconds (a token bucket's depth).
    pub burst: Option<f64>,
    /// Sustained admission rate refilling the burst quota, in worker-seconds per second.
    pub rate: Option<f64>,
    /// Retry work allowed per retry window, in worker-seconds.
    pub retry_budget: Option<f64>,
    /// The window of the retry budget.
    pub retry_window: Option<DurStr>,
}

/// A `[[class]]`: a priority band.
#[derive(Clone, Debug, Deserialize, Serialize, Default)]
#[serde(deny_unknown_fields)]
pub struct ClassSpec {
    /// The class's name.
    pub name: String,
    /// Priority of the band (higher is more urgent); orders bands for reserves and `strict`.
    #[serde(default)]
    pub priority: i32,
    /// Weight of the band inside each tenant's share.
    pub weight: Option<f64>,
    /// Fraction of each pool's capacity held for this band and higher ones.
    #[serde(default)]
    pub reserve: f64,
    /// Maximum queue age admission promises: it accepts while the predicted wait fills at
    /// most 80% of it.
    pub max_age: Option<DurStr>,
    /// One priority point gained per step of waiting ...
    pub aging_step: Option<DurStr>,
    /// ... up to this many points.
    pub aging_cap: Option<u32>,
    /// What happens to a queued job that can no longer meet its deadline.
    #[serde(default)]
    pub on_deadline: DeadlinePolicy,
    /// What admission does with work predicted to wait past `max_age`.
    #[serde(default)]
    pub overload: OverloadPolicy,
    /// Estimate for jobs that declare none.
    pub default_estimate: Option<DurStr>,
    /// Smallest estimate accepted (declared estimates are raised to it).
    pub min_estimate: Option<DurStr>,
    /// Largest estimate accepted (a job declaring more is refused).
    pub max_estimate: Option<DurStr>,
    /// Attempts per job, unless the job says fewer.
    pub max_attempts: Option<u32>,
    /// First retry delay; doubles per failed attempt.
    pub backoff: Option<DurStr>,
    /// Longest retry delay.
    pub backoff_max: Option<DurStr>,
}

/// The sections of a policy file.
#[derive(Clone, Debug, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct PolicyFile {
    /// `[policy]`.
    #[serde(default)]
    pub policy: PolicySection,
    /// `[[pool]]`.
    #[serde(default)]
    pub pool: Vec<Spanned<PoolSpec>>,
    /// `[[tenant]]`.
    #[serde(default)]
    pub tenant: Vec<Spanned<TenantSpec>>,
    /// `[[class]]`.
    #[serde(default)]
    pub class: Vec<Spanned<ClassSpec>>,
}

/// An error in a policy or scenario file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigError {
    /// 1-based line, when known.
    pub line: Option<usize>,
    /// The offending key, when known.
    pub key: Option<String>,
    /// What is wrong.
    pub message: String,
}

impl ConfigError {
    /// An error at the byte `span` of `text`.
    pub fn at(
        text: &str,
        span: Option<Range<usize>>,
        key: Option<&str>,
        message: impl Into<String>,
    ) -> ConfigError {
        ConfigError {
            line: span.map(|s| line_of(text, s.start)),
            key: key.map(str::to_string),
            message: message.into(),
        }
    }

    /// An error converted from the TOML parser.
    pub fn from_toml(text: &str, err: &toml::de::Error) -> ConfigError {
        let message = err.message().trim().to_string();
        let key = message
            .split('`')
            .nth(1)
            .filter(|_| {
                message.starts_with("unknown field") || message.starts_with("missing field")
            })
            .map(str::to_string);
        ConfigError::at(text, err.span(), key.as_deref(), message)
    }
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.line, &self.key) {
            (Some(line), Some(key)) => write!(f, "line {line}: key `{key}`: {}", self.message),
            (Some(line), None) => write!(f, "line {line}: {}", self.message),
            (None, Some(key)) => write!(f, "key `{key}`: {}", self.message),
            (None, None) => write!(f, "{}", self.message),
        }
    }
}

/// The 1-based line of byte `offset` in `text`.
pub fn line_of(text: &str, offset: usize) -> usize {
    text.as_bytes()[..offset.min(text.len())]
        .iter()
        .filter(|b| **b == b'\n')
        .count()
        + 1
}

/// Finds the line of `key = ...` inside the table that starts at byte `table_start`, for errors
/// about a key whose value parsed but does not make sense.
pub fn key_line(text: &str, table_start: usize, key: &str) -> usize {
    let start_line = line_of(text, table_start);
    for (i, line) in text.lines().enumerate().skip(start_line.saturating_sub(1)) {
        let trimmed = line.trim_start();
        if i + 1 > start_line && trimmed.starts_with('[') {
            break;
        }
        if let Some(rest) = trimmed.strip_prefix(key)
            && rest.trim_start().starts_with('=')
        {
            return i + 1;
        }
    }
    start_line
}

/// Renders policy sections as a standalone policy file (used when they came from a scenario).
pub fn render_sections(
    section: &PolicySection,
    pools: &[Spanned<PoolSpec>],
    tenants: &[Spanned<TenantSpec>],
    classes: &[Spanned<ClassSpec>],
) -> String {
    #[derive(Serialize)]
    struct Render<'a> {
        policy: &'a PolicySection,
        pool: Vec<&'a PoolSpec>,
        tenant: Vec<&'a TenantSpec>,
        class: Vec<&'a ClassSpec>,
    }
    let render = Render {
        policy: section,
        pool: pools.iter().map(|p| p.get_ref()).collect(),
        tenant: tenants.iter().map(|t| t.get_ref()).collect(),
        class: classes.iter().map(|c| c.get_ref()).collect(),
    };
    toml::to_string(&render).expect("policy sections serialize")
}

impl PolicyFile {
    /// Parses a policy file; the error names the line and key.
    pub fn parse(text: &str) -> Result<PolicyFile, ConfigError> {
        toml::from_str(text).map_err(|e| ConfigError::from_toml(text, &e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_keys_name_the_line_and_key() {
        let text = "[policy]\nname = \"fair\"\n\n[[tenant]]\nname = \"a\"\nwieght = 2\n";
        let err = PolicyFile::parse(text).unwrap_err();
        assert_eq!(err.line, Some(6), "{err}");
        assert_eq!(err.key.as_deref(), Some("wieght"), "{err}");
    }

    #[test]
    fn durations_need_units_and_policies_need_known_names() {
        let err = PolicyFile::parse("[[class]]\nname = \"x\"\nmax_age = 5\n").unwrap_err();
        assert_eq!(err.line, Some(3), "{err}");
        assert!(err.message.contains("no unit"), "{err}");
        let err = PolicyFile::parse("[policy]\nname = \"lottery\"\n").unwrap_err();
        assert_eq!(err.line, Some(2), "{err}");
        let ok =
            PolicyFile::parse("[policy]\nname = \"round-robin\"\nbackfill = \"easy\"\n").unwrap();
        assert_eq!(ok.policy.name, PolicyName::RoundRobin);
        assert_eq!(ok.policy.backfill, Backfill::Easy);
    }

    #[test]
    fn key_line_finds_the_key_inside_its_table() {
        let text = "[[tenant]]\nname = \"a\"\n\n[[tenant]]\nname = \"b\"\nweight = -1\n";
        let second = text.find("[[tenant]]\nname = \"b\"").unwrap();
        assert_eq!(key_line(text, second, "weight"), 6);
    }
}
