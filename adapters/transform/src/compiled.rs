//! Compiling an expression and applying it: inline first, on the blocking pool when slow.

use crate::{bindings, errors};
use async_trait::async_trait;
use queuebox_jsonata::{Bindings, Expression, Limits};
use queuebox_ports::transform::{
    CompiledTransform, TransformContext, TransformError, TransformErrorKind, TransformLimits,
    TransformOutput, Transformer,
};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::Semaphore;

/// How long an evaluation may run on the calling task before it moves to the blocking pool.
pub const DEFAULT_INLINE_BUDGET: Duration = Duration::from_millis(1);

/// The [`Transformer`] over `queuebox_jsonata`.
#[derive(Debug, Clone)]
pub struct JsonataTransformer {
    inline_budget: Duration,
    slow_lane: Arc<Semaphore>,
    slow_lane_width: usize,
}

impl JsonataTransformer {
    /// A transformer with the default inline budget and one slow evaluation per core (at least
    /// two) at a time.
    pub fn new() -> Self {
        let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
        Self::with_budget(DEFAULT_INLINE_BUDGET, cores.max(2))
    }

    /// A transformer whose evaluations run inline for at most `inline_budget`, with at most
    /// `slow_lane_width` (at least one) evaluations on the blocking pool at a time.
    pub fn with_budget(inline_budget: Duration, slow_lane_width: usize) -> Self {
        let slow_lane_width = slow_lane_width.max(1);
        Self {
            inline_budget,
            slow_lane: Arc::new(Semaphore::new(slow_lane_width)),
            slow_lane_width,
        }
    }

    /// How many slow evaluations may run on the blocking pool at once.
    pub fn slow_lane_width(&self) -> usize {
        self.slow_lane_width
    }

    /// [`Transformer::compile`] with the concrete type, for callers that do not need the port.
    ///
    /// # Errors
    /// A compile error naming the problem and its position.
    pub fn compile_jsonata(
        &self,
        expression: &str,
        limits: TransformLimits,
    ) -> Result<JsonataTransform, TransformError> {
        let compiled = Expression::compile(expression).map_err(|e| errors::compile(&e))?;
        Ok(JsonataTransform {
            expression: compiled,
            limits,
            inline_budget: self.inline_budget,
            slow_lane: Arc::clone(&self.slow_lane),
        })
    }
}

impl Default for JsonataTransformer {
    fn default() -> Self {
        Self::new()
    }
}

impl Transformer for JsonataTransformer {
    fn compile(
        &self,
        expression: &str,
        limits: TransformLimits,
    ) -> Result<Arc<dyn CompiledTransform>, TransformError> {
        Ok(Arc::new(self.compile_jsonata(expression, limits)?))
    }
}

/// One compiled expression with its limits.
#[derive(Debug, Clone)]
pub struct JsonataTransform {
    expression: Expression,
    limits: TransformLimits,
    inline_budget: Duration,
    slow_lane: Arc<Semaphore>,
}

impl JsonataTransform {
    /// The engine limits of one run that may take `timeout`.
    fn engine_limits(&self, timeout: Duration) -> Limits {
        Limits {
            timeout,
            max_depth: self.limits.max_depth as usize,
            ..Limits::default()
        }
    }

    fn finish(
        &self,
        result: Result<Option<String>, queuebox_jsonata::Error>,
    ) -> Result<TransformOutput, TransformError> {
        match result {
            Ok(Some(text)) => Ok(TransformOutput::Json(text)),
            Ok(None) => Ok(TransformOutput::Undefined),
            Err(e) => Err(errors::evaluation(&e, &self.limits)),
        }
    }

    /// The second run, off the async worker, with what is left of the timeout.
    async fn run_slow(
        &self,
        payload: &str,
        bindings: Bindings,
        spent: Duration,
    ) -> Result<TransformOutput, TransformError> {
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            // No tokio runtime, so no worker thread to protect: finish here.
            let limits = self.engine_limits(self.limits.timeout.saturating_sub(spent));
            return self.finish(self.expression.evaluate_json(payload, &bindings, &limits));
        };
        let _permit = self.slow_lane.acquire().await.map_err(|_| {
            TransformError::new(TransformErrorKind::Evaluation, "transformer closed")
        })?;
        let remaining = self.limits.timeout.saturating_sub(spent);
        if remaining.is_zero() {
            return Err(errors::timeout(&self.limits));
        }
        let limits = self.engine_limits(remaining);
        let expression = self.expression.clone();
        let payload = payload.to_owned();
        let result = runtime
            .spawn_blocking(move || expression.evaluate_json(&payload, &bindings, &limits))
            .await
            .map_err(|e| {
                TransformError::new(
                    TransformErrorKind::Evaluation,
                    format!("the evaluation thread failed: {e}"),
                )
            })?;
        self.finish(result)
    }
}

#[async_trait]
impl CompiledTransform for JsonataTransform {
    fn expression(&self) -> &str {
        self.expression.source()
    }

    fn limits(&self) -> TransformLimits {
        self.limits
    }

    async fn apply(
        &self,
        payload: &str,
        context: &TransformContext,
    ) -> Result<TransformOutput, TransformError> {
        let bindings = bindings::of(context);
        if self.limits.timeout <= self.inline_budget {
            let limits = self.engine_limits(self.limits.timeout);
            return self.finish(self.expression.evaluate_json(payload, &bindings, &limits));
        }
        let started = Instant::now();
        let inline = self.engine_limits(self.inline_budget);
        match self.expression.evaluate_json(payload, &bindings, &inline) {
            Err(e) if e.is_timeout() => self.run_slow(payload, bindings, started.elapsed()).await,
            result => self.finish(result),
        }
    }
}
