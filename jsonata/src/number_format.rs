//! Number pictures: `$formatNumber` (XPath `format-number`), `$formatInteger`
//! and `$parseInteger` (XPath `format-integer` and its inverse), `$formatBase`.

use crate::error::{Error, Result};
use crate::functions::numeric_round_half_even as round_half_even;
use crate::value::Map;

// ---------------------------------------------------------------- format-number

struct Props {
    decimal: char,
    grouping: char,
    exponent: char,
    percent: String,
    per_mille: String,
    zero: char,
    digit: char,
    pattern: char,
    minus: String,
    infinity: String,
    nan: String,
}

fn first_char(s: &str, default: char) -> char {
    s.chars().next().unwrap_or(default)
}

impl Props {
    fn new(options: Option<&Map>) -> Props {
        let get = |k: &str| -> Option<String> {
            options
                .and_then(|m| m.get(k))
                .and_then(|v| v.as_str())
                .map(String::from)
        };
        Props {
            decimal: get("decimal-separator")
                .map(|s| first_char(&s, '.'))
                .unwrap_or('.'),
            grouping: get("grouping-separator")
                .map(|s| first_char(&s, ','))
                .unwrap_or(','),
            exponent: get("exponent-separator")
                .map(|s| first_char(&s, 'e'))
                .unwrap_or('e'),
            percent: get("percent").unwrap_or_else(|| "%".into()),
            per_mille: get("per-mille").unwrap_or_else(|| "\u{2030}".into()),
            zero: get("zero-digit")
                .map(|s| first_char(&s, '0'))
                .unwrap_or('0'),
            digit: get("digit").map(|s| first_char(&s, '#')).unwrap_or('#'),
            pattern: get("pattern-separator")
                .map(|s| first_char(&s, ';'))
                .unwrap_or(';'),
            minus: get("minus-sign").unwrap_or_else(|| "-".into()),
            infinity: get("infinity").unwrap_or_else(|| "Infinity".into()),
            nan: get("NaN").unwrap_or_else(|| "NaN".into()),
        }
    }

    fn digit_value(&self, c: char) -> Option<u32> {
        let d = (c as u32).checked_sub(self.zero as u32)?;
        if d < 10 { Some(d) } else { None }
    }

    fn is_digitlike(&self, c: char) -> bool {
        c == self.digit || self.digit_value(c).is_some()
    }

    fn is_active(&self, c: char) -> bool {
        c == self.decimal || c == self.grouping || self.is_digitlike(c)
    }
}

struct SubPicture {
    prefix: String,
    suffix: String,
    integer: Vec<char>,
    fraction: Vec<char>,
    exponent: Option<Vec<char>>,
    percent: bool,
    per_mille: bool,
}

fn err(code: &'static str, msg: &str) -> Error {
    Error::new(code, msg.to_string())
}

