//! Function signatures (`<s-n?:s>`): parsing and argument validation.
//! Validation matches the type symbols of the supplied arguments against the
//! parameter list with a tiny backtracking matcher (argument lists are short).

use crate::error::{Error, Result};
use crate::value::Val;

const MAX_PARAMS: usize = 64;

#[derive(Debug, Clone)]
pub(crate) struct Param {
    /// Symbols this parameter accepts, e.g. "sm" or "asnblfom".
    accepts: String,
    /// The declared type: a single symbol or a "(union)".
    kind: String,
    subtype: Option<String>,
    optional: bool,
    plus: bool,
    context: bool,
}

#[derive(Debug, Clone)]
pub(crate) struct Signature {
    params: Vec<Param>,
}

pub(crate) fn symbol(v: Option<&Val>) -> char {
    match v {
        None => 'm',
        Some(Val::Func(_)) => 'f',
        Some(Val::Str(_)) => 's',
        Some(Val::Num(_)) => 'n',
        Some(Val::Bool(_)) => 'b',
        Some(Val::Null) => 'l',
        Some(Val::Arr(..)) | Some(Val::Tuples(_)) => 'a',
        Some(Val::Obj(_)) => 'o',
    }
}

impl Signature {
    pub fn parse(sig: &str) -> Result<Signature> {
        let chars: Vec<char> = sig.chars().collect();
        let mut params: Vec<Param> = Vec::new();
        let mut i = 1usize; // skip '<'
        while let Some(&c) = chars.get(i) {
            if c == ':' || c == '>' {
                break;
            }
            match c {
                's' | 'n' | 'b' | 'l' | 'o' => {
                    params.push(Param::new(&format!("{c}m"), c.to_string()))
                }
                'a' => params.push(Param::new("asnblfom", "a".into())),
                'f' => params.push(Param::new("f", "f".into())),
                'j' => params.push(Param::new("asnblom", "j".into())),
                'x' => params.push(Param::new("asnblfom", "x".into())),
                '(' => {
                    let start = i + 1;
                    let mut end = start;
                    while chars.get(end).is_some_and(|c| *c != ')') {
                        end += 1;
                    }
                    let choice: String = chars
                        .get(start..end)
                        .map(|s| s.iter().collect())
                        .unwrap_or_default();
                    if choice.contains('<') {
                        return Err(Error::new(
                            "S0402",
                            "Choice groups containing parameterized types are not supported",
                        ));
                    }
                    params.push(Param::new(&format!("{choice}m"), format!("({choice})")));
                    i = end;
                }
                '-' => {
                    if let Some(p) = params.last_mut() {
                        p.context = true;
                        p.optional = true;
                    }
                }
                '?' => {
                    if let Some(p) = params.last_mut() {
                        p.optional = true;
                    }
                }
                '+' => {
                    if let Some(p) = params.last_mut() {
                        p.plus = true;
                    }
                }
                '<' => {
                    let ok = params
                        .last()
                        .is_some_and(|p| p.kind == "a" || p.kind == "f");
                    if !ok {
                        return Err(Error::new(
                            "S0401",
                            format!(
                                "Type parameters can only be applied to functions and arrays: {sig}"
                            ),
                        ));
                    }
                    let start = i + 1;
                    let mut depth = 1;
                    let mut end = start;
                    while let Some(&c) = chars.get(end) {
                        if c == '<' {
                            depth += 1;
                        } else if c == '>' {
                            depth -= 1;
                            if depth == 0 {
                                break;
                            }
                        }
                        end += 1;
                    }
                    let sub: String = chars
                        .get(start..end)
                        .map(|s| s.iter().collect())
                        .unwrap_or_default();
                    if let Some(p) = params.last_mut() {
                        p.subtype = Some(sub);
                    }
                    i = end;
                }
                _ => {
                    return Err(Error::new(
                        "S0401",
                        format!(
                            "Type parameters can only be applied to functions and arrays: {sig}"
                        ),
                    ));
                }
            }
            i += 1;
        }
        // matching recurses once per parameter: keep that shallow
        if params.len() > MAX_PARAMS {
            return Err(Error::new(
                "S0401",
                format!("A function signature may declare at most {MAX_PARAMS} parameters"),
            ));
        }
        Ok(Signature { params })
    }

