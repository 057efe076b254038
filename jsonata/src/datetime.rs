//! Dates for `$fromMillis`, `$toMillis` and `$now`: ISO 8601 by default, or
//! XPath-style picture strings (`[Y0001]-[M01]-[D01]`, `[FNn]`, `[Dwo]`, ...).
//! All calendar arithmetic is proleptic Gregorian in UTC plus a fixed offset.

use crate::error::{Error, Result};
use crate::number_format::{format_integer, parse_integer};

const MONTHS: [&str; 12] = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
];
const DAYS: [&str; 7] = [
    "Monday",
    "Tuesday",
    "Wednesday",
    "Thursday",
    "Friday",
    "Saturday",
    "Sunday",
];
const MS_PER_DAY: f64 = 86_400_000.0;

/// Days since 1970-01-01 for a civil date (month 1-12).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = if y >= 0 { y } else { y - 399 } / 400;
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// Civil date (year, month 1-12, day 1-31) for days since 1970-01-01.
fn civil_from_days(z: i64) -> (i64, i64, i64) {
    let z = z + 719_468;
    let era = if z >= 0 { z } else { z - 146_096 } / 146_097;
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (if m <= 2 { y + 1 } else { y }, m, d)
}

struct Parts {
    year: i64,
    month: i64,
    day: i64,
    hour: i64,
    minute: i64,
    second: i64,
    milli: i64,
    /// ISO day of week, 1 = Monday.
    dow: i64,
    doy: i64,
    days: i64,
}

fn parts(ms: f64, offset_min: i64) -> Parts {
    let local = ms + offset_min as f64 * 60_000.0;
    let days = (local / MS_PER_DAY).floor() as i64;
    let rem = (local - days as f64 * MS_PER_DAY) as i64;
    let (year, month, day) = civil_from_days(days);
    Parts {
        year,
        month,
        day,
        hour: rem / 3_600_000,
        minute: (rem / 60_000) % 60,
        second: (rem / 1000) % 60,
        milli: rem % 1000,
        dow: (days + 3).rem_euclid(7) + 1,
        doy: days - days_from_civil(year, 1, 1) + 1,
        days,
    }
}

/// ISO week-numbering year and week for a day count.
fn iso_week(days: i64, dow: i64) -> (i64, i64) {
    let thursday = days - (dow - 1) + 3;
    let (y, _, _) = civil_from_days(thursday);
    let doy = thursday - days_from_civil(y, 1, 1);
    (y, doy / 7 + 1)
}

/// Week of month (the month owning the week's Thursday) and that month.
fn month_week(days: i64, dow: i64) -> (i64, i64) {
    let thursday = days - (dow - 1) + 3;
    let (_, m, d) = civil_from_days(thursday);
    ((d - 1) / 7 + 1, m)
}

#[derive(Debug, Clone)]
enum Item {
    Literal(String),
    Marker(Marker),
}

#[derive(Debug, Clone)]
struct Marker {
    component: char,
    presentation: String,
    ordinal: bool,
    t_modifier: bool,
    min_width: Option<usize>,
    max_width: Option<usize>,
}

fn parse_width(w: &str) -> Option<(Option<usize>, Option<usize>)> {
    let (a, b) = match w.split_once('-') {
        Some((a, b)) => (a, Some(b)),
        None => (w, None),
    };
    let num = |s: &str| -> Option<Option<usize>> {
        if s == "*" {
            Some(None)
        } else {
            s.parse::<usize>().ok().map(Some)
        }
    };
    // widths beyond a few dozen characters are meaningless; the cap keeps
    // padding cheap whatever the picture asks for
    let cap = |w: Option<usize>| w.map(|v| v.min(64));
    let min = cap(num(a)?);
    let max = match b {
        Some(b) => cap(num(b)?),
        None => None,
    };
    Some((min, max))
}

const MAX_PICTURE_ITEMS: usize = 1000;