fn analyse(sub: &str, p: &Props) -> Result<SubPicture> {
    let chars: Vec<char> = sub.chars().collect();
    let Some(first) = chars.iter().position(|c| p.is_active(*c)) else {
        return Err(err(
            "D3086",
            "A sub-picture must contain at least one active character",
        ));
    };
    let last = chars.iter().rposition(|c| p.is_active(*c)).unwrap_or(first);
    let prefix: String = chars
        .get(..first)
        .map(|s| s.iter().collect())
        .unwrap_or_default();
    let suffix: String = chars
        .get(last + 1..)
        .map(|s| s.iter().collect())
        .unwrap_or_default();
    let active: Vec<char> = chars
        .get(first..=last)
        .map(|s| s.to_vec())
        .unwrap_or_default();
    if chars.iter().filter(|c| **c == p.decimal).count() > 1 {
        return Err(err(
            "D3081",
            "A sub-picture must not contain more than one decimal separator",
        ));
    }
    let count = |needle: &str| {
        if needle.is_empty() {
            0
        } else {
            sub.matches(needle).count()
        }
    };
    let percents = count(&p.percent);
    let per_milles = count(&p.per_mille);
    if percents > 1 {
        return Err(err(
            "D3082",
            "A sub-picture must not contain more than one percent character",
        ));
    }
    if per_milles > 1 {
        return Err(err(
            "D3083",
            "A sub-picture must not contain more than one per-mille character",
        ));
    }
    if percents > 0 && per_milles > 0 {
        return Err(err(
            "D3084",
            "A sub-picture must not contain both a percent and a per-mille character",
        ));
    }
    // exponent separator: only inside the active part and followed by digits
    let exp_pos = active.iter().position(|c| *c == p.exponent);
    let (mantissa, exponent) = match exp_pos {
        Some(i) => (
            active.get(..i).unwrap_or(&[]).to_vec(),
            Some(active.get(i + 1..).unwrap_or(&[]).to_vec()),
        ),
        None => (active.clone(), None),
    };
    if !mantissa.iter().any(|c| p.is_digitlike(*c)) {
        return Err(err(
            "D3085",
            "The mantissa part of a sub-picture must contain at least one digit",
        ));
    }
    if active
        .iter()
        .enumerate()
        .any(|(i, c)| !p.is_active(*c) && Some(i) != exp_pos)
    {
        return Err(err(
            "D3086",
            "A sub-picture must not contain a passive character between active characters",
        ));
    }
    let dpos = mantissa.iter().position(|c| *c == p.decimal);
    let (integer, fraction) = match dpos {
        Some(i) => (
            mantissa.get(..i).unwrap_or(&[]).to_vec(),
            mantissa.get(i + 1..).unwrap_or(&[]).to_vec(),
        ),
        None => (mantissa.clone(), Vec::new()),
    };
    if let Some(i) = dpos
        && ((i > 0 && mantissa.get(i - 1) == Some(&p.grouping))
            || mantissa.get(i + 1) == Some(&p.grouping))
    {
        return Err(err(
            "D3087",
            "A grouping separator must not be adjacent to the decimal separator",
        ));
    }
    if dpos.is_none() && integer.last() == Some(&p.grouping) {
        return Err(err(
            "D3088",
            "The integer part of a sub-picture must not end with a grouping separator",
        ));
    }
    if mantissa
        .windows(2)
        .any(|w| w.first() == Some(&p.grouping) && w.get(1) == Some(&p.grouping))
    {
        return Err(err(
            "D3089",
            "A sub-picture must not contain two adjacent grouping separators",
        ));
    }
    let mut seen_digit = false;
    for c in &integer {
        if p.digit_value(*c).is_some() {
            seen_digit = true;
        } else if *c == p.digit && seen_digit {
            return Err(err(
                "D3090",
                "The integer part of a sub-picture must not contain an optional digit after a mandatory digit",
            ));
        }
    }
    let mut seen_optional = false;
    for c in &fraction {
        if *c == p.digit {
            seen_optional = true;
        } else if p.digit_value(*c).is_some() && seen_optional {
            return Err(err(
                "D3091",
                "The fractional part of a sub-picture must not contain a mandatory digit after an optional digit",
            ));
        }
    }
    if let Some(e) = &exponent {
        if percents > 0 || per_milles > 0 {
            return Err(err(
                "D3092",
                "A sub-picture that contains a percent or per-mille character must not contain an exponent separator",
            ));
        }
        if e.is_empty() || e.iter().any(|c| p.digit_value(*c).is_none()) {
            return Err(err(
                "D3093",
                "The exponent part of a sub-picture must consist of one or more decimal digits",
            ));
        }
    }
    Ok(SubPicture {
        prefix,
        suffix,
        integer,
        fraction,
        exponent,
        percent: percents > 0,
        per_mille: per_milles > 0,
    })
}

/// Grouping positions counted in digits from the decimal point outward.
fn group_positions(part: &[char], p: &Props, from_right: bool) -> Vec<usize> {
    let mut out = Vec::new();
    let mut digits = 0;
    let iter: Box<dyn Iterator<Item = &char>> = if from_right {
        Box::new(part.iter().rev())
    } else {
        Box::new(part.iter())
    };
    for c in iter {
        if *c == p.grouping {
            out.push(digits);
        } else if p.is_digitlike(*c) {
            digits += 1;
        }
    }
    out
}

