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
                    tracing::debug!(error = &error as &dyn std::error::Error, name = %query.name, "forwarding failed");
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::forward::ForwardError;
    use crate::records::fixtures::{namespace, service, slice};
    use crate::resolve::tests::{ip, name, sample};
    use std::sync::Mutex;

    /// An upstream that answers every question with one A record (192.0.2.1) and remembers
    /// what it was asked.
    #[derive(Default)]
    struct FakeUpstream {
        asked: Mutex<Vec<(String, bool)>>,
        fail: bool,
    }

    impl Upstream for FakeUpstream {
        async fn exchange(&self, query: &[u8], over_tcp: bool) -> Result<Vec<u8>, ForwardError> {
            let q = Message::from_vec(query).expect("upstream got a valid query");
            let qname = q.queries[0].name().clone();
            self.asked.lock().expect("asked").push((qname.to_ascii(), over_tcp));
            if self.fail {
                return Err(ForwardError::NoUpstream);
            }
            let mut reply = Message::response(q.metadata.id, OpCode::Query);
            reply.add_queries(q.queries.iter().cloned());
            reply.add_answer(hickory_proto::rr::Record::from_rdata(
                qname,
                300,
                hickory_proto::rr::RData::A(hickory_proto::rr::rdata::A("192.0.2.1".parse().expect("ip"))),
            ));
            Ok(reply.to_vec().expect("encode"))
        }
    }

    fn handler(records: Records, upstream: FakeUpstream) -> Handler<FakeUpstream> {
        let (_tx, rx) = watch::channel(Arc::new(records));
        Handler::new(rx, upstream)
    }

    fn query(qname: &str, qtype: RecordType, edns: bool) -> Message {
        let mut m = Message::query();
        m.metadata.recursion_desired = true;
        m.add_query(WireQuery::query(name(qname), qtype));
        if edns {
            let mut e = Edns::new();
            e.set_max_payload(1232);
            m.set_edns(e);
        }
        m
    }

    async fn ask(h: &Handler<FakeUpstream>, m: &Message, over_tcp: bool) -> Message {
        let raw = h.handle(&m.to_vec().expect("encode"), over_tcp).await.expect("a reply");
        Message::from_vec(&raw).expect("decode reply")
    }

    #[tokio::test]
    async fn cluster_answers_are_authoritative_and_echo_id_question_and_rd() {
        let h = handler(sample(), FakeUpstream::default());
        let q = query("web.default.svc.cluster.local.", RecordType::A, false);
        let reply = ask(&h, &q, false).await;
        assert_eq!(reply.metadata.id, q.metadata.id);
        assert_eq!(reply.metadata.message_type, MessageType::Response);
        assert!(reply.metadata.authoritative && reply.metadata.recursion_desired && reply.metadata.recursion_available);
        assert_eq!(reply.queries, q.queries);
        assert_eq!(reply.answers.len(), 1);
        assert!(reply.edns.is_none());
        assert!(h.upstream.asked.lock().expect("asked").is_empty());
    }

    #[tokio::test]
    async fn nxdomain_replies_carry_the_soa_and_edns_when_asked_with_edns() {
        let h = handler(sample(), FakeUpstream::default());
        let reply = ask(&h, &query("nope.default.svc.cluster.local.", RecordType::A, true), false).await;
        assert_eq!(reply.metadata.response_code, ResponseCode::NXDomain);
        assert_eq!(reply.authorities.len(), 1);
        assert_eq!(reply.authorities[0].record_type(), RecordType::SOA);
        assert_eq!(reply.edns.as_ref().map(Edns::max_payload), Some(MAX_UDP_PAYLOAD));
    }

    #[tokio::test]
    async fn outside_names_are_relayed_to_the_upstream_unchanged() {
        let h = handler(sample(), FakeUpstream::default());
        let q = query("example.com.", RecordType::A, false);
        let reply = ask(&h, &q, true).await;
        assert_eq!(reply.metadata.id, q.metadata.id);
        assert_eq!(reply.answers.len(), 1);
        assert_eq!(*h.upstream.asked.lock().expect("asked"), vec![("example.com.".to_string(), true)]);
    }

    #[tokio::test]
    async fn a_failing_upstream_gives_servfail() {
        let h = handler(sample(), FakeUpstream { fail: true, ..Default::default() });
        let reply = ask(&h, &query("example.com.", RecordType::A, false), false).await;
        assert_eq!(reply.metadata.response_code, ResponseCode::ServFail);
    }

    #[tokio::test]
    async fn external_name_targets_outside_the_cluster_are_resolved_upstream() {
        let h = handler(sample(), FakeUpstream::default());
        let reply = ask(&h, &query("ext.default.svc.cluster.local.", RecordType::A, false), false).await;
        let got: Vec<String> = reply.answers.iter().map(|r| format!("{} {}", r.name, r.data)).collect();
        assert_eq!(got, vec!["ext.default.svc.cluster.local. example.com.", "example.com. 192.0.2.1"]);
    }

    #[tokio::test]
    async fn udp_replies_too_large_for_the_client_are_truncated_and_complete_over_tcp() {
        let endpoints: Vec<String> = (1..=60).map(|i| format!("10.42.1.{i}")).collect();
        let eps: Vec<(&str, Option<&str>, Option<bool>)> =
            endpoints.iter().map(|e| (e.as_str(), None, Some(true))).collect();
        let svc = service("default", "big", "None", &[("http", "TCP", 80)]);
        let sl = slice("default", "big", &eps, &[("http", "TCP", 80)]);
        let r = Records::build("cluster.local", ip("10.43.0.10"), 1, [&svc], [&sl], [&namespace("default")]);
        let h = handler(r, FakeUpstream::default());
        let q = query("_http._tcp.big.default.svc.cluster.local.", RecordType::SRV, false);
        let udp = ask(&h, &q, false).await;
        assert!(udp.metadata.truncation);
        assert!(udp.answers.is_empty());
        let tcp = ask(&h, &q, true).await;
        assert!(!tcp.metadata.truncation);
        assert_eq!(tcp.answers.len(), 60);
        assert_eq!(tcp.additionals.len(), 60);
    }

    #[tokio::test]
    async fn malformed_and_unsupported_requests_get_error_codes() {
        let h = handler(sample(), FakeUpstream::default());
        let garbage = [0xAB, 0xCD, 0x01, 0x00, 0, 9, 0, 0, 0, 0, 0, 0, 1, 2, 3];
        let raw = h.handle(&garbage, false).await.expect("a FORMERR reply");
        let reply = Message::from_vec(&raw).expect("decode");
        assert_eq!((reply.metadata.id, reply.metadata.response_code), (0xABCD, ResponseCode::FormErr));
        assert!(h.handle(&[1, 2, 3], false).await.is_none(), "shorter than a header: dropped");

        let mut two = query("web.default.svc.cluster.local.", RecordType::A, false);
        two.add_query(WireQuery::query(name("db.default.svc.cluster.local."), RecordType::A));
        assert_eq!(ask(&h, &two, false).await.metadata.response_code, ResponseCode::FormErr);

        let mut update = query("web.default.svc.cluster.local.", RecordType::A, false);
        update.metadata.op_code = OpCode::Update;
        assert_eq!(ask(&h, &update, false).await.metadata.response_code, ResponseCode::NotImp);

        let axfr = query("cluster.local.", RecordType::AXFR, false);
        assert_eq!(ask(&h, &axfr, true).await.metadata.response_code, ResponseCode::Refused);

        let mut response = query("web.default.svc.cluster.local.", RecordType::A, false);
        response.metadata.message_type = MessageType::Response;
        assert!(h.handle(&response.to_vec().expect("encode"), false).await.is_none(), "responses are dropped");
    }

    #[tokio::test]
    async fn udp_and_tcp_listeners_answer_on_loopback_and_see_new_records_at_once() {
        let (udp, tcp) = bind("127.0.0.1:0".parse().expect("addr")).await.expect("bind");
        let addr = udp.local_addr().expect("addr");
        let (tx, rx) = watch::channel(Arc::new(sample()));
        let h = Arc::new(Handler::new(rx, FakeUpstream::default()));
        let cancel = CancellationToken::new();
        let tasks = [
            tokio::spawn(serve_udp(Arc::new(udp), h.clone(), cancel.clone())),
            tokio::spawn(serve_tcp(tcp, h, cancel.clone())),
        ];

        let client = UdpSocket::bind("127.0.0.1:0").await.expect("client");
        let q = query("web.default.svc.cluster.local.", RecordType::A, true);
        client.send_to(&q.to_vec().expect("encode"), addr).await.expect("send");
        let mut buf = [0u8; 1500];
        let n =
            tokio::time::timeout(Duration::from_secs(5), client.recv(&mut buf)).await.expect("in time").expect("recv");
        let reply = Message::from_vec(&buf[..n]).expect("decode");
        assert_eq!(reply.answers.len(), 1);

        // A new Service is visible to the very next question.
        let svc = service("default", "late", "10.43.0.99", &[("http", "TCP", 80)]);
        tx.send_replace(Arc::new(Records::build(
            "cluster.local",
            ip("10.43.0.10"),
            2,
            [&svc],
            [],
            [&namespace("default")],
        )));
        let mut stream = TcpStream::connect(addr).await.expect("connect");
        for _ in 0..2 {
            let bytes = query("late.default.svc.cluster.local.", RecordType::A, false).to_vec().expect("encode");
            stream.write_all(&u16::try_from(bytes.len()).expect("len").to_be_bytes()).await.expect("write");
            stream.write_all(&bytes).await.expect("write");
            let len = stream.read_u16().await.expect("len");
            let mut raw = vec![0u8; usize::from(len)];
            stream.read_exact(&mut raw).await.expect("reply");
            let reply = Message::from_vec(&raw).expect("decode");
            assert_eq!(reply.answers.len(), 1, "both questions on one connection are answered");
        }
        cancel.cancel();
        for t in tasks {
            t.await.expect("listener task");
        }
    }
}
