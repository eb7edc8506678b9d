//! The validated policy the engine runs under.
//!
//! A [`Policy`] is built from a [`PolicyFile`] by [`Policy::from_text`], which checks every
//! section and returns all the errors it finds, each with its line. The engine publishes a
//! policy as a new version; a policy that fails validation is refused and the prior version
//! stays.

use crate::config::{
    Backfill, ClassSpec, ConfigError, DeadlinePolicy, OverloadPolicy, PolicyFile, PolicyName,
    PoolSpec, TenantSpec, key_line,
};
use crate::resources::{AMOUNT_SCALE, amount_from_f64};
use crate::time::Dur;
use crate::weight::Weight;
use std::collections::{BTreeMap, BTreeSet};
use toml::Spanned;

/// Cost units per worker-second: cost is `duration_ns * share_ppb`, so one worker busy for one
/// second costs `1e9 * 1e9`.
pub const COST_PER_WORKER_SECOND: u128 = 1_000_000_000_000_000_000;

/// The name of the class every policy has.
pub const DEFAULT_CLASS: &str = "default";

/// The policy a server runs when given none: one pool named `default`, one class named
/// `default`, the `fair` policy, any tenant accepted.
pub const BUILT_IN_POLICY: &str = r#"# Fairway's built-in policy.
[policy]
name = "fair"
backfill = "none"

[[pool]]
name = "default"

[[class]]
name = "default"
"#;

/// Limits on what a policy may declare, so that one file cannot exhaust the engine.
pub const MAX_TENANTS_DECLARED: usize = 100_000;
/// The most classes a policy may declare.
pub const MAX_CLASSES: usize = 256;
/// The most pools a policy may declare.
pub const MAX_POOLS: usize = 1024;
/// The deepest tenant tree (`a/b/c/...`).
pub const MAX_TENANT_DEPTH: usize = 8;
/// The longest tenant, class, pool or label name.
pub const MAX_NAME_LEN: usize = 128;

/// A validated class (priority band).
#[derive(Clone, Debug)]
pub struct ClassPolicy {
    /// Its name.
    pub name: String,
    /// Its priority (higher first, for reserves and `strict`).
    pub priority: i32,
    /// Its weight inside each tenant's share.
    pub weight: Weight,
    /// Fraction of each pool's capacity held for it, in parts per billion.
    pub reserve_ppb: u64,
    /// Maximum queue age admission promises.
    pub max_age: Option<Dur>,
    /// Aging: one point per step ...
    pub aging_step: Option<Dur>,
    /// ... up to this many points (unbounded when `None`).
    pub aging_cap: Option<u32>,
    /// Deadline handling.
    pub on_deadline: DeadlinePolicy,
    /// Overload handling at admission.
    pub overload: OverloadPolicy,
    /// Estimate for jobs that declare none.
    pub default_estimate: Option<Dur>,
    /// Smallest estimate.
    pub min_estimate: Dur,
    /// Largest estimate.
    pub max_estimate: Dur,
    /// Attempts per job.
    pub max_attempts: u32,
    /// First retry delay.
    pub backoff: Dur,
    /// Longest retry delay.
    pub backoff_max: Dur,
}

/// A validated tenant declaration.
#[derive(Clone, Debug)]
pub struct TenantPolicy {
    /// Full path name (`org/team`).
    pub name: String,
    /// Weight relative to siblings.
    pub weight: Weight,
    /// Guarantee, per named resource (millionths).
    pub guarantee: BTreeMap<String, u64>,
    /// Limit, per named resource (millionths).
    pub limit: BTreeMap<String, u64>,
    /// Classes it may use; `None` means all.
    pub classes: Option<BTreeSet<String>>,
    /// Outstanding-work envelope in cost units.
    pub max_outstanding: Option<u128>,
    /// Burst quota in cost units.
    pub burst: Option<u128>,
    /// Refill rate of the burst quota in cost units per second.
    pub rate: Option<u128>,
    /// Retry work per window, in cost units.
    pub retry_budget: Option<u128>,
    /// The retry budget's window.
    pub retry_window: Dur,
}

