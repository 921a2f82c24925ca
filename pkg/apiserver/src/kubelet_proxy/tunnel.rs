//! Byte-level plumbing between an upgraded client connection and an upgraded kubelet
//! connection: a plain splice (SPDY or legacy WebSocket passed through untouched) and the
//! `SPDY/3.1+portforward.k8s.io` tunnel, where the client's SPDY bytes ride in binary
//! WebSocket messages (upstream's `TunnelingHandler`).

use super::websocket::{self, MessageSink, MessageSource};
use futures::{SinkExt, StreamExt};
use hyper::upgrade::{OnUpgrade, Upgraded};
use hyper_util::rt::TokioIo;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_tungstenite::tungstenite::Message;

/// The WebSocket subprotocol prefix of a tunnelled SPDY protocol.
pub(crate) const TUNNEL_PREFIX: &str = "SPDY/3.1+";
pub(crate) const PORT_FORWARD_PROTOCOL: &str = "portforward.k8s.io";

/// Copies both ways until both sides are done.
pub(crate) async fn splice(client: OnUpgrade, backend: Upgraded) {
    let client = match client.await {
        Ok(c) => c,
        Err(e) => {
            tracing::debug!(error = %e, "client upgrade failed");
            return;
        }
    };
    let mut client = TokioIo::new(client);
    let mut backend = TokioIo::new(backend);
    match tokio::io::copy_bidirectional(&mut client, &mut backend).await {
        Ok((up, down)) => tracing::debug!(up, down, "upgraded stream finished"),
        Err(e) => tracing::debug!(error = %e, "upgraded stream ended"),
    }
}

/// Carries the tunnelled SPDY session: client messages become kubelet bytes and kubelet bytes
/// become binary messages, until either side ends.
pub(crate) async fn tunnel(
    mut sink: impl MessageSink,
    mut source: impl MessageSource,
    backend: impl tokio::io::AsyncRead + tokio::io::AsyncWrite,
) {
    let (rd, wr) = tokio::io::split(backend);
    tokio::pin!(rd);
    tokio::pin!(wr);
    let mut buf = vec![0u8; 32 * 1024];
    loop {
        tokio::select! {
            msg = source.next() => match msg {
                Some(Ok(Message::Binary(b))) => {
                    if wr.write_all(&b).await.is_err() || wr.flush().await.is_err() {
                        break;
                    }
                }
                Some(Ok(Message::Ping(p))) => {
                    let _ = sink.send(Message::Pong(p)).await;
                }
                Some(Ok(Message::Close(_))) | None | Some(Err(_)) => {
                    let _ = wr.shutdown().await;
                    return;
                }
                Some(Ok(_)) => {}
            },
            n = rd.read(&mut buf) => match n {
                Ok(n) if n > 0 => {
                    if sink.send(Message::Binary(bytes::Bytes::copy_from_slice(&buf[..n]))).await.is_err() {
                        return;
                    }
                }
                _ => break,
            },
        }
    }
    websocket::close_normally(&mut sink).await;
    websocket::drain_until_closed(&mut sink, &mut source, Duration::from_secs(10)).await;
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;
    use tokio_tungstenite::tungstenite::protocol::Role;
    use tokio_tungstenite::WebSocketStream;

    #[tokio::test]
    async fn tunnel_carries_bytes_both_ways_and_closes_normally_when_the_kubelet_ends() {
        let (ws_client, ws_server) = tokio::io::duplex(64 * 1024);
        let (backend, mut kubelet) = tokio::io::duplex(64 * 1024);
        let (sink, source) = WebSocketStream::from_raw_socket(ws_server, Role::Server, None).await.split();
        let t = tokio::spawn(tunnel(sink, source, backend));
        let mut client = WebSocketStream::from_raw_socket(ws_client, Role::Client, None).await;
        client.send(Message::Binary(Bytes::from_static(b"spdy bytes"))).await.expect("send");
        let mut got = [0u8; 10];
        kubelet.read_exact(&mut got).await.expect("kubelet reads");
        assert_eq!(&got, b"spdy bytes");
        kubelet.write_all(b"reply").await.expect("kubelet writes");
        let msg = tokio::time::timeout(Duration::from_secs(5), client.next()).await.expect("in time");
        assert_eq!(msg.expect("message").expect("ok"), Message::Binary(Bytes::from_static(b"reply")));
        drop(kubelet);
        let msg = tokio::time::timeout(Duration::from_secs(5), client.next()).await.expect("in time");
        match msg.expect("message").expect("ok") {
            Message::Close(Some(f)) => assert_eq!(u16::from(f.code), 1000),
            other => panic!("expected a close frame, got {other:?}"),
        }
        drop(client);
        tokio::time::timeout(Duration::from_secs(15), t).await.expect("tunnel ends").expect("join");
    }
}