/// If grouping positions are all multiples of the first, grouping repeats.
fn regular_interval(positions: &[usize]) -> Option<usize> {
    let mut sorted = positions.to_vec();
    sorted.sort_unstable();
    let first = *sorted.first()?;
    if first == 0 {
        return None;
    }
    for (i, pos) in sorted.iter().enumerate() {
        if *pos != first * (i + 1) {
            return None;
        }
    }
    Some(first)
}

pub(crate) fn format_number(n: f64, picture: &str, options: Option<&Map>) -> Result<String> {
    let p = Props::new(options);
    let subs: Vec<&str> = picture.split(p.pattern).collect();
    if subs.len() > 2 {
        return Err(err(
            "D3080",
            "The picture string must not contain more than one pattern separator",
        ));
    }
    let mut analysed = Vec::new();
    for s in &subs {
        analysed.push(analyse(s, &p)?);
    }
    if n.is_nan() {
        return Ok(p.nan.clone());
    }
    let negative = n < 0.0;
    let (pic, add_minus) = match (negative, analysed.get(1)) {
        (true, Some(second)) => (second, false),
        (true, None) => match analysed.first() {
            Some(f) => (f, true),
            None => return Ok(String::new()),
        },
        (false, _) => match analysed.first() {
            Some(f) => (f, false),
            None => return Ok(String::new()),
        },
    };
    let mut prefix = pic.prefix.clone();
    if add_minus {
        prefix = format!("{}{}", p.minus, prefix);
    }
    if n.is_infinite() {
        return Ok(format!("{prefix}{}{}", p.infinity, pic.suffix));
    }
    let mut value = n.abs();
    if pic.percent {
        value *= 100.0;
    } else if pic.per_mille {
        value *= 1000.0;
    }
    let int_groups = group_positions(&pic.integer, &p, true);
    let frac_groups = group_positions(&pic.fraction, &p, false);
    // sets: a long picture can have thousands of separators
    let int_group_set: std::collections::HashSet<usize> = int_groups.iter().copied().collect();
    let frac_group_set: std::collections::HashSet<usize> = frac_groups.iter().copied().collect();
    let mut min_int = pic
        .integer
        .iter()
        .filter(|c| p.digit_value(**c).is_some())
        .count();
    let mut min_frac = pic
        .fraction
        .iter()
        .filter(|c| p.digit_value(**c).is_some())
        .count();
    let mut max_frac = pic.fraction.iter().filter(|c| p.is_digitlike(**c)).count();
    let has_optional_int = pic.integer.contains(&p.digit);
    if min_int == 0 && max_frac == 0 {
        if pic.exponent.is_some() {
            min_frac = 1;
            max_frac = 1;
        } else {
            min_int = 1;
        }
    }
    let mut exponent_value: i32 = 0;
    if let Some(_e) = &pic.exponent
        && value != 0.0
    {
        let mag = value.log10().floor() as i32;
        exponent_value = mag + 1 - min_int as i32;
        let mut mantissa = value / 10f64.powi(exponent_value);
        mantissa = round_half_even(mantissa, max_frac as i32);
        if mantissa >= 10f64.powi(min_int.max(1) as i32) && min_int > 0
            || (min_int == 0 && mantissa >= 1.0)
        {
            exponent_value += 1;
            mantissa = value / 10f64.powi(exponent_value);
        }
        value = mantissa;
    }
    let rounded = round_half_even(value, max_frac as i32);
    let text = format!("{:.*}", max_frac, rounded);
    let (int_digits, frac_digits) = match text.split_once('.') {
        Some((a, b)) => (a.to_string(), b.to_string()),
        None => (text.clone(), String::new()),
    };
    let mut int_digits = int_digits.trim_start_matches('0').to_string();
    if int_digits.len() < min_int {
        // pad in one go: pictures can be long, repeated inserts are quadratic
        int_digits = format!("{}{int_digits}", "0".repeat(min_int - int_digits.len()));
    }
    if int_digits.is_empty() && has_optional_int && pic.exponent.is_some() {
        int_digits.push('0');
    }
    let mut frac_digits = frac_digits;
    while frac_digits.len() > min_frac && frac_digits.ends_with('0') {
        frac_digits.pop();
    }
    if int_digits.is_empty() && frac_digits.is_empty() {
        int_digits.push('0');
    }
    let map_digit = |c: char| -> char {
        c.to_digit(10)
            .and_then(|d| char::from_u32(p.zero as u32 + d))
            .unwrap_or(c)
    };
    // integer part with grouping, built right to left
    let int_chars: Vec<char> = int_digits.chars().map(map_digit).collect();
    let mut grouped: Vec<char> = Vec::new();
    let regular = regular_interval(&int_groups);
    for (i, c) in int_chars.iter().rev().enumerate() {
        if i > 0 {
            let sep = match regular {
                Some(k) => i % k == 0,
                None => int_group_set.contains(&i),
            };
            if sep {
                grouped.push(p.grouping);
            }
        }
        grouped.push(*c);
    }
    grouped.reverse();
    let mut out = prefix;
    out.extend(grouped);
    if !frac_digits.is_empty() {
        out.push(p.decimal);
        for (i, c) in frac_digits.chars().enumerate() {
            if i > 0 && frac_group_set.contains(&i) {
                out.push(p.grouping);
            }
            out.push(map_digit(c));
        }
    }
    if let Some(e) = &pic.exponent {
        out.push(p.exponent);
        if exponent_value < 0 {
            out.push_str(&p.minus);
        }
        let digits = exponent_value.unsigned_abs().to_string();
        for _ in digits.len()..e.len() {
            out.push(p.zero);
        }
        out.extend(digits.chars().map(map_digit));
    }
    out.push_str(&pic.suffix);
    Ok(out)
}