/// A validated pool declaration.
#[derive(Clone, Debug)]
pub struct PoolPolicy {
    /// Its name.
    pub name: String,
    /// Worker count (simulator only).
    pub workers: Option<u32>,
    /// Capacity per worker (decimal amounts, as declared).
    pub capacity: BTreeMap<String, f64>,
    /// Labels.
    pub labels: BTreeMap<String, String>,
}

/// A validated policy: what the engine schedules by.
#[derive(Clone, Debug)]
pub struct Policy {
    /// The ordering policy.
    pub name: PolicyName,
    /// Backfilling mode.
    pub backfill: Backfill,
    /// Whether preemptible work may be preempted to restore reserves and guarantees.
    pub preemption: bool,
    /// DRR quantum in cost units per unit of weight.
    pub quantum: u128,
    /// Reservations held under conservative backfill.
    pub reservation_depth: usize,
    /// Jobs one pass may pass over while backfilling.
    pub backfill_window: usize,
    /// Lease length.
    pub lease: Dur,
    /// Grace for a preempted or canceled attempt to stop.
    pub preempt_grace: Dur,
    /// Estimate for jobs with no declared estimate and no class default.
    pub default_estimate: Dur,
    /// Extra charge on repeated underestimation, in parts per billion of the overrun.
    pub debt_penalty_ppb: u64,
    /// Pools, in declaration order.
    pub pools: Vec<PoolPolicy>,
    /// Declared tenants, sorted by name.
    pub tenants: Vec<TenantPolicy>,
    /// Classes, in declaration order (`default` added if not declared).
    pub classes: Vec<ClassPolicy>,
    /// The text the policy was parsed from.
    pub source: String,
}

impl Policy {
    /// The built-in default policy.
    pub fn built_in() -> Policy {
        Policy::from_text(BUILT_IN_POLICY).expect("the built-in policy is valid")
    }

    /// Whether a declared tenant limits the classes it (and the tenants under it) may submit
    /// to.
    pub fn limits_classes(&self) -> bool {
        self.tenants.iter().any(|t| t.classes.is_some())
    }

    /// Parses and validates a policy file, returning every error found.
    pub fn from_text(text: &str) -> Result<Policy, Vec<ConfigError>> {
        let file = PolicyFile::parse(text).map_err(|e| vec![e])?;
        let mut policy = Policy::from_file(&file, text)?;
        policy.source = text.to_string();
        Ok(policy)
    }

    /// Validates parsed sections; `text` is the source, for line numbers.
    pub fn from_file(file: &PolicyFile, text: &str) -> Result<Policy, Vec<ConfigError>> {
        Policy::from_sections(&file.policy, &file.pool, &file.tenant, &file.class, text)
    }

