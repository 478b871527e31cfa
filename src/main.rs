//! `interview-runtime`: reads settings, starts the server, runs until SIGTERM.
#![forbid(unsafe_code)]

use clap::Parser;
use interview_runtime::settings::{Overrides, Settings};
use interview_runtime::{telemetry, Application};

#[tokio::main]
async fn main() -> std::process::ExitCode {
    let mut overrides = Overrides::parse();
    let command = overrides.command.take();
    let settings = match Settings::load(overrides) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("error: {e}");
            return std::process::ExitCode::from(2);
        }
    };
    // `researchers …`: on the server's database, then exit.
    if let Some(command) = command {
        let database_url = settings.effective_database_url();
        return match interview_runtime::access::cli::run(command, &database_url).await {
            Ok(()) => std::process::ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("error: {e}");
                std::process::ExitCode::FAILURE
            }
        };
    }
    // Kept until exit: dropping it sends the traces still buffered.
    let _traces = telemetry::init_with(settings.log_format, settings.otlp_endpoint.as_deref());
    let app = match Application::build(settings).await {
        Ok(app) => app,
        Err(e) => {
            tracing::error!(error = %e, "cannot start");
            return std::process::ExitCode::FAILURE;
        }
    };
    match app.run_until_stopped().await {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!(error = %e, "server error");
            std::process::ExitCode::FAILURE
        }
    }
}