pub(crate) fn to_radix(n: f64, radix: u32) -> String {
    let neg = n < 0.0;
    let mut v = n.abs().min(3.4e38) as u128;
    if v == 0 {
        return "0".into();
    }
    let mut digits = Vec::new();
    while v > 0 {
        let d = (v % radix as u128) as u32;
        digits.push(std::char::from_digit(d, radix).unwrap_or('0'));
        v /= radix as u128;
    }
    if neg {
        digits.push('-');
    }
    digits.iter().rev().collect()
}

// ---------------------------------------------------------------- format-integer

enum Primary {
    Decimal {
        zero: char,
        mandatory: usize,
        groups: Vec<(usize, char)>,
    },
    Roman(bool),
    Letters(bool),
    Words(WordCase),
}

#[derive(Clone, Copy)]
enum WordCase {
    Lower,
    Upper,
    Title,
}

struct IntPicture {
    primary: Primary,
    ordinal: bool,
}

/// The zero of the Unicode decimal digit family containing `c`, if any.
fn digit_zero(c: char) -> Option<char> {
    if !c.is_numeric() {
        return None;
    }
    let code = c as u32;
    // all Unicode Nd ranges are aligned blocks of ten; probe downward
    for d in 0..10u32 {
        let z = code.checked_sub(d)?;
        let zc = char::from_u32(z)?;
        if is_decimal_zero(zc) {
            return Some(zc);
        }
    }
    None
}

fn is_decimal_zero(c: char) -> bool {
    matches!(
        c as u32,
        0x30 | 0x660
            | 0x6F0
            | 0x7C0
            | 0x966
            | 0x9E6
            | 0xA66
            | 0xAE6
            | 0xB66
            | 0xBE6
            | 0xC66
            | 0xCE6
            | 0xD66
            | 0xDE6
            | 0xE50
            | 0xED0
            | 0xF20
            | 0x1040
            | 0x1090
            | 0x17E0
            | 0x1810
            | 0x1946
            | 0x19D0
            | 0x1A80
            | 0x1A90
            | 0x1B50
            | 0x1BB0
            | 0x1C40
            | 0x1C50
            | 0xA620
            | 0xA8D0
            | 0xA900
            | 0xA9D0
            | 0xA9F0
            | 0xAA50
            | 0xABF0
            | 0xFF10
    )
}

