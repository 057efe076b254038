//! Compiles every configured `transform` block at start, so a bad expression stops the start
//! with its key path instead of failing messages later.

use anyhow::bail;
use queuebox_application::transform::StageTransform;
use queuebox_config::{OnError, Settings, Transform};
use queuebox_ports::transform::{ErrorStrategy, TransformLimits, Transformer};
use queuebox_transform::JsonataTransformer;
use std::collections::HashMap;

/// The compiled transforms of the three stages.
#[derive(Debug, Default)]
pub struct Transforms {
    /// `sources.<name>.transform`, by source name.
    pub sources: HashMap<String, StageTransform>,
    /// `routes[i].transform`, entry `i` for route `i`.
    pub routes: Vec<Option<StageTransform>>,
    /// `destinations.<name>.transform`, by destination name.
    pub destinations: HashMap<String, StageTransform>,
}

/// Compiles every expression of `settings` with one shared transformer.
///
/// # Errors
/// Every expression that does not compile, one line each, named by its key path.
pub fn compile(settings: &Settings) -> anyhow::Result<Transforms> {
    let transformer = JsonataTransformer::new();
    let mut problems = Vec::new();
    let mut compiled = Transforms::default();
    let mut one = |key_path: String, block: &Transform| -> Option<StageTransform> {
        let limits = TransformLimits {
            timeout: block.timeout,
            max_depth: block.max_depth,
        };
        match transformer.compile(&block.expression, limits) {
            Ok(expression) => Some(StageTransform::new(
                expression,
                strategy(block.on_error),
                key_path,
            )),
            Err(error) => {
                problems.push(format!(
                    "{key_path}.expression: the JSONata expression does not compile: {error}"
                ));
                None
            }
        }
    };
    for (name, source) in &settings.sources {
        if let Some(block) = &source.transform
            && let Some(t) = one(format!("sources.{name}.transform"), block)
        {
            compiled.sources.insert(name.clone(), t);
        }
    }
    for (index, route) in settings.routes.iter().enumerate() {
        let t = route
            .transform
            .as_ref()
            .and_then(|block| one(format!("routes[{index}].transform"), block));
        compiled.routes.push(t);
    }
    for (name, destination) in &settings.destinations {
        if let Some(block) = &destination.transform
            && let Some(t) = one(format!("destinations.{name}.transform"), block)
        {
            compiled.destinations.insert(name.clone(), t);
        }
    }
    if !problems.is_empty() {
        bail!("{}", problems.join("\n"));
    }
    Ok(compiled)
}

fn strategy(on_error: OnError) -> ErrorStrategy {
    match on_error {
        OnError::Fail => ErrorStrategy::Fail,
        OnError::Skip => ErrorStrategy::Skip,
        OnError::Dead => ErrorStrategy::Dead,
    }
}
