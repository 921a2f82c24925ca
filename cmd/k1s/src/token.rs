//! `k1s token create`: the token other servers join this server's cluster with.

use anyhow::{Context, Result};
use clap::{Args, Subcommand};
use std::path::PathBuf;

#[derive(Args, Debug)]
pub struct TokenArgs {
    #[command(subcommand)]
    command: TokenCommand,
}

#[derive(Subcommand, Debug)]
enum TokenCommand {
    /// Print the server join token (`K10<ca-hash>::server:<secret>`), for `k1s server --server
    /// https://THIS:6443 --token TOKEN` or `--datastore-endpoint <the same etcd> --token TOKEN`.
    Create {
        /// (data) Folder holding the server's state.
        #[arg(long, short = 'd', env = "K1S_DATA_DIR", default_value = "/var/lib/k1s")]
        data_dir: PathBuf,
    },
}

pub fn run(args: TokenArgs) -> Result<()> {
    match args.command {
        TokenCommand::Create { data_dir } => {
            let path = k1s_server::join::token_path(&data_dir);
            let token = std::fs::read_to_string(&path).with_context(|| {
                format!("reading {}: a server keeps its token there once it has started", path.display())
            })?;
            let parsed: k1s_server::join::Token =
                token.parse().with_context(|| format!("{} holds no valid token", path.display()))?;
            anyhow::ensure!(parsed.ca_hash.is_some(), "{} holds no CA hash", path.display());
            println!("{}", token.trim());
            Ok(())
        }
    }
}
