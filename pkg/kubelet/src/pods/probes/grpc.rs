//! The gRPC probe: `grpc.health.v1.Health/Check` over cleartext HTTP/2, as upstream's
//! `pkg/probe/grpc`: connection attempts repeat until the timeout (upstream dials with
//! `WithBlock`), `SERVING` is success, and the failure texts are upstream's.

use super::dial;
use super::go_duration;
use super::ProbeResult;
use bytes::{Buf as _, Bytes};
use http_body_util::{BodyExt as _, Full};
use hyper_util::rt::{TokioExecutor, TokioIo};
use std::time::Duration;
use tokio::time::Instant;

/// `grpc.health.v1.HealthCheckRequest`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct HealthCheckRequest {
    #[prost(string, tag = "1")]
    pub service: String,
}

/// `grpc.health.v1.HealthCheckResponse`; `status` is a `ServingStatus`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct HealthCheckResponse {
    #[prost(int32, tag = "1")]
    pub status: i32,
}

const SERVING: i32 = 1;

fn serving_status_name(v: i32) -> String {
    match v {
        0 => "UNKNOWN".into(),
        1 => "SERVING".into(),
        2 => "NOT_SERVING".into(),
        3 => "SERVICE_UNKNOWN".into(),
        other => other.to_string(),
    }
}

/// grpc-go's names of status codes.
fn code_name(code: u32) -> String {
    let names = [
        "OK",
        "Canceled",
        "Unknown",
        "InvalidArgument",
        "DeadlineExceeded",
        "NotFound",
        "AlreadyExists",
        "PermissionDenied",
        "ResourceExhausted",
        "FailedPrecondition",
        "Aborted",
        "OutOfRange",
        "Unimplemented",
        "Internal",
        "Unavailable",
        "DataLoss",
        "Unauthenticated",
    ];
    names.get(code as usize).map_or_else(|| format!("Code({code})"), |s| s.to_string())
}

const UNKNOWN: u32 = 2;
const DEADLINE_EXCEEDED: u32 = 4;
const UNIMPLEMENTED: u32 = 12;
const INTERNAL: u32 = 13;
const UNAVAILABLE: u32 = 14;

/// Undoes the percent-encoding of `grpc-message`.
fn decode_message(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' && i + 2 < b.len() {
            let hex = |c: u8| char::from(c).to_digit(16);
            if let (Some(h), Some(l)) = (hex(b[i + 1]), hex(b[i + 2])) {
                out.push(u8::try_from(h * 16 + l).unwrap_or(b'?'));
                i += 3;
                continue;
            }
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The gRPC code grpc-go derives from a non-200 HTTP status.
fn code_for_http_status(status: u16) -> u32 {
    match status {
        400 => INTERNAL,
        401 => 16,
        403 => 7,
        404 => UNIMPLEMENTED,
        429 | 502 | 503 | 504 => UNAVAILABLE,
        _ => UNKNOWN,
    }
}

/// A finished RPC: the grpc-status code and message, and the response message if any.
struct RpcAnswer {
    code: u32,
    message: String,
    response: Option<HealthCheckResponse>,
}

type Sender = hyper::client::conn::http2::SendRequest<Full<Bytes>>;

/// Connects and completes the HTTP/2 handshake, retrying until `deadline`.
async fn connect(host: &str, port: u16, deadline: Instant) -> Option<Sender> {
    loop {
        if let Ok(tcp) = dial::dial(host, port, deadline).await {
            let handshake = hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(tcp));
            if let Ok(Ok((sender, conn))) = tokio::time::timeout_at(deadline, handshake).await {
                tokio::spawn(async move {
                    let _ = conn.await;
                });
                return Some(sender);
            }
        }
        let retry_at = Instant::now() + Duration::from_millis(200);
        if retry_at >= deadline {
            tokio::time::sleep_until(deadline).await;
            return None;
        }
        tokio::time::sleep_until(retry_at).await;
    }
}

