//! Selecting the kind of a destination, a source or an `auth` block from its required keys.
//!
//! The required keys decide, as the product has always done. A `type` that contradicts them is
//! refused rather than ignored: an entry that says `rabbitmq` and loads as HTTP is a mistake the
//! operator wants to hear about.

use super::text;
use crate::catalog::Doc;
use crate::reader::{Block, Reader};

/// One kind and the keys that select it. `kind` is the reader's own enum value for it, so the
/// reader matches the selected kind exhaustively instead of comparing names.
pub(crate) struct KindKeys<K> {
    pub kind: K,
    pub name: &'static str,
    pub keys: &'static [&'static str],
}

/// `what` without its article: "a destination" -> "destination".
fn noun(what: &str) -> &str {
    what.split_once(' ').map_or(what, |(_, noun)| noun)
}

/// The kind of block `b`, or `None` (with a problem recorded) when it cannot be told. `what` names
/// the block with its article ("a destination", "an auth block").
pub(crate) fn select<K: Copy>(
    r: &mut Reader,
    b: &mut Block<'_>,
    what: &str,
    kinds: &[KindKeys<K>],
) -> Option<K> {
    let type_path = b.path_of("type");
    let names: Vec<&str> = kinds.iter().map(|k| k.name).collect();
    let spellings: Vec<String> = names.iter().map(|n| format!("`{n}`")).collect();
    r.describe(
        &type_path,
        Doc::default()
            .default_text("the kind whose required keys are set")
            .allowed(format!("{} (any letter case)", spellings.join(", "))),
    );
    let declared = text(r, b, "type").and_then(|declared| {
        let found = kinds
            .iter()
            .find(|k| k.name.eq_ignore_ascii_case(declared.trim()))
            .map(|k| k.name);
        if found.is_none() {
            r.problem(
                type_path.clone(),
                format!("must be one of {}, got `{declared}`", names.join(", ")),
            );
        }
        found
    });
    let complete: Vec<&KindKeys<K>> = kinds
        .iter()
        .filter(|k| k.keys.iter().all(|key| b.has(key)))
        .collect();
    match complete.as_slice() {
        [one] => match declared {
            Some(declared) if declared != one.name => {
                r.problem(
                    type_path,
                    format!(
                        "says {declared}, but the keys {} select {what} of type {}; make type and the keys agree",
                        one.keys.join(", "),
                        one.name
                    ),
                );
                None
            }
            // No `type`, or one that agrees with the keys.
            _ => {
                r.record_kind(b.path(), one.name);
                for key in one.keys {
                    r.describe(&b.path_of(key), Doc::default().default_text("required"));
                }
                Some(one.kind)
            }
        },
        [] => {
            // Name the missing keys of the declared kind, or of the kinds the entry came closest to
            // (each of them when several share the keys it sets, such as `url`).
            let present = |k: &KindKeys<K>| k.keys.iter().filter(|key| b.has(key)).count();
            let closest = kinds.iter().map(present).max().unwrap_or(0);
            let targets: Vec<&KindKeys<K>> = match declared {
                Some(d) => kinds.iter().filter(|k| k.name == d).collect(),
                None if closest > 0 => kinds.iter().filter(|k| present(k) == closest).collect(),
                None => Vec::new(),
            };
            match targets.as_slice() {
                [_, ..] => {
                    for kind in targets {
                        for key in kind.keys.iter().filter(|key| !b.has(key)) {
                            r.problem(
                                b.path_of(key),
                                format!("is required by {what} of type {}", kind.name),
                            );
                        }
                    }
                }
                [] => {
                    let options: Vec<String> = kinds
                        .iter()
                        .map(|k| format!("{}: {}", k.name, k.keys.join(", ")))
                        .collect();
                    r.problem(
                        b.path().to_owned(),
                        format!(
                            "cannot tell the kind of this {}: set type and the required keys of one kind ({})",
                            noun(what),
                            options.join("; ")
                        ),
                    );
                }
            }
            None
        }
        several => {
            let options: Vec<String> = several
                .iter()
                .map(|k| format!("{}: {}", k.name, k.keys.join(", ")))
                .collect();
            r.problem(
                b.path().to_owned(),
                format!(
                    "sets the required keys of several kinds ({}); keep the keys of one kind",
                    options.join("; ")
                ),
            );
            None
        }
    }
}
