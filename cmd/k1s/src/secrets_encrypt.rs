//! `k1s secrets-encrypt status|enable|disable|prepare|rotate|reencrypt|rotate-keys`: argument
//! parsing and printing only; the running server does the work (`k1s_server::secrets_encrypt`).

use anyhow::{Context, Result};
use clap::{Args, Subcommand, ValueEnum};
use k1s_server::secrets_encrypt::{Answer, Request, Status};
use std::path::PathBuf;

#[derive(Args, Debug)]
pub struct SecretsEncryptArgs {
    #[command(subcommand)]
    command: SecretsEncryptCommand,
    /// (data) Folder holding the server's state.
    #[arg(long, short = 'd', env = "K1S_DATA_DIR", default_value = "/var/lib/k1s", global = true)]
    data_dir: PathBuf,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
enum Output {
    Text,
    Json,
}

#[derive(Subcommand, Debug)]
enum SecretsEncryptCommand {
    /// Print current status of secrets encryption.
    Status {
        /// Status format.
        #[arg(long, short = 'o', value_enum, default_value = "text")]
        output: Output,
    },
    /// Enable secrets encryption (new writes encrypted; every Secret rewritten encrypted).
    Enable,
    /// Disable secrets encryption (new writes in plain text; every Secret rewritten so).
    Disable,
    /// Prepare for encryption keys rotation: add a new key, not used yet.
    Prepare {
        /// Force this stage.
        #[arg(long, short = 'f')]
        force: bool,
    },
    /// Rotate secrets encryption keys: the prepared key encrypts from now on.
    Rotate {
        /// Force this stage.
        #[arg(long, short = 'f')]
        force: bool,
    },
    /// Reencrypt all data with the encryption key now first, then remove the rotated-out key.
    Reencrypt {
        /// Force this stage.
        #[arg(long, short = 'f')]
        force: bool,
        /// Skip removing old key.
        #[arg(long, short = 's')]
        skip: bool,
    },
    /// Add a key, rotate to it and reencrypt every Secret, in one step.
    RotateKeys,
}

pub fn run(args: SecretsEncryptArgs) -> Result<()> {
    let (req, output) = match args.command {
        SecretsEncryptCommand::Status { output } => (Request::Status, Some(output)),
        SecretsEncryptCommand::Enable => (Request::Enable, None),
        SecretsEncryptCommand::Disable => (Request::Disable, None),
        SecretsEncryptCommand::Prepare { force } => (Request::Prepare { force }, None),
        SecretsEncryptCommand::Rotate { force } => (Request::Rotate { force }, None),
        SecretsEncryptCommand::Reencrypt { force, skip } => (Request::Reencrypt { force, skip }, None),
        SecretsEncryptCommand::RotateKeys => (Request::RotateKeys, None),
    };
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().context("starting the runtime")?;
    let answer = rt.block_on(k1s_server::secrets_encrypt::request(&args.data_dir, &req)).context("secrets-encrypt")?;
    match answer {
        Answer::Done(message) => println!("{message}"),
        Answer::Status(status) => match output {
            Some(Output::Json) => println!("{}", serde_json::to_string_pretty(&status)?),
            _ => print!("{}", status_text(&status)),
        },
    }
    Ok(())
}

/// `status` as k3s prints it.
fn status_text(s: &Status) -> String {
    let Some(enabled) = s.enable else {
        return "Encryption Status: Disabled, no configuration file found\n".to_string();
    };
    let mut out = format!("Encryption Status: {}\n", if enabled { "Enabled" } else { "Disabled" });
    out.push_str(&format!("Current Rotation Stage: {}\n", s.stage));
    if s.hash_match {
        out.push_str("Server Encryption Hashes: All hashes match\n");
    } else {
        out.push_str(&format!("Server Encryption Hashes: {}\n", s.hash_error));
    }
    if !s.config_file.is_empty() {
        out.push_str(&format!("Configuration: {} ({})\n", s.config_file, s.resources.join(", ")));
    }
    let split = |k: &str| match k.split_once(' ') {
        Some((t, n)) => (t.to_string(), n.to_string()),
        None => (String::new(), k.to_string()),
    };
    let mut rows = vec![("Active".to_string(), "Key Type".to_string(), "Name".to_string())];
    rows.push(("------".into(), "--------".into(), "----".into()));
    if !s.active_key.is_empty() {
        let (t, n) = split(&s.active_key);
        rows.push((" *".into(), t, n));
    }
    for k in &s.inactive_keys {
        let (t, n) = split(k);
        rows.push((String::new(), t, n));
    }
    let w0 = rows.iter().map(|r| r.0.len()).max().unwrap_or(0) + 2;
    let w1 = rows.iter().map(|r| r.1.len()).max().unwrap_or(0) + 2;
    out.push('\n');
    for (a, t, n) in rows {
        out.push_str(&format!("{a:<w0$}{t:<w1$}{n}\n"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_is_printed_as_k3s_prints_it() {
        let s = Status {
            enable: Some(true),
            stage: "prepare".into(),
            active_key: "AES-CBC aescbckey".into(),
            inactive_keys: vec!["AES-CBC aescbckey-2026-12-07T10:00:00Z".into()],
            hash_match: true,
            ..Status::default()
        };
        assert_eq!(
            status_text(&s),
            "Encryption Status: Enabled\nCurrent Rotation Stage: prepare\nServer Encryption Hashes: All hashes match\n\n\
             Active  Key Type  Name\n------  --------  ----\n *      AES-CBC   aescbckey\n        AES-CBC   aescbckey-2026-12-07T10:00:00Z\n"
        );
        assert_eq!(status_text(&Status::default()), "Encryption Status: Disabled, no configuration file found\n");
    }
}
