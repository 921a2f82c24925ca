//! Forwarding of names outside the cluster to the host's resolvers: the client's query bytes go
//! upstream unchanged and the upstream's answer comes back unchanged (same ID, same EDNS), over
//! UDP with a TCP retry on truncation, or over TCP when the client asked over TCP. The
//! resolvers come from the host's `/etc/resolv.conf`.

use std::future::Future;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::path::Path;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpStream, UdpSocket};

/// How long one upstream may take to answer before the next is tried.
pub const UPSTREAM_TIMEOUT: Duration = Duration::from_secs(2);

#[derive(Debug, thiserror::Error)]
pub enum ForwardError {
    #[error("forwarding a query: no upstream resolver is configured")]
    NoUpstream,
    #[error("forwarding a query to {server} over {transport}")]
    Exchange { server: SocketAddr, transport: &'static str, source: std::io::Error },
    #[error("forwarding a query to {server} over {transport}: no answer within {timeout:?}")]
    Timeout { server: SocketAddr, transport: &'static str, timeout: Duration },
}

/// Somewhere to send the questions the cluster cannot answer.
pub trait Upstream: Send + Sync + 'static {
    /// Sends one DNS message and returns the reply's bytes.
    fn exchange(&self, query: &[u8], over_tcp: bool) -> impl Future<Output = Result<Vec<u8>, ForwardError>> + Send;
}

/// The host's resolvers, tried in order.
#[derive(Clone, Debug)]
pub struct Forwarder {
    servers: Vec<SocketAddr>,
    timeout: Duration,
}

impl Forwarder {
    pub fn new(servers: Vec<SocketAddr>) -> Forwarder {
        Forwarder { servers, timeout: UPSTREAM_TIMEOUT }
    }
}

impl Upstream for Forwarder {
    async fn exchange(&self, query: &[u8], over_tcp: bool) -> Result<Vec<u8>, ForwardError> {
        let mut last = ForwardError::NoUpstream;
        for server in &self.servers {
            let result = if over_tcp {
                exchange_tcp(*server, query, self.timeout).await
            } else {
                match exchange_udp(*server, query, self.timeout).await {
                    Ok(reply) if truncated(&reply) => exchange_tcp(*server, query, self.timeout).await,
                    other => other,
                }
            };
            match result {
                Ok(reply) => return Ok(reply),
                Err(e) => {
                    // As a `dyn Error`, so that the log line carries its sources.
                    tracing::debug!(error = &e as &dyn std::error::Error, "upstream resolver failed; trying the next");
                    last = e;
                }
            }
        }
        Err(last)
    }
}

/// The TC bit of a DNS header.
fn truncated(reply: &[u8]) -> bool {
    reply.get(2).is_some_and(|b| b & 0x02 != 0)
}

async fn exchange_udp(server: SocketAddr, query: &[u8], timeout: Duration) -> Result<Vec<u8>, ForwardError> {
    let io = |source| ForwardError::Exchange { server, transport: "udp", source };
    let local: SocketAddr = match server {
        SocketAddr::V4(_) => (Ipv4Addr::UNSPECIFIED, 0).into(),
        SocketAddr::V6(_) => (Ipv6Addr::UNSPECIFIED, 0).into(),
    };
    let socket = UdpSocket::bind(local).await.map_err(io)?;
    socket.connect(server).await.map_err(io)?;
    socket.send(query).await.map_err(io)?;
    let mut buf = vec![0u8; 65535];
    let receive = async {
        loop {
            let n = socket.recv(&mut buf).await?;
            // A reply to another question (a late answer to nothing we sent) is not ours.
            if n >= 12 && buf[..2] == query[..2.min(query.len())] {
                return Ok::<_, std::io::Error>(buf[..n].to_vec());
            }
        }
    };
    match tokio::time::timeout(timeout, receive).await {
        Ok(r) => r.map_err(io),
        Err(_) => Err(ForwardError::Timeout { server, transport: "udp", timeout }),
    }
}

async fn exchange_tcp(server: SocketAddr, query: &[u8], timeout: Duration) -> Result<Vec<u8>, ForwardError> {
    let io = |source| ForwardError::Exchange { server, transport: "tcp", source };
    let exchange = async {
        let mut stream = TcpStream::connect(server).await?;
        let len = u16::try_from(query.len()).map_err(|_| std::io::Error::other("query longer than 65535 bytes"))?;
        let mut framed = Vec::with_capacity(query.len() + 2);
        framed.extend_from_slice(&len.to_be_bytes());
        framed.extend_from_slice(query);
        stream.write_all(&framed).await?;
        let reply_len = stream.read_u16().await?;
        let mut reply = vec![0u8; usize::from(reply_len)];
        stream.read_exact(&mut reply).await?;
        Ok::<_, std::io::Error>(reply)
    };
    match tokio::time::timeout(timeout, exchange).await {
        Ok(r) => r.map_err(io),
        Err(_) => Err(ForwardError::Timeout { server, transport: "tcp", timeout }),
    }
}

/// The `nameserver` entries of a resolv.conf text, port 53, leaving out `exclude` (the cluster
/// DNS address itself: forwarding to it would loop).
pub fn parse_resolv_conf(text: &str, exclude: IpAddr) -> Vec<SocketAddr> {
    text.lines()
        .filter_map(|line| {
            let mut words = line.split_whitespace();
            (words.next()? == "nameserver").then_some(())?;
            // A zone index (`fe80::1%eth0`) cannot be given to a socket address here.
            words.next()?.split('%').next()?.parse::<IpAddr>().ok()
        })
        .filter(|ip| *ip != exclude)
        .map(|ip| SocketAddr::new(ip, 53))
        .collect()
}

/// The host's resolvers from the resolv.conf at `path` (usually `/etc/resolv.conf`), leaving
/// out `exclude`; none when the file cannot be read.
pub fn host_upstreams(path: &Path, exclude: IpAddr) -> Vec<SocketAddr> {
    match std::fs::read_to_string(path) {
        Ok(text) => parse_resolv_conf(&text, exclude),
        Err(error) => {
            tracing::warn!(path = %path.display(), %error, "cannot read the host's resolvers; names outside the cluster will fail");
            Vec::new()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resolv_conf_nameservers_become_port_53_upstreams_without_the_cluster_dns() {
        let text = "# generated\nsearch example.org\nnameserver 192.0.2.53\nnameserver 10.43.0.10\n\
                    nameserver fe80::1%eth0\nnameserver   2001:db8::53  \noptions ndots:2\nnameserver bogus\n";
        let got = parse_resolv_conf(text, "10.43.0.10".parse().expect("ip"));
        let want: Vec<SocketAddr> =
            ["192.0.2.53:53", "[fe80::1]:53", "[2001:db8::53]:53"].iter().map(|s| s.parse().expect("addr")).collect();
        assert_eq!(got, want);
    }

    #[test]
    fn truncation_is_read_from_the_header_flags() {
        assert!(truncated(&[0, 1, 0x83, 0x80]));
        assert!(!truncated(&[0, 1, 0x81, 0x80]));
        assert!(!truncated(&[0]));
    }

    #[tokio::test]
    async fn forwarding_without_upstreams_fails_at_once() {
        let err = Forwarder::new(Vec::new()).exchange(&[0; 12], false).await.expect_err("no upstream");
        assert!(matches!(err, ForwardError::NoUpstream));
    }

    #[tokio::test]
    async fn udp_forwarding_relays_bytes_and_falls_back_to_tcp_on_truncation() {
        // A loopback "upstream": UDP answers truncated, TCP answers in full.
        // The same port for both: a UDP port the kernel picks may be taken for TCP.
        let (udp, tcp) = crate::server::bind("127.0.0.1:0".parse().expect("addr")).await.expect("udp and tcp");
        let addr = udp.local_addr().expect("addr");
        tokio::spawn(async move {
            let mut buf = [0u8; 512];
            let (n, peer) = udp.recv_from(&mut buf).await.expect("recv");
            let mut reply = buf[..n].to_vec();
            reply[2] |= 0x82; // QR + TC
            udp.send_to(&reply, peer).await.expect("send");
        });
        tokio::spawn(async move {
            let (mut s, _) = tcp.accept().await.expect("accept");
            let len = s.read_u16().await.expect("len");
            let mut q = vec![0u8; usize::from(len)];
            s.read_exact(&mut q).await.expect("query");
            q[2] |= 0x80;
            q.push(0xAA); // marks the TCP reply
            s.write_all(&u16::try_from(q.len()).expect("len").to_be_bytes()).await.expect("write");
            s.write_all(&q).await.expect("write");
        });
        let query = [0x12, 0x34, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0];
        let reply = Forwarder::new(vec![addr]).exchange(&query, false).await.expect("reply");
        assert_eq!(&reply[..2], &[0x12, 0x34]);
        assert_eq!(reply.last(), Some(&0xAA));
    }
}
