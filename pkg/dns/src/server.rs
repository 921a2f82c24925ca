//! The DNS transport: UDP and TCP (RFC 1035 length-prefixed) listeners that decode each message
//! with `hickory-proto`, answer it from the current [`Records`] snapshot or relay it upstream,
//! and encode the reply (truncated, with TC set, when it exceeds what the client can take over
//! UDP).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use hickory_proto::op::{Edns, Message, MessageType, OpCode, Query as WireQuery, ResponseCode};
use hickory_proto::rr::{DNSClass, Name, RecordType};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream, UdpSocket};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::forward::Upstream;
use crate::records::Records;
use crate::resolve::{resolve, Answer, Query, Response};

/// The largest UDP reply we send to EDNS clients (the DNS flag day 2020 value).
pub const MAX_UDP_PAYLOAD: u16 = 1232;
/// UDP reply limit for clients without EDNS.
const PLAIN_UDP_PAYLOAD: usize = 512;
/// An idle TCP connection is closed after this long.
const TCP_IDLE: Duration = Duration::from_secs(10);

/// Turns request bytes into reply bytes.
pub struct Handler<U> {
    records: watch::Receiver<Arc<Records>>,
    upstream: U,
}

impl<U: Upstream> Handler<U> {
    pub fn new(records: watch::Receiver<Arc<Records>>, upstream: U) -> Handler<U> {
        Handler { records, upstream }
    }

    /// The reply to one request, or `None` when it must be dropped (not a query, unparsable
    /// header).
    pub async fn handle(&self, request: &[u8], over_tcp: bool) -> Option<Vec<u8>> {
        let message = match Message::from_vec(request) {
            Ok(m) => m,
            Err(error) => {
                tracing::debug!(%error, "malformed DNS request");
                let id = u16::from_be_bytes([*request.first()?, *request.get(1)?]);
                return (request.len() >= 12)
                    .then(|| Message::error_msg(id, OpCode::Query, ResponseCode::FormErr).to_vec().ok())
                    .flatten();
            }
        };
        if message.metadata.message_type != MessageType::Query {
            return None;
        }
        let refuse = |code| encode(&reply_to(&message, code), &message, over_tcp);
        if message.metadata.op_code != OpCode::Query {
            return refuse(ResponseCode::NotImp);
        }
        let [question] = message.queries.as_slice() else {
            return refuse(ResponseCode::FormErr);
        };
        if question.query_class() != DNSClass::IN
            || matches!(question.query_type(), RecordType::AXFR | RecordType::IXFR)
        {
            return refuse(ResponseCode::Refused);
        }
        let query = Query::new(question.name().clone(), question.query_type());
        let snapshot = self.records.borrow().clone();
        match resolve(&snapshot, &query) {
            Response::Forward => match self.upstream.exchange(request, over_tcp).await {
                Ok(reply) => Some(reply),
                Err(error) => {
                    tracing::debug!(%error, name = %query.name, "forwarding failed");
                    refuse(ResponseCode::ServFail)
                }
            },
            Response::Answer(answer) => {
                let mut reply = reply_to(&message, answer.code);
                reply.metadata.authoritative = answer.code != ResponseCode::ServFail;
                let chase = answer.chase.clone();
                fill(&mut reply, answer);
                if let Some(target) = chase {
                    self.chase(&mut reply, target, query.query_type).await;
                }
                encode(&reply, &message, over_tcp)
            }
        }
    }

    /// Appends the upstream's answers for an ExternalName target outside the cluster.
    async fn chase(&self, reply: &mut Message, target: Name, query_type: RecordType) {
        let mut ask = Message::query();
        ask.metadata.recursion_desired = true;
        ask.add_query(WireQuery::query(target.clone(), query_type));
        let Ok(bytes) = ask.to_vec() else { return };
        match self.upstream.exchange(&bytes, false).await {
            Ok(raw) => match Message::from_vec(&raw) {
                Ok(upstream) => reply.answers.extend(upstream.answers),
                Err(error) => tracing::debug!(%error, %target, "unparsable upstream reply"),
            },
            Err(error) => tracing::debug!(%error, %target, "cannot resolve the ExternalName target"),
        }
    }
}

/// A reply skeleton: the question echoed, RD copied, recursion available (we forward).
fn reply_to(request: &Message, code: ResponseCode) -> Message {
    let mut reply = Message::response(request.metadata.id, request.metadata.op_code);
    reply.metadata.recursion_desired = request.metadata.recursion_desired;
    reply.metadata.checking_disabled = request.metadata.checking_disabled;
    reply.metadata.recursion_available = true;
    reply.metadata.response_code = code;
    reply.add_queries(request.queries.iter().cloned());
    if request.edns.is_some() {
        let mut edns = Edns::new();
        edns.set_max_payload(MAX_UDP_PAYLOAD);
        reply.set_edns(edns);
    }
    reply
}

fn fill(reply: &mut Message, answer: Answer) {
    reply.answers = answer.answers;
    reply.authorities = answer.authority;
    reply.additionals = answer.additionals;
}

