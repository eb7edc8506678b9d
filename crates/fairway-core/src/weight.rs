//! Weights: the share of service a tenant, band or source receives relative to its siblings.

use std::fmt;

/// A positive scheduling weight, held in millionths so that arithmetic on it is exact and
/// deterministic. `Weight::ONE` is the default weight everywhere.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug)]
pub struct Weight(u64);

impl Weight {
    /// Millionths per unit of weight.
    pub const SCALE: u64 = 1_000_000;
    /// The default weight.
    pub const ONE: Weight = Weight(Self::SCALE);
    /// The smallest weight accepted (one millionth).
    pub const MIN: Weight = Weight(1);
    /// The largest weight accepted (one million).
    pub const MAX: Weight = Weight(Self::SCALE * Self::SCALE);

    /// A weight from a decimal number; `None` unless it is finite and within `MIN..=MAX`.
    pub fn from_f64(value: f64) -> Option<Weight> {
        if !value.is_finite() {
            return None;
        }
        let micros = (value * Self::SCALE as f64).round();
        if micros < Self::MIN.0 as f64 || micros > Self::MAX.0 as f64 {
            return None;
        }
        Some(Weight(micros as u64))
    }

    /// A weight from a whole number of units; `None` when zero or above `MAX`.
    pub fn from_units(units: u64) -> Option<Weight> {
        let micros = units.checked_mul(Self::SCALE)?;
        (Self::MIN.0..=Self::MAX.0)
            .contains(&micros)
            .then_some(Weight(micros))
    }

    /// The weight in millionths.
    pub fn micros(self) -> u64 {
        self.0
    }

    /// The weight as a decimal number (for reports only; never for decisions).
    pub fn as_f64(self) -> f64 {
        self.0 as f64 / Self::SCALE as f64
    }

    /// `amount` scaled by this weight: `amount * weight`, saturating.
    pub fn scale(self, amount: u64) -> u64 {
        let product = amount as u128 * self.0 as u128 / Self::SCALE as u128;
        u64::try_from(product).unwrap_or(u64::MAX)
    }

    /// `amount` divided by this weight: `amount / weight`, saturating.
    pub fn divide(self, amount: u128) -> u128 {
        amount.saturating_mul(Self::SCALE as u128) / self.0 as u128
    }
}

impl Default for Weight {
    fn default() -> Self {
        Weight::ONE
    }
}

impl fmt::Display for Weight {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.as_f64())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn weights_round_trip_and_reject_nonsense() {
        assert_eq!(Weight::from_f64(2.5).unwrap().micros(), 2_500_000);
        assert_eq!(Weight::from_units(3).unwrap().scale(10), 30);
        assert_eq!(Weight::from_units(2).unwrap().divide(10), 5);
        assert!(Weight::from_f64(0.0).is_none());
        assert!(Weight::from_f64(-1.0).is_none());
        assert!(Weight::from_f64(f64::NAN).is_none());
        assert!(Weight::from_units(0).is_none());
    }
}
