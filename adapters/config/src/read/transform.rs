//! `transform` blocks of sources, routes and destinations.
//!
//! The expression is only stored here; the JSONata adapter compiles it at start and reports a
//! compile error against the same key path.

use super::{Case, choice, positive, required};
use crate::catalog::Doc;
use crate::model::{OnError, Transform};
use crate::reader::{Block, Reader};
use std::time::Duration;

/// The `transform` block under `parent`, if set.
pub(crate) fn read(r: &mut Reader, parent: &mut Block<'_>) -> Option<Transform> {
    // An optional block: declared here, because an absent one is never opened.
    r.describe(&parent.path_of("transform"), Doc::ty("block"));
    let value = parent.get("transform")?;
    let mut b = Block::open(r, Some(value), &parent.path_of("transform"));
    let expression = required(r, &mut b, "expression");
    let timeout_ms = positive(r, &mut b, "timeoutMs", 100);
    let max_depth = positive(r, &mut b, "maxDepth", 100);
    let on_error = choice(
        r,
        &mut b,
        "onError",
        &[
            ("Fail", OnError::Fail),
            ("Skip", OnError::Skip),
            ("Dead", OnError::Dead),
        ],
        Case::Exact,
        OnError::Fail,
    );
    b.finish(r);
    Some(Transform {
        expression,
        timeout: Duration::from_millis(u64::from(timeout_ms)),
        max_depth,
        on_error,
    })
}
