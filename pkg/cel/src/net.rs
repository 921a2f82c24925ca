//! The Kubernetes IP and CIDR libraries (k8s.io/apiserver/pkg/cel/library/ip.go, cidr.go):
//! `ip`, `isIP`, `ip.isCanonical`, `cidr`, `isCIDR` and their member functions. Addresses follow
//! Go's `net/netip`, less what upstream refuses: zones and IPv4-mapped IPv6 addresses.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::Arc;

use cel::objects::Opaque;
use cel::{ExecutionError, Value};

use crate::library::{arg, string};

/// The CEL type name of an IP address.
pub(crate) const IP_TYPE: &str = "net.IP";
/// The CEL type name of a CIDR.
pub(crate) const CIDR_TYPE: &str = "net.CIDR";

/// An IP address, `net.IP`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Ip(pub(crate) IpAddr);

impl Opaque for Ip {
    fn runtime_type_name(&self) -> &str {
        IP_TYPE
    }
}

/// An IP prefix, `net.CIDR`: the address as written (not masked) and the prefix length.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Cidr {
    addr: IpAddr,
    bits: u8,
}

impl Opaque for Cidr {
    fn runtime_type_name(&self) -> &str {
        CIDR_TYPE
    }
}

impl Cidr {
    fn max_bits(&self) -> u8 {
        if self.addr.is_ipv4() {
            32
        } else {
            128
        }
    }

    fn masked(&self) -> Cidr {
        let addr = match self.addr {
            IpAddr::V4(a) => {
                let mask = u32::MAX.checked_shl(32 - u32::from(self.bits)).unwrap_or(0);
                IpAddr::V4(Ipv4Addr::from(u32::from(a) & mask))
            }
            IpAddr::V6(a) => {
                let mask = u128::MAX.checked_shl(128 - u32::from(self.bits)).unwrap_or(0);
                IpAddr::V6(Ipv6Addr::from(u128::from(a) & mask))
            }
        };
        Cidr { addr, bits: self.bits }
    }

    fn contains(&self, ip: &IpAddr) -> bool {
        if ip.is_ipv4() != self.addr.is_ipv4() {
            return false;
        }
        Cidr { addr: *ip, bits: self.bits }.masked().addr == self.masked().addr
    }
}

impl std::fmt::Display for Cidr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.addr, self.bits)
    }
}

/// Go's `netip.ParseAddr`, less zones (which the standard library refuses too), then upstream's
/// refusal of IPv4-mapped IPv6 addresses.
fn parse_addr(s: &str) -> Result<IpAddr, String> {
    let addr: IpAddr = s.parse().map_err(|_| {
        let reason = if s.contains('%') { "IPv6 zones are not allowed" } else { "unable to parse IP" };
        format!("ParseAddr({s:?}): {reason}")
    })?;
    Ok(addr)
}

fn is_mapped(addr: &IpAddr) -> bool {
    matches!(addr, IpAddr::V6(a) if a.to_ipv4_mapped().is_some())
}

fn parse_ip(s: &str) -> Result<IpAddr, String> {
    let addr = parse_addr(s).map_err(|e| format!("IP Address {s:?} parse error during conversion from string: {e}"))?;
    if is_mapped(&addr) {
        return Err(format!("IPv4-mapped IPv6 address {s:?} is not allowed"));
    }
    Ok(addr)
}

/// Go's `netip.ParsePrefix`, then upstream's refusal of IPv4-mapped addresses.
fn parse_prefix(s: &str) -> Result<Cidr, String> {
    let fail = |reason: String| {
        format!(
            "network address parse error during conversion from string: network address parse error during conversion from string: netip.ParsePrefix({s:?}): {reason}"
        )
    };
    let Some((addr, bits)) = s.rsplit_once('/') else { return Err(fail("no '/'".into())) };
    let addr = parse_addr(addr).map_err(fail)?;
    let bad_bits = || fail(format!("bad bits after slash: {bits:?}"));
    if bits.is_empty() || !bits.bytes().all(|b| b.is_ascii_digit()) || (bits.len() > 1 && bits.starts_with('0')) {
        return Err(bad_bits());
    }
    let bits: u8 = bits.parse().map_err(|_| bad_bits())?;
    let cidr = Cidr { addr, bits };
    if bits > cidr.max_bits() {
        return Err(fail("prefix length out of range".to_owned()));
    }
    if is_mapped(&addr) {
        return Err(format!("IPv4-mapped IPv6 address {s:?} is not allowed"));
    }
    Ok(cidr)
}

fn ip_of<'a>(v: &'a Value, function: &str) -> Result<&'a IpAddr, ExecutionError> {
    match v {
        Value::Opaque(o) => o.downcast_ref::<Ip>().map(|ip| &ip.0),
        _ => None,
    }
    .ok_or_else(|| ExecutionError::function_error(function, "expected an IP address"))
}

fn cidr_of<'a>(v: &'a Value, function: &str) -> Result<&'a Cidr, ExecutionError> {
    match v {
        Value::Opaque(o) => o.downcast_ref::<Cidr>(),
        _ => None,
    }
    .ok_or_else(|| ExecutionError::function_error(function, "expected a CIDR"))
}

fn ip_value(addr: IpAddr) -> Value {
    Value::Opaque(Arc::new(Ip(addr)))
}

fn cidr_value(cidr: Cidr) -> Value {
    Value::Opaque(Arc::new(cidr))
}

pub(crate) fn ip(args: &[Value]) -> Result<Value, ExecutionError> {
    parse_ip(string(args, 0, "ip")?).map(ip_value).map_err(|e| ExecutionError::function_error("ip", e))
}

