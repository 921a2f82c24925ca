//! The server side of a WebSocket handshake (RFC 6455) on a hyper request, and the message
//! loop helpers the stream translator and the port-forward tunnel share.

use crate::endpoints::Body;
use bytes::Bytes;
use futures::stream::{SplitSink, SplitStream};
use futures::{SinkExt, StreamExt};
use http::{header, HeaderMap, HeaderValue, Response, StatusCode};
use http_body_util::{BodyExt, Empty};
use hyper::upgrade::Upgraded;
use hyper_util::rt::TokioIo;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::protocol::{CloseFrame, Role};
use tokio_tungstenite::tungstenite::{Error as WsError, Message};
use tokio_tungstenite::WebSocketStream;

pub(crate) type Ws = WebSocketStream<TokioIo<Upgraded>>;
pub(crate) type WsSink = SplitSink<Ws, Message>;
pub(crate) type WsSource = SplitStream<Ws>;

fn header_has_token(headers: &HeaderMap, name: header::HeaderName, token: &str) -> bool {
    headers
        .get_all(name)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|t| t.trim().eq_ignore_ascii_case(token))
}

/// Whether the request asks to upgrade to a WebSocket.
pub(crate) fn is_websocket(headers: &HeaderMap) -> bool {
    header_has_token(headers, header::CONNECTION, "upgrade") && header_has_token(headers, header::UPGRADE, "websocket")
}

/// Whether the request asks for any upgrade (SPDY or WebSocket).
pub(crate) fn is_upgrade(headers: &HeaderMap) -> bool {
    header_has_token(headers, header::CONNECTION, "upgrade") && headers.contains_key(header::UPGRADE)
}

/// The subprotocols the client offers, in its order.
pub(crate) fn offered_protocols(headers: &HeaderMap) -> Vec<String> {
    headers
        .get_all(header::SEC_WEBSOCKET_PROTOCOL)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(|p| p.trim().to_string())
        .filter(|p| !p.is_empty())
        .collect()
}

/// The `101 Switching Protocols` answer selecting `protocol`, or `None` when the request lacks
/// a usable `Sec-WebSocket-Key`.
pub(crate) fn accept(headers: &HeaderMap, protocol: &str) -> Option<Response<Body>> {
    let key = headers.get(header::SEC_WEBSOCKET_KEY)?;
    let accept = tokio_tungstenite::tungstenite::handshake::derive_accept_key(key.as_bytes());
    let mut r = Response::new(Empty::<Bytes>::new().map_err(|never| match never {}).boxed_unsync());
    *r.status_mut() = StatusCode::SWITCHING_PROTOCOLS;
    let h = r.headers_mut();
    h.insert(header::UPGRADE, HeaderValue::from_static("websocket"));
    h.insert(header::CONNECTION, HeaderValue::from_static("Upgrade"));
    h.insert(header::SEC_WEBSOCKET_ACCEPT, HeaderValue::from_str(&accept).ok()?);
    h.insert(header::SEC_WEBSOCKET_PROTOCOL, HeaderValue::from_str(protocol).ok()?);
    Some(r)
}

/// Wraps the upgraded client connection as the server end of a WebSocket.
pub(crate) async fn server(upgraded: Upgraded) -> (WsSink, WsSource) {
    WebSocketStream::from_raw_socket(TokioIo::new(upgraded), Role::Server, None).await.split()
}

/// The sending half of a WebSocket.
pub(crate) trait MessageSink: futures::Sink<Message, Error = WsError> + Unpin + Send {}
impl<T: futures::Sink<Message, Error = WsError> + Unpin + Send> MessageSink for T {}
/// The receiving half of a WebSocket.
pub(crate) trait MessageSource: futures::Stream<Item = Result<Message, WsError>> + Unpin + Send {}
impl<T: futures::Stream<Item = Result<Message, WsError>> + Unpin + Send> MessageSource for T {}

/// Sends a normal-closure close frame (1000).
pub(crate) async fn close_normally(sink: &mut impl MessageSink) {
    let frame = CloseFrame { code: CloseCode::Normal, reason: "".into() };
    let _ = sink.send(Message::Close(Some(frame))).await;
}

/// After our close frame: reads (and discards) until the client closes too, answering pings,
/// for at most `limit`.
pub(crate) async fn drain_until_closed(
    sink: &mut impl MessageSink,
    source: &mut impl MessageSource,
    limit: std::time::Duration,
) {
    let _ = tokio::time::timeout(limit, async {
        while let Some(msg) = source.next().await {
            match msg {
                Ok(Message::Ping(p)) => {
                    let _ = sink.send(Message::Pong(p)).await;
                }
                Ok(Message::Close(_)) | Err(_) => break,
                Ok(_) => {}
            }
        }
    })
    .await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn handshake_headers_are_recognised_and_answered() {
        let mut h = HeaderMap::new();
        h.insert(header::CONNECTION, HeaderValue::from_static("keep-alive, Upgrade"));
        h.insert(header::UPGRADE, HeaderValue::from_static("websocket"));
        h.insert(header::SEC_WEBSOCKET_KEY, HeaderValue::from_static("dGhlIHNhbXBsZSBub25jZQ=="));
        h.append(header::SEC_WEBSOCKET_PROTOCOL, HeaderValue::from_static("v5.channel.k8s.io, v4.channel.k8s.io"));
        h.append(header::SEC_WEBSOCKET_PROTOCOL, HeaderValue::from_static("channel.k8s.io"));
        assert!(is_websocket(&h) && is_upgrade(&h));
        assert_eq!(offered_protocols(&h), ["v5.channel.k8s.io", "v4.channel.k8s.io", "channel.k8s.io"]);
        let r = accept(&h, "v5.channel.k8s.io").expect("101");
        assert_eq!(r.status(), StatusCode::SWITCHING_PROTOCOLS);
        // RFC 6455 section 1.3's example key and answer.
        assert_eq!(r.headers()[header::SEC_WEBSOCKET_ACCEPT], "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=");
        assert_eq!(r.headers()[header::SEC_WEBSOCKET_PROTOCOL], "v5.channel.k8s.io");
    }

    #[test]
    fn spdy_upgrades_are_upgrades_but_not_websockets() {
        let mut h = HeaderMap::new();
        h.insert(header::CONNECTION, HeaderValue::from_static("Upgrade"));
        h.insert(header::UPGRADE, HeaderValue::from_static("SPDY/3.1"));
        assert!(is_upgrade(&h) && !is_websocket(&h));
        assert!(accept(&h, "x").is_none());
    }
}