fn parse_int_picture(picture: &str) -> Result<IntPicture> {
    let (primary, modifier) = match picture.rfind(';') {
        Some(i) if i > 0 => (
            picture.get(..i).unwrap_or(""),
            picture.get(i + 1..).unwrap_or(""),
        ),
        _ => (picture, ""),
    };
    let ordinal = modifier.starts_with('o');
    let primary = match primary {
        "I" => Primary::Roman(true),
        "i" => Primary::Roman(false),
        "A" => Primary::Letters(true),
        "a" => Primary::Letters(false),
        "w" => Primary::Words(WordCase::Lower),
        "W" => Primary::Words(WordCase::Upper),
        "Ww" => Primary::Words(WordCase::Title),
        other => {
            let mut zero: Option<char> = None;
            let mut mandatory = 0;
            let mut digits_seen = 0;
            let mut seps: Vec<(usize, char)> = Vec::new(); // (digits to the left, sep)
            for c in other.chars() {
                if c == '#' {
                    digits_seen += 1;
                } else if let Some(z) = digit_zero(c) {
                    if zero.is_some_and(|zz| zz != z) {
                        return Err(err(
                            "D3131",
                            "The digits within a format-integer picture must be from the same digit family",
                        ));
                    }
                    zero = Some(z);
                    mandatory += 1;
                    digits_seen += 1;
                } else if c.is_alphanumeric() {
                    return Err(err("D3130", "Unsupported format-integer picture"));
                } else {
                    seps.push((digits_seen, c));
                }
            }
            let Some(zero) = zero else {
                return Err(err(
                    "D3130",
                    "A format-integer picture must contain at least one mandatory digit",
                ));
            };
            let groups = seps
                .into_iter()
                .map(|(left, c)| (digits_seen - left, c))
                .collect();
            Primary::Decimal {
                zero,
                mandatory,
                groups,
            }
        }
    };
    Ok(IntPicture { primary, ordinal })
}

fn ordinal_suffix(n: u128) -> &'static str {
    match (n % 10, n % 100) {
        (_, 11..=13) => "th",
        (1, _) => "st",
        (2, _) => "nd",
        (3, _) => "rd",
        _ => "th",
    }
}

const ONES: [&str; 20] = [
    "zero",
    "one",
    "two",
    "three",
    "four",
    "five",
    "six",
    "seven",
    "eight",
    "nine",
    "ten",
    "eleven",
    "twelve",
    "thirteen",
    "fourteen",
    "fifteen",
    "sixteen",
    "seventeen",
    "eighteen",
    "nineteen",
];
const TENS: [&str; 10] = [
    "", "", "twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety",
];
const SCALES: [(f64, &str); 4] = [
    (1e12, "trillion"),
    (1e9, "billion"),
    (1e6, "million"),
    (1e3, "thousand"),
];

fn words(n: f64) -> String {
    let n = n.floor();
    if n < 20.0 {
        return ONES.get(n as usize).copied().unwrap_or("").to_string();
    }
    if n < 100.0 {
        let t = TENS.get((n / 10.0) as usize).copied().unwrap_or("");
        let o = (n % 10.0) as usize;
        return if o == 0 {
            t.to_string()
        } else {
            format!("{t}-{}", ONES.get(o).copied().unwrap_or(""))
        };
    }
    if n < 1000.0 {
        let h = (n / 100.0).floor();
        let r = n - h * 100.0;
        let head = format!("{} hundred", ONES.get(h as usize).copied().unwrap_or(""));
        return if r == 0.0 {
            head
        } else {
            format!("{head} and {}", words(r))
        };
    }
    for (scale, name) in SCALES {
        if n >= scale {
            let q = (n / scale).floor();
            let r = n - q * scale;
            let head = format!("{} {name}", words(q));
            return if r <= 0.0 {
                head
            } else if r < 100.0 {
                format!("{head} and {}", words(r))
            } else {
                format!("{head}, {}", words(r))
            };
        }
    }
    String::new()
}

fn ordinal_word(w: &str) -> String {
    match w {
        "one" => "first".into(),
        "two" => "second".into(),
        "three" => "third".into(),
        "five" => "fifth".into(),
        "eight" => "eighth".into(),
        "nine" => "ninth".into(),
        "twelve" => "twelfth".into(),
        _ => match w.strip_suffix('y') {
            Some(stem) => format!("{stem}ieth"),
            None => format!("{w}th"),
        },
    }
}

