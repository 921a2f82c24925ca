//! `resource.Quantity.String()`: the canonical form upstream prints quantities in (`1024Mi` → `1Gi`,
//! `0.1` → `100m`, `1000` → `1k`), following apimachinery's `ParseQuantity` and `CanonicalizeBytes`.

use serde_json::Value;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Format {
    DecimalExponent,
    DecimalSI,
    BinarySI,
}

/// A parsed quantity: `(-1)^negative × mantissa × 10^scale`, rounded up to nano precision.
#[derive(Debug, PartialEq, Eq)]
struct Quantity {
    negative: bool,
    mantissa: u128,
    scale: i32,
    format: Format,
}

/// A quantity JSON value (a string, or a number as upstream also accepts) in canonical form; a value
/// that does not parse is printed as given.
pub(super) fn format_value(v: &Value) -> String {
    let raw = match v {
        Value::String(s) => s.trim().to_string(),
        Value::Number(n) => n.to_string(),
        other => return other.to_string(),
    };
    canonical(&raw).unwrap_or(raw)
}

/// The canonical string of a quantity, or `None` when it does not parse.
pub(super) fn canonical(s: &str) -> Option<String> {
    let q = parse(s)?;
    if q.mantissa == 0 {
        return Some("0".to_string());
    }
    let sign = if q.negative { "-" } else { "" };
    if q.format == Format::BinarySI {
        if let Some(int) = q.integer().filter(|i| *i >= 1024) {
            let (mut n, mut exp) = (int, 0u32);
            while n % 1024 == 0 {
                n /= 1024;
                exp += 1;
            }
            let suffix = ["", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"].get(exp as usize).copied().unwrap_or_default();
            return Some(format!("{sign}{n}{suffix}"));
        }
    }
    // Decimal: move factors of ten into the exponent, then make the exponent a multiple of three.
    let (mut n, mut exp) = (q.mantissa, q.scale);
    while n % 10 == 0 {
        n /= 10;
        exp += 1;
    }
    match exp.rem_euclid(3) {
        1 => {
            n = n.checked_mul(10)?;
            exp -= 1;
        }
        2 => {
            n = n.checked_mul(100)?;
            exp -= 2;
        }
        _ => {}
    }
    let suffix = match q.format {
        Format::DecimalExponent if exp == 0 => String::new(),
        Format::DecimalExponent => format!("e{exp}"),
        _ => match exp {
            -9 => "n",
            -6 => "u",
            -3 => "m",
            3 => "k",
            6 => "M",
            9 => "G",
            12 => "T",
            15 => "P",
            18 => "E",
            // Upstream finds no suffix for other exponents and prints the bare number.
            _ => "",
        }
        .to_string(),
    };
    Some(format!("{sign}{n}{suffix}"))
}

impl Quantity {
    /// The value as an integer, when it is one.
    fn integer(&self) -> Option<u128> {
        if self.scale >= 0 {
            self.mantissa.checked_mul(10u128.checked_pow(self.scale.unsigned_abs())?)
        } else {
            let div = 10u128.checked_pow(self.scale.unsigned_abs())?;
            self.mantissa.is_multiple_of(div).then_some(self.mantissa / div)
        }
    }
}

fn parse(s: &str) -> Option<Quantity> {
    let b = s.as_bytes();
    if b.is_empty() {
        return None;
    }
    let mut pos = 0;
    let mut negative = false;
    match b[0] {
        b'-' => {
            negative = true;
            pos = 1;
        }
        b'+' => pos = 1,
        _ => {}
    }
    while pos < b.len() && b[pos] == b'0' {
        pos += 1;
    }
    let digits = |from: usize| from + b[from..].iter().take_while(|c| c.is_ascii_digit()).count();
    let num_end = digits(pos);
    let num = &s[pos..num_end];
    pos = num_end;
    let mut denom = "";
    if pos < b.len() && b[pos] == b'.' {
        let end = digits(pos + 1);
        denom = &s[pos + 1..end];
        pos = end;
    }
    let suffix_start = pos;
    pos += b[pos..].iter().take_while(|c| b"eEinumkKMGTP".contains(c)).count();
    if pos < b.len() && (b[pos] == b'-' || b[pos] == b'+') {
        pos += 1;
    }
    if digits(pos) != b.len() {
        return None;
    }
    let (base2, exponent, format) = interpret(&s[suffix_start..])?;

    let all_digits = format!("{num}{denom}");
    let mut mantissa: u128 = if all_digits.is_empty() { 0 } else { all_digits.parse().ok()? };
    let mut scale = -i32::try_from(denom.len()).ok()?;
    if base2 {
        mantissa = mantissa.checked_mul(1u128.checked_shl(u32::try_from(exponent).ok()?)?)?;
    } else {
        scale = scale.checked_add(exponent)?;
    }
    // Round non-zero values up to the smallest representable amount, a nano.
    if mantissa != 0 && scale < -9 {
        let drop = scale.unsigned_abs() - 9;
        mantissa = match 10u128.checked_pow(drop) {
            Some(div) => mantissa.div_ceil(div),
            None => 1,
        };
        scale = -9;
    }
    Some(Quantity { negative, mantissa, scale, format })
}

/// A suffix as `(is base 2, exponent, format)`.
fn interpret(suffix: &str) -> Option<(bool, i32, Format)> {
    let dec = |e| Some((false, e, Format::DecimalSI));
    let bin = |e| Some((true, e, Format::BinarySI));
    match suffix {
        "n" => dec(-9),
        "u" => dec(-6),
        "m" => dec(-3),
        "" => dec(0),
        "k" => dec(3),
        "M" => dec(6),
        "G" => dec(9),
        "T" => dec(12),
        "P" => dec(15),
        "E" => dec(18),
        "Ki" => bin(10),
        "Mi" => bin(20),
        "Gi" => bin(30),
        "Ti" => bin(40),
        "Pi" => bin(50),
        "Ei" => bin(60),
        s if s.len() > 1 && (s.starts_with('e') || s.starts_with('E')) => {
            let e: i64 = s[1..].parse().ok()?;
            Some((false, i32::try_from(e).ok()?, Format::DecimalExponent))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn canonical_forms_match_upstream() {
        let cases = [
            ("1Gi", "1Gi"),
            ("1024Mi", "1Gi"),
            ("1000Mi", "1000Mi"),
            ("1.5Gi", "1536Mi"),
            ("0.5Gi", "512Mi"),
            ("100Ki", "100Ki"),
            ("1Ki", "1Ki"),
            ("512", "512"),
            ("0.3Ki", "307200m"),
            ("100m", "100m"),
            ("0.1", "100m"),
            ("0.5", "500m"),
            ("1.5", "1500m"),
            ("1000", "1k"),
            ("1500", "1500"),
            ("20G", "20G"),
            ("12e6", "12e6"),
            ("1e3", "1e3"),
            ("0", "0"),
            ("0Gi", "0"),
            ("000", "0"),
            ("-500m", "-500m"),
            ("0.0000000001", "1n"),
            ("2", "2"),
        ];
        for (input, want) in cases {
            assert_eq!(canonical(input).as_deref(), Some(want), "{input}");
        }
    }

    #[test]
    fn invalid_quantities_print_as_given() {
        assert_eq!(canonical("1Kb"), None);
        assert_eq!(canonical("abc"), None);
        assert_eq!(format_value(&json!("ten")), "ten");
        assert_eq!(format_value(&json!(5)), "5");
        assert_eq!(format_value(&json!(" 2Gi ")), "2Gi");
    }
}
