//! JSON text straight to and from the internal values, for
//! [`Expression::evaluate_json`](crate::Expression::evaluate_json): the
//! payload is parsed into evaluation values and the result is written as text
//! without building `serde_json::Value` trees on the way in or out. The
//! conversions match `value::from_json` and `value::to_json` exactly (same
//! numbers, same key order and duplicate-key rule, same output size
//! accounting, same errors).

use crate::error::{Error, Result};
use crate::limits::{MAX_DATA_DEPTH, data_too_deep};
use crate::value::{Map, Val, json_number};
use serde::de::{self, DeserializeSeed, MapAccess, SeqAccess, Visitor};
use serde::ser::{self, Serialize, SerializeMap, SerializeSeq, Serializer};
use std::cell::{Cell, RefCell};
use std::fmt;
use std::rc::Rc;

/// Parse JSON text into an evaluation value.
pub(crate) fn parse(text: &str) -> Result<Val> {
    let mut de = serde_json::Deserializer::from_str(text);
    let v = ValSeed { depth: 0 }
        .deserialize(&mut de)
        .and_then(|v| de.end().map(|()| v))
        .map_err(|e| {
            if e.to_string().starts_with(TOO_DEEP) {
                data_too_deep()
            } else {
                invalid_input(&e)
            }
        })?;
    Ok(v)
}

const TOO_DEEP: &str = "data nesting limit exceeded";

fn invalid_input(e: &serde_json::Error) -> Error {
    Error::new("J0001", format!("The input is not valid JSON: {e}"))
}

struct ValSeed {
    depth: usize,
}

impl<'de> DeserializeSeed<'de> for ValSeed {
    type Value = Val;
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> std::result::Result<Val, D::Error> {
        if self.depth > MAX_DATA_DEPTH {
            return Err(de::Error::custom(TOO_DEEP));
        }
        d.deserialize_any(ValVisitor { depth: self.depth })
    }
}

struct ValVisitor {
    depth: usize,
}

impl<'de> Visitor<'de> for ValVisitor {
    type Value = Val;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }
    fn visit_unit<E>(self) -> std::result::Result<Val, E> {
        Ok(Val::Null)
    }
    fn visit_none<E>(self) -> std::result::Result<Val, E> {
        Ok(Val::Null)
    }
    fn visit_bool<E>(self, b: bool) -> std::result::Result<Val, E> {
        Ok(Val::Bool(b))
    }
    // as serde_json::Number::as_f64
    fn visit_i64<E>(self, n: i64) -> std::result::Result<Val, E> {
        Ok(Val::Num(n as f64))
    }
    fn visit_u64<E>(self, n: u64) -> std::result::Result<Val, E> {
        Ok(Val::Num(n as f64))
    }
    fn visit_f64<E>(self, n: f64) -> std::result::Result<Val, E> {
        Ok(Val::Num(n))
    }
    fn visit_str<E>(self, s: &str) -> std::result::Result<Val, E> {
        Ok(Val::str(s))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> std::result::Result<Val, A::Error> {
        let mut out = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(1024));
        while let Some(v) = seq.next_element_seed(ValSeed {
            depth: self.depth + 1,
        })? {
            out.push(v);
        }
        Ok(Val::array(out))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> std::result::Result<Val, A::Error> {
        let mut m = Map::with_capacity_and_hasher(
            map.size_hint().unwrap_or(0).min(1024),
            Default::default(),
        );
        while let Some(k) = map.next_key_seed(KeySeed)? {
            let v = map.next_value_seed(ValSeed {
                depth: self.depth + 1,
            })?;
            // a repeated key keeps its first position and takes the last value,
            // as serde_json's ordered map does
            m.insert(k, v);
        }
        Ok(Val::object(m))
    }
}

struct KeySeed;

impl<'de> DeserializeSeed<'de> for KeySeed {
    type Value = Rc<str>;
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> std::result::Result<Rc<str>, D::Error> {
        d.deserialize_str(KeyVisitor)
    }
}

struct KeyVisitor;

impl Visitor<'_> for KeyVisitor {
    type Value = Rc<str>;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an object key")
    }
    fn visit_str<E>(self, s: &str) -> std::result::Result<Rc<str>, E> {
        Ok(Rc::from(s))
    }
}

/// Write a result as JSON text, with the size accounting of `value::to_json`.
pub(crate) fn write(v: &Val, max_bytes: usize) -> Result<String> {
    let state = OutState {
        bytes: Cell::new(0),
        max: max_bytes,
        error: RefCell::new(None),
    };
    match serde_json::to_string(&Out {
        v,
        depth: 0,
        state: &state,
    }) {
        Ok(s) => Ok(s),
        Err(e) => Err(state
            .error
            .into_inner()
            .unwrap_or_else(|| Error::new("J0002", format!("Cannot write the result: {e}")))),
    }
}

struct OutState {
    bytes: Cell<usize>,
    max: usize,
    error: RefCell<Option<Error>>,
}

impl OutState {
    fn fail<E: ser::Error>(&self, e: Error) -> E {
        let msg = e.message.clone();
        *self.error.borrow_mut() = Some(e);
        E::custom(msg)
    }

    fn add<E: ser::Error>(&self, n: usize) -> std::result::Result<(), E> {
        let b = self.bytes.get().saturating_add(n);
        self.bytes.set(b);
        if b > self.max {
            return Err(self.fail(Error::new(
                "U1002",
                format!("Output size limit of {} bytes exceeded", self.max),
            )));
        }
        Ok(())
    }
}

struct Out<'a> {
    v: &'a Val,
    depth: usize,
    state: &'a OutState,
}

impl Serialize for Out<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        let st = self.state;
        if self.depth > MAX_DATA_DEPTH {
            return Err(st.fail(data_too_deep()));
        }
        st.add(8)?;
        let child = |v| Out {
            v,
            depth: self.depth + 1,
            state: st,
        };
        match self.v {
            Val::Null => s.serialize_unit(),
            Val::Bool(b) => s.serialize_bool(*b),
            Val::Num(n) => {
                if !n.is_finite() {
                    return Err(st.fail(Error::new("D1001", "Number out of range")));
                }
                json_number(*n).serialize(s)
            }
            Val::Str(x) => {
                st.add(x.len())?;
                s.serialize_str(x)
            }
            Val::Arr(items, _) => {
                let mut seq = s.serialize_seq(Some(items.len()))?;
                for x in items.iter() {
                    seq.serialize_element(&child(x))?;
                }
                seq.end()
            }
            Val::Obj(m) => {
                let mut map = s.serialize_map(Some(m.len()))?;
                for (k, x) in m.iter() {
                    st.add(k.len())?;
                    map.serialize_entry(&**k, &child(x))?;
                }
                map.end()
            }
            Val::Func(_) => s.serialize_str(""),
            Val::Tuples(ts) => {
                let mut seq = s.serialize_seq(None)?;
                for t in ts.iter() {
                    if let Some((_, v)) = t.iter().find(|(k, _)| &**k == "@") {
                        seq.serialize_element(&child(v))?;
                    }
                }
                seq.end()
            }
        }
    }
}