fn parse_picture(picture: &str) -> Result<Vec<Item>> {
    let chars: Vec<char> = picture.chars().collect();
    // bracket balance is checked first so that it wins over marker errors
    let last_close = chars.iter().rposition(|c| *c == ']');
    let mut j = 0;
    while let Some(&c) = chars.get(j) {
        if c == '[' && chars.get(j + 1) == Some(&'[') {
            j += 2;
            continue;
        }
        if c == '[' && last_close.is_none_or(|e| e < j) {
            return Err(Error::new(
                "D3135",
                "No matching closing bracket ']' in date/time picture string",
            ));
        }
        j += 1;
    }
    let mut items = Vec::new();
    let mut lit = String::new();
    let mut i = 0;
    while let Some(&c) = chars.get(i) {
        if c == '[' {
            if chars.get(i + 1) == Some(&'[') {
                lit.push('[');
                i += 2;
                continue;
            }
            let Some(end) = chars.iter().skip(i).position(|c| *c == ']').map(|p| p + i) else {
                return Err(Error::new(
                    "D3135",
                    "No matching closing bracket ']' in date/time picture string",
                ));
            };
            if !lit.is_empty() {
                items.push(Item::Literal(std::mem::take(&mut lit)));
            }
            let body: String = chars
                .get(i + 1..end)
                .map(|s| s.iter().filter(|c| !c.is_whitespace()).collect())
                .unwrap_or_default();
            items.push(Item::Marker(parse_marker(&body)?));
            i = end + 1;
            continue;
        }
        if c == ']' && chars.get(i + 1) == Some(&']') {
            lit.push(']');
            i += 2;
            continue;
        }
        lit.push(c);
        i += 1;
    }
    if !lit.is_empty() {
        items.push(Item::Literal(lit));
    }
    // parsing is linear in the input per marker: keep pictures reasonable
    if items.len() > MAX_PICTURE_ITEMS {
        return Err(Error::new(
            "D3135",
            format!("A date/time picture may contain at most {MAX_PICTURE_ITEMS} components"),
        ));
    }
    Ok(items)
}

fn parse_marker(body: &str) -> Result<Marker> {
    let mut chars = body.chars();
    let Some(component) = chars.next() else {
        return Err(Error::new(
            "D3132",
            "Unknown component specifier in date/time picture",
        ));
    };
    if !"YMDdFWwXxHhPmsfZzCE".contains(component) {
        return Err(Error::new(
            "D3132",
            format!("Unknown component specifier {component} in date/time picture"),
        ));
    }
    let rest: String = chars.collect();
    let (mut pres, width) = match rest.rfind(',') {
        Some(i) => match parse_width(rest.get(i + 1..).unwrap_or("")) {
            Some(w) => (rest.get(..i).unwrap_or("").to_string(), Some(w)),
            None => (rest.clone(), None),
        },
        None => (rest.clone(), None),
    };
    let mut ordinal = false;
    let mut t_modifier = false;
    if pres.chars().count() > 1 || (pres.len() == 1 && (pres == "o" || pres == "t")) {
        if pres.ends_with('o') && !pres.ends_with("No") {
            ordinal = true;
            pres.pop();
        } else if pres.ends_with('t') {
            t_modifier = true;
            pres.pop();
        } else if pres.ends_with('c') && pres.len() > 1 {
            pres.pop();
        }
    }
    if pres.is_empty() {
        pres = match component {
            'F' | 'P' | 'C' | 'E' => "n",
            'm' | 's' => "01",
            'Z' | 'z' => "01:01",
            _ => "1",
        }
        .to_string();
    }
    let is_name = matches!(pres.as_str(), "N" | "n" | "Nn");
    if is_name && !"MFPxCEZz".contains(component) {
        return Err(Error::new(
            "D3133",
            format!("The 'name' modifier is not supported for the {component} component"),
        ));
    }
    let (min_width, max_width) = width.unwrap_or((None, None));
    Ok(Marker {
        component,
        presentation: pres,
        ordinal,
        t_modifier,
        min_width,
        max_width,
    })
}

