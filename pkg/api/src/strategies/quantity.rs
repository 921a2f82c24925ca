//! Resource quantities (upstream's `resource.Quantity`): parsing, comparison and the canonical
//! string form the API server stores and returns (`1000m` ▶ `1`, `0.5` ▶ `500m`, `1024Mi` ▶ `1Gi`).
//!
//! Values are held exactly in nano units (`i128`), which covers every quantity Kubernetes
//! accepts in practice; anything finer than a nano unit is rounded up, as upstream does.

use k8s_openapi::apimachinery::pkg::api::resource::Quantity as ApiQuantity;
use std::cmp::Ordering;
use std::collections::BTreeMap;

/// Upstream's `ErrFormatWrong` text.
pub const FORMAT_ERROR: &str =
    "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'";

/// Why a string is not a quantity (upstream's `ErrFormatWrong`, `ErrNumeric`, `ErrSuffix`).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum QuantityError {
    #[error("{FORMAT_ERROR}")]
    Format,
    #[error("unable to parse numeric part of quantity")]
    Numeric,
    #[error("unable to parse quantity's suffix")]
    Suffix,
}

/// How a quantity is written, which decides its canonical form.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// `k`, `M`, `m`, no suffix…
    DecimalSI,
    /// `Ki`, `Mi`, `Gi`…
    BinarySI,
    /// `1e3`, `5E-2`…
    DecimalExponent,
}

/// A parsed quantity.
#[derive(Clone, Copy, Debug)]
pub struct Quantity {
    nanos: i128,
    format: Format,
}

impl PartialEq for Quantity {
    fn eq(&self, other: &Self) -> bool {
        self.nanos == other.nanos
    }
}

impl Eq for Quantity {}

impl PartialOrd for Quantity {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Quantity {
    fn cmp(&self, other: &Self) -> Ordering {
        self.nanos.cmp(&other.nanos)
    }
}

const NANO: i128 = 1_000_000_000;

fn pow10(exp: u32) -> Option<i128> {
    10i128.checked_pow(exp)
}

/// Multiplies `v` by `10^exp` (exp may be negative: divides, rounding away from zero).
fn scale10(v: i128, exp: i32) -> Option<i128> {
    if exp >= 0 {
        v.checked_mul(pow10(exp.unsigned_abs())?)
    } else {
        let d = pow10(exp.unsigned_abs()).unwrap_or(i128::MAX);
        let q = v / d;
        Some(if v % d != 0 { q + v.signum() } else { q })
    }
}

impl Quantity {
    /// Parses a quantity string as upstream's `ParseQuantity` does.
    pub fn parse(s: &str) -> Result<Self, QuantityError> {
        let s = s.trim();
        if s.is_empty() {
            return Err(QuantityError::Format);
        }
        let bytes = s.as_bytes();
        let mut pos = 0;
        let mut negative = false;
        if matches!(bytes.first(), Some(b'+' | b'-')) {
            negative = bytes[0] == b'-';
            pos = 1;
        }
        let int_start = pos;
        while pos < bytes.len() && bytes[pos].is_ascii_digit() {
            pos += 1;
        }
        let int_part = &s[int_start..pos];
        let mut frac_part = "";
        if pos < bytes.len() && bytes[pos] == b'.' {
            pos += 1;
            let frac_start = pos;
            while pos < bytes.len() && bytes[pos].is_ascii_digit() {
                pos += 1;
            }
            frac_part = &s[frac_start..pos];
        }
        if int_part.is_empty() && frac_part.is_empty() {
            return Err(QuantityError::Format);
        }
        let suffix = &s[pos..];
        if !suffix.chars().all(|c| "eEinumkKMGTP+-0123456789".contains(c)) {
            return Err(QuantityError::Format);
        }
        let (format, exp10, exp2) = parse_suffix(suffix)?;
        let digits = format!("{int_part}{frac_part}");
        let digits = digits.trim_start_matches('0');
        if digits.len() > 36 {
            return Err(QuantityError::Numeric);
        }
        let mut mantissa: i128 = 0;
        for c in digits.chars() {
            let d = i128::from(c.to_digit(10).ok_or(QuantityError::Numeric)?);
            mantissa = mantissa * 10 + d;
        }
        let frac_len = i32::try_from(frac_part.len()).map_err(|_| QuantityError::Numeric)?;
        let exp = 9 + exp10 - frac_len;
        let mut nanos = mantissa.checked_mul(1i128 << exp2).ok_or(QuantityError::Numeric)?;
        nanos = scale10(nanos, exp).ok_or(QuantityError::Numeric)?;
        if negative {
            nanos = -nanos;
        }
        Ok(Quantity { nanos, format })
    }

