//! `k1s killall` and `k1s uninstall`: the command line of `k1s_server::host_cleanup`.

use anyhow::{bail, Context, Result};
use clap::Args;
use k1s_server::host_cleanup::{self, HostPaths, Step};
use std::path::PathBuf;

/// The folders of the node to take down: the same flags (and `K1S_*` variables) as `k1s server`.
#[derive(Args, Debug)]
pub struct NodeDirs {
    /// (data) Folder holding the node's state.
    #[arg(long, short = 'd', env = "K1S_DATA_DIR", default_value = "/var/lib/k1s")]
    data_dir: PathBuf,
    /// (agent/runtime) Runtime state directory (containerd socket and state).
    #[arg(long, env = "K1S_RUN_DIR", default_value = "/run/k1s", hide = true)]
    run_dir: PathBuf,
    /// (agent/node) Directory of container logs.
    #[arg(long, env = "K1S_POD_LOG_DIR", default_value = "/var/log/pods", hide = true)]
    pod_log_dir: PathBuf,
    /// (config) Configuration folder (config.yaml, kubeconfig, registries.yaml).
    #[arg(long, env = "K1S_CONFIG_DIR", default_value = "/etc/k1s", hide = true)]
    config_dir: PathBuf,
}

impl NodeDirs {
    fn paths(&self) -> HostPaths {
        HostPaths {
            data_dir: self.data_dir.clone(),
            run_dir: self.run_dir.clone(),
            pod_log_dir: self.pod_log_dir.clone(),
            config_dir: self.config_dir.clone(),
        }
    }
}

#[derive(Args, Debug)]
pub struct KillallArgs {
    #[command(flatten)]
    dirs: NodeDirs,
}

#[derive(Args, Debug)]
pub struct UninstallArgs {
    #[command(flatten)]
    dirs: NodeDirs,
    /// Keep the configuration folder (/etc/k1s).
    #[arg(long)]
    keep_config: bool,
}

fn report(steps: Vec<Step>) -> Result<()> {
    let mut failed = 0;
    for s in steps {
        match s.result {
            Ok(()) => println!("{}", s.what),
            Err(e) => {
                failed += 1;
                eprintln!("FAILED: {}: {e}", s.what);
            }
        }
    }
    if failed > 0 {
        bail!("{failed} step(s) failed");
    }
    Ok(())
}

fn runtime() -> Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_current_thread().enable_all().build().context("starting the runtime")
}

pub fn killall(args: KillallArgs) -> Result<()> {
    report(runtime()?.block_on(host_cleanup::killall(&args.dirs.paths())))
}

pub fn uninstall(args: UninstallArgs) -> Result<()> {
    report(runtime()?.block_on(host_cleanup::uninstall(&args.dirs.paths(), args.keep_config)))
}