pub(crate) fn is_ip(args: &[Value]) -> Result<Value, ExecutionError> {
    Ok(Value::Bool(parse_ip(string(args, 0, "isIP")?).is_ok()))
}

pub(crate) fn is_canonical(args: &[Value]) -> Result<Value, ExecutionError> {
    let s = string(args, 0, "ip.isCanonical")?;
    let addr = parse_ip(s).map_err(|e| ExecutionError::function_error("ip.isCanonical", e))?;
    Ok(Value::Bool(addr.to_string() == s))
}

pub(crate) fn ip_to_string(args: &[Value]) -> Result<Value, ExecutionError> {
    Ok(Value::String(Arc::new(ip_of(arg(args, 0, "string")?, "string")?.to_string())))
}

pub(crate) fn family(args: &[Value]) -> Result<Value, ExecutionError> {
    Ok(Value::Int(if ip_of(arg(args, 0, "family")?, "family")?.is_ipv4() { 4 } else { 6 }))
}

fn predicate(args: &[Value], function: &str, test: fn(&IpAddr) -> bool) -> Result<Value, ExecutionError> {
    Ok(Value::Bool(test(ip_of(arg(args, 0, function)?, function)?)))
}

pub(crate) fn is_unspecified(args: &[Value]) -> Result<Value, ExecutionError> {
    predicate(args, "isUnspecified", IpAddr::is_unspecified)
}

pub(crate) fn is_loopback(args: &[Value]) -> Result<Value, ExecutionError> {
    predicate(args, "isLoopback", IpAddr::is_loopback)
}

fn link_local_multicast(addr: &IpAddr) -> bool {
    match addr {
        IpAddr::V4(a) => a.octets()[..3] == [224, 0, 0],
        IpAddr::V6(a) => a.segments()[0] & 0xff0f == 0xff02,
    }
}

fn link_local_unicast(addr: &IpAddr) -> bool {
    match addr {
        IpAddr::V4(a) => a.is_link_local(),
        IpAddr::V6(a) => a.segments()[0] & 0xffc0 == 0xfe80,
    }
}

/// Go's `Addr.IsGlobalUnicast`: not unspecified, loopback, multicast, link-local or the IPv4
/// broadcast address (private addresses are global unicast).
fn global_unicast(addr: &IpAddr) -> bool {
    if matches!(addr, IpAddr::V4(a) if a.is_broadcast()) {
        return false;
    }
    !addr.is_unspecified() && !addr.is_loopback() && !addr.is_multicast() && !link_local_unicast(addr)
}

pub(crate) fn is_link_local_multicast(args: &[Value]) -> Result<Value, ExecutionError> {
    predicate(args, "isLinkLocalMulticast", link_local_multicast)
}

pub(crate) fn is_link_local_unicast(args: &[Value]) -> Result<Value, ExecutionError> {
    predicate(args, "isLinkLocalUnicast", link_local_unicast)
}

pub(crate) fn is_global_unicast(args: &[Value]) -> Result<Value, ExecutionError> {
    predicate(args, "isGlobalUnicast", global_unicast)
}

pub(crate) fn cidr(args: &[Value]) -> Result<Value, ExecutionError> {
    parse_prefix(string(args, 0, "cidr")?).map(cidr_value).map_err(|e| ExecutionError::function_error("cidr", e))
}

pub(crate) fn is_cidr(args: &[Value]) -> Result<Value, ExecutionError> {
    Ok(Value::Bool(parse_prefix(string(args, 0, "isCIDR")?).is_ok()))
}

pub(crate) fn cidr_to_string(args: &[Value]) -> Result<Value, ExecutionError> {
    Ok(Value::String(Arc::new(cidr_of(arg(args, 0, "string")?, "string")?.to_string())))
}

pub(crate) fn contains_ip(args: &[Value]) -> Result<Value, ExecutionError> {
    let cidr = cidr_of(arg(args, 0, "containsIP")?, "containsIP")?;
    let ip = match arg(args, 1, "containsIP")? {
        Value::String(s) => parse_ip(s).map_err(|e| ExecutionError::function_error("containsIP", e))?,
        other => *ip_of(other, "containsIP")?,
    };
    Ok(Value::Bool(cidr.contains(&ip)))
}

pub(crate) fn contains_cidr(args: &[Value]) -> Result<Value, ExecutionError> {
    let cidr = cidr_of(arg(args, 0, "containsCIDR")?, "containsCIDR")?;
    let other = match arg(args, 1, "containsCIDR")? {
        Value::String(s) => parse_prefix(s).map_err(|e| ExecutionError::function_error("containsCIDR", e))?,
        other => cidr_of(other, "containsCIDR")?.clone(),
    };
    Ok(Value::Bool(cidr.contains(&other.addr) && cidr.bits <= other.bits))
}

pub(crate) fn cidr_ip(args: &[Value]) -> Result<Value, ExecutionError> {
    Ok(ip_value(cidr_of(arg(args, 0, "ip")?, "ip")?.addr))
}

pub(crate) fn masked(args: &[Value]) -> Result<Value, ExecutionError> {
    Ok(cidr_value(cidr_of(arg(args, 0, "masked")?, "masked")?.masked()))
}

pub(crate) fn prefix_length(args: &[Value]) -> Result<Value, ExecutionError> {
    Ok(Value::Int(i64::from(cidr_of(arg(args, 0, "prefixLength")?, "prefixLength")?.bits)))
}
