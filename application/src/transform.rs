//! A configured transform as every stage uses it: the compiled expression, its `onError`
//! strategy, and the key path that names it in logs and errors. What a failure means for the
//! message differs per stage, so this only runs the expression and reports; the ingest pipeline
//! and the dispatcher decide.

use queuebox_ports::transform::{
    CompiledTransform, ErrorStrategy, TransformContext, TransformError,
};
use std::sync::Arc;

/// One `transform` block, compiled at start.
#[derive(Debug, Clone)]
pub struct StageTransform {
    compiled: Arc<dyn CompiledTransform>,
    strategy: ErrorStrategy,
    key_path: String,
}

impl StageTransform {
    /// `compiled` with its `onError` strategy; `key_path` names the block, for example
    /// `routes[0].transform`.
    pub fn new(
        compiled: Arc<dyn CompiledTransform>,
        strategy: ErrorStrategy,
        key_path: impl Into<String>,
    ) -> Self {
        Self {
            compiled,
            strategy,
            key_path: key_path.into(),
        }
    }

    /// The `onError` strategy.
    pub fn strategy(&self) -> ErrorStrategy {
        self.strategy
    }

    /// The configuration key path of the block.
    pub fn key_path(&self) -> &str {
        &self.key_path
    }

    /// The payload (JSON text) the expression makes of `input`. An undefined result is an error
    /// like any other failure: there is no document to store or send.
    pub(crate) async fn apply(
        &self,
        input: &str,
        context: &TransformContext,
    ) -> Result<String, TransformError> {
        self.compiled.apply(input, context).await?.into_payload()
    }
}

#[cfg(test)]
pub(crate) mod mock {
    //! A mocked compiled transform for the stage tests.
    use async_trait::async_trait;
    use mockall::mock;
    use queuebox_ports::transform::{
        CompiledTransform, ErrorStrategy, TransformContext, TransformError, TransformLimits,
        TransformOutput,
    };
    use std::sync::Arc;

    mock! {
        pub Transform {}
        #[async_trait]
        impl CompiledTransform for Transform {
            fn expression(&self) -> &str;
            fn limits(&self) -> TransformLimits;
            async fn apply(
                &self,
                payload: &str,
                context: &TransformContext,
            ) -> Result<TransformOutput, TransformError>;
        }
    }

    impl std::fmt::Debug for MockTransform {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("MockTransform")
        }
    }

    /// A stage whose expression answers `f(payload, context)`.
    pub(crate) fn stage(
        strategy: ErrorStrategy,
        key_path: &str,
        f: impl Fn(&str, &TransformContext) -> Result<TransformOutput, TransformError>
        + Send
        + Sync
        + 'static,
    ) -> super::StageTransform {
        let mut mock = MockTransform::new();
        mock.expect_apply().returning(move |p, c| f(p, c));
        super::StageTransform::new(Arc::new(mock), strategy, key_path)
    }
}