    /// Validates the four policy sections (shared by policy and scenario files).
    pub fn from_sections(
        section: &crate::config::PolicySection,
        pools: &[Spanned<PoolSpec>],
        tenants: &[Spanned<TenantSpec>],
        classes: &[Spanned<ClassSpec>],
        text: &str,
    ) -> Result<Policy, Vec<ConfigError>> {
        let source = crate::config::render_sections(section, pools, tenants, classes);
        let mut v = Validator {
            text,
            errors: Vec::new(),
        };
        let policy_start = text.find("[policy]").unwrap_or(0);
        let quantum = match Weight::from_f64(section.quantum) {
            Some(_) => (section.quantum * COST_PER_WORKER_SECOND as f64) as u128,
            None => {
                v.err(
                    policy_start,
                    "quantum",
                    "must be a positive number of worker-seconds",
                );
                1
            }
        };
        let debt_penalty_ppb = match section.debt_penalty {
            None => 500_000_000,
            Some(p) if p.is_finite() && (0.0..=10.0).contains(&p) => (p * 1e9) as u64,
            Some(_) => {
                v.err(
                    policy_start,
                    "debt_penalty",
                    "must be a number between 0 and 10",
                );
                0
            }
        };
        let pools = v.pools(pools);
        let classes = v.classes(classes);
        let class_names: BTreeSet<String> = classes.iter().map(|c| c.name.clone()).collect();
        let tenants = v.tenants(tenants, &class_names);
        if !v.errors.is_empty() {
            return Err(v.errors);
        }
        Ok(Policy {
            name: section.name,
            backfill: section.backfill,
            preemption: section.preemption,
            quantum,
            reservation_depth: section.reservation_depth.unwrap_or(64).clamp(1, 10_000) as usize,
            backfill_window: section.backfill_window.unwrap_or(1024).clamp(1, 100_000) as usize,
            lease: section.lease.map(|d| d.0).unwrap_or(Dur::from_secs(30)),
            preempt_grace: section
                .preempt_grace
                .map(|d| d.0)
                .unwrap_or(Dur::from_secs(30)),
            default_estimate: section
                .default_estimate
                .map(|d| d.0)
                .unwrap_or(Dur::from_secs(1)),
            debt_penalty_ppb,
            pools,
            tenants,
            classes,
            source,
        })
    }

    /// The class named `name`.
    pub fn class(&self, name: &str) -> Option<(usize, &ClassPolicy)> {
        self.classes
            .iter()
            .enumerate()
            .find(|(_, c)| c.name == name)
    }

    /// The declaration of tenant `name`, if declared.
    pub fn tenant(&self, name: &str) -> Option<&TenantPolicy> {
        self.tenants
            .binary_search_by(|t| t.name.as_str().cmp(name))
            .ok()
            .map(|i| &self.tenants[i])
    }
}

/// Checks a tenant, class, pool or label name.
pub fn check_name(kind: &str, name: &str) -> Result<(), String> {
    if name.is_empty() {
        return Err(format!("{kind} name is empty"));
    }
    if name.len() > MAX_NAME_LEN {
        return Err(format!(
            "{kind} name {name:?} is longer than {MAX_NAME_LEN} bytes"
        ));
    }
    if has_char_outside(name, b'!', |c| c.is_control() || c.is_whitespace()) {
        return Err(format!(
            "{kind} name {name:?} contains whitespace or control characters"
        ));
    }
    Ok(())
}

/// Whether `s` holds a character that `unwanted` refuses, for an `unwanted` that refuses no
/// ASCII character from `lowest` to `~` and every other ASCII character. Every submission
/// checks its id and names, so the bytes are read first, in one pass with no early exit (which
/// the compiler turns into a few wide compares), for a byte outside `lowest..=b'~'`: DEL, a
/// lower byte or a byte of a non-ASCII character. Only text with one is read again as
/// characters.
pub(crate) fn has_char_outside(s: &str, lowest: u8, unwanted: impl Fn(char) -> bool) -> bool {
    let span = 0x7f - lowest;
    let outside = s
        .bytes()
        .fold(0u8, |acc, b| acc | u8::from(b.wrapping_sub(lowest) >= span));
    outside != 0 && s.chars().any(unwanted)
}

/// Checks a tenant path (`org/team`).
pub fn check_tenant_name(name: &str) -> Result<(), String> {
    check_name("tenant", name)?;
    // One pass over the bytes ('/' is ASCII: it never occurs inside a longer character).
    let (mut slashes, mut empty_segment, mut previous) = (0, false, b'/');
    for &b in name.as_bytes() {
        if b == b'/' {
            empty_segment |= previous == b'/';
            slashes += 1;
        }
        previous = b;
    }
    if empty_segment || previous == b'/' {
        return Err(format!("tenant name {name:?} has an empty path segment"));
    }
    if slashes >= MAX_TENANT_DEPTH {
        return Err(format!(
            "tenant name {name:?} is deeper than {MAX_TENANT_DEPTH} levels"
        ));
    }
    Ok(())
}

