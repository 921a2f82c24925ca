//! TCP connections for probes and hooks, with Go's error texts (`dial tcp 10.42.0.5:80:
//! connect: connection refused`, `…: i/o timeout`) because those end up in events users read.

use std::net::{IpAddr, SocketAddr};
use tokio::net::TcpStream;
use tokio::time::Instant;

/// Why a connection could not be made; displays as Go's `net.OpError`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DialError {
    #[error("dial tcp {addr}: connect: {reason}")]
    Connect { addr: String, reason: String },
    #[error("dial tcp {addr}: i/o timeout")]
    Timeout { addr: String },
    #[error("dial tcp: lookup {host}: {reason}")]
    Lookup { host: String, reason: String },
}

/// An OS error as Go prints it: the C library's text, lower-cased, without `(os error N)`.
pub fn go_errno_text(e: &std::io::Error) -> String {
    let text = e.to_string();
    let text = match text.find(" (os error") {
        Some(i) => &text[..i],
        None => &text[..],
    };
    let mut chars = text.chars();
    match chars.next() {
        Some(first) => first.to_lowercase().chain(chars).collect(),
        None => String::new(),
    }
}

/// `host:port` as Go's `net.JoinHostPort` writes it (`[fd00::1]:80`).
pub fn join_host_port(host: &str, port: u16) -> String {
    if host.contains(':') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    }
}

/// Resolves `host` (an IP or a name) and connects to the first address that answers, by
/// `deadline`.
pub async fn dial(host: &str, port: u16, deadline: Instant) -> Result<TcpStream, DialError> {
    let addr_text = join_host_port(host, port);
    let addrs: Vec<SocketAddr> = match host.parse::<IpAddr>() {
        Ok(ip) => vec![SocketAddr::new(ip, port)],
        Err(_) => match tokio::time::timeout_at(deadline, tokio::net::lookup_host((host, port))).await {
            Ok(Ok(a)) => a.collect(),
            Ok(Err(e)) => return Err(DialError::Lookup { host: host.to_string(), reason: go_errno_text(&e) }),
            Err(_) => return Err(DialError::Timeout { addr: addr_text }),
        },
    };
    let mut last = DialError::Lookup { host: host.to_string(), reason: "no such host".into() };
    for addr in addrs {
        match tokio::time::timeout_at(deadline, TcpStream::connect(addr)).await {
            Ok(Ok(s)) => {
                let _ = s.set_nodelay(true);
                return Ok(s);
            }
            Ok(Err(e)) => last = DialError::Connect { addr: addr.to_string(), reason: go_errno_text(&e) },
            Err(_) => return Err(DialError::Timeout { addr: addr.to_string() }),
        }
    }
    Err(last)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn os_errors_read_like_go() {
        let e = std::io::Error::from_raw_os_error(111);
        assert_eq!(go_errno_text(&e), "connection refused");
        let e = std::io::Error::from_raw_os_error(113);
        assert_eq!(go_errno_text(&e), "no route to host");
        assert_eq!(join_host_port("fd00::1", 80), "[fd00::1]:80");
        assert_eq!(join_host_port("10.0.0.1", 8080), "10.0.0.1:8080");
    }

    #[tokio::test]
    async fn refused_connections_name_the_address() {
        // Bind then drop to find a port nobody listens on.
        let port = std::net::TcpListener::bind("127.0.0.1:0").expect("bind").local_addr().expect("addr").port();
        let err = dial("127.0.0.1", port, Instant::now() + Duration::from_secs(2)).await.expect_err("refused");
        assert_eq!(err.to_string(), format!("dial tcp 127.0.0.1:{port}: connect: connection refused"));
    }
}
