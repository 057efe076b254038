//! The TLS crypto provider of the HTTP client.
//!
//! reqwest is built with `rustls-no-provider` so the workspace compiles `ring` instead of aws-lc (a
//! C and cmake build that dominates a cold compile). rustls then needs a process-wide default
//! provider before the first client is built; installing it is idempotent here, and when another
//! part of the binary installed a provider first, that one stays.

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
