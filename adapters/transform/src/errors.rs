//! Engine errors as port errors: compile, evaluation, or which limit.

use queuebox_jsonata::Error;
use queuebox_ports::transform::{
    TransformError, TransformErrorKind, TransformLimit, TransformLimits,
};

/// An expression that did not compile.
pub(crate) fn compile(e: &Error) -> TransformError {
    TransformError::new(TransformErrorKind::Compile, e.to_string())
}

/// A failed evaluation under `limits`.
pub(crate) fn evaluation(e: &Error, limits: &TransformLimits) -> TransformError {
    if e.is_timeout() {
        return timeout(limits);
    }
    let kind = match e.code {
        "U1001" => TransformErrorKind::Limit(TransformLimit::Depth),
        "U1002" => TransformErrorKind::Limit(TransformLimit::Size),
        _ => TransformErrorKind::Evaluation,
    };
    let message = match kind {
        TransformErrorKind::Limit(TransformLimit::Depth) => {
            format!("{e} (maxDepth {})", limits.max_depth)
        }
        _ => e.to_string(),
    };
    TransformError::new(kind, message)
}

/// The evaluation ran past `timeoutMs`.
pub(crate) fn timeout(limits: &TransformLimits) -> TransformError {
    TransformError::new(
        TransformErrorKind::Limit(TransformLimit::Timeout),
        format!(
            "evaluation ran longer than timeoutMs ({} ms)",
            limits.timeout.as_millis()
        ),
    )
}