fn apply_name_case(name: &str, pres: &str, max: Option<usize>) -> String {
    let name: String = match max {
        Some(m) => name.chars().take(m).collect(),
        None => name.to_string(),
    };
    match pres {
        "N" => name.to_uppercase(),
        "n" => name.to_lowercase(),
        _ => name,
    }
}

fn digit_count(p: &str) -> (usize, usize) {
    let mandatory = p.chars().filter(|c| c.is_numeric()).count();
    let optional = p.chars().filter(|c| *c == '#').count();
    (mandatory, optional)
}

fn format_number_component(value: i64, m: &Marker) -> Result<String> {
    let mut pic = m.presentation.clone();
    if m.ordinal {
        pic.push_str(";o");
    }
    let mut v = value;
    if m.component == 'Y' {
        let (mand, opt) = digit_count(&m.presentation);
        let mut n = mand + opt;
        if m.presentation == "1" && m.min_width.is_some() {
            n = m.min_width.unwrap_or(1);
        }
        let keep = match m.max_width {
            Some(max) => Some(max),
            None if n >= 2 => Some(n),
            None => None,
        };
        if let Some(k) = keep
            && k < 18
        {
            v = value.rem_euclid(10i64.pow(k as u32));
        }
    }
    let mut s = format_integer(v as f64, &pic)?;
    if let Some(max) = m.max_width
        && s.chars().all(|c| c.is_ascii_digit())
        && s.len() > max
    {
        s = s.get(s.len() - max..).unwrap_or("").to_string();
    }
    if let Some(min) = m.min_width
        && s.chars().all(|c| c.is_ascii_digit())
        && s.len() < min
    {
        s = format!("{}{s}", "0".repeat(min - s.len()));
    }
    Ok(s)
}

fn format_offset(offset_min: i64, m: &Marker) -> Result<String> {
    if m.t_modifier && offset_min == 0 {
        return Ok("Z".into());
    }
    let sign = if offset_min < 0 { '-' } else { '+' };
    let abs = offset_min.abs();
    let (h, mi) = (abs / 60, abs % 60);
    let pres = &m.presentation;
    let digits: Vec<char> = pres.chars().filter(|c| c.is_numeric()).collect();
    if digits.len() > 4 {
        return Err(Error::new(
            "D3134",
            "The timezone component of the picture string has too many digits",
        ));
    }
    let sep = pres.chars().find(|c| !c.is_numeric());
    let out = match sep {
        Some(sep) => {
            let hwidth = pres
                .split(sep)
                .next()
                .map(|s| s.chars().count())
                .unwrap_or(2);
            format!("{sign}{:0hw$}{sep}{:02}", h, mi, hw = hwidth)
        }
        None => {
            if digits.len() >= 3 {
                format!("{sign}{:02}{:02}", h, mi)
            } else if mi != 0 {
                format!("{sign}{:0w$}:{:02}", h, mi, w = digits.len())
            } else {
                format!("{sign}{:0w$}", h, w = digits.len())
            }
        }
    };
    Ok(out)
}

fn parse_tz(tz: &str) -> Option<i64> {
    let t = tz.trim();
    let (sign, rest) = match t.chars().next()? {
        '-' => (-1, t.get(1..)?),
        '+' => (1, t.get(1..)?),
        _ => (1, t),
    };
    let digits: String = rest.chars().filter(|c| c.is_ascii_digit()).collect();
    let (h, m) = match digits.len() {
        1 | 2 => (digits.parse::<i64>().ok()?, 0),
        3 | 4 => {
            let split = digits.len() - 2;
            (
                digits.get(..split)?.parse::<i64>().ok()?,
                digits.get(split..)?.parse::<i64>().ok()?,
            )
        }
        _ => return None,
    };
    Some(sign * (h * 60 + m))
}

