//! `fairway`: the server, command-line client, worker runner and simulator in one binary.
//!
//! Exit codes (a contract, as ripgrep's): 0 success; 1 a runtime failure (the server could not
//! start, a request failed); 2 bad input (a malformed file, an unknown option, an invalid
//! argument). Subcommands document any code of their own.

mod sim;

use clap::{Parser, Subcommand};
use std::process::ExitCode;

/// Fairway: a multi-tenant scheduler for durable work.
#[derive(Parser)]
#[command(name = "fairway", version, about, propagate_version = true)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run a scenario (or an SWF trace) through the engine on a simulated clock.
    Sim(sim::SimArgs),
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let code = if e.use_stderr() { 2 } else { 0 };
            let _ = e.print();
            return ExitCode::from(code);
        }
    };
    match cli.command {
        Command::Sim(args) => sim::run(args),
    }
}