    /// A quantity of `n` whole units in decimal SI format.
    pub fn from_units(n: i64) -> Self {
        Quantity { nanos: i128::from(n) * NANO, format: Format::DecimalSI }
    }

    /// The value in nano units.
    pub fn nanos(&self) -> i128 {
        self.nanos
    }

    pub fn format(&self) -> Format {
        self.format
    }

    pub fn is_zero(&self) -> bool {
        self.nanos == 0
    }

    pub fn is_negative(&self) -> bool {
        self.nanos < 0
    }

    /// Whether the value is a whole number of units.
    pub fn is_integer(&self) -> bool {
        self.nanos % NANO == 0
    }

    /// The sum, keeping this quantity's format, or the other's when this one is zero
    /// (upstream's `Add`).
    pub fn add(&self, other: &Quantity) -> Quantity {
        let format = if self.nanos == 0 { other.format } else { self.format };
        Quantity { nanos: self.nanos.saturating_add(other.nanos), format }
    }

    /// The difference, keeping this quantity's format (upstream's `Sub`).
    pub fn sub(&self, other: &Quantity) -> Quantity {
        Quantity { nanos: self.nanos.saturating_sub(other.nanos), format: self.format }
    }

    /// The value in milli units, rounded up (upstream's `MilliValue`).
    pub fn milli_ceil(&self) -> i128 {
        let q = self.nanos.div_euclid(1_000_000);
        if self.nanos.rem_euclid(1_000_000) != 0 {
            q + 1
        } else {
            q
        }
    }

    /// Rounds up to milli units, as upstream's `SetDefaults_ResourceList`.
    pub fn round_up_milli(&self) -> Quantity {
        Quantity { nanos: scale10(self.nanos, -6).map(|v| v * 1_000_000).unwrap_or(self.nanos), format: self.format }
    }

    /// The canonical string, as upstream's `Quantity.String()`.
    pub fn canonical(&self) -> String {
        if self.nanos == 0 {
            return "0".to_string();
        }
        let mut format = self.format;
        if format == Format::BinarySI && (self.nanos.abs() < 1024 * NANO || !self.is_integer()) {
            format = Format::DecimalSI;
        }
        match format {
            Format::BinarySI => {
                let mut units = self.nanos / NANO;
                let mut exp = 0;
                while exp < 6 && units % 1024 == 0 {
                    units /= 1024;
                    exp += 1;
                }
                let suffix = ["", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"][exp];
                format!("{units}{suffix}")
            }
            Format::DecimalSI | Format::DecimalExponent => {
                let mut mantissa = self.nanos;
                let mut exp: i32 = -9;
                while mantissa % 10 == 0 {
                    mantissa /= 10;
                    exp += 1;
                }
                let r = exp.rem_euclid(3);
                mantissa *= 10i128.pow(r.unsigned_abs());
                exp -= r;
                if format == Format::DecimalExponent {
                    return if exp == 0 { mantissa.to_string() } else { format!("{mantissa}e{exp}") };
                }
                if exp > 18 {
                    mantissa = mantissa.saturating_mul(pow10((exp - 18).unsigned_abs()).unwrap_or(i128::MAX));
                    exp = 18;
                }
                let suffix = match exp {
                    -9 => "n",
                    -6 => "u",
                    -3 => "m",
                    3 => "k",
                    6 => "M",
                    9 => "G",
                    12 => "T",
                    15 => "P",
                    18 => "E",
                    _ => "",
                };
                format!("{mantissa}{suffix}")
            }
        }
    }
}

impl std::fmt::Display for Quantity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.canonical())
    }
}