fn ordinal_words(s: &str) -> String {
    let cut = s.rfind([' ', '-']).map(|i| i + 1).unwrap_or(0);
    let (head, last) = s.split_at(cut);
    format!("{head}{}", ordinal_word(last))
}

fn apply_case(s: &str, case: WordCase) -> String {
    match case {
        WordCase::Lower => s.to_string(),
        WordCase::Upper => s.to_uppercase(),
        WordCase::Title => {
            let mut out = String::new();
            let mut word = String::new();
            let flush = |word: &mut String, out: &mut String| {
                if word == "and" {
                    out.push_str(word);
                } else {
                    let mut cs = word.chars();
                    if let Some(f) = cs.next() {
                        out.extend(f.to_uppercase());
                        out.push_str(cs.as_str());
                    }
                }
                word.clear();
            };
            for c in s.chars() {
                if c == ' ' || c == '-' || c == ',' {
                    flush(&mut word, &mut out);
                    out.push(c);
                } else {
                    word.push(c);
                }
            }
            flush(&mut word, &mut out);
            out
        }
    }
}

fn roman(mut n: u128) -> String {
    const TABLE: [(u128, &str); 13] = [
        (1000, "m"),
        (900, "cm"),
        (500, "d"),
        (400, "cd"),
        (100, "c"),
        (90, "xc"),
        (50, "l"),
        (40, "xl"),
        (10, "x"),
        (9, "ix"),
        (5, "v"),
        (4, "iv"),
        (1, "i"),
    ];
    let mut out = String::new();
    for (v, s) in TABLE {
        while n >= v {
            out.push_str(s);
            n -= v;
        }
    }
    out
}

fn letters(mut n: u128) -> String {
    let mut out = Vec::new();
    while n > 0 {
        n -= 1;
        out.push((b'a' + (n % 26) as u8) as char);
        n /= 26;
    }
    out.iter().rev().collect()
}

pub(crate) fn format_integer(n: f64, picture: &str) -> Result<String> {
    let pic = parse_int_picture(picture)?;
    let negative = n < 0.0;
    let abs = n.abs().trunc();
    let int = abs.min(3.4e38) as u128;
    let body = match &pic.primary {
        // Roman numerals for huge values would be absurdly long: as XPath
        // allows, fall back to decimal digits
        Primary::Roman(_) if int >= 1_000_000 => format!("{abs:.0}"),
        Primary::Roman(upper) => {
            let r = roman(int);
            if *upper { r.to_uppercase() } else { r }
        }
        Primary::Letters(upper) => {
            let r = letters(int);
            if *upper { r.to_uppercase() } else { r }
        }
        Primary::Words(case) => {
            let w = words(abs);
            let w = if pic.ordinal { ordinal_words(&w) } else { w };
            apply_case(&w, *case)
        }
        Primary::Decimal {
            zero,
            mandatory,
            groups,
        } => {
            let digits: Vec<char> = format!("{abs:.0}")
                .chars()
                .map(|c| {
                    c.to_digit(10)
                        .and_then(|d| char::from_u32(*zero as u32 + d))
                        .unwrap_or(c)
                })
                .collect();
            let mut digits = digits;
            if digits.len() < *mandatory {
                let mut padded = vec![*zero; *mandatory - digits.len()];
                padded.append(&mut digits);
                digits = padded;
            }
            let positions: Vec<usize> = groups.iter().map(|g| g.0).collect();
            let group_map: std::collections::HashMap<usize, char> =
                groups.iter().copied().collect();
            let same_sep = groups
                .windows(2)
                .all(|w| w.first().map(|a| a.1) == w.get(1).map(|b| b.1));
            let regular = if same_sep {
                regular_interval(&positions)
            } else {
                None
            };
            let mut out: Vec<char> = Vec::new();
            for (i, c) in digits.iter().rev().enumerate() {
                if i > 0 {
                    let sep = match regular {
                        Some(k) => {
                            if i % k == 0 {
                                groups.first().map(|g| g.1)
                            } else {
                                None
                            }
                        }
                        None => group_map.get(&i).copied(),
                    };
                    if let Some(s) = sep {
                        out.push(s);
                    }
                }
                out.push(*c);
            }
            out.reverse();
            let mut s: String = out.into_iter().collect();
            if pic.ordinal {
                s.push_str(ordinal_suffix(int));
            }
            s
        }
    };
    Ok(if negative { format!("-{body}") } else { body })
}

