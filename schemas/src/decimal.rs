//! Values as the robot prints them: a decimal mantissa and a power of ten.
//!
//! The robot prints decimals (`21446`, `0.05`, `1.152e+10`). Stored as binary floats they cost
//! eight bytes of noise each; stored as the integer of their digits and a scale they compress to
//! about a byte (BENCHMARKS.md, "Lake format 2 measured offline"). A value is stored this way
//! only when [`Decimal::value`] gives back exactly the float the parser read, so no digit is
//! lost; a value that does not round-trip is kept as its float.

/// 10⁰ to 10²²: every one exactly representable as an `f64`, so scaling by one is a single
/// correctly rounded operation, which is what parsing the printed decimal was.
const POWERS_OF_TEN: [f64; 23] = [
    1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15, 1e16,
    1e17, 1e18, 1e19, 1e20, 1e21, 1e22,
];

/// Mantissas up to 2⁵³ convert to `f64` exactly.
const MAX_MANTISSA: f64 = 9_007_199_254_740_992.0;

/// From here on the robot prints four significant digits (`1.152e+10`): stored as those digits
/// and a negative scale. Smaller whole numbers keep scale 0.
const WHOLE_FROM: f64 = 1e8;

/// `mantissa × 10^-scale`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Decimal {
    /// The digits, as an integer.
    pub mantissa: i64,
    /// How many of the digits are decimals; negative for trailing zeros not stored.
    pub scale: i8,
}

impl Decimal {
    /// The shortest decimal whose [`value`](Self::value) is exactly `value`, if there is one
    /// with a mantissa of at most 2⁵³ and at most 22 decimals or trailing zeros. Values of
    /// 10⁸ and more are whole numbers of a few significant digits: they keep only those.
    pub fn of(value: f64) -> Option<Self> {
        if !value.is_finite() {
            return None;
        }
        if value.abs() >= WHOLE_FROM {
            // At least 8: the number of digits before the point, less one.
            let digits = value.abs().log10().floor() as i32;
            return (0..=digits.min(22))
                .rev()
                .find_map(|zeros| Self::scaled(value, -zeros));
        }
        (0..=22).find_map(|scale| Self::scaled(value, scale))
    }

    /// `value` with `scale`, if that gives it back exactly.
    fn scaled(value: f64, scale: i32) -> Option<Self> {
        let power = POWERS_OF_TEN[usize::try_from(scale.unsigned_abs()).ok()?];
        let mantissa = if scale >= 0 {
            value * power
        } else {
            value / power
        }
        .round();
        if mantissa.abs() > MAX_MANTISSA {
            return None;
        }
        let decimal = Self {
            // Whole and bounded by 2⁵³ just above: the cast is exact.
            mantissa: mantissa as i64,
            scale: i8::try_from(scale).ok()?,
        };
        (decimal.value().to_bits() == value.to_bits()).then_some(decimal)
    }

    /// The value: the nearest `f64` to the decimal, as parsing its digits gives.
    pub fn value(self) -> f64 {
        // Bounded by 2⁵³ when made by `of`: exact.
        let mantissa = self.mantissa as f64;
        let power = POWERS_OF_TEN[usize::from(self.scale.unsigned_abs()).min(22)];
        if self.scale >= 0 {
            mantissa / power
        } else {
            mantissa * power
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stored(printed: &str) -> Option<(i64, i8)> {
        let value: f64 = printed.parse().ok()?;
        Decimal::of(value).map(|d| (d.mantissa, d.scale))
    }

    #[test]
    fn printed_values_are_stored_as_their_digits() {
        assert_eq!(stored("21446"), Some((21446, 0)));
        assert_eq!(stored("0.05"), Some((5, 2)));
        assert_eq!(stored("-34.5"), Some((-345, 1)));
        assert_eq!(stored("1.152e+10"), Some((1152, -7)));
        assert_eq!(stored("12345678"), Some((12_345_678, 0)));
        assert_eq!(stored("120000000"), Some((12, -7)));
        assert_eq!(stored("0"), Some((0, 0)));
        assert_eq!(stored("3.2e-07"), Some((32, 8)));
        assert_eq!(stored("1e22"), Some((1, -22)));
    }

    #[test]
    fn every_stored_decimal_gives_back_the_parsed_float_exactly() {
        for printed in [
            "0.1",
            "0.2",
            "0.3",
            "2.675",
            "1.152e+10",
            "9007199254740993",
            "123456.78",
            "1e-22",
            "5e-324",
            "1.7976931348623157e308",
            "0.30000000000000004",
            "-0.01",
        ] {
            let value: f64 = printed.parse().unwrap_or(f64::NAN);
            if let Some(decimal) = Decimal::of(value) {
                assert_eq!(decimal.value().to_bits(), value.to_bits(), "{printed}");
            }
        }
    }

    #[test]
    fn values_without_a_short_decimal_are_left_as_floats() {
        assert_eq!(Decimal::of(f64::NAN), None);
        assert_eq!(Decimal::of(f64::INFINITY), None);
        assert_eq!(Decimal::of(5e-324), None);
        assert_eq!(Decimal::of(123_456_789.5), None);
        assert_eq!(Decimal::of(0.1 + 0.2), None);
    }
}
