//! The TLS crypto provider for `amqps` URLs.
//!
//! lapin is built with rustls and the `ring` provider (no aws-lc C build). rustls needs a
//! process-wide default provider before the first TLS connection; installing it is idempotent
//! here, and a provider that another part of the binary installed first stays.

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
