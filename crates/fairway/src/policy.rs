//! `fairway policy check|get|put`: validate a policy file locally, read or replace the
//! server's.
//!
//! `check` needs no server: it runs the engine's own validation (`Policy::from_text`), so a
//! file that passes here is one the server accepts. Each error prints as
//! `FILE:LINE: key `k`: message`, the form editors and CI logs link to.

use crate::client_cmds::{
    EXIT_BAD_INPUT, EXIT_CODES, EXIT_OK, EXIT_RUNTIME, ServerArgs, block_on, fail, print_json,
    print_out,
};
use clap::{Args, Subcommand};
use fairway_client::Error;
use fairway_core::Policy;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// Options of `fairway policy`.
#[derive(Args, Debug)]
pub struct PolicyArgs {
    #[command(subcommand)]
    pub command: PolicyCommand,
}

/// The `policy` subcommands.
#[derive(Subcommand, Debug)]
pub enum PolicyCommand {
    /// Validate a policy file locally (no server needed); print every error as
    /// FILE:LINE: key `k`: message.
    #[command(after_help = "\
Exit codes:
  0  the policy is valid
  1  the policy has errors (each printed on stderr)
  2  the file cannot be read")]
    Check {
        /// The policy file (TOML).
        file: PathBuf,
    },
    /// Print the server's policy: its TOML text on stdout, its version on stderr.
    #[command(after_help = EXIT_CODES)]
    Get {
        #[command(flatten)]
        server: ServerArgs,
        /// Print the reply `{version, policy}` as JSON instead.
        #[arg(long)]
        json: bool,
    },
    /// Replace the server's policy with FILE (needs the admin token when the server has a
    /// token file); prints the new version. A refused policy prints its errors as
    /// FILE:LINE: ..., exits 2, and the prior version stays in force.
    #[command(after_help = EXIT_CODES)]
    Put {
        /// The policy file (TOML).
        file: PathBuf,
        #[command(flatten)]
        server: ServerArgs,
    },
}

/// Runs a `policy` subcommand.
pub fn run(args: PolicyArgs) -> ExitCode {
    match args.command {
        PolicyCommand::Check { file } => check(&file),
        PolicyCommand::Get { server, json } => get(&server, json),
        PolicyCommand::Put { file, server } => put(&file, &server),
    }
}

/// One error as `FILE:LINE: key `k`: message` (line and key when known).
fn located(file: &Path, line: Option<usize>, key: Option<&str>, message: &str) -> String {
    let mut text = file.display().to_string();
    if let Some(line) = line {
        text.push_str(&format!(":{line}"));
    }
    text.push_str(": ");
    if let Some(key) = key {
        text.push_str(&format!("key `{key}`: "));
    }
    text.push_str(message);
    text
}

fn read(file: &Path, command: &str) -> Result<String, ExitCode> {
    std::fs::read_to_string(file).map_err(|e| {
        eprintln!("fairway policy {command}: {}: {e}", file.display());
        ExitCode::from(EXIT_BAD_INPUT)
    })
}

fn check(file: &Path) -> ExitCode {
    let text = match read(file, "check") {
        Ok(text) => text,
        Err(code) => return code,
    };
    match Policy::from_text(&text) {
        Ok(policy) => {
            print_out(&format!(
                "{}: valid ({} policy, {} pools, {} classes, {} tenants declared)\n",
                file.display(),
                policy.name,
                policy.pools.len(),
                policy.classes.len(),
                policy.tenants.len()
            ));
            ExitCode::from(EXIT_OK)
        }
        Err(errors) => {
            for e in &errors {
                eprintln!("{}", located(file, e.line, e.key.as_deref(), &e.message));
            }
            // A checker's finding, not a failure to run: 1, as linters do (2 is for a file
            // that cannot be read at all).
            ExitCode::from(EXIT_RUNTIME)
        }
    }
}

fn get(server: &ServerArgs, json: bool) -> ExitCode {
    let client = match server.client() {
        Ok(client) => client,
        Err(e) => return fail("policy get", &e),
    };
    match block_on(client.get_policy()) {
        Ok(reply) if json => {
            print_json(&reply);
            ExitCode::from(EXIT_OK)
        }
        Ok(reply) => {
            let mut text = reply.policy;
            if !text.ends_with('\n') {
                text.push('\n');
            }
            print_out(&text);
            eprintln!("policy version {}", reply.version);
            ExitCode::from(EXIT_OK)
        }
        Err(e) => fail("policy get", &e),
    }
}

fn put(file: &Path, server: &ServerArgs) -> ExitCode {
    let text = match read(file, "put") {
        Ok(text) => text,
        Err(code) => return code,
    };
    let client = match server.client() {
        Ok(client) => client,
        Err(e) => return fail("policy put", &e),
    };
    match block_on(client.put_policy(text)) {
        Ok(version) => {
            print_json(&version);
            ExitCode::from(EXIT_OK)
        }
        Err(Error::InvalidPolicy { message, errors }) => {
            eprintln!("fairway policy put: the server refused the policy: {message}");
            for e in &errors {
                eprintln!("{}", located(file, e.line, e.key.as_deref(), &e.message));
            }
            ExitCode::from(EXIT_BAD_INPUT)
        }
        Err(e) => fail("policy put", &e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_name_the_file_then_line_then_key() {
        let file = Path::new("p.toml");
        assert_eq!(
            located(file, Some(3), Some("weight"), "must be positive"),
            "p.toml:3: key `weight`: must be positive"
        );
        assert_eq!(located(file, Some(3), None, "bad"), "p.toml:3: bad");
        assert_eq!(located(file, None, None, "no pool"), "p.toml: no pool");
    }
}