/// The range of JavaScript dates (±10^8 days around the epoch); beyond it the
/// reference fails too, and the calendar arithmetic would overflow.
const MAX_MILLIS: f64 = 8.64e15;

pub(crate) fn format_millis(ms: f64, picture: Option<&str>, tz: Option<&str>) -> Result<String> {
    if !ms.is_finite() || ms.abs() > MAX_MILLIS {
        return Err(Error::new(
            "D3110",
            format!("The timestamp {ms} is out of range"),
        ));
    }
    let offset = tz.and_then(parse_tz).unwrap_or(0);
    let picture = match picture {
        Some(p) => p.to_string(),
        None => {
            if tz.is_none() {
                let p = parts(ms, 0);
                return Ok(format!(
                    "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:03}Z",
                    p.year, p.month, p.day, p.hour, p.minute, p.second, p.milli
                ));
            }
            "[Y0001]-[M01]-[D01]T[H01]:[m01]:[s01].[f001][Z01:01t]".to_string()
        }
    };
    let items = parse_picture(&picture)?;
    let p = parts(ms, offset);
    let mut out = String::new();
    for item in &items {
        match item {
            Item::Literal(s) => out.push_str(s),
            Item::Marker(m) => out.push_str(&format_component(&p, m, offset)?),
        }
    }
    Ok(out)
}

fn format_component(p: &Parts, m: &Marker, offset: i64) -> Result<String> {
    let is_name = matches!(m.presentation.as_str(), "N" | "n" | "Nn");
    let value = match m.component {
        'Y' => p.year,
        'M' => {
            if is_name {
                let name = MONTHS.get((p.month - 1) as usize).copied().unwrap_or("");
                return Ok(apply_name_case(name, &m.presentation, m.max_width));
            }
            p.month
        }
        'D' => p.day,
        'd' => p.doy,
        'F' => {
            if is_name {
                let name = DAYS.get((p.dow - 1) as usize).copied().unwrap_or("");
                return Ok(apply_name_case(name, &m.presentation, m.max_width));
            }
            p.dow
        }
        'W' => iso_week(p.days, p.dow).1,
        'X' => iso_week(p.days, p.dow).0,
        'w' => month_week(p.days, p.dow).0,
        'x' => {
            let month = month_week(p.days, p.dow).1;
            if is_name {
                let name = MONTHS.get((month - 1) as usize).copied().unwrap_or("");
                return Ok(apply_name_case(name, &m.presentation, m.max_width));
            }
            month
        }
        'H' => p.hour,
        'h' => {
            let h = p.hour % 12;
            if h == 0 { 12 } else { h }
        }
        'P' => {
            let s = if p.hour < 12 { "am" } else { "pm" };
            return Ok(apply_name_case(s, &m.presentation, m.max_width));
        }
        'm' => p.minute,
        's' => p.second,
        'f' => {
            let (mand, _) = digit_count(&m.presentation);
            let mut s = format!("{:03}", p.milli);
            let want = mand.max(1);
            while s.len() < want {
                s.push('0');
            }
            while s.len() > want && s.ends_with('0') {
                s.pop();
            }
            return Ok(s);
        }
        'Z' => return format_offset(offset, m),
        'z' => {
            let inner = format_offset(offset, m)?;
            return Ok(format!("GMT{inner}"));
        }
        'C' | 'E' => return Ok("ISO".into()),
        _ => 0,
    };
    format_number_component(value, m)
}

// ------------------------------------------------------------------ parsing