/// Returns (format, power of ten, power of two) for a suffix.
fn parse_suffix(suffix: &str) -> Result<(Format, i32, u32), QuantityError> {
    let si = |e| Ok((Format::DecimalSI, e, 0));
    let bin = |p| Ok((Format::BinarySI, 0, p));
    match suffix {
        "" => si(0),
        "n" => si(-9),
        "u" => si(-6),
        "m" => si(-3),
        "k" => si(3),
        "M" => si(6),
        "G" => si(9),
        "T" => si(12),
        "P" => si(15),
        "E" => si(18),
        "Ki" => bin(10),
        "Mi" => bin(20),
        "Gi" => bin(30),
        "Ti" => bin(40),
        "Pi" => bin(50),
        "Ei" => bin(60),
        s if s.starts_with(['e', 'E']) => {
            let exp: i32 = s[1..].parse().map_err(|_| QuantityError::Suffix)?;
            if !(-40..=40).contains(&exp) {
                return Err(QuantityError::Numeric);
            }
            Ok((Format::DecimalExponent, exp, 0))
        }
        _ => Err(QuantityError::Suffix),
    }
}

/// Rounds every parseable quantity of a resource list up to milli units and rewrites it in
/// canonical form (upstream's `SetDefaults_ResourceList` plus serialization). Unparseable values
/// are left for validation to report.
pub fn canonicalize_resource_list(list: &mut BTreeMap<String, ApiQuantity>) {
    for q in list.values_mut() {
        if let Ok(parsed) = Quantity::parse(&q.0) {
            q.0 = parsed.round_up_milli().canonical();
        }
    }
}

/// Rewrites one quantity in canonical form, leaving unparseable values untouched.
pub fn canonicalize(q: &mut ApiQuantity) {
    if let Ok(parsed) = Quantity::parse(&q.0) {
        q.0 = parsed.canonical();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn canon(s: &str) -> String {
        Quantity::parse(s).expect("parses").canonical()
    }

    #[test]
    fn canonical_forms_match_upstream() {
        assert_eq!(canon("1000m"), "1");
        assert_eq!(canon("0.5"), "500m");
        assert_eq!(canon("1.5"), "1500m");
        assert_eq!(canon("1200"), "1200");
        assert_eq!(canon("1000"), "1k");
        assert_eq!(canon("1024Mi"), "1Gi");
        assert_eq!(canon("1536Mi"), "1536Mi");
        assert_eq!(canon("1.5Ki"), "1536");
        assert_eq!(canon("512"), "512");
        assert_eq!(canon("0.5Ki"), "512");
        assert_eq!(canon("1e3"), "1e3");
        assert_eq!(canon("1.5e3"), "1500");
        assert_eq!(canon("-100m"), "-100m");
        assert_eq!(canon("0"), "0");
        assert_eq!(canon("128974848"), "128974848");
        assert_eq!(canon("129e6"), "129e6");
        assert_eq!(canon("123Mi"), "123Mi");
        assert_eq!(canon("5G"), "5G");
    }

    #[test]
    fn comparison_is_by_value_across_formats() {
        let p = |s| Quantity::parse(s).expect("parses");
        assert_eq!(p("1"), p("1000m"));
        assert!(p("1Gi") > p("1G"));
        assert!(p("500m") < p("1"));
        assert!(p("-1").is_negative());
        assert!(p("2").is_integer());
        assert!(!p("2500m").is_integer());
    }

    #[test]
    fn milli_round_up_applies_to_resource_lists() {
        let mut list = BTreeMap::new();
        list.insert("cpu".to_string(), ApiQuantity("0.0001".into()));
        list.insert("memory".to_string(), ApiQuantity("1024Mi".into()));
        list.insert("bad".to_string(), ApiQuantity("12x".into()));
        canonicalize_resource_list(&mut list);
        assert_eq!(list["cpu"].0, "1m");
        assert_eq!(list["memory"].0, "1Gi");
        assert_eq!(list["bad"].0, "12x");
    }

    #[test]
    fn malformed_quantities_are_rejected_with_upstream_messages() {
        assert_eq!(Quantity::parse("abc"), Err(QuantityError::Format));
        assert_eq!(Quantity::parse(""), Err(QuantityError::Format));
        assert_eq!(Quantity::parse("1Qi"), Err(QuantityError::Format));
        assert_eq!(Quantity::parse("1kk"), Err(QuantityError::Suffix));
        assert!(QuantityError::Format.to_string().starts_with("quantities must match"));
    }
}
