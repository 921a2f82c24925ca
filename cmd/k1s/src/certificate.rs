//! `k1s certificate check|rotate|rotate-ca`: the certificates under the data dir.

use anyhow::{bail, Context, Result};
use clap::{Args, Subcommand};
use std::path::PathBuf;
use std::time::{Duration, UNIX_EPOCH};

#[derive(Args, Debug)]
pub struct CertificateArgs {
    #[command(subcommand)]
    command: CertificateCommand,
}

#[derive(Args, Debug)]
struct DataDir {
    /// (data) Folder holding the server's state.
    #[arg(long, short = 'd', env = "K1S_DATA_DIR", default_value = "/var/lib/k1s")]
    data_dir: PathBuf,
}

#[derive(Subcommand, Debug)]
enum CertificateCommand {
    /// List every certificate with its expiry.
    Check(DataDir),
    /// Re-issue leaf certificates now (all, or one service's), with the same CA, subject and
    /// SANs. Works on the files, with or without a running server: a running server serves the
    /// new API certificate to new connections within a minute; every other certificate is used
    /// from the server's next start.
    Rotate {
        #[command(flatten)]
        dir: DataDir,
        /// Only this service's certificates: kube-apiserver, admin, controller, scheduler,
        /// kubelet, proxy, dns, kube-apiserver-kubelet-client, front-proxy.
        #[arg(long)]
        service: Option<String>,
    },
    /// Not supported: see the README (certificates).
    RotateCa,
}

fn date(unix: i64) -> String {
    let t = UNIX_EPOCH + Duration::from_secs(unix.max(0) as u64);
    humantime::format_rfc3339_seconds(t).to_string()
}

pub fn run(args: CertificateArgs) -> Result<()> {
    match args.command {
        CertificateCommand::Check(d) => {
            let certs = k1s_server::certificates(&d.data_dir)
                .with_context(|| format!("listing the certificates of {}", d.data_dir.display()))?;
            let now = std::time::SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs() as i64).unwrap_or(0);
            println!("{:<32} {:<22} {:<22} {:>10}  SUBJECT", "FILE", "NOT BEFORE", "NOT AFTER", "DAYS LEFT");
            for c in certs {
                let file = c.path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
                let left = (c.not_after - now) as f64 / 86400.0;
                let kind = if c.is_ca { " (CA)" } else { "" };
                println!(
                    "{file:<32} {:<22} {:<22} {left:>10.1}  {}{kind}",
                    date(c.not_before),
                    date(c.not_after),
                    c.subject
                );
            }
            Ok(())
        }
        CertificateCommand::Rotate { dir, service } => {
            let rotated = k1s_server::rotate_certificates(&dir.data_dir, service.as_deref())
                .with_context(|| format!("rotating the certificates of {}", dir.data_dir.display()))?;
            if rotated.is_empty() {
                bail!("no certificate of service {:?} under {}", service.unwrap_or_default(), dir.data_dir.display());
            }
            for r in rotated {
                println!(
                    "rotated {} (serial {} ▶ {}), valid until {}",
                    r.path.display(),
                    r.old_serial,
                    r.new_serial,
                    date(r.not_after)
                );
            }
            Ok(())
        }
        CertificateCommand::RotateCa => bail!(
            "rotating the CA is out of scope: every client certificate, kubeconfig and ServiceAccount root \
             CA bundle would change at once. The CA lasts 10 years; to replace it, stop k1s, remove \
             <data-dir>/server/tls and start again (every kubeconfig must be fetched again)"
        ),
    }
}
