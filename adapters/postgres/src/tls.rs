//! The TLS crypto provider of the database connections.
//!
//! sqlx picks `ring` for its own TLS configuration, but a CA-only check (`sslmode=verify-ca`) builds
//! a rustls verifier that asks for the process-wide default provider, and the workspace compiles
//! more than one provider, so none is chosen by itself: without this the process panicked on the
//! first such connection. Installing is idempotent, and a provider another part of the binary
//! installed first stays.

use std::sync::Once;

static INSTALL: Once = Once::new();

/// Makes sure a rustls crypto provider is installed for this process.
pub(crate) fn ensure_crypto_provider() {
    INSTALL.call_once(|| {
        if rustls::crypto::CryptoProvider::get_default().is_none() {
            // An Err means another thread installed one in between: that provider serves as well.
            let _ = rustls::crypto::ring::default_provider().install_default();
        }
    });
}