async fn call(mut sender: Sender, authority: &str, service: &str, deadline: Instant) -> Result<RpcAnswer, String> {
    let msg = prost::Message::encode_to_vec(&HealthCheckRequest { service: service.to_string() });
    let mut frame = Vec::with_capacity(msg.len() + 5);
    frame.push(0);
    frame.extend_from_slice(&u32::try_from(msg.len()).unwrap_or(u32::MAX).to_be_bytes());
    frame.extend_from_slice(&msg);
    let left = deadline.saturating_duration_since(Instant::now());
    let request = http::Request::builder()
        .method(http::Method::POST)
        .uri(format!("http://{authority}/grpc.health.v1.Health/Check"))
        .header(http::header::CONTENT_TYPE, "application/grpc")
        .header(http::header::TE, "trailers")
        .header(http::header::USER_AGENT, super::USER_AGENT)
        .header("grpc-timeout", format!("{}m", left.as_millis().max(1)))
        .body(Full::new(Bytes::from(frame)))
        .map_err(|e| e.to_string())?;
    sender.ready().await.map_err(|e| e.to_string())?;
    let resp = sender.send_request(request).await.map_err(|e| e.to_string())?;
    let status = resp.status().as_u16();
    let header_code =
        resp.headers().get("grpc-status").and_then(|v| v.to_str().ok()).and_then(|v| v.parse::<u32>().ok());
    let header_msg = resp.headers().get("grpc-message").and_then(|v| v.to_str().ok()).map(decode_message);
    if status != 200 {
        let reason = http::StatusCode::from_u16(status).ok().and_then(|s| s.canonical_reason()).unwrap_or("");
        return Ok(RpcAnswer {
            code: code_for_http_status(status),
            message: format!("unexpected HTTP status code received from server: {status} ({reason})"),
            response: None,
        });
    }
    if let Some(code) = header_code {
        // Trailers-only answer.
        return Ok(RpcAnswer { code, message: header_msg.unwrap_or_default(), response: None });
    }
    let mut body = resp.into_body();
    let mut data = Vec::new();
    let mut trailers = None;
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|e| e.to_string())?;
        match frame.into_data() {
            Ok(mut d) => {
                while d.has_remaining() {
                    let chunk = d.chunk();
                    data.extend_from_slice(chunk);
                    let n = chunk.len();
                    d.advance(n);
                }
            }
            Err(frame) => {
                if let Ok(t) = frame.into_trailers() {
                    trailers = Some(t);
                }
            }
        }
    }
    let Some(trailers) = trailers else {
        return Ok(RpcAnswer {
            code: INTERNAL,
            message: "server closed the stream without sending trailers".into(),
            response: None,
        });
    };
    let code = trailers
        .get("grpc-status")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u32>().ok())
        .unwrap_or(UNKNOWN);
    let message = trailers.get("grpc-message").and_then(|v| v.to_str().ok()).map(decode_message).unwrap_or_default();
    let response = if data.len() >= 5 {
        let len = u32::from_be_bytes([data[1], data[2], data[3], data[4]]) as usize;
        let end = (5 + len).min(data.len());
        prost::Message::decode(&data[5..end]).ok()
    } else {
        None
    };
    Ok(RpcAnswer { code, message, response })
}