fn parse_iso(s: &str) -> Option<f64> {
    let b: Vec<char> = s.chars().collect();
    let mut i = 0;
    let num = |i: &mut usize, n: usize| -> Option<i64> {
        let part: String = b.get(*i..*i + n)?.iter().collect();
        if !part.chars().all(|c| c.is_ascii_digit()) {
            return None;
        }
        *i += n;
        part.parse().ok()
    };
    let year = num(&mut i, 4)?;
    let (mut month, mut day, mut hour, mut minute, mut second, mut milli) = (1, 1, 0, 0, 0, 0.0);
    let mut offset = 0i64;
    if b.get(i) == Some(&'-') {
        i += 1;
        month = num(&mut i, 2)?;
        if b.get(i) == Some(&'-') {
            i += 1;
            day = num(&mut i, 2)?;
            if b.get(i) == Some(&'T') {
                i += 1;
                hour = num(&mut i, 2)?;
                if b.get(i) != Some(&':') {
                    return None;
                }
                i += 1;
                minute = num(&mut i, 2)?;
                if b.get(i) == Some(&':') {
                    i += 1;
                    second = num(&mut i, 2)?;
                    if b.get(i) == Some(&'.') {
                        i += 1;
                        let start = i;
                        while b.get(i).is_some_and(|c| c.is_ascii_digit()) {
                            i += 1;
                        }
                        let frac: String = b.get(start..i)?.iter().collect();
                        if frac.is_empty() {
                            return None;
                        }
                        milli = (format!("0.{frac}").parse::<f64>().ok()? * 1000.0).floor();
                    }
                }
                match b.get(i) {
                    Some('Z') => i += 1,
                    Some('+') | Some('-') => {
                        let rest: String = b.get(i..)?.iter().collect();
                        offset = parse_tz(&rest)?;
                        i = b.len();
                    }
                    _ => {}
                }
            }
        }
    }
    if i != b.len() || !(1..=12).contains(&month) || !(1..=31).contains(&day) {
        return None;
    }
    let days = days_from_civil(year, month, day);
    Some(
        days as f64 * MS_PER_DAY
            + ((hour * 60 + minute - offset) * 60 + second) as f64 * 1000.0
            + milli,
    )
}

