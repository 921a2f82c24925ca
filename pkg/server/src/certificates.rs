//! Keeps a running server's certificates fresh: every [`k1s_pki::Validity::check_every`] it
//! re-issues the leaf certificates that are due (less than 90 days left, by default), hands a
//! new serving certificate to its listener (the API server's and the kubelet's: new
//! connections get it, established ones and their watches keep theirs), a new client
//! certificate of the API server's own (towards kubelets and aggregated API servers) to the
//! client that presents it, and rewrites the kubeconfigs that embed a renewed client
//! certificate (the admin's, and the components' under `server/cred`): the components'
//! clients follow their kubeconfig ([`k1s_runtime::connect`]), so their new connections
//! present the renewed certificate.
//!
//! What `k1s certificate rotate` writes is picked up the same way.

use k1s_pki::{ClientCert, ServingCert, ServingError, Validity};
use std::collections::BTreeMap;
use std::path::PathBuf;
use tokio_util::sync::CancellationToken;

/// A kubeconfig embedding the client certificate `client-<file>.crt`.
pub(crate) struct Kubeconfig {
    pub file: String,
    pub path: PathBuf,
    pub mode: u32,
}

pub(crate) struct Renewal {
    pub tls_dir: PathBuf,
    pub validity: Validity,
    pub ca_pem: String,
    pub api_url: String,
    /// Serving certificate files and the listener slots they are served from.
    pub serving: Vec<(PathBuf, ServingCert)>,
    /// Client certificate files of the API server's own clients and the slots they present.
    pub clients: Vec<(PathBuf, ClientCert)>,
    pub kubeconfigs: Vec<Kubeconfig>,
    /// The certificate PEM each served or written file currently holds.
    pub current: BTreeMap<PathBuf, String>,
}

fn read(path: &std::path::Path) -> Option<String> {
    std::fs::read_to_string(path).ok()
}

impl Renewal {
    pub(crate) fn new(
        tls_dir: PathBuf,
        validity: Validity,
        ca_pem: String,
        api_url: String,
        serving: Vec<(PathBuf, ServingCert)>,
        clients: Vec<(PathBuf, ClientCert)>,
        kubeconfigs: Vec<Kubeconfig>,
    ) -> Renewal {
        let mut r =
            Renewal { tls_dir, validity, ca_pem, api_url, serving, clients, kubeconfigs, current: BTreeMap::new() };
        for f in r.watched() {
            if let Some(pem) = read(&f) {
                r.current.insert(f, pem);
            }
        }
        r
    }

    fn client_crt(&self, file: &str) -> PathBuf {
        self.tls_dir.join(format!("client-{file}.crt"))
    }

    fn watched(&self) -> Vec<PathBuf> {
        let mut v: Vec<PathBuf> = self.serving.iter().map(|(f, _)| f.clone()).collect();
        v.extend(self.clients.iter().map(|(f, _)| f.clone()));
        v.extend(self.kubeconfigs.iter().map(|k| self.client_crt(&k.file)));
        v
    }

    /// One pass: renew what is due, reload what changed on disk.
    pub(crate) fn tick(&mut self) {
        match k1s_pki::renew_due(&self.tls_dir, self.validity) {
            Ok(renewed) => {
                for r in renewed {
                    tracing::info!(path = %r.path.display(), serial = %r.new_serial, "renewed a certificate due for renewal");
                }
            }
            Err(e) => tracing::warn!(error = %e, "renewing certificates"),
        }
        for (crt, slot) in &self.serving {
            reload(&mut self.current, crt, "serving", |c, k| slot.replace(c, k));
        }
        for (crt, slot) in &self.clients {
            reload(&mut self.current, crt, "client", |c, k| slot.replace(c, k));
        }
        for k in &self.kubeconfigs {
            let crt = self.client_crt(&k.file);
            let (Some(cert), Some(key)) = (read(&crt), read(&crt.with_extension("key"))) else { continue };
            if self.current.get(&crt) == Some(&cert) {
                continue;
            }
            let pair = k1s_pki::CertPair { cert_pem: cert.clone(), key_pem: key };
            match k1s_pki::write_kubeconfig(&k.path, &k1s_pki::kubeconfig(&self.api_url, &self.ca_pem, &pair), k.mode) {
                Ok(()) => {
                    tracing::info!(path = %k.path.display(), "rewrote a kubeconfig with its renewed client certificate");
                    self.current.insert(crt, cert);
                }
                Err(e) => tracing::warn!(error = %e, "rewriting a kubeconfig"),
            }
        }
    }
}

/// Hands the certificate in `crt` (and its key) to a slot with `replace` when it differs from
/// the one `current` says the slot holds.
fn reload(
    current: &mut BTreeMap<PathBuf, String>,
    crt: &std::path::Path,
    kind: &str,
    replace: impl Fn(&str, &str) -> Result<(), ServingError>,
) {
    let (Some(cert), Some(key)) = (read(crt), read(&crt.with_extension("key"))) else { return };
    if current.get(crt) == Some(&cert) {
        return;
    }
    match replace(&cert, &key) {
        Ok(()) => {
            tracing::info!(path = %crt.display(), kind, "new connections get the renewed certificate");
            current.insert(crt.to_path_buf(), cert);
        }
        // Written between the two reads, or half-written by hand: next tick.
        Err(e) => tracing::warn!(error = %e, path = %crt.display(), kind, "loading a renewed certificate"),
    }
}

/// Runs [`Renewal::tick`] until `cancel` fires.
pub(crate) async fn renew_periodically(mut renewal: Renewal, cancel: CancellationToken) {
    let every = renewal.validity.check_every();
    loop {
        tokio::select! {
            _ = cancel.cancelled() => return,
            _ = tokio::time::sleep(every) => {}
        }
        // File I/O and signing: off the async workers.
        renewal = match tokio::task::spawn_blocking(move || {
            renewal.tick();
            renewal
        })
        .await
        {
            Ok(r) => r,
            Err(e) => {
                tracing::error!(error = %e, "certificate renewal panicked; stopping the server");
                return;
            }
        };
    }
}
