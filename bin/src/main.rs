//! The `queuebox` binary: parse the command line, load the configuration, run the subcommand, and
//! turn any start failure into a short error on stderr and a non-zero exit status.

use clap::Parser as _;
use queuebox::cli::{Cli, Command};
use queuebox::{backends, database, logging, serve, signals, telemetry, tracing_export};
use std::process::ExitCode;

// mimalloc instead of the system allocator: in a profile of an outbox drain, glibc's malloc and free
// took about a fifth of the process's CPU (many small, short-lived allocations per HTTP request).
// The measured effect is in bench/RESULTS.md and the reason in features.md.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    let cli = Cli::parse();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("queuebox: cannot start the async runtime: {error}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(cli)) {
        Ok(code) => code,
        Err(error) => {
            print_error(&error);
            ExitCode::FAILURE
        }
    }
}

/// Prints an error and its causes, one per line, so the reason fits on one screen.
fn print_error(error: &anyhow::Error) {
    eprintln!("queuebox: {error}");
    for cause in error.chain().skip(1) {
        eprintln!("  caused by: {cause}");
    }
}

async fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    let request = queuebox_config::LoadRequest {
        env: std::env::vars_os()
            .filter_map(|(name, value)| Some((name.into_string().ok()?, value.into_string().ok()?)))
            .collect(),
        config_file: cli.config.clone(),
    };
    let command = cli.command.unwrap_or(Command::Serve);
    let loaded = match queuebox_config::load(&request) {
        Ok(loaded) => loaded,
        Err(error) => {
            eprintln!("queuebox: the configuration is not valid:\n{error}");
            return Ok(ExitCode::FAILURE);
        }
    };
    // Logging starts once the configuration is read: trace export (serve only) is configured there,
    // after the metrics recorder, which counts the spans export drops.
    let mut metrics = None;
    let export = match command {
        Command::Serve => {
            metrics = Some(telemetry::install()?);
            match tracing_export::start(&loaded.settings.telemetry.tracing, &request.env) {
                Ok(Some((export, tracing))) => {
                    logging::init(cli.log_format, Some(tracing));
                    Some(export)
                }
                Ok(None) => {
                    logging::init(cli.log_format, None);
                    None
                }
                Err(error) => {
                    eprintln!("queuebox: trace export (telemetry.tracing) cannot start: {error}");
                    return Ok(ExitCode::FAILURE);
                }
            }
        }
        _ => {
            logging::init(cli.log_format, None);
            None
        }
    };
    for warning in &loaded.warnings {
        tracing::warn!("{warning}");
    }
    if let Err(missing) = backends::check(&loaded.settings) {
        eprintln!("queuebox: the configuration needs support this binary does not have:");
        for line in missing {
            eprintln!("  {line}");
        }
        return Ok(ExitCode::FAILURE);
    }

    // Every transform compiles before any command runs, so `check-config` reports a bad
    // expression too; `serve` compiles them again for its own use.
    if let Err(error) = queuebox::transforms::compile(&loaded.settings) {
        eprintln!("queuebox: the configuration is not valid:\n{error}");
        return Ok(ExitCode::FAILURE);
    }

    match command {
        Command::CheckConfig => {
            eprintln!("queuebox: the configuration is valid ({})", loaded.origin);
            print!("{}", queuebox_config::render_effective(&loaded.settings));
            Ok(ExitCode::SUCCESS)
        }
        Command::Migrate => {
            let mut options = loaded.settings.database_options();
            options.migrate = true;
            let db = database::connect(&options).await?;
            database::prepare(db.as_ref()).await?;
            db.close().await;
            tracing::info!("migrations applied");
            Ok(ExitCode::SUCCESS)
        }
        Command::Serve => {
            let metrics = match metrics {
                Some(metrics) => metrics,
                None => telemetry::install()?,
            };
            let listeners = serve::bind(&loaded.settings).await?;
            let served =
                serve::run(loaded.settings, listeners, metrics, signals::terminate()).await;
            if let Some(export) = export {
                // The export thread blocks while it sends the last spans.
                let _ = tokio::task::spawn_blocking(move || export.shutdown()).await;
            }
            served?;
            Ok(ExitCode::SUCCESS)
        }
    }
}