struct Validator<'a> {
    text: &'a str,
    errors: Vec<ConfigError>,
}

impl Validator<'_> {
    fn err(&mut self, table_start: usize, key: &str, message: impl Into<String>) {
        let line = key_line(self.text, table_start, key);
        self.errors.push(ConfigError {
            line: Some(line),
            key: Some(key.to_string()),
            message: message.into(),
        });
    }

    fn weight(&mut self, start: usize, value: Option<f64>) -> Weight {
        match value {
            None => Weight::ONE,
            Some(w) => Weight::from_f64(w).unwrap_or_else(|| {
                self.err(
                    start,
                    "weight",
                    format!("{w} is not a positive weight (between 0.000001 and 1000000)"),
                );
                Weight::ONE
            }),
        }
    }

    fn amounts(
        &mut self,
        start: usize,
        key: &str,
        map: &BTreeMap<String, f64>,
    ) -> BTreeMap<String, u64> {
        let mut out = BTreeMap::new();
        for (name, value) in map {
            if let Err(e) = check_name("resource", name) {
                self.err(start, key, e);
            }
            match amount_from_f64(*value) {
                Some(a) => {
                    out.insert(name.clone(), a);
                }
                None => self.err(
                    start,
                    key,
                    format!("resource {name:?}: {value} is not an amount >= 0"),
                ),
            }
        }
        out
    }

    fn work(&mut self, start: usize, key: &str, value: Option<f64>) -> Option<u128> {
        let value = value?;
        if value.is_finite() && value > 0.0 && value < 1e15 {
            Some((value * COST_PER_WORKER_SECOND as f64) as u128)
        } else {
            self.err(
                start,
                key,
                format!("{value} is not a positive amount of worker-seconds"),
            );
            None
        }
    }

    fn pools(&mut self, pools: &[Spanned<PoolSpec>]) -> Vec<PoolPolicy> {
        if pools.len() > MAX_POOLS {
            self.errors.push(ConfigError::at(
                self.text,
                None,
                None,
                format!("more than {MAX_POOLS} pools"),
            ));
        }
        let mut seen = BTreeSet::new();
        let mut out = Vec::new();
        for spanned in pools {
            let start = spanned.span().start;
            let p = spanned.get_ref();
            if let Err(e) = check_name("pool", &p.name) {
                self.err(start, "name", e);
            }
            if !seen.insert(p.name.clone()) {
                self.err(
                    start,
                    "name",
                    format!("pool {:?} is declared twice", p.name),
                );
            }
            if let Some(n) = p.workers
                && n > 100_000
            {
                self.err(start, "workers", format!("{n} workers is more than 100000"));
            }
            self.amounts(start, "capacity", &p.capacity);
            for (k, val) in &p.labels {
                if let Err(e) = check_name("label", k).and_then(|_| check_name("label value", val))
                {
                    self.err(start, "labels", e);
                }
            }
            out.push(PoolPolicy {
                name: p.name.clone(),
                workers: p.workers,
                capacity: p.capacity.clone(),
                labels: p.labels.clone(),
            });
        }
        out
    }

    fn dur_opt(&mut self, d: Option<crate::config::DurStr>) -> Option<Dur> {
        d.map(|d| d.0)
    }

    fn classes(&mut self, classes: &[Spanned<ClassSpec>]) -> Vec<ClassPolicy> {
        if classes.len() > MAX_CLASSES {
            self.errors.push(ConfigError::at(
                self.text,
                None,
                None,
                format!("more than {MAX_CLASSES} classes"),
            ));
        }
        let mut seen = BTreeSet::new();
        let mut out = Vec::new();
        let mut reserve_total: u64 = 0;
        for spanned in classes {
            let start = spanned.span().start;
            let c = spanned.get_ref();
            if let Err(e) = check_name("class", &c.name) {
                self.err(start, "name", e);
            }
            if !seen.insert(c.name.clone()) {
                self.err(
                    start,
                    "name",
                    format!("class {:?} is declared twice", c.name),
                );
            }
            let weight = self.weight(start, c.weight);
            if !(c.reserve.is_finite() && (0.0..1.0).contains(&c.reserve)) {
                self.err(
                    start,
                    "reserve",
                    format!("{} is not a fraction in [0, 1)", c.reserve),
                );
            }
            let reserve_ppb = (c.reserve.clamp(0.0, 1.0) * 1e9) as u64;
            reserve_total = reserve_total.saturating_add(reserve_ppb);
            if c.aging_cap.is_some() && c.aging_step.is_none() {
                self.err(
                    start,
                    "aging_cap",
                    "needs aging_step (the time one point of priority takes)",
                );
            }
            if let Some(step) = c.aging_step
                && step.0 < Dur::from_millis(1)
            {
                self.err(start, "aging_step", "must be at least 1ms");
            }
            if !(-1_000_000..=1_000_000).contains(&c.priority) {
                self.err(start, "priority", "must be between -1000000 and 1000000");
            }
            let min_estimate = self.dur_opt(c.min_estimate).unwrap_or(Dur::ZERO);
            let max_estimate = self
                .dur_opt(c.max_estimate)
                .unwrap_or(Dur::from_secs(7 * 86400));
            if min_estimate > max_estimate {
                self.err(start, "min_estimate", "is larger than max_estimate");
            }
            let default_estimate = self.dur_opt(c.default_estimate);
            if let Some(d) = default_estimate
                && (d < min_estimate || d > max_estimate)
            {
                self.err(
                    start,
                    "default_estimate",
                    "is outside [min_estimate, max_estimate]",
                );
            }
            let max_attempts = c.max_attempts.unwrap_or(3);
            if !(1..=1000).contains(&max_attempts) {
                self.err(start, "max_attempts", "must be between 1 and 1000");
            }
            let backoff = self.dur_opt(c.backoff).unwrap_or(Dur::from_secs(1));
            let backoff_max = self.dur_opt(c.backoff_max).unwrap_or(Dur::from_secs(300));
            if backoff > backoff_max {
                self.err(start, "backoff", "is larger than backoff_max");
            }
            out.push(ClassPolicy {
                name: c.name.clone(),
                priority: c.priority,
                weight,
                reserve_ppb,
                max_age: self.dur_opt(c.max_age),
                aging_step: self.dur_opt(c.aging_step),
                aging_cap: c.aging_cap,
                on_deadline: c.on_deadline,
                overload: c.overload,
                default_estimate,
                min_estimate,
                max_estimate,
                max_attempts,
                backoff,
                backoff_max,
            });
        }
        if reserve_total >= 1_000_000_000 {
            self.errors.push(ConfigError::at(
                self.text,
                classes.first().map(|c| c.span()),
                Some("reserve"),
                "the classes' reserves add up to the whole pool or more; they must leave capacity unreserved",
            ));
        }
        if !seen.contains(DEFAULT_CLASS) {
            out.push(ClassPolicy {
                name: DEFAULT_CLASS.to_string(),
                priority: 0,
                weight: Weight::ONE,
                reserve_ppb: 0,
                max_age: None,
                aging_step: None,
                aging_cap: None,
                on_deadline: DeadlinePolicy::RunLate,
                overload: OverloadPolicy::Reject,
                default_estimate: None,
                min_estimate: Dur::ZERO,
                max_estimate: Dur::from_secs(7 * 86400),
                max_attempts: 3,
                backoff: Dur::from_secs(1),
                backoff_max: Dur::from_secs(300),
            });
        }
        out
    }

    fn tenants(
        &mut self,
        tenants: &[Spanned<TenantSpec>],
        class_names: &BTreeSet<String>,
    ) -> Vec<TenantPolicy> {
        if tenants.len() > MAX_TENANTS_DECLARED {
            self.errors.push(ConfigError::at(
                self.text,
                None,
                None,
                format!("more than {MAX_TENANTS_DECLARED} tenants"),
            ));
        }
        let mut out: BTreeMap<String, TenantPolicy> = BTreeMap::new();
        for spanned in tenants {
            let start = spanned.span().start;
            let t = spanned.get_ref();
            if let Err(e) = check_tenant_name(&t.name) {
                self.err(start, "name", e);
            }
            if out.contains_key(&t.name) {
                self.err(
                    start,
                    "name",
                    format!("tenant {:?} is declared twice", t.name),
                );
            }
            let weight = self.weight(start, t.weight);
            let guarantee = self.amounts(start, "guarantee", &t.guarantee);
            let limit = self.amounts(start, "limit", &t.limit);
            for (r, g) in &guarantee {
                if let Some(l) = limit.get(r)
                    && g > l
                {
                    self.err(
                        start,
                        "guarantee",
                        format!(
                            "guarantee of {r} ({}) is above the limit ({})",
                            *g as f64 / AMOUNT_SCALE as f64,
                            *l as f64 / AMOUNT_SCALE as f64
                        ),
                    );
                }
            }
            if let Some(classes) = &t.classes {
                for c in classes {
                    if !class_names.contains(c) && c != DEFAULT_CLASS {
                        self.err(start, "classes", format!("unknown class {c:?}"));
                    }
                }
            }
            let retry_window = t.retry_window.map(|d| d.0).unwrap_or(Dur::from_secs(60));
            if retry_window == Dur::ZERO {
                self.err(start, "retry_window", "must be longer than zero");
            }
            let tenant = TenantPolicy {
                name: t.name.clone(),
                weight,
                guarantee,
                limit,
                classes: t.classes.as_ref().map(|c| c.iter().cloned().collect()),
                max_outstanding: self.work(start, "max_outstanding", t.max_outstanding),
                burst: self.work(start, "burst", t.burst),
                rate: self.work(start, "rate", t.rate),
                retry_budget: self.work(start, "retry_budget", t.retry_budget),
                retry_window,
            };
            if tenant.rate.is_some() && tenant.burst.is_none() {
                self.err(
                    start,
                    "rate",
                    "needs burst (the depth of the quota the rate refills)",
                );
            }
            out.insert(t.name.clone(), tenant);
        }
        out.into_values().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Proves: the byte-wise first pass changes no answer: for every character there is, alone
    // and at each place in ASCII text long enough for the wide compares (and their remainder),
    // a job id's check and a name's agree with reading the text as characters.
    #[test]
    fn the_byte_pass_agrees_with_reading_characters() {
        let id = |c: char| c.is_control();
        let name = |c: char| c.is_control() || c.is_whitespace();
        let agree = |s: &str| {
            assert_eq!(has_char_outside(s, b' ', id), s.chars().any(id), "{s:?}");
            assert_eq!(
                has_char_outside(s, b'!', name),
                s.chars().any(name),
                "{s:?}"
            );
        };
        let mut text = String::new();
        for c in (0..=char::MAX as u32).filter_map(char::from_u32) {
            text.clear();
            text.push(c);
            agree(&text);
            text.insert_str(0, "ab");
            text.push_str("yz");
            agree(&text);
        }
        let plain = "0123456789abcdefghijklmnopqrstuvwxyz-_.:".repeat(2);
        agree(&plain);
        for c in [
            '\0',
            '\t',
            ' ',
            '~',
            '\u{7f}',
            '\u{80}',
            '\u{85}',
            'é',
            '\u{3000}',
            '\u{10ffff}',
        ] {
            for at in 0..=plain.len() {
                let mut s = plain.clone();
                s.insert(at, c);
                agree(&s);
            }
        }
    }

    /// The checks as they were written before their byte-wise fast path: the reference the
    /// fast path must agree with.
    fn tenant_name_reference(name: &str) -> bool {
        !name.is_empty()
            && name.len() <= MAX_NAME_LEN
            && !name.chars().any(|c| c.is_control() || c.is_whitespace())
            && !name.split('/').any(str::is_empty)
            && name.split('/').count() <= MAX_TENANT_DEPTH
    }

    // Proves: the byte-wise name checks accept and refuse exactly what the character-wise
    // ones did, on ASCII and non-ASCII text (whitespace and controls beyond ASCII, such as
    // NEL and the ideographic space), at the depth bound and around empty segments.
    proptest::proptest! {
        #[test]
        fn tenant_names_are_checked_as_before(
            segments in proptest::collection::vec("[a-c]{0,3}", 0..11),
            odd in proptest::option::of((
                proptest::sample::select(vec![' ', '\t', '\u{7f}', '\0', 'é', '\u{85}', '\u{3000}']),
                proptest::prelude::any::<proptest::sample::Index>(),
            )),
        ) {
            let mut name: Vec<char> = segments.join("/").chars().collect();
            if let Some((c, at)) = odd {
                name.insert(at.index(name.len() + 1), c);
            }
            let name: String = name.into_iter().collect();
            proptest::prop_assert_eq!(
                check_tenant_name(&name).is_ok(),
                tenant_name_reference(&name),
                "{:?}",
                name
            );
        }
    }

    #[test]
    fn tenant_names_at_the_edges() {
        let deepest = ["a"; MAX_TENANT_DEPTH].join("/");
        assert!(check_tenant_name(&deepest).is_ok());
        let too_deep = format!("{deepest}/a");
        assert!(check_tenant_name(&too_deep).unwrap_err().contains("deeper"));
        for empty in ["/a", "a/", "a//b", "/"] {
            assert!(
                check_tenant_name(empty)
                    .unwrap_err()
                    .contains("empty path segment")
            );
        }
        for bad in ["a b", "a\tb", "a\u{7f}", "a\u{85}b", "a\u{3000}b"] {
            assert!(
                check_tenant_name(bad).unwrap_err().contains("whitespace"),
                "{bad:?}"
            );
        }
        assert!(check_tenant_name("équipe/été").is_ok());
    }

    #[test]
    fn the_built_in_policy_is_fair_with_a_default_class() {
        let p = Policy::built_in();
        assert_eq!(p.name, PolicyName::Fair);
        assert_eq!(p.classes.len(), 1);
        assert_eq!(p.classes[0].name, "default");
        assert_eq!(p.pools[0].name, "default");
    }

    #[test]
    fn validation_reports_every_error_with_its_line() {
        let text = "[[class]]\nname = \"a\"\nreserve = 1.5\n\n[[tenant]]\nname = \"t\"\nweight = 0\nclasses = [\"nope\"]\n";
        let errors = Policy::from_text(text).unwrap_err();
        let lines: Vec<_> = errors
            .iter()
            .map(|e| (e.line, e.key.clone().unwrap_or_default()))
            .collect();
        assert!(
            lines.contains(&(Some(3), "reserve".to_string())),
            "{errors:?}"
        );
        assert!(
            lines.contains(&(Some(7), "weight".to_string())),
            "{errors:?}"
        );
        assert!(
            lines.contains(&(Some(8), "classes".to_string())),
            "{errors:?}"
        );
    }

    #[test]
    fn guarantees_above_limits_are_refused() {
        let text = "[[tenant]]\nname = \"t\"\nguarantee = { cpu = 8 }\nlimit = { cpu = 4 }\n";
        let errors = Policy::from_text(text).unwrap_err();
        assert!(errors[0].message.contains("above the limit"), "{errors:?}");
    }
}