pub(crate) fn parse_to_millis(s: &str, picture: Option<&str>, now_ms: f64) -> Result<Option<f64>> {
    let Some(picture) = picture else {
        return match parse_iso(s) {
            Some(v) => Ok(Some(v)),
            None => Err(Error::new(
                "D3110",
                format!("The timestamp {s} cannot be parsed"),
            )),
        };
    };
    let items = parse_picture(picture)?;
    let mut vals: std::collections::HashMap<char, i64> = std::collections::HashMap::new();
    let mut pm: Option<bool> = None;
    let mut offset: Option<i64> = None;
    let chars: Vec<char> = s.chars().collect();
    let mut pos = 0usize;
    for (idx, item) in items.iter().enumerate() {
        match item {
            Item::Literal(l) => {
                let lc: Vec<char> = l.chars().collect();
                if chars.get(pos..pos + lc.len()) != Some(&lc[..]) {
                    return Ok(None);
                }
                pos += lc.len();
            }
            Item::Marker(m) => {
                let next_is_marker = matches!(items.get(idx + 1), Some(Item::Marker(_)));
                let next_lit = match items.get(idx + 1) {
                    Some(Item::Literal(l)) => Some(l.clone()),
                    _ => None,
                };
                let Some((value, used)) =
                    parse_component(&chars, pos, m, next_is_marker, next_lit.as_deref())?
                else {
                    return Ok(None);
                };
                pos += used;
                match value {
                    Parsed::Num(v) => {
                        vals.insert(m.component, v);
                    }
                    Parsed::Pm(p) => pm = Some(p),
                    Parsed::Offset(o) => offset = Some(o),
                    Parsed::Ignore => {}
                }
            }
        }
    }
    if vals.is_empty() {
        return Ok(None);
    }
    // keep the calendar arithmetic far from integer overflow
    if vals.values().any(|v| v.abs() > 10_000_000) {
        return Err(Error::new(
            "D3110",
            format!("The timestamp {s} is out of range"),
        ));
    }
    if ['X', 'x', 'W', 'w'].iter().any(|c| vals.contains_key(c)) {
        return Err(Error::new(
            "D3136",
            "The date/time picture string is missing specifiers required to parse the timestamp",
        ));
    }
    if let Some(h) = vals.get(&'h').copied() {
        let mut hour = h % 12;
        if pm == Some(true) {
            hour += 12;
        }
        vals.insert('H', hour);
    }
    let now = parts(now_ms, 0);
    let by_day_of_year = vals.contains_key(&'d');
    // Y M D H m s f: leading gaps take "now", inner gaps are an error
    let order: Vec<char> = if by_day_of_year {
        vec!['Y', 'd', 'H', 'm', 's', 'f']
    } else {
        vec!['Y', 'M', 'D', 'H', 'm', 's', 'f']
    };
    let present: Vec<bool> = order.iter().map(|c| vals.contains_key(c)).collect();
    let first = present.iter().position(|p| *p).unwrap_or(0);
    let last = present.iter().rposition(|p| *p).unwrap_or(0);
    if present
        .get(first..=last)
        .is_some_and(|s| s.iter().any(|p| !p))
    {
        return Err(Error::new(
            "D3136",
            "The date/time picture string is missing specifiers required to parse the timestamp",
        ));
    }
    let get = |c: char, default: i64, i: usize| -> i64 {
        match vals.get(&c) {
            Some(v) => *v,
            None => {
                if i < first {
                    match c {
                        'Y' => now.year,
                        'M' => now.month,
                        'D' => now.day,
                        'd' => now.doy,
                        'H' => now.hour,
                        'm' => now.minute,
                        's' => now.second,
                        _ => default,
                    }
                } else {
                    default
                }
            }
        }
    };
    let pos_of = |c: char| order.iter().position(|x| *x == c).unwrap_or(0);
    let year = get('Y', 0, pos_of('Y'));
    let days = if by_day_of_year {
        let d = get('d', 1, pos_of('d'));
        days_from_civil(year, 1, 1) + d - 1
    } else {
        let month = get('M', 1, pos_of('M'));
        let day = get('D', 1, pos_of('D'));
        days_from_civil(year, month, day)
    };
    let hour = get('H', 0, pos_of('H'));
    let minute = get('m', 0, pos_of('m'));
    let second = get('s', 0, pos_of('s'));
    let milli = get('f', 0, pos_of('f'));
    let total = days as f64 * MS_PER_DAY
        + ((hour * 60 + minute - offset.unwrap_or(0)) * 60 + second) as f64 * 1000.0
        + milli as f64;
    Ok(Some(total))
}

enum Parsed {
    Num(i64),
    Pm(bool),
    Offset(i64),
    Ignore,
}

fn take_while(chars: &[char], pos: usize, f: impl Fn(char) -> bool) -> usize {
    let mut n = 0;
    while chars.get(pos + n).is_some_and(|c| f(*c)) {
        n += 1;
    }
    n
}

