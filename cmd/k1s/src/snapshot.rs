//! `k1s snapshot save|ls|delete|extract` and `k1s server --cluster-reset-restore-path`: argument parsing
//! and printing only; the work is in `k1s_server::snapshot`.

use anyhow::{Context, Result};
use clap::{Args, Subcommand};
use std::path::{Path, PathBuf};

#[derive(Args, Debug)]
pub struct SnapshotArgs {
    #[command(subcommand)]
    command: SnapshotCommand,
    /// (data) Folder holding the server's state.
    #[arg(long, short = 'd', env = "K1S_DATA_DIR", default_value = "/var/lib/k1s", global = true)]
    data_dir: PathBuf,
    /// (db) Folder of snapshots (default: <data-dir>/server/db/snapshots).
    #[arg(long, env = "K1S_SNAPSHOT_DIR", global = true)]
    dir: Option<PathBuf>,
}

#[derive(Subcommand, Debug)]
enum SnapshotCommand {
    /// Ask the running server for a snapshot of its store (consistent, while it keeps serving).
    Save {
        /// Name prefix of the file (`<name>-<node>-<unix time>`); default `on-demand`.
        #[arg(long)]
        name: Option<String>,
    },
    /// List the snapshots in the snapshot folder.
    #[command(alias = "list")]
    Ls,
    /// Delete snapshots by file name.
    #[command(alias = "rm")]
    Delete {
        #[arg(required = true)]
        names: Vec<String>,
    },
    /// Write out the etcd database of a snapshot taken on etcd (checksum checked first), for
    /// `etcdctl snapshot restore` / `etcdutl snapshot restore`.
    Extract {
        /// The snapshot: a path, or a name in the snapshot folder.
        snapshot: PathBuf,
        /// The etcd database file to write (must not exist).
        out: PathBuf,
    },
}

pub fn run(args: SnapshotArgs) -> Result<()> {
    let dir = args.dir.clone().unwrap_or_else(|| k1s_server::snapshot::default_dir(&args.data_dir));
    match args.command {
        SnapshotCommand::Save { name } => {
            // The server resolves relative paths against its own working folder: send ours.
            let dir = match args.dir {
                Some(d) => Some(std::path::absolute(&d).with_context(|| format!("--dir {}", d.display()))?),
                None => None,
            };
            let rt =
                tokio::runtime::Builder::new_current_thread().enable_all().build().context("starting the runtime")?;
            let saved = rt.block_on(k1s_server::snapshot::save_online(&args.data_dir, name, dir))?;
            println!(
                "saved snapshot {} (revision {}, {} bytes)",
                saved.path.display(),
                saved.manifest.revision,
                saved.manifest.payload_bytes
            );
            Ok(())
        }
        SnapshotCommand::Ls => {
            let list = k1s_server::snapshot::list(&dir).with_context(|| format!("listing {}", dir.display()))?;
            println!("{:<48} {:>10} {:>12} {:<21} {:<8} VERSION", "NAME", "REVISION", "SIZE", "CREATED", "STORE");
            for l in list {
                match l.manifest {
                    Ok(m) => println!(
                        "{:<48} {:>10} {:>12} {:<21} {:<8} {}",
                        l.name,
                        m.revision,
                        l.size,
                        k1s_server::cron::format_utc(m.created_unix),
                        m.backend,
                        m.k1s_version
                    ),
                    Err(e) => println!("{:<48} {:>10} {:>12} unreadable: {e}", l.name, "-", l.size),
                }
            }
            Ok(())
        }
        SnapshotCommand::Extract { snapshot, out } => {
            let file = if snapshot.exists() { snapshot } else { dir.join(&snapshot) };
            let m = k1s_server::snapshot::extract(&file, &out)
                .with_context(|| format!("extracting {} into {}", file.display(), out.display()))?;
            println!(
                "wrote etcd's database of {} (revision {}) to {}; restore it with `etcdctl snapshot restore {}`",
                file.display(),
                m.revision,
                out.display(),
                out.display()
            );
            Ok(())
        }
        SnapshotCommand::Delete { names } => {
            for name in names {
                let path = k1s_server::snapshot::delete(&dir, &name).map_err(anyhow::Error::msg)?;
                println!("deleted {}", path.display());
            }
            Ok(())
        }
    }
}

/// What `k1s server --cluster-reset` without a snapshot says: k3s forgets the other etcd
/// members there; k1s's embedded store has none.
pub const CLUSTER_RESET_ALONE: &str =
    "k1s's embedded store has a single member: there is no cluster membership to reset and \
nothing was changed. To go back to a snapshot: k1s server --cluster-reset --cluster-reset-restore-path FILE \
(k1s snapshot ls lists them). Start k1s again without --cluster-reset to serve.";

/// `k1s server [--cluster-reset] --cluster-reset-restore-path FILE`: restore, say what
/// happened, exit.
pub fn restore(data_dir: &Path, file: &Path) -> Result<()> {
    let restored = k1s_server::snapshot::restore(data_dir, file)
        .with_context(|| format!("restoring {} into {}", file.display(), data_dir.display()))?;
    println!(
        "restored snapshot {} (revision {}, written by k1s {}) into {}",
        file.display(),
        restored.manifest.revision,
        restored.manifest.k1s_version,
        k1s_server::snapshot::store_dir(data_dir).display()
    );
    if let Some(old) = &restored.previous {
        println!("the previous store (revision {}) was kept in {}", restored.previous_revision, old.display());
    }
    println!(
        "the store continues at revision {}; clients holding older resourceVersions will relist",
        restored.revision
    );
    println!("start k1s again (without --cluster-reset-restore-path) to serve the restored cluster");
    Ok(())
}
