//! `k1s images import|save`: argument parsing and printing only; the work is in
//! `k1s_server::images`.

use anyhow::{bail, Context, Result};
use clap::{Args, Subcommand};
use std::path::PathBuf;

#[derive(Args, Debug)]
pub struct ImagesArgs {
    #[command(subcommand)]
    command: ImagesCommand,
}

#[derive(Subcommand, Debug)]
enum ImagesCommand {
    /// Import image archives (OCI layout or docker-archive tar, optionally .gz/.zst) into the
    /// node's containerd (namespace k8s.io). A corrupt archive is refused and imports nothing.
    Import {
        #[arg(required = true)]
        files: Vec<PathBuf>,
        /// (data) Folder holding the server's state (it records the containerd endpoint).
        #[arg(long, short = 'd', env = "K1S_DATA_DIR", default_value = "/var/lib/k1s")]
        data_dir: PathBuf,
        /// (agent/runtime) containerd endpoint (default: the one the server on --data-dir uses).
        #[arg(long, env = "K1S_CONTAINER_RUNTIME_ENDPOINT")]
        container_runtime_endpoint: Option<String>,
        /// (agent/runtime) Runtime state directory of k1s's own containerd.
        #[arg(long, env = "K1S_RUN_DIR", default_value = "/run/k1s", hide = true)]
        run_dir: PathBuf,
    },
    /// Pull images from their registries and write them to one OCI layout tar (gzip or zstd
    /// when FILE ends in .gz/.tgz or .zst/.tzst), for the images folder or `k1s images import`.
    Save {
        #[arg(required = true)]
        images: Vec<String>,
        /// The archive to write.
        #[arg(long, short = 'o')]
        output: PathBuf,
        /// (agent/runtime) Registry mirrors and credentials (k3s registries.yaml format).
        #[arg(long, env = "K1S_REGISTRIES_CONFIG", default_value = "/etc/k1s/registries.yaml")]
        registries_config: PathBuf,
    },
}

pub fn run(args: ImagesArgs) -> Result<()> {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().context("starting the runtime")?;
    match args.command {
        ImagesCommand::Import { files, data_dir, container_runtime_endpoint, run_dir } => {
            let endpoint =
                k1s_server::images::runtime_endpoint(&data_dir, &run_dir, container_runtime_endpoint.as_deref());
            let results = rt.block_on(k1s_server::images::import(&files, &endpoint));
            let mut failed = 0;
            for (file, result) in results {
                match result {
                    Ok(summary) => println!("imported {}: {}", file.display(), summary.images.join(", ")),
                    Err(e) => {
                        failed += 1;
                        eprintln!("error: {}: {:#}", file.display(), anyhow::Error::new(e));
                    }
                }
            }
            if failed > 0 {
                bail!("{failed} of {} archives not imported (nothing of them was)", files.len());
            }
            Ok(())
        }
        ImagesCommand::Save { images, output, registries_config } => {
            let saved = rt
                .block_on(k1s_server::images::save(&images, &registries_config, &output))
                .with_context(|| format!("saving images to {}", output.display()))?;
            println!(
                "saved {} to {} ({} blobs, {} bytes)",
                saved.images.join(", "),
                output.display(),
                saved.blobs,
                saved.bytes
            );
            Ok(())
        }
    }
}