fn word_value(w: &str) -> Option<f64> {
    let w = w.to_lowercase();
    let base = match w.as_str() {
        "first" => "one".to_string(),
        "second" => "two".into(),
        "third" => "three".into(),
        "fifth" => "five".into(),
        "eighth" => "eight".into(),
        "ninth" => "nine".into(),
        "twelfth" => "twelve".into(),
        other => {
            if let Some(stem) = other.strip_suffix("ieth") {
                format!("{stem}y")
            } else if let Some(stem) = other.strip_suffix("th") {
                if ONES.contains(&stem)
                    || TENS.contains(&stem)
                    || stem == "hundred"
                    || SCALES.iter().any(|s| s.1 == stem)
                {
                    stem.to_string()
                } else {
                    other.to_string()
                }
            } else {
                other.to_string()
            }
        }
    };
    if let Some(i) = ONES.iter().position(|x| *x == base) {
        return Some(i as f64);
    }
    if let Some(i) = TENS.iter().position(|x| *x == base && !x.is_empty()) {
        return Some(i as f64 * 10.0);
    }
    if base == "hundred" {
        return Some(100.0);
    }
    SCALES.iter().find(|s| s.1 == base).map(|s| s.0)
}

/// Longest number-in-words we parse; also bounds the recursion below.
const MAX_WORD_TOKENS: usize = 200;

fn parse_words(tokens: &[f64]) -> f64 {
    // split at the last occurrence of the largest scale word
    let max_scale = tokens
        .iter()
        .copied()
        .filter(|v| *v >= 1000.0)
        .fold(0.0, f64::max);
    if max_scale >= 1000.0
        && let Some(i) = tokens.iter().rposition(|v| *v == max_scale)
    {
        let left = parse_words(tokens.get(..i).unwrap_or(&[]));
        let right = parse_words(tokens.get(i + 1..).unwrap_or(&[]));
        return left.max(1.0) * max_scale + right;
    }
    let mut total: f64 = 0.0;
    for v in tokens {
        if *v == 100.0 {
            total = total.max(1.0) * 100.0;
        } else {
            total += v;
        }
    }
    total
}

pub(crate) fn parse_integer(s: &str, picture: &str) -> Result<Option<f64>> {
    let pic = parse_int_picture(picture)?;
    let v = match &pic.primary {
        Primary::Roman(_) => {
            let mut total = 0i64;
            let vals: Vec<i64> = s
                .to_lowercase()
                .chars()
                .map(|c| match c {
                    'i' => 1,
                    'v' => 5,
                    'x' => 10,
                    'l' => 50,
                    'c' => 100,
                    'd' => 500,
                    'm' => 1000,
                    _ => 0,
                })
                .collect();
            for (i, v) in vals.iter().enumerate() {
                if vals.get(i + 1).is_some_and(|n| n > v) {
                    total -= v;
                } else {
                    total += v;
                }
            }
            total as f64
        }
        Primary::Letters(_) => {
            let mut total = 0f64;
            for c in s.to_lowercase().chars() {
                if c.is_ascii_lowercase() {
                    total = total * 26.0 + (c as u8 - b'a' + 1) as f64;
                }
            }
            total
        }
        Primary::Words(_) => {
            let tokens: Vec<f64> = s
                .split([' ', '-', ','])
                .filter(|t| !t.is_empty() && !t.eq_ignore_ascii_case("and"))
                .filter_map(word_value)
                .collect();
            if tokens.len() > MAX_WORD_TOKENS {
                return Ok(None);
            }
            parse_words(&tokens)
        }
        Primary::Decimal { zero, .. } => {
            let mut total = 0f64;
            let mut any = false;
            for c in s.chars() {
                if let Some(d) = (c as u32).checked_sub(*zero as u32).filter(|d| *d < 10) {
                    total = total * 10.0 + d as f64;
                    any = true;
                }
            }
            if !any {
                return Ok(None);
            }
            total
        }
    };
    Ok(Some(v))
}
