//! The command line: `queuebox [serve|migrate|check-config] [--config PATH] [--log-format text|json]`.

use clap::{Parser, Subcommand, ValueEnum};
use std::path::PathBuf;

/// QueueBox: a transactional outbox and an idempotent inbox in one process.
#[derive(Debug, Parser)]
#[command(name = "queuebox", version, about)]
pub struct Cli {
    /// The configuration file. Wins over QUEUEBOX_CONFIG_FILE (default /etc/queuebox/queuebox.yml).
    #[arg(long, global = true, value_name = "PATH")]
    pub config: Option<PathBuf>,

    /// The log line format. The level comes from RUST_LOG (default `info`).
    #[arg(
        long,
        global = true,
        value_enum,
        env = "QB_LOG_FORMAT",
        default_value = "text"
    )]
    pub log_format: LogFormat,

    /// What to do; `serve` when omitted.
    #[command(subcommand)]
    pub command: Option<Command>,
}

/// The subcommands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Subcommand)]
pub enum Command {
    /// Run the service (the default).
    Serve,
    /// Apply the database migrations and exit.
    Migrate,
    /// Load and validate the configuration, print it with every secret masked, and exit 0 or 1.
    CheckConfig,
}

/// How log lines are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    /// Human-readable text.
    Text,
    /// One JSON object per line.
    Json,
}
