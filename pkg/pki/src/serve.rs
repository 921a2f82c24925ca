//! The HTTPS accept loop shared by the API server and the kubelet: TLS (with the client's
//! certificates handed to the handler), HTTP/1.1 and HTTP/2 by ALPN, upgrades kept for
//! streaming, and the limits that cut off clients that never finish: the TLS handshake must end
//! within [`Limits::handshake`] and an HTTP/1.1 request's head arrive within
//! [`Limits::header_read`] (upstream's `ReadHeaderTimeout`), so that slow-loris clients do not
//! hold connections and tasks forever. On cancellation the loop stops accepting and every
//! connection is shut down gracefully, given [`Limits::shutdown_grace`] to finish.

use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;
use tokio_util::sync::CancellationToken;

/// How long a client may take.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// From the TCP connection to the end of the TLS handshake.
    pub handshake: Duration,
    /// For an HTTP/1.1 request's line and headers, from the first byte (or the end of the
    /// previous request on a kept-alive connection).
    pub header_read: Duration,
    /// For open connections to finish once the server shuts down.
    pub shutdown_grace: Duration,
}

impl Default for Limits {
    /// The API server's: kube-apiserver's `ReadHeaderTimeout` is 32 s, Go's TLS handshake
    /// timeout 10 s.
    fn default() -> Limits {
        Limits {
            handshake: Duration::from_secs(10),
            header_read: Duration::from_secs(32),
            shutdown_grace: Duration::from_secs(5),
        }
    }
}

/// One accepted connection, as the handler sees it.
#[derive(Clone, Debug, Default)]
pub struct Connection {
    pub remote: Option<SocketAddr>,
    /// The client's certificate chain (DER), leaf first; empty without one.
    pub certificates: Vec<Vec<u8>>,
}

