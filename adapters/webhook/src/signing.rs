//! Standard Webhooks signing of outgoing requests (`signing` on an HTTP destination).
//!
//! Every request carries `webhook-id` (the outbox row id: the same on every retry, so a receiver
//! deduplicates with it), `webhook-timestamp` (this attempt's send time in Unix seconds) and
//! `webhook-signature` with one `v1,<base64>` entry per configured secret, so a receiver that
//! knows either the old or the new secret accepts the request during a rotation. The three
//! headers replace any row or static header of the same name: a receiver must see the values
//! that were signed.

use queuebox_domain::inbox::signatures::{
    BadSecret, StandardWebhooksSigner, WEBHOOK_ID, WEBHOOK_SIGNATURE, WEBHOOK_TIMESTAMP,
};
use queuebox_domain::secret::Secret;
use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use std::time::{SystemTime, UNIX_EPOCH};

/// The `signing` block of an HTTP destination.
#[derive(Debug, Clone)]
pub struct SigningOptions {
    /// `secrets`: `whsec_<base64>`, one or more.
    pub secrets: Vec<Secret>,
}

/// The signer of one destination.
#[derive(Debug, Clone)]
pub(crate) struct Signer {
    inner: StandardWebhooksSigner,
}

impl Signer {
    /// # Errors
    /// The first secret that is not a Standard Webhooks key.
    pub(crate) fn new(options: &SigningOptions) -> Result<Self, BadSecret> {
        StandardWebhooksSigner::new(&options.secrets).map(|inner| Self { inner })
    }

    /// Sets the three headers of one attempt of message `id` with `body`, sent now.
    pub(crate) fn sign(&self, headers: &mut HeaderMap, id: &str, body: &[u8]) {
        let timestamp = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|elapsed| elapsed.as_secs())
            .unwrap_or(0)
            .to_string();
        self.sign_at(headers, id, &timestamp, body);
    }

    /// [`Signer::sign`] at a given timestamp (Unix seconds as text).
    pub(crate) fn sign_at(&self, headers: &mut HeaderMap, id: &str, timestamp: &str, body: &[u8]) {
        let signature = self.inner.signature(id, timestamp, body);
        for (name, value) in [
            (WEBHOOK_ID, id),
            (WEBHOOK_TIMESTAMP, timestamp),
            (WEBHOOK_SIGNATURE, signature.as_str()),
        ] {
            // The id is a UUID, the timestamp digits and the signature base64: always valid.
            if let Ok(value) = HeaderValue::from_str(value) {
                headers.insert(HeaderName::from_static(name), value);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_headers_replace_row_headers_of_the_same_name() {
        let signer = Signer::new(&SigningOptions {
            secrets: vec![Secret::new("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")],
        })
        .expect("valid secret");
        let mut headers = HeaderMap::new();
        headers.insert("webhook-id", HeaderValue::from_static("forged"));
        signer.sign_at(
            &mut headers,
            "msg_p5jXN8AQM9LWM0D4loKWxJek",
            "1614265330",
            br#"{"test": 2432232314}"#,
        );
        assert_eq!(headers.get_all("webhook-id").iter().count(), 1);
        assert_eq!(headers["webhook-id"], "msg_p5jXN8AQM9LWM0D4loKWxJek");
        assert_eq!(headers["webhook-timestamp"], "1614265330");
        assert_eq!(
            headers["webhook-signature"],
            "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
        );
    }
}
