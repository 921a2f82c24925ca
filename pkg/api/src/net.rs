//! One validated CIDR type for every component: the API's validation, the Service IP allocator,
//! the pod network (CNI) and the service proxy.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::str::FromStr;

/// An IPv4 or IPv6 network in CIDR notation. The address is kept as written (host bits are not
/// cleared), like Go's `net.ParseCIDR`'s first result; [`Cidr::network`] gives the masked one.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Cidr {
    addr: IpAddr,
    prefix: u8,
}

/// Text that is not `ADDRESS/PREFIX`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid CIDR {text:?}: expected ADDRESS/PREFIX, e.g. 10.42.0.0/16 or fd00:42::/56")]
pub struct CidrError {
    pub text: String,
}

impl Cidr {
    /// `None` when `prefix` is longer than the address.
    pub fn new(addr: IpAddr, prefix: u8) -> Option<Cidr> {
        (prefix <= Self::bits_of(addr)).then_some(Cidr { addr, prefix })
    }

    fn bits_of(addr: IpAddr) -> u8 {
        if addr.is_ipv4() {
            32
        } else {
            128
        }
    }

    /// The address as written.
    pub fn addr(&self) -> IpAddr {
        self.addr
    }

    pub fn prefix(&self) -> u8 {
        self.prefix
    }

    pub fn is_ipv4(&self) -> bool {
        self.addr.is_ipv4()
    }

    /// How many bits address hosts (32 or 128 minus the prefix).
    pub fn host_bits(&self) -> u8 {
        Self::bits_of(self.addr) - self.prefix
    }

    fn mask(&self) -> u128 {
        let bits = u32::from(Self::bits_of(self.addr));
        let all = if bits == 32 { u128::from(u32::MAX) } else { u128::MAX };
        let host = u32::from(self.host_bits());
        all.checked_shl(host).unwrap_or(0) & all
    }

    fn as_u128(ip: IpAddr) -> u128 {
        match ip {
            IpAddr::V4(v4) => u128::from(u32::from(v4)),
            IpAddr::V6(v6) => u128::from(v6),
        }
    }

    /// `v` as an address of this network's family.
    fn same_family(&self, v: u128) -> IpAddr {
        match self.addr {
            IpAddr::V4(_) => IpAddr::V4(Ipv4Addr::from(v as u32)),
            IpAddr::V6(_) => IpAddr::V6(Ipv6Addr::from(v)),
        }
    }

    /// The network address (host bits cleared).
    pub fn network(&self) -> IpAddr {
        self.same_family(Self::as_u128(self.addr) & self.mask())
    }

    /// Whether `ip` (of the same family) lies inside the network.
    pub fn contains(&self, ip: IpAddr) -> bool {
        ip.is_ipv4() == self.is_ipv4() && Self::as_u128(ip) & self.mask() == Self::as_u128(self.addr) & self.mask()
    }

    /// Whether `other` lies wholly inside this network.
    pub fn covers(&self, other: &Cidr) -> bool {
        other.prefix >= self.prefix && self.contains(other.addr)
    }

    /// The `n`th address of the network (0 is the network address), if the network has one.
    pub fn nth(&self, n: u128) -> Option<IpAddr> {
        let host = self.host_bits();
        if host < 128 && n >> host != 0 {
            return None;
        }
        Some(self.same_family((Self::as_u128(self.addr) & self.mask()) | n))
    }

    /// The offset of `ip` from the network address, if it lies inside.
    pub fn offset(&self, ip: IpAddr) -> Option<u128> {
        self.contains(ip).then(|| Self::as_u128(ip) & !self.mask())
    }
}

impl FromStr for Cidr {
    type Err = CidrError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let err = || CidrError { text: s.to_owned() };
        let (addr, prefix) = s.trim().split_once('/').ok_or_else(err)?;
        let addr: IpAddr = addr.parse().map_err(|_| err())?;
        if prefix.is_empty() || !prefix.bytes().all(|b| b.is_ascii_digit()) {
            return Err(err());
        }
        let prefix: u8 = prefix.parse().map_err(|_| err())?;
        Cidr::new(addr, prefix).ok_or_else(err)
    }
}

/// The masked network, `10.42.0.0/16`.
impl fmt::Display for Cidr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.network(), self.prefix)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().expect("ip")
    }

    #[test]
    fn parses_both_families_and_keeps_the_address_as_written() {
        let c: Cidr = "10.42.3.4/16".parse().expect("v4");
        assert_eq!((c.addr(), c.network(), c.prefix()), (ip("10.42.3.4"), ip("10.42.0.0"), 16));
        assert_eq!(c.to_string(), "10.42.0.0/16");
        assert!(c.contains(ip("10.42.255.1")) && !c.contains(ip("10.43.0.1")) && !c.contains(ip("::1")));
        let v6: Cidr = "fd00:42::7/56".parse().expect("v6");
        assert_eq!(v6.to_string(), "fd00:42::/56");
        assert!(v6.contains(ip("fd00:42:0:ff::1")) && !v6.contains(ip("fd00:43::1")) && !v6.contains(ip("10.0.0.1")));
        for bad in ["10.0.0.0", "10.0.0.0/33", "::/129", "10.0.0.0/", "10.0.0.0/+8", "x/8", "10.0.0/8", ""] {
            assert!(bad.parse::<Cidr>().is_err(), "{bad}");
        }
        let all: Cidr = "0.0.0.0/0".parse().expect("all");
        assert!(all.contains(ip("255.255.255.255")));
        let one: Cidr = "10.0.0.1/32".parse().expect("host");
        assert!(one.contains(ip("10.0.0.1")) && !one.contains(ip("10.0.0.2")));
    }

    #[test]
    fn addresses_by_offset() {
        let c: Cidr = "10.43.0.0/16".parse().expect("cidr");
        assert_eq!(c.host_bits(), 16);
        assert_eq!(c.nth(1), Some(ip("10.43.0.1")));
        assert_eq!(c.nth(65535), Some(ip("10.43.255.255")));
        assert_eq!(c.nth(65536), None);
        assert_eq!(c.offset(ip("10.43.1.2")), Some(258));
        assert_eq!(c.offset(ip("10.44.0.0")), None);
        let v6: Cidr = "fd00::/120".parse().expect("v6");
        assert_eq!(v6.nth(255), Some(ip("fd00::ff")));
        let all6: Cidr = "::/0".parse().expect("all");
        assert_eq!(all6.nth(u128::MAX), Some(ip("ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff")));
        let outer: Cidr = "10.0.0.0/8".parse().expect("outer");
        assert!(outer.covers(&"10.1.0.0/16".parse().expect("inner")));
        assert!(!outer.covers(&"10.0.0.0/7".parse().expect("wider")));
    }
}
