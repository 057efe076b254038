//! The librdkafka settings every client of this crate shares: the brokers, the security keys and
//! the client id, checked before librdkafka sees them so a mistake names the configuration key.

use crate::error::KafkaError;
use crate::options::KafkaConnection;
use queuebox_domain::redact::Redactor;
use rdkafka::config::{ClientConfig, RDKafkaLogLevel};

/// The SASL mechanisms this build supports: librdkafka's built-in ones (GSSAPI needs Cyrus SASL,
/// and OAUTHBEARER a token provider; neither is built in).
pub const SASL_MECHANISMS: [&str; 3] = ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"];

/// The librdkafka settings of `connection`, for the entry `owner` ("destination `x`" or
/// "source `x`").
///
/// # Errors
/// [`KafkaError::InvalidSetting`] naming the key: no broker, a `SASL_` protocol without its
/// mechanism, user name or password, or a mechanism this build does not support.
pub(crate) fn client_config(
    owner: &str,
    connection: &KafkaConnection,
) -> Result<ClientConfig, KafkaError> {
    let invalid = |what: String| KafkaError::InvalidSetting {
        owner: owner.to_owned(),
        what,
    };
    let servers: Vec<&str> = connection
        .bootstrap_servers
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .collect();
    if servers.is_empty() {
        return Err(invalid("bootstrapServers names no broker".to_owned()));
    }
    for server in &servers {
        if !server.contains(':') {
            return Err(invalid(format!(
                "bootstrapServers: `{server}` is not host:port"
            )));
        }
    }
    let mut config = ClientConfig::new();
    config
        .set("bootstrap.servers", servers.join(","))
        .set(
            "security.protocol",
            connection.security_protocol.as_str().to_ascii_lowercase(),
        )
        // librdkafka's own log lines reach the context's `log`, which turns them into tracing
        // events; warnings and worse are enough (the rest is per-request chatter).
        .set_log_level(RDKafkaLogLevel::Warning);
    if let Some(client_id) = &connection.client_id {
        config.set("client.id", client_id);
    }
    if connection.security_protocol.is_sasl() {
        let mechanism = connection.sasl_mechanism.as_deref().ok_or_else(|| {
            invalid("saslMechanism is required by a SASL_ securityProtocol".into())
        })?;
        let mechanism = mechanism.trim().to_ascii_uppercase();
        if !SASL_MECHANISMS.contains(&mechanism.as_str()) {
            return Err(invalid(format!(
                "saslMechanism `{mechanism}` is not supported; use one of {}",
                SASL_MECHANISMS.join(", ")
            )));
        }
        let username = connection.sasl_username.as_deref().ok_or_else(|| {
            invalid("saslUsername is required by a SASL_ securityProtocol".into())
        })?;
        let password = connection.sasl_password.as_ref().ok_or_else(|| {
            invalid("saslPassword is required by a SASL_ securityProtocol".into())
        })?;
        config
            .set("sasl.mechanism", mechanism)
            .set("sasl.username", username)
            .set("sasl.password", password.expose());
    }
    Ok(config)
}

/// A redactor for the reasons of a client of `connection`: the SASL password is masked.
pub(crate) fn redactor(connection: &KafkaConnection, max_bytes: usize) -> Redactor {
    let redactor = Redactor::new(max_bytes.max(64));
    match &connection.sasl_password {
        Some(password) if !password.is_empty() => redactor.with_secret(password.expose()),
        _ => redactor,
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::options::SecurityProtocol;
    use queuebox_domain::secret::Secret;

    fn connection(servers: &str) -> KafkaConnection {
        KafkaConnection {
            bootstrap_servers: servers.to_owned(),
            ..KafkaConnection::default()
        }
    }

    #[test]
    fn brokers_are_trimmed_and_joined() {
        let config = client_config("destination `d`", &connection(" a:9092 , b:9093,")).unwrap();
        assert_eq!(config.get("bootstrap.servers"), Some("a:9092,b:9093"));
        assert_eq!(config.get("security.protocol"), Some("plaintext"));
    }

    #[test]
    fn a_missing_broker_or_port_is_named() {
        let error = client_config("source `s`", &connection(" , ")).unwrap_err();
        assert_eq!(
            error.to_string(),
            "source `s`: bootstrapServers names no broker"
        );
        let error = client_config("source `s`", &connection("kafka")).unwrap_err();
        assert_eq!(
            error.to_string(),
            "source `s`: bootstrapServers: `kafka` is not host:port"
        );
    }

    #[test]
    fn sasl_needs_a_supported_mechanism_a_user_and_a_password() {
        let mut sasl = connection("a:9092");
        sasl.security_protocol = SecurityProtocol::SaslSsl;
        let error = client_config("destination `d`", &sasl).unwrap_err();
        assert!(
            error.to_string().contains("saslMechanism is required"),
            "{error}"
        );
        sasl.sasl_mechanism = Some("GSSAPI".into());
        let error = client_config("destination `d`", &sasl).unwrap_err();
        assert!(
            error.to_string().contains("`GSSAPI` is not supported"),
            "{error}"
        );
        sasl.sasl_mechanism = Some("scram-sha-512".into());
        let error = client_config("destination `d`", &sasl).unwrap_err();
        assert!(
            error.to_string().contains("saslUsername is required"),
            "{error}"
        );
        sasl.sasl_username = Some("app".into());
        let error = client_config("destination `d`", &sasl).unwrap_err();
        assert!(
            error.to_string().contains("saslPassword is required"),
            "{error}"
        );
        sasl.sasl_password = Some(Secret::new("hunter2"));
        let config = client_config("destination `d`", &sasl).unwrap();
        assert_eq!(config.get("sasl.mechanism"), Some("SCRAM-SHA-512"));
        assert_eq!(config.get("security.protocol"), Some("sasl_ssl"));
        assert!(
            !redactor(&sasl, 100)
                .redact("pw hunter2")
                .contains("hunter2")
        );
    }
}