/// Runs one gRPC health check against `host:port` for `service`, bounded by `timeout`.
pub async fn check(host: &str, port: u16, service: &str, timeout: Duration) -> (ProbeResult, String) {
    let deadline = Instant::now() + timeout;
    let addr = dial::join_host_port(host, port);
    let Some(sender) = connect(host, port, deadline).await else {
        return (
            ProbeResult::Failure,
            format!(
                "timeout: failed to connect service {addr:?} within {}: context deadline exceeded",
                go_duration(timeout)
            ),
        );
    };
    let answer = match tokio::time::timeout_at(deadline, call(sender, &addr, service, deadline)).await {
        Err(_) => {
            return (
                ProbeResult::Failure,
                format!("timeout: health rpc did not complete within {}", go_duration(timeout)),
            )
        }
        Ok(Err(e)) => {
            return (
                ProbeResult::Failure,
                format!("error: health rpc probe failed: rpc error: code = Unavailable desc = {e}"),
            )
        }
        Ok(Ok(a)) => a,
    };
    match answer.code {
        0 => {}
        UNIMPLEMENTED => {
            return (
                ProbeResult::Failure,
                format!(
                    "this server does not implement the grpc health protocol (grpc.health.v1.Health): {}",
                    answer.message
                ),
            )
        }
        DEADLINE_EXCEEDED => {
            return (
                ProbeResult::Failure,
                format!("timeout: health rpc did not complete within {}", go_duration(timeout)),
            )
        }
        code => {
            return (
                ProbeResult::Failure,
                format!(
                    "error: health rpc probe failed: rpc error: code = {} desc = {}",
                    code_name(code),
                    answer.message
                ),
            )
        }
    }
    let status = answer.response.map(|r| r.status).unwrap_or(0);
    if status != SERVING {
        return (ProbeResult::Failure, format!("service unhealthy (responded with {:?})", serving_status_name(status)));
    }
    (ProbeResult::Success, "service is serving".to_string())
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use hyper::service::service_fn;
    use std::convert::Infallible;

    /// How the in-process health server answers.
    #[derive(Clone, Copy)]
    pub enum Answer {
        Status(i32),
        Code(u32, &'static str),
        Hang,
    }

    fn grpc_frame(msg: &impl prost::Message) -> Bytes {
        let m = msg.encode_to_vec();
        let mut f = vec![0];
        f.extend_from_slice(&(m.len() as u32).to_be_bytes());
        f.extend_from_slice(&m);
        Bytes::from(f)
    }

    /// An h2c health server on 127.0.0.1; returns its port.
    pub async fn serve(answer: Answer) -> u16 {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let port = listener.local_addr().expect("addr").port();
        tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else { return };
                tokio::spawn(async move {
                    let svc = service_fn(move |req: http::Request<hyper::body::Incoming>| async move {
                        let path = req.uri().path().to_string();
                        let _ = req.into_body().collect().await;
                        assert_eq!(path, "/grpc.health.v1.Health/Check");
                        type Body = http_body_util::StreamBody<
                            futures::stream::Iter<std::vec::IntoIter<Result<hyper::body::Frame<Bytes>, Infallible>>>,
                        >;
                        let frames: Vec<Result<hyper::body::Frame<Bytes>, Infallible>> = match answer {
                            Answer::Status(s) => {
                                let mut t = http::HeaderMap::new();
                                t.insert("grpc-status", http::HeaderValue::from_static("0"));
                                vec![
                                    Ok(hyper::body::Frame::data(grpc_frame(&HealthCheckResponse { status: s }))),
                                    Ok(hyper::body::Frame::trailers(t)),
                                ]
                            }
                            Answer::Code(code, msg) => {
                                let mut t = http::HeaderMap::new();
                                t.insert("grpc-status", http::HeaderValue::from_str(&code.to_string()).expect("hv"));
                                t.insert("grpc-message", http::HeaderValue::from_static(msg));
                                vec![Ok(hyper::body::Frame::trailers(t))]
                            }
                            Answer::Hang => {
                                tokio::time::sleep(Duration::from_secs(30)).await;
                                vec![]
                            }
                        };
                        let body: Body = http_body_util::StreamBody::new(futures::stream::iter(frames));
                        let resp = http::Response::builder()
                            .header("content-type", "application/grpc")
                            .body(body)
                            .expect("response");
                        Ok::<_, Infallible>(resp)
                    });
                    let _ = hyper::server::conn::http2::Builder::new(TokioExecutor::new())
                        .serve_connection(TokioIo::new(stream), svc)
                        .await;
                });
            }
        });
        port
    }

    #[tokio::test]
    async fn serving_is_success_and_other_states_fail() {
        let port = serve(Answer::Status(SERVING)).await;
        assert_eq!(
            check("127.0.0.1", port, "", Duration::from_secs(2)).await,
            (ProbeResult::Success, "service is serving".to_string())
        );
        let port = serve(Answer::Status(2)).await;
        assert_eq!(
            check("127.0.0.1", port, "db", Duration::from_secs(2)).await,
            (ProbeResult::Failure, "service unhealthy (responded with \"NOT_SERVING\")".to_string())
        );
    }

    #[tokio::test]
    async fn error_codes_map_to_upstream_messages() {
        let port = serve(Answer::Code(12, "unknown service grpc.health.v1.Health")).await;
        assert_eq!(
            check("127.0.0.1", port, "", Duration::from_secs(2)).await.1,
            "this server does not implement the grpc health protocol (grpc.health.v1.Health): unknown service grpc.health.v1.Health"
        );
        let port = serve(Answer::Code(5, "unknown%20service")).await;
        assert_eq!(
            check("127.0.0.1", port, "x", Duration::from_secs(2)).await.1,
            "error: health rpc probe failed: rpc error: code = NotFound desc = unknown service"
        );
    }

    #[tokio::test]
    async fn slow_servers_and_closed_ports_time_out() {
        let port = serve(Answer::Hang).await;
        assert_eq!(
            check("127.0.0.1", port, "", Duration::from_millis(300)).await,
            (ProbeResult::Failure, "timeout: health rpc did not complete within 300ms".to_string())
        );
        let closed = std::net::TcpListener::bind("127.0.0.1:0").expect("bind").local_addr().expect("addr").port();
        let (result, msg) = check("127.0.0.1", closed, "", Duration::from_millis(300)).await;
        assert_eq!(result, ProbeResult::Failure);
        assert_eq!(
            msg,
            format!(
                "timeout: failed to connect service \"127.0.0.1:{closed}\" within 300ms: context deadline exceeded"
            )
        );
    }
}