    /// Try to match params[pi..] against syms[si..]; on success fills spans.
    fn matches(
        &self,
        pi: usize,
        syms: &[char],
        si: usize,
        spans: &mut Vec<(usize, usize)>,
        full: bool,
        steps: &mut u32,
    ) -> bool {
        // bound the backtracking: signatures such as `<n+n+n+n+>` could
        // otherwise take exponential time
        *steps += 1;
        if *steps > 100_000 {
            return false;
        }
        let Some(p) = self.params.get(pi) else {
            return !full || si == syms.len();
        };
        // count how many consecutive symbols this param could take
        let mut max = 0;
        while syms.get(si + max).is_some_and(|c| p.accepts.contains(*c)) {
            max += 1;
            if !p.plus {
                break;
            }
        }
        let min = if p.optional { 0 } else { 1 };
        let mut take = max;
        loop {
            if take < min {
                return false;
            }
            spans.push((si, si + take));
            if self.matches(pi + 1, syms, si + take, spans, full, steps) {
                return true;
            }
            spans.pop();
            if take == 0 {
                return false;
            }
            take -= 1;
        }
    }

    pub fn validate(
        &self,
        args: Vec<Option<Val>>,
        context: Option<&Val>,
        name: &str,
    ) -> Result<Vec<Option<Val>>> {
        let syms: Vec<char> = args.iter().map(|a| symbol(a.as_ref())).collect();
        let mut spans = Vec::new();
        if !self.matches(0, &syms, 0, &mut spans, true, &mut 0) {
            return Err(self.mismatch(&syms, &args, name));
        }
        let mut out = Vec::with_capacity(self.params.len());
        let mut ai = 0usize;
        for (p, (start, end)) in self.params.iter().zip(spans.iter()) {
            if start == end {
                if p.context {
                    let ctx_sym = symbol(context);
                    if p.accepts.contains(ctx_sym) && ctx_sym != 'm'
                        || (ctx_sym == 'm' && p.accepts.contains('m'))
                    {
                        out.push(context.cloned());
                    } else {
                        return Err(Error::new(
                            "T0411",
                            format!("Context value is not a compatible type with argument {} of function {name}", ai + 1),
                        )
                        .with_token(name));
                    }
                } else {
                    out.push(args.get(ai).cloned().flatten());
                    ai += 1;
                }
                continue;
            }
            for k in *start..*end {
                let single = syms.get(k).copied().unwrap_or('m');
                let arg = args.get(ai).cloned().flatten();
                if p.kind == "a" {
                    if single == 'm' {
                        out.push(None);
                    } else {
                        if let Some(sub) = &p.subtype {
                            let mut ok = true;
                            if single != 'a' {
                                if !sub.starts_with(single) || sub.len() != 1 {
                                    ok = false;
                                }
                            } else if let Some(Val::Arr(items, _)) = &arg
                                && let Some(first) = items.first()
                            {
                                let t = symbol(Some(first));
                                if !sub.starts_with(t) {
                                    ok = false;
                                } else {
                                    ok = items.iter().all(|x| symbol(Some(x)) == t);
                                }
                            }
                            if !ok {
                                return Err(Error::new(
                                    "T0412",
                                    format!(
                                        "Argument {} of function {name} must be an array of {}",
                                        ai + 1,
                                        array_name(sub)
                                    ),
                                )
                                .with_token(name));
                            }
                        }
                        match arg {
                            Some(v) if single != 'a' => out.push(Some(Val::array(vec![v]))),
                            other => out.push(other),
                        }
                    }
                } else {
                    out.push(arg);
                }
                ai += 1;
            }
        }
        Ok(out)
    }

    fn mismatch(&self, syms: &[char], _args: &[Option<Val>], name: &str) -> Error {
        let mut good = 0usize;
        for i in 0..self.params.len() {
            let partial = Signature {
                params: self
                    .params
                    .get(..=i)
                    .map(|s| s.to_vec())
                    .unwrap_or_default(),
            };
            let mut spans = Vec::new();
            if !partial.matches(0, syms, 0, &mut spans, false, &mut 0) {
                break;
            }
            good = spans.last().map(|s| s.1).unwrap_or(0);
        }
        Error::new(
            "T0410",
            format!(
                "Argument {} of function {name} does not match function signature",
                good + 1
            ),
        )
        .with_token(name)
    }
}

fn array_name(sub: &str) -> &'static str {
    match sub.chars().next() {
        Some('s') => "strings",
        Some('n') => "numbers",
        Some('b') => "booleans",
        Some('o') => "objects",
        Some('f') => "functions",
        Some('a') => "arrays",
        _ => "values",
    }
}

impl Param {
    fn new(accepts: &str, kind: String) -> Param {
        Param {
            accepts: accepts.to_string(),
            kind,
            subtype: None,
            optional: false,
            plus: false,
            context: false,
        }
    }
}