/// Accepts connections on `listener` until `cancel` fires. Once a connection's handshake is
/// done, `connected` makes the handler of its requests (what it keeps, such as the identity
/// read from the client's certificate, is read once per connection). `what` names the server
/// in log lines ("API server", "kubelet").
pub async fn serve<M, H, F, B>(
    listener: TcpListener,
    tls: Arc<rustls::ServerConfig>,
    limits: Limits,
    what: &'static str,
    cancel: CancellationToken,
    connected: M,
) where
    M: Fn(Connection) -> H + Send + Sync + 'static,
    H: Fn(http::Request<Incoming>) -> F + Send + 'static,
    F: Future<Output = http::Response<B>> + Send + 'static,
    B: http_body::Body + Send + 'static,
    B::Data: Send,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let acceptor = TlsAcceptor::from(tls);
    let connected = Arc::new(connected);
    loop {
        let (tcp, remote) = tokio::select! {
            _ = cancel.cancelled() => return,
            r = listener.accept() => match r {
                Ok(x) => x,
                Err(e) => {
                    // Out of file descriptors, for example: wait rather than spin.
                    tracing::warn!(server = what, error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
        };
        let _ = tcp.set_nodelay(true);
        let (acceptor, cancel, connected) = (acceptor.clone(), cancel.clone(), connected.clone());
        tokio::spawn(async move {
            let tls = tokio::select! {
                _ = cancel.cancelled() => return,
                r = tokio::time::timeout(limits.handshake, acceptor.accept(tcp)) => match r {
                    Ok(Ok(t)) => t,
                    Ok(Err(e)) => {
                        tracing::debug!(server = what, %remote, error = %e, "TLS handshake failed");
                        return;
                    }
                    Err(_) => {
                        tracing::debug!(server = what, %remote, "TLS handshake timed out");
                        return;
                    }
                },
            };
            let certificates =
                tls.get_ref().1.peer_certificates().map(|c| c.iter().map(|d| d.to_vec()).collect()).unwrap_or_default();
            let handler = connected(Connection { remote: Some(remote), certificates });
            let svc = hyper::service::service_fn(move |req| {
                let response = handler(req);
                async move { Ok::<_, Infallible>(response.await) }
            });
            let mut builder = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
            builder.http1().timer(TokioTimer::new()).header_read_timeout(limits.header_read);
            builder.http2().timer(TokioTimer::new());
            let conn = builder.serve_connection_with_upgrades(TokioIo::new(tls), svc);
            tokio::pin!(conn);
            tokio::select! {
                r = conn.as_mut() => {
                    if let Err(e) = r {
                        tracing::trace!(server = what, %remote, error = %e, "connection ended");
                    }
                }
                _ = cancel.cancelled() => {
                    conn.as_mut().graceful_shutdown();
                    let _ = tokio::time::timeout(limits.shutdown_grace, conn).await;
                }
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

    fn server_config(dir: &std::path::Path) -> (Arc<rustls::ServerConfig>, Vec<u8>) {
        let pki = crate::Pki::ensure(dir, &["127.0.0.1".to_owned()]).expect("pki");
        let serving = pki.api_serving(&["127.0.0.1".to_owned()]).expect("serving");
        let ca = std::fs::read_to_string(dir.join("server-ca.crt")).expect("ca");
        let material =
            crate::ServingMaterial { ca_pem: ca.clone(), cert_pem: serving.cert_pem, key_pem: serving.key_pem };
        (Arc::new(crate::server_config(&material).expect("server config")), ca.into_bytes())
    }

    async fn tls_client(port: u16, ca: &[u8]) -> tokio_rustls::client::TlsStream<tokio::net::TcpStream> {
        let cfg = crate::client::client_config(crate::client::Trust::Pem { pem: ca, what: "ca" }, None, &[b"http/1.1"])
            .expect("client config");
        let tcp = tokio::net::TcpStream::connect(("127.0.0.1", port)).await.expect("connect");
        let name = rustls::pki_types::ServerName::try_from("127.0.0.1").expect("name");
        tokio_rustls::TlsConnector::from(Arc::new(cfg)).connect(name, tcp).await.expect("handshake")
    }

    /// Reads until the server closes the connection, giving how long that took.
    async fn closed_after(mut s: impl tokio::io::AsyncRead + Unpin) -> Duration {
        let start = std::time::Instant::now();
        let mut buf = [0u8; 1024];
        loop {
            match tokio::time::timeout(Duration::from_secs(20), s.read(&mut buf)).await {
                Ok(Ok(0)) | Ok(Err(_)) => return start.elapsed(),
                Ok(Ok(_)) => {}
                Err(_) => panic!("the connection was never closed"),
            }
        }
    }

    #[tokio::test]
    async fn slow_clients_are_cut_off_and_others_served() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (tls, ca) = server_config(dir.path());
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let port = listener.local_addr().expect("addr").port();
        let limits = Limits {
            handshake: Duration::from_millis(500),
            header_read: Duration::from_millis(700),
            shutdown_grace: Duration::from_secs(1),
        };
        let cancel = CancellationToken::new();
        let served = tokio::spawn(serve(listener, tls, limits, "test", cancel.clone(), |conn: Connection| {
            let remote = conn.remote.map(|r| r.ip().to_string()).unwrap_or_default();
            move |_req| {
                let remote = remote.clone();
                async move { http::Response::new(http_body_util::Full::new(bytes::Bytes::from(remote))) }
            }
        }));

        // A client that connects and never starts TLS.
        let silent = tokio::net::TcpStream::connect(("127.0.0.1", port)).await.expect("connect");
        // A client that sends half a request head and stops (slow loris).
        let mut loris = tls_client(port, &ca).await;
        loris.write_all(b"GET /api HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ").await.expect("write");
        loris.flush().await.expect("flush");
        // A client that asks properly is served meanwhile, with what the handler knows of it.
        let mut good = tls_client(port, &ca).await;
        good.write_all(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n").await.expect("write");
        let mut reply = String::new();
        good.read_to_string(&mut reply).await.expect("read");
        assert!(reply.starts_with("HTTP/1.1 200"), "{reply}");
        assert!(reply.ends_with("127.0.0.1"), "the handler sees the client's address: {reply}");

        let (silent_after, loris_after) = tokio::join!(closed_after(silent), closed_after(loris));
        assert!(silent_after < Duration::from_secs(5), "no handshake: cut after {silent_after:?}");
        assert!(loris_after < Duration::from_secs(5), "half a head: cut after {loris_after:?}");
        assert!(loris_after >= Duration::from_millis(500), "not before the limit: {loris_after:?}");

        cancel.cancel();
        tokio::time::timeout(Duration::from_secs(5), served).await.expect("the loop stops").expect("join");
    }
}
