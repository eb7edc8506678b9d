//! `fairway`: the server, command-line client, worker runner and simulator in one binary.
//!
//! Exit codes (a contract, as ripgrep's): 0 success; 1 a runtime failure (the server could not
//! start, a request failed); 2 bad input (a malformed file, an unknown option, an invalid
//! argument). Subcommands document any code of their own; the client commands (`submit`,
//! `status`, `cancel`, `explain`, `top`, `policy`, `worker`) add 3 rejected retryably, 4 rejected for good,
//! 5 not found (see `client_cmds`).

mod bench;
mod bench_e2e;
mod client_cmds;
mod memory;
mod observe_cmds;
mod policy;
mod serve;
mod sim;
mod vopr;
mod worker;

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
    /// Run the durable server: HTTP API v1 on the embedded store.
    Serve(serve::ServeArgs),
    /// Run a scenario (or an SWF trace) through the engine on a simulated clock.
    Sim(sim::SimArgs),
    /// Submit a job to a server; prints the outcome as JSON.
    Submit(client_cmds::SubmitArgs),
    /// Print a job's state as JSON.
    Status(client_cmds::StatusArgs),
    /// Cancel a job; a running attempt is told to stop.
    Cancel(client_cmds::CancelArgs),
    /// Explain why a job is (not) running: its waiting reasons, workers, decisions.
    Explain(observe_cmds::ExplainArgs),
    /// A live view of tenants against their share, bands and workers (admin).
    Top(observe_cmds::TopArgs),
    /// Check a policy file locally, or get or replace the server's policy.
    Policy(policy::PolicyArgs),
    /// Run jobs from a server through a command: lease, run, heartbeat, complete.
    Worker(worker::WorkerArgs),
    /// Measure the engine (cost per dispatch decision, memory per queued job) and the server
    /// (peer scenarios end to end, memory, restart).
    Bench(bench::BenchArgs),
    /// The deterministic simulation of the server loop with injected faults, over many seeds.
    Vopr(vopr::VoprArgs),
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
        Command::Serve(args) => serve::run(args),
        Command::Sim(args) => sim::run(args),
        Command::Submit(args) => client_cmds::submit(args),
        Command::Status(args) => client_cmds::status(args),
        Command::Cancel(args) => client_cmds::cancel(args),
        Command::Explain(args) => observe_cmds::explain(args),
        Command::Top(args) => observe_cmds::top(args),
        Command::Policy(args) => policy::run(args),
        Command::Worker(args) => worker::run(args),
        Command::Bench(args) => bench::run(args),
        Command::Vopr(args) => vopr::run(args),
    }
}
