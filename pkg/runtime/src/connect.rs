//! A component's API client, built from its kubeconfig and following it: when the file changes
//! (the server's certificate renewal rewrote it with a renewed client certificate), later
//! requests go over new connections made with the new credentials, while requests under way
//! (watches) finish on the connections they started on. Upstream's client-go does the same for
//! a rotated client certificate (`transport/cert_rotation.go`: new connections, old ones closed).
//!
//! The client is two layers: the [`kube::Client`] callers hold, whose only service hands each
//! request to the current inner client, one built by kube from the kubeconfig (its own
//! connection pool, TLS identity, retries). A follower task looks at the file every
//! [`FOLLOW_EVERY`] and swaps the inner client when the file changed; dropping the old one
//! closes its idle connections. The follower ends once every clone of the client is dropped.

use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock, Weak};
use std::task::{Context, Poll};
use std::time::{Duration, SystemTime};

/// How often a client looks whether its kubeconfig changed (one `stat`).
pub const FOLLOW_EVERY: Duration = Duration::from_secs(1);

#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    #[error("reading kubeconfig {path}: {message}")]
    Kubeconfig { path: String, message: String },
    #[error("building a client from {path}: {message}")]
    Client { path: String, message: String },
}

/// A client authenticated with the kubeconfig at `path`, sending `user_agent`, that follows the
/// file's changes (see the module documentation).
pub async fn connect(path: &Path, user_agent: &str) -> Result<kube::Client, ConnectError> {
    let seen = Stamp::of(path);
    let (client, namespace) = build(path, user_agent).await?;
    let current = Arc::new(Current(RwLock::new(client)));
    tokio::spawn(follow(Arc::downgrade(&current), path.to_path_buf(), user_agent.to_string(), seen));
    Ok(kube::Client::new(Following(current), namespace))
}

/// A client made from the kubeconfig at `path` as it is now, and its default namespace.
async fn build(path: &Path, user_agent: &str) -> Result<(kube::Client, String), ConnectError> {
    let p = path.display().to_string();
    let kc = kube::config::Kubeconfig::read_from(path)
        .map_err(|e| ConnectError::Kubeconfig { path: p.clone(), message: e.to_string() })?;
    let mut cfg = kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default())
        .await
        .map_err(|e| ConnectError::Kubeconfig { path: p.clone(), message: e.to_string() })?;
    cfg.read_timeout = None;
    let ua = http::HeaderValue::from_str(user_agent)
        .map_err(|e| ConnectError::Client { path: p.clone(), message: format!("user agent {user_agent:?}: {e}") })?;
    cfg.headers.push((http::header::USER_AGENT, ua));
    let namespace = cfg.default_namespace.clone();
    let client = kube::Client::try_from(cfg).map_err(|e| ConnectError::Client { path: p, message: e.to_string() })?;
    Ok((client, namespace))
}

/// What tells that a file changed without reading it: inode, size and modification time (the
/// kubeconfig is replaced by a rename, so a rewrite always changes the inode).
#[derive(Clone, Debug, PartialEq, Eq)]
struct Stamp(Option<(u64, u64, Option<SystemTime>)>);

impl Stamp {
    fn of(path: &Path) -> Stamp {
        use std::os::unix::fs::MetadataExt as _;
        Stamp(std::fs::metadata(path).ok().map(|m| (m.ino(), m.len(), m.modified().ok())))
    }
}

/// The inner client new requests go to.
struct Current(RwLock<kube::Client>);

impl Current {
    fn get(&self) -> kube::Client {
        self.0.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    fn replace(&self, client: kube::Client) {
        *self.0.write().unwrap_or_else(|p| p.into_inner()) = client;
    }
}

/// Rebuilds the inner client whenever the kubeconfig changes, until the client is dropped.
async fn follow(current: Weak<Current>, path: PathBuf, user_agent: String, mut seen: Stamp) {
    loop {
        tokio::time::sleep(FOLLOW_EVERY).await;
        let Some(live) = current.upgrade() else { return };
        let now = Stamp::of(&path);
        if now == seen {
            continue;
        }
        match build(&path, &user_agent).await {
            Ok((client, _)) => {
                live.replace(client);
                seen = now;
                tracing::info!(kubeconfig = %path.display(), "the kubeconfig changed: new connections use its credentials");
            }
            // Missing or half-written by hand: the current client goes on; tried again next time.
            Err(e) => {
                tracing::warn!(error = %e, "the kubeconfig changed but cannot be used; keeping the current client")
            }
        }
    }
}

/// The outer client's service: each request goes to the inner client current at the time.
#[derive(Clone)]
struct Following(Arc<Current>);

impl tower::Service<http::Request<kube::client::Body>> for Following {
    type Response = http::Response<kube::client::Body>;
    type Error = kube::Error;
    type Future = futures::future::BoxFuture<'static, Result<Self::Response, Self::Error>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: http::Request<kube::client::Body>) -> Self::Future {
        let client = self.0.get();
        Box::pin(async move { client.send(req).await })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rewritten_file_has_a_new_stamp_and_an_untouched_one_keeps_it() {
        let dir = tempfile::tempdir().expect("tmp");
        let path = dir.path().join("kubeconfig");
        assert_eq!(Stamp::of(&path), Stamp(None), "missing");
        std::fs::write(&path, "a").expect("write");
        let first = Stamp::of(&path);
        assert!(first.0.is_some());
        assert_eq!(Stamp::of(&path), first);
        // As write_kubeconfig does: a new file renamed over the old one, same size.
        let tmp = dir.path().join("kubeconfig.tmp");
        std::fs::write(&tmp, "b").expect("write");
        std::fs::rename(&tmp, &path).expect("rename");
        assert_ne!(Stamp::of(&path), first);
    }
}