/// Encodes `reply`; over UDP, a reply too large for the client becomes an empty one with TC set.
fn encode(reply: &Message, request: &Message, over_tcp: bool) -> Option<Vec<u8>> {
    let bytes = match reply.to_vec() {
        Ok(b) => b,
        Err(error) => {
            tracing::warn!(%error, "cannot encode a DNS reply");
            return Message::error_msg(reply.metadata.id, reply.metadata.op_code, ResponseCode::ServFail).to_vec().ok();
        }
    };
    let limit = match &request.edns {
        Some(edns) => usize::from(edns.max_payload().clamp(512, MAX_UDP_PAYLOAD)),
        None => PLAIN_UDP_PAYLOAD,
    };
    if over_tcp || bytes.len() <= limit {
        return Some(bytes);
    }
    reply.truncate().to_vec().ok()
}

/// Answers every datagram on `socket` until `cancel` fires. Cluster answers are sent inline;
/// forwarded questions get a task each so a slow upstream blocks nobody.
pub async fn serve_udp<U: Upstream>(socket: Arc<UdpSocket>, handler: Arc<Handler<U>>, cancel: CancellationToken) {
    let mut buf = vec![0u8; 65535];
    loop {
        let (n, peer) = tokio::select! {
            _ = cancel.cancelled() => return,
            r = socket.recv_from(&mut buf) => match r {
                Ok(r) => r,
                Err(error) => {
                    // ICMP errors from earlier replies surface here; the socket stays usable.
                    tracing::debug!(%error, "udp receive failed");
                    continue;
                }
            },
        };
        let request = buf[..n].to_vec();
        let (socket, handler) = (socket.clone(), handler.clone());
        let reply = async move {
            if let Some(reply) = handler.handle(&request, false).await {
                if let Err(error) = socket.send_to(&reply, peer).await {
                    tracing::debug!(%error, %peer, "udp send failed");
                }
            }
        };
        // Most questions are answered from memory without awaiting anything: poll once inline
        // and only spawn what is still pending (a forwarded question).
        let mut reply = Box::pin(reply);
        if futures::poll!(reply.as_mut()).is_pending() {
            tokio::spawn(reply);
        }
    }
}

/// Accepts TCP connections on `listener` until `cancel` fires.
pub async fn serve_tcp<U: Upstream>(listener: TcpListener, handler: Arc<Handler<U>>, cancel: CancellationToken) {
    loop {
        let (stream, peer) = tokio::select! {
            _ = cancel.cancelled() => return,
            r = listener.accept() => match r {
                Ok(r) => r,
                Err(error) => {
                    tracing::debug!(%error, "tcp accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
        };
        let (handler, cancel) = (handler.clone(), cancel.clone());
        tokio::spawn(async move {
            tokio::select! {
                _ = cancel.cancelled() => {}
                r = connection(stream, &handler) => if let Err(error) = r {
                    tracing::debug!(%error, %peer, "tcp connection ended");
                },
            }
        });
    }
}

/// Serves length-prefixed messages on one connection, in order, until it closes or idles.
async fn connection<U: Upstream>(mut stream: TcpStream, handler: &Handler<U>) -> std::io::Result<()> {
    loop {
        let len = match tokio::time::timeout(TCP_IDLE, stream.read_u16()).await {
            Err(_) => return Ok(()),
            Ok(Err(e)) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(()),
            Ok(r) => r?,
        };
        let mut request = vec![0u8; usize::from(len)];
        tokio::time::timeout(TCP_IDLE, stream.read_exact(&mut request))
            .await
            .map_err(|_| std::io::Error::new(std::io::ErrorKind::TimedOut, "request body"))??;
        let Some(reply) = handler.handle(&request, true).await else { continue };
        let reply_len =
            u16::try_from(reply.len()).map_err(|_| std::io::Error::other("reply longer than 65535 bytes"))?;
        let mut framed = Vec::with_capacity(reply.len() + 2);
        framed.extend_from_slice(&reply_len.to_be_bytes());
        framed.extend_from_slice(&reply);
        stream.write_all(&framed).await?;
    }
}

/// Binds UDP and TCP on the same `addr`; port 0 picks one free for both.
pub async fn bind(addr: SocketAddr) -> std::io::Result<(UdpSocket, TcpListener)> {
    if addr.port() != 0 {
        return Ok((UdpSocket::bind(addr).await?, TcpListener::bind(addr).await?));
    }
    let mut last = None;
    for _ in 0..16 {
        let udp = UdpSocket::bind(addr).await?;
        let port = udp.local_addr()?.port();
        match TcpListener::bind(SocketAddr::new(addr.ip(), port)).await {
            Ok(tcp) => return Ok((udp, tcp)),
            Err(e) if e.kind() == std::io::ErrorKind::AddrInUse => last = Some(e),
            Err(e) => return Err(e),
        }
    }
    Err(last.unwrap_or_else(|| std::io::Error::other("no port free for both UDP and TCP")))
}
