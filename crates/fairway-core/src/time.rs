//! Instants and durations on the engine's clock.
//!
//! The engine never reads a clock: every call takes `now` as an argument. Time is counted in
//! nanoseconds from an origin the driver chooses (the simulator starts at zero; the server uses
//! the Unix epoch), so arithmetic is exact and deterministic.

use serde::{Deserialize, Serialize};
use std::fmt;

/// An instant, in nanoseconds since the driver's origin.
#[derive(
    Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug, Default, Serialize, Deserialize,
)]
pub struct Time(pub u64);

/// A length of time, in nanoseconds.
#[derive(
    Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug, Default, Serialize, Deserialize,
)]
pub struct Dur(pub u64);

impl Time {
    /// The origin.
    pub const ZERO: Time = Time(0);
    /// The end of time; used for "never".
    pub const MAX: Time = Time(u64::MAX);

    /// An instant `millis` milliseconds after the origin.
    pub const fn from_millis(millis: u64) -> Time {
        Time(millis.saturating_mul(1_000_000))
    }

    /// This instant plus `d`, saturating at `Time::MAX`.
    pub fn plus(self, d: Dur) -> Time {
        Time(self.0.saturating_add(d.0))
    }

    /// This instant minus `d`, saturating at the origin.
    pub fn minus(self, d: Dur) -> Time {
        Time(self.0.saturating_sub(d.0))
    }

    /// The time from `earlier` to `self`, or zero when `earlier` is later.
    pub fn since(self, earlier: Time) -> Dur {
        Dur(self.0.saturating_sub(earlier.0))
    }

    /// Milliseconds since the origin, rounded down.
    pub fn as_millis(self) -> u64 {
        self.0 / 1_000_000
    }

    /// Seconds since the origin (for reports only; never for decisions).
    pub fn as_secs_f64(self) -> f64 {
        self.0 as f64 / 1e9
    }
}

impl Dur {
    /// No time.
    pub const ZERO: Dur = Dur(0);
    /// Longer than anything.
    pub const MAX: Dur = Dur(u64::MAX);

    /// A duration of `millis` milliseconds.
    pub const fn from_millis(millis: u64) -> Dur {
        Dur(millis.saturating_mul(1_000_000))
    }

    /// A duration of `secs` seconds.
    pub const fn from_secs(secs: u64) -> Dur {
        Dur(secs.saturating_mul(1_000_000_000))
    }

    /// A duration from decimal seconds, rounded to the nanosecond; negative or NaN gives zero.
    pub fn from_secs_f64(secs: f64) -> Dur {
        if secs.is_nan() || secs <= 0.0 {
            return Dur::ZERO;
        }
        let nanos = (secs * 1e9).round();
        if nanos >= u64::MAX as f64 {
            Dur::MAX
        } else {
            Dur(nanos as u64)
        }
    }

    /// Milliseconds, rounded down.
    pub fn as_millis(self) -> u64 {
        self.0 / 1_000_000
    }

    /// Decimal seconds (for reports only).
    pub fn as_secs_f64(self) -> f64 {
        self.0 as f64 / 1e9
    }

    /// Sum, saturating.
    pub fn plus(self, other: Dur) -> Dur {
        Dur(self.0.saturating_add(other.0))
    }

    /// Difference, saturating at zero.
    pub fn minus(self, other: Dur) -> Dur {
        Dur(self.0.saturating_sub(other.0))
    }

    /// Parses a duration with a unit: `"250ms"`, `"5s"`, `"2m"`, `"1h"`, `"1.5s"`, `"10us"`,
    /// `"100ns"`, `"1d"`. A bare number is rejected: the unit is what makes a file readable.
    pub fn parse(text: &str) -> Result<Dur, String> {
        let text = text.trim();
        let split = text
            .find(|c: char| c.is_ascii_alphabetic())
            .ok_or_else(|| {
                format!("duration {text:?} has no unit (use ns, us, ms, s, m, h or d)")
            })?;
        let (number, unit) = text.split_at(split);
        let scale: f64 = match unit {
            "ns" => 1.0,
            "us" | "µs" => 1e3,
            "ms" => 1e6,
            "s" => 1e9,
            "m" | "min" => 60e9,
            "h" => 3600e9,
            "d" => 86400e9,
            _ => {
                return Err(format!(
                    "duration {text:?} has an unknown unit {unit:?} (use ns, us, ms, s, m, h or d)"
                ));
            }
        };
        let value: f64 = number
            .trim()
            .parse()
            .map_err(|_| format!("duration {text:?} does not start with a number"))?;
        if !value.is_finite() || value < 0.0 {
            return Err(format!("duration {text:?} must be a non-negative number"));
        }
        let nanos = value * scale;
        if nanos >= u64::MAX as f64 {
            return Err(format!("duration {text:?} is too long"));
        }
        Ok(Dur(nanos.round() as u64))
    }
}

impl fmt::Display for Dur {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let n = self.0;
        if n == 0 {
            write!(f, "0s")
        } else if n.is_multiple_of(3_600_000_000_000) {
            write!(f, "{}h", n / 3_600_000_000_000)
        } else if n.is_multiple_of(60_000_000_000) {
            write!(f, "{}m", n / 60_000_000_000)
        } else if n.is_multiple_of(1_000_000_000) {
            write!(f, "{}s", n / 1_000_000_000)
        } else if n.is_multiple_of(1_000_000) {
            write!(f, "{}ms", n / 1_000_000)
        } else if n.is_multiple_of(1_000) {
            write!(f, "{}us", n / 1_000)
        } else {
            write!(f, "{n}ns")
        }
    }
}

impl fmt::Display for Time {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:.3}s", self.as_secs_f64())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_parse_with_units_and_refuse_without() {
        assert_eq!(Dur::parse("250ms").unwrap(), Dur::from_millis(250));
        assert_eq!(Dur::parse("1.5s").unwrap(), Dur::from_millis(1500));
        assert_eq!(Dur::parse("2m").unwrap(), Dur::from_secs(120));
        assert_eq!(Dur::parse("1h").unwrap(), Dur::from_secs(3600));
        assert_eq!(Dur::parse("10us").unwrap(), Dur(10_000));
        assert!(Dur::parse("5").unwrap_err().contains("no unit"));
        assert!(
            Dur::parse("5 parsecs")
                .unwrap_err()
                .contains("unknown unit")
        );
        assert!(Dur::parse("-1s").is_err());
        assert_eq!(Dur::from_millis(1500).to_string(), "1500ms");
        assert_eq!(Dur::from_secs(120).to_string(), "2m");
    }
}
