//! Reading an admin request body: a JSON object whose known fields are read one by one, so a wrong
//! field is named in the answer and an unknown field is ignored.

use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

/// The body as a JSON object, or the reason (without the `Invalid request: ` prefix) it is not one.
pub(crate) fn object(body: &[u8]) -> Result<Map<String, Value>, String> {
    match serde_json::from_slice::<Value>(body) {
        Ok(Value::Object(fields)) => Ok(fields),
        Ok(_) => Err("the body must be a JSON object".to_owned()),
        Err(error) => Err(format!("the body is not JSON: {error}")),
    }
}

/// The field `name` as `T`; `None` when it is absent or null. The error names the field.
pub(crate) fn field<T: DeserializeOwned>(
    fields: &Map<String, Value>,
    name: &str,
) -> Result<Option<T>, String> {
    match fields.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(value) => T::deserialize(value)
            .map(Some)
            .map_err(|error| format!("{name}: {error}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_body_that_is_not_an_object_is_refused() {
        assert!(object(b"[1]").is_err());
        assert!(object(b"not json").is_err_and(|e| e.starts_with("the body is not JSON")));
        assert!(object(br#"{"a":1}"#).is_ok());
    }

    #[test]
    fn a_field_of_the_wrong_type_is_named() {
        let fields = object(br#"{"topic": 5, "ids": null}"#).expect("object");
        let error = field::<String>(&fields, "topic").expect_err("wrong type");
        assert!(error.starts_with("topic: invalid type"), "{error}");
        assert_eq!(field::<Vec<String>>(&fields, "ids"), Ok(None));
        assert_eq!(field::<String>(&fields, "absent"), Ok(None));
    }
}
