//! IPv4 CIDR blocks (`10.42.0.0/16`) for nftables' `ip` family: k1s_api's [`net::Cidr`], held
//! to IPv4, with IPv4-typed accessors and nft-friendly display.

use k1s_api::net;
use std::fmt;
use std::net::{IpAddr, Ipv4Addr};
use std::str::FromStr;

/// An IPv4 network in CIDR notation. The address is kept as written (host bits are not cleared),
/// like `net.ParseCIDR`'s first result; [`Cidr::network`] gives the masked address.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Cidr(net::Cidr);

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum CidrError {
    #[error("parsing CIDR {text:?}: expected ADDRESS/PREFIX with an IPv4 address and a prefix of 0-32")]
    Parse { text: String },
}

impl Cidr {
    pub fn new(addr: Ipv4Addr, prefix: u8) -> Option<Self> {
        net::Cidr::new(IpAddr::V4(addr), prefix).map(Self)
    }

    pub fn prefix(&self) -> u8 {
        self.0.prefix()
    }

    /// The network address (host bits cleared).
    pub fn network(&self) -> Ipv4Addr {
        match self.0.network() {
            IpAddr::V4(v4) => v4,
            IpAddr::V6(_) => unreachable!("a proxy Cidr is IPv4 by construction"),
        }
    }

    pub fn contains(&self, ip: Ipv4Addr) -> bool {
        self.0.contains(IpAddr::V4(ip))
    }
}

impl FromStr for Cidr {
    type Err = CidrError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.parse::<net::Cidr>() {
            Ok(c) if c.is_ipv4() => Ok(Cidr(c)),
            _ => Err(CidrError::Parse { text: s.to_string() }),
        }
    }
}

/// Displays the masked network, as nft requires (`10.42.0.0/16`, or a bare address for /32).
impl fmt::Display for Cidr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.prefix() == 32 {
            write!(f, "{}", self.network())
        } else {
            write!(f, "{}", self.0)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_masks_host_bits_for_display() {
        let c: Cidr = "10.42.3.4/16".parse().expect("cidr");
        assert_eq!(c.to_string(), "10.42.0.0/16");
        assert_eq!(c.network(), Ipv4Addr::new(10, 42, 0, 0));
        assert!(c.contains(Ipv4Addr::new(10, 42, 255, 1)));
        assert!(!c.contains(Ipv4Addr::new(10, 43, 0, 1)));
    }

    #[test]
    fn host_routes_and_default_route_are_handled() {
        let host: Cidr = "192.0.2.7/32".parse().expect("cidr");
        assert_eq!(host.to_string(), "192.0.2.7");
        assert!(host.contains(Ipv4Addr::new(192, 0, 2, 7)));
        assert!(!host.contains(Ipv4Addr::new(192, 0, 2, 8)));
        let all: Cidr = "0.0.0.0/0".parse().expect("cidr");
        assert!(all.contains(Ipv4Addr::new(8, 8, 8, 8)));
        assert_eq!(all.to_string(), "0.0.0.0/0");
    }

    #[test]
    fn rejects_ipv6_missing_prefix_and_oversized_prefix() {
        for bad in ["fd00::/64", "10.0.0.0", "10.0.0.0/33", "10.0.0/8", "x/8"] {
            assert!(bad.parse::<Cidr>().is_err(), "{bad} should not parse");
        }
    }
}
