//! Waiting for SIGTERM or SIGINT.

/// Completes on the first SIGTERM or SIGINT (Ctrl-C).
pub async fn terminate() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        match signal(SignalKind::terminate()) {
            Ok(mut sigterm) => {
                tokio::select! {
                    _ = sigterm.recv() => tracing::info!("SIGTERM received; stopping"),
                    _ = tokio::signal::ctrl_c() => tracing::info!("SIGINT received; stopping"),
                }
            }
            Err(error) => {
                tracing::warn!(%error, "cannot listen for SIGTERM; only SIGINT stops the process");
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
        tracing::info!("Ctrl-C received; stopping");
    }
}