fn parse_component(
    chars: &[char],
    pos: usize,
    m: &Marker,
    next_is_marker: bool,
    next_lit: Option<&str>,
) -> Result<Option<(Parsed, usize)>> {
    let pres = m.presentation.as_str();
    let text = |n: usize| -> String {
        chars
            .get(pos..pos + n)
            .map(|s| s.iter().collect())
            .unwrap_or_default()
    };
    match m.component {
        'P' => {
            let n = take_while(chars, pos, |c| c.is_alphabetic());
            let t = text(n).to_lowercase();
            return Ok(match t.as_str() {
                "am" => Some((Parsed::Pm(false), n)),
                "pm" => Some((Parsed::Pm(true), n)),
                _ => None,
            });
        }
        'Z' | 'z' => {
            let mut p = pos;
            if m.component == 'z' {
                if text(3) != "GMT" {
                    return Ok(None);
                }
                p += 3;
            }
            if chars.get(p) == Some(&'Z') {
                return Ok(Some((Parsed::Offset(0), p + 1 - pos)));
            }
            let n = take_while(chars, p, |c| {
                c.is_ascii_digit() || c == '+' || c == '-' || c == ':'
            });
            let t: String = chars
                .get(p..p + n)
                .map(|s| s.iter().filter(|c| **c != ':').collect())
                .unwrap_or_default();
            let normal = t.clone();
            let off = if chars.get(p..p + n).is_some_and(|s| s.contains(&':')) {
                let raw: String = chars
                    .get(p..p + n)
                    .map(|s| s.iter().collect())
                    .unwrap_or_default();
                let (sign, rest) = match raw.chars().next() {
                    Some('-') => (-1, raw.get(1..).unwrap_or("")),
                    Some('+') => (1, raw.get(1..).unwrap_or("")),
                    _ => (1, raw.as_str()),
                };
                let (h, mi) = rest.split_once(':').unwrap_or((rest, "0"));
                let h = h.parse::<i64>().unwrap_or(0).clamp(0, 10_000);
                let mi = mi.parse::<i64>().unwrap_or(0).clamp(0, 10_000);
                Some(sign * (h * 60 + mi))
            } else {
                parse_tz(&normal)
            };
            return Ok(off.map(|o| (Parsed::Offset(o), p + n - pos)));
        }
        'C' | 'E' => {
            let n = take_while(chars, pos, |c| c.is_alphabetic());
            return Ok(Some((Parsed::Ignore, n)));
        }
        _ => {}
    }
    let is_name = matches!(pres, "N" | "n" | "Nn");
    if is_name {
        let n = take_while(chars, pos, |c| c.is_alphabetic());
        let t = text(n).to_lowercase();
        let table: &[&str] = if m.component == 'M' || m.component == 'x' {
            &MONTHS
        } else {
            &DAYS
        };
        let found = table.iter().position(|name| {
            let name = name.to_lowercase();
            name == t || (t.len() >= 3 && name.starts_with(&t))
        });
        return Ok(found.map(|i| {
            if m.component == 'F' {
                (Parsed::Ignore, n)
            } else {
                (Parsed::Num(i as i64 + 1), n)
            }
        }));
    }
    let kind = pres.chars().next().unwrap_or('1');
    let (n, value) = match kind {
        'I' | 'i' => {
            let n = take_while(chars, pos, |c| "ivxlcdmIVXLCDM".contains(c));
            (n, parse_integer(&text(n), "I")?)
        }
        'A' | 'a' => {
            let n = take_while(chars, pos, |c| c.is_ascii_alphabetic());
            (n, parse_integer(&text(n), "a")?)
        }
        'w' | 'W' => {
            let n = match next_lit {
                Some(l) if !l.is_empty() => {
                    let rest: String = chars
                        .get(pos..)
                        .map(|s| s.iter().collect())
                        .unwrap_or_default();
                    match rest.find(l) {
                        Some(i) => rest.get(..i).map(|s| s.chars().count()).unwrap_or(0),
                        None => chars.len().saturating_sub(pos),
                    }
                }
                _ => chars.len().saturating_sub(pos),
            };
            (n, parse_integer(&text(n), "w")?)
        }
        _ => {
            let n = if next_is_marker {
                let (mand, _) = digit_count(pres);
                let want = m.max_width.unwrap_or(mand.max(1));
                take_while(chars, pos, |c| c.is_numeric()).min(want)
            } else {
                take_while(chars, pos, |c| c.is_numeric() || c == ',')
            };
            if n == 0 {
                return Ok(None);
            }
            let mut v = parse_integer(&text(n).replace(',', ""), "0")?;
            if m.component == 'f'
                && let Some(x) = v
            {
                // fractional seconds: scale the digits to milliseconds
                let scale = 10f64.powi(3 - n as i32);
                v = Some((x * scale).floor());
            }
            let mut used = n;
            if m.ordinal {
                used += take_while(chars, pos + n, |c| c.is_alphabetic());
            }
            (used, v)
        }
    };
    Ok(value.map(|v| (Parsed::Num(v as i64), n)))
}
