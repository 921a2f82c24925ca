//! ClusterIP and NodePort allocation for Services (upstream's service REST allocators).
//!
//! One API server owns the store, so the allocators live in memory, seeded from the stored
//! Services on first use and kept in step with every Service write. An allocation made for a
//! write that then fails is released.

use crate::error::ApiError;
use crate::registry::{Allocator, Reservation};
use k1s_api::FieldError;
use serde_json::{json, Value};
use std::collections::BTreeSet;
use std::net::{IpAddr, Ipv4Addr};
use std::sync::Mutex;

pub const NODE_PORT_MIN: u16 = 30000;
pub const NODE_PORT_MAX: u16 = 32767;

pub use k1s_api::net::Cidr;

/// The IPv4 range ClusterIPs come from, as numbers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Range {
    base: u32,
    prefix: u8,
}

impl Range {
    /// IPv4 networks of at least four addresses (network, `kubernetes`, one Service, broadcast).
    fn of(cidr: &Cidr) -> Option<Range> {
        match cidr.network() {
            IpAddr::V4(net) if cidr.prefix() <= 30 => Some(Range { base: u32::from(net), prefix: cidr.prefix() }),
            _ => None,
        }
    }
    fn size(&self) -> u32 {
        1u32 << (32 - self.prefix as u32)
    }
    fn contains(&self, ip: Ipv4Addr) -> bool {
        let v = u32::from(ip);
        v >= self.base && v < self.base + self.size()
    }
}

/// Parses a Service CIDR k1s can allocate ClusterIPs from: IPv4, /30 or wider.
pub fn service_cidr(text: &str) -> Option<Cidr> {
    text.parse::<Cidr>().ok().filter(|c| Range::of(c).is_some())
}

/// The first usable address of the Service CIDR: the `kubernetes` Service's.
pub fn first_ip(cidr: &Cidr) -> Option<IpAddr> {
    cidr.nth(1)
}

#[derive(Default)]
struct State {
    seeded: bool,
    ips: BTreeSet<u32>,
    ports: BTreeSet<u16>,
    next_ip: u32,
    next_port: u16,
}

/// What one write took, to release if the write fails.
#[derive(Debug, Default)]
pub struct Taken {
    ips: Vec<u32>,
    ports: Vec<u16>,
}

pub struct ServiceAllocator {
    cidr: Range,
    state: Mutex<State>,
}

fn ports_of(svc: &Value) -> Vec<Option<u16>> {
    svc.pointer("/spec/ports")
        .and_then(Value::as_array)
        .map(|ps| ps.iter().map(|p| p.get("nodePort").and_then(Value::as_u64).map(|n| n as u16)).collect())
        .unwrap_or_default()
}

fn cluster_ips(svc: &Value) -> Vec<String> {
    let mut out: Vec<String> = svc
        .pointer("/spec/clusterIPs")
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).map(str::to_string).collect())
        .unwrap_or_default();
    if let Some(ip) = svc.pointer("/spec/clusterIP").and_then(Value::as_str) {
        if !ip.is_empty() && !out.iter().any(|x| x == ip) {
            out.insert(0, ip.to_string());
        }
    }
    out
}

fn svc_type(svc: &Value) -> &str {
    svc.pointer("/spec/type").and_then(Value::as_str).unwrap_or("ClusterIP")
}

fn wants_node_ports(svc: &Value) -> bool {
    matches!(svc_type(svc), "NodePort" | "LoadBalancer")
}

impl ServiceAllocator {
    /// `None` for a CIDR [`service_cidr`] refuses.
    pub fn new(cidr: &Cidr) -> Option<ServiceAllocator> {
        Some(ServiceAllocator { cidr: Range::of(cidr)?, state: Mutex::new(State::default()) })
    }

    /// Seeds from stored Services the first time (the caller lists them).
    pub fn seed_with(&self, services: &[Value]) {
        let Ok(mut st) = self.state.lock() else { return };
        if st.seeded {
            return;
        }
        for s in services {
            for ip in cluster_ips(s) {
                if let Ok(v4) = ip.parse::<Ipv4Addr>() {
                    st.ips.insert(u32::from(v4));
                }
            }
            for p in ports_of(s).into_iter().flatten() {
                st.ports.insert(p);
            }
        }
        st.seeded = true;
    }

    pub fn seeded(&self) -> bool {
        self.state.lock().map(|s| s.seeded).unwrap_or(false)
    }

    fn invalid(name: &str, errs: Vec<FieldError>) -> ApiError {
        ApiError::invalid("", "Service", name, &errs)
    }

    /// Allocates what a new Service needs: a ClusterIP unless headless or ExternalName (or
    /// reserves the one asked for), and NodePorts for NodePort/LoadBalancer Services.
    pub fn allocate_create(&self, svc: &mut Value) -> Result<Taken, ApiError> {
        let name = svc.pointer("/metadata/name").and_then(Value::as_str).unwrap_or("").to_string();
        let mut st = self.state.lock().map_err(|_| ApiError::internal("service allocator poisoned"))?;
        let mut taken = Taken::default();
        if svc_type(svc) != "ExternalName" {
            let asked = svc.pointer("/spec/clusterIP").and_then(Value::as_str).unwrap_or("").to_string();
            match asked.as_str() {
                "None" => {}
                "" => {
                    let ip = self.next_free_ip(&mut st).ok_or_else(|| {
                        Self::invalid(
                            &name,
                            vec![FieldError::invalid(
                                "spec.clusterIPs",
                                json!([]),
                                "failed to allocate IP: range is full",
                            )],
                        )
                    })?;
                    st.ips.insert(ip);
                    taken.ips.push(ip);
                    let s = Ipv4Addr::from(ip).to_string();
                    svc["spec"]["clusterIP"] = json!(s);
                    svc["spec"]["clusterIPs"] = json!([s]);
                }
                other => {
                    let bad = |why: String| {
                        Self::invalid(&name, vec![FieldError::invalid("spec.clusterIPs", json!([other]), why)])
                    };
                    let ip: Ipv4Addr = other.parse().map_err(|_| bad("must be a valid IP address".into()))?;
                    if !self.cidr.contains(ip) || u32::from(ip) == self.cidr.base {
                        return Err(bad(format!(
                            "failed to allocate IP {other}: the provided IP ({other}) is not in the valid range. The range of valid IPs is {}/{}",
                            Ipv4Addr::from(self.cidr.base),
                            self.cidr.prefix
                        )));
                    }
                    if st.ips.contains(&u32::from(ip)) {
                        return Err(bad(format!("failed to allocate IP {other}: provided IP is already allocated")));
                    }
                    st.ips.insert(u32::from(ip));
                    taken.ips.push(u32::from(ip));
                }
            }
        }
        if wants_node_ports(svc) {
            if let Err(e) = self.allocate_ports(&mut st, svc, &name, &BTreeSet::new(), &mut taken) {
                Self::release_locked(&mut st, &taken);
                return Err(e);
            }
        }
        Ok(taken)
    }

    fn allocate_ports(
        &self,
        st: &mut State,
        svc: &mut Value,
        name: &str,
        owned: &BTreeSet<u16>,
        taken: &mut Taken,
    ) -> Result<(), ApiError> {
        let Some(ports) = svc.pointer_mut("/spec/ports").and_then(Value::as_array_mut) else { return Ok(()) };
        for (i, p) in ports.iter_mut().enumerate() {
            match p.get("nodePort").and_then(Value::as_u64) {
                Some(n) => {
                    let n = n as u16;
                    if owned.contains(&n) || taken.ports.contains(&n) {
                        continue;
                    }
                    if !(NODE_PORT_MIN..=NODE_PORT_MAX).contains(&n) {
                        return Err(Self::invalid(
                            name,
                            vec![FieldError::invalid(
                                format!("spec.ports[{i}].nodePort"),
                                n,
                                format!("provided port is not in the valid range. The range of valid ports is {NODE_PORT_MIN}-{NODE_PORT_MAX}"),
                            )],
                        ));
                    }
                    if st.ports.contains(&n) {
                        return Err(Self::invalid(
                            name,
                            vec![FieldError::invalid(
                                format!("spec.ports[{i}].nodePort"),
                                n,
                                "provided port is already allocated",
                            )],
                        ));
                    }
                    st.ports.insert(n);
                    taken.ports.push(n);
                }
                None => {
                    let n = self.next_free_port(st).ok_or_else(|| {
                        Self::invalid(
                            name,
                            vec![FieldError::invalid(format!("spec.ports[{i}].nodePort"), 0, "range is full")],
                        )
                    })?;
                    st.ports.insert(n);
                    taken.ports.push(n);
                    p["nodePort"] = json!(n);
                }
            }
        }
        Ok(())
    }

    /// Allocates NodePorts an update adds (type changed to NodePort/LoadBalancer, or new
    /// ports), and reports the ports the update gives up, to release once it is written.
    pub fn allocate_update(&self, new: &mut Value, old: &Value) -> Result<(Taken, Taken), ApiError> {
        let name = new.pointer("/metadata/name").and_then(Value::as_str).unwrap_or("").to_string();
        let mut st = self.state.lock().map_err(|_| ApiError::internal("service allocator poisoned"))?;
        let old_ports: BTreeSet<u16> = ports_of(old).into_iter().flatten().collect();
        let mut taken = Taken::default();
        if wants_node_ports(new) {
            self.allocate_ports(&mut st, new, &name, &old_ports, &mut taken)
                .inspect_err(|_| Self::release_locked(&mut st, &taken))?;
        } else if let Some(ports) = new.pointer_mut("/spec/ports").and_then(Value::as_array_mut) {
            for p in ports.iter_mut() {
                if let Some(m) = p.as_object_mut() {
                    m.remove("nodePort");
                }
            }
        }
        let new_ports: BTreeSet<u16> = ports_of(new).into_iter().flatten().collect();
        let freed = Taken { ips: Vec::new(), ports: old_ports.difference(&new_ports).copied().collect() };
        Ok((taken, freed))
    }

    fn next_free_ip(&self, st: &mut State) -> Option<u32> {
        let size = self.cidr.size();
        // Skip the network address and the first address (the `kubernetes` Service's, reserved
        // unless asked for explicitly) and the broadcast address.
        let usable = size.saturating_sub(3);
        for i in 0..usable {
            let off = 2 + (st.next_ip + i) % usable;
            let ip = self.cidr.base + off;
            if !st.ips.contains(&ip) {
                st.next_ip = (st.next_ip + i + 1) % usable;
                return Some(ip);
            }
        }
        None
    }

    fn next_free_port(&self, st: &mut State) -> Option<u16> {
        let span = (NODE_PORT_MAX - NODE_PORT_MIN + 1) as u32;
        let start = if st.next_port == 0 { rand::random_range(0..span) as u16 } else { st.next_port - NODE_PORT_MIN };
        for i in 0..span {
            let p = NODE_PORT_MIN + ((start as u32 + i) % span) as u16;
            if !st.ports.contains(&p) {
                st.next_port = NODE_PORT_MIN + ((p - NODE_PORT_MIN + 1) as u32 % span) as u16;
                return Some(p);
            }
        }
        None
    }

    fn release_locked(st: &mut State, t: &Taken) {
        for ip in &t.ips {
            st.ips.remove(ip);
        }
        for p in &t.ports {
            st.ports.remove(p);
        }
    }

    pub fn release(&self, t: &Taken) {
        if let Ok(mut st) = self.state.lock() {
            Self::release_locked(&mut st, t);
        }
    }

    /// Releases everything a deleted Service held.
    pub fn release_service(&self, svc: &Value) {
        let mut t = Taken::default();
        for ip in cluster_ips(svc) {
            if let Ok(v4) = ip.parse::<Ipv4Addr>() {
                t.ips.push(u32::from(v4));
            }
        }
        t.ports = ports_of(svc).into_iter().flatten().collect();
        self.release(&t);
    }
}

/// The group-resource the allocator serves, its key in `Registry::allocators`.
pub const SERVICES: (&str, &str) = ("", "services");

/// A Service write's allocation: what it took, and what it gives up once stored.
struct ServiceReservation<'a> {
    allocator: &'a ServiceAllocator,
    taken: Taken,
    freed: Taken,
}

impl Reservation for ServiceReservation<'_> {
    fn commit(self: Box<Self>) {
        self.allocator.release(&self.freed);
    }

    fn abort(self: Box<Self>) {
        self.allocator.release(&self.taken);
    }
}

impl Allocator for ServiceAllocator {
    fn seeded(&self) -> bool {
        ServiceAllocator::seeded(self)
    }

    fn seed(&self, stored: &[Value]) {
        self.seed_with(stored);
    }

    fn reserve_for_create<'a>(&'a self, obj: &mut Value) -> Result<Box<dyn Reservation + 'a>, ApiError> {
        let taken = self.allocate_create(obj)?;
        Ok(Box::new(ServiceReservation { allocator: self, taken, freed: Taken::default() }))
    }

    fn reserve_for_update<'a>(&'a self, new: &mut Value, old: &Value) -> Result<Box<dyn Reservation + 'a>, ApiError> {
        let (taken, freed) = self.allocate_update(new, old)?;
        Ok(Box::new(ServiceReservation { allocator: self, taken, freed }))
    }

    fn release_object(&self, obj: &Value) {
        self.release_service(obj);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn alloc() -> ServiceAllocator {
        let a = ServiceAllocator::new(&"10.43.0.0/16".parse().expect("cidr")).expect("allocator");
        a.seed_with(&[]);
        a
    }

    #[test]
    fn cluster_ips_are_unique_and_explicit_ones_are_checked() {
        let a = alloc();
        let mut s1 = json!({"metadata": {"name": "a"}, "spec": {"ports": [{"port": 80}]}});
        let mut s2 = json!({"metadata": {"name": "b"}, "spec": {"ports": [{"port": 80}]}});
        a.allocate_create(&mut s1).expect("a");
        a.allocate_create(&mut s2).expect("b");
        assert_ne!(s1["spec"]["clusterIP"], s2["spec"]["clusterIP"]);
        assert_ne!(s1["spec"]["clusterIP"], "10.43.0.1");
        let mut dup = json!({"metadata": {"name": "c"}, "spec": {"clusterIP": s1["spec"]["clusterIP"].clone()}});
        let e = a.allocate_create(&mut dup).expect_err("duplicate");
        assert_eq!(e.code, 422);
        assert!(e.message.contains("provided IP is already allocated"), "{}", e.message);
        let mut out = json!({"metadata": {"name": "d"}, "spec": {"clusterIP": "10.99.0.1"}});
        assert!(a.allocate_create(&mut out).expect_err("range").message.contains("not in the valid range"));
        let mut k = json!({"metadata": {"name": "kubernetes"}, "spec": {"clusterIP": "10.43.0.1"}});
        a.allocate_create(&mut k).expect("first address on request");
        let mut headless = json!({"metadata": {"name": "h"}, "spec": {"clusterIP": "None"}});
        a.allocate_create(&mut headless).expect("headless");
        assert_eq!(headless["spec"]["clusterIP"], "None");
    }

    #[test]
    fn node_ports_are_allocated_refused_when_taken_and_released() {
        let a = alloc();
        let mut s = json!({"metadata": {"name": "np"}, "spec": {"type": "NodePort", "ports": [{"port": 80}, {"port": 81, "nodePort": 30080}]}});
        let t = a.allocate_create(&mut s).expect("np");
        let p0 = s["spec"]["ports"][0]["nodePort"].as_u64().expect("allocated");
        assert!((30000..=32767).contains(&p0));
        let mut clash = json!({"metadata": {"name": "x"}, "spec": {"type": "NodePort", "ports": [{"port": 80, "nodePort": 30080}]}});
        let e = a.allocate_create(&mut clash).expect_err("taken");
        assert_eq!(e.causes[0].field, "spec.ports[0].nodePort");
        a.release(&t);
        a.allocate_create(&mut clash).expect("free again");
        // Switching a NodePort Service back to ClusterIP gives its ports up.
        let mut to_cluster = clash.clone();
        to_cluster["spec"]["type"] = json!("ClusterIP");
        let (_, freed) = a.allocate_update(&mut to_cluster, &clash).expect("update");
        assert_eq!(freed.ports, vec![30080]);
        assert!(to_cluster["spec"]["ports"][0].get("nodePort").is_none());
    }

    #[test]
    fn a_reservation_gives_back_what_it_took_on_abort_and_what_it_freed_on_commit() {
        let a = alloc();
        let hook: &dyn Allocator = &a;
        let mut s = json!({"metadata": {"name": "np"}, "spec": {"type": "NodePort", "ports": [{"port": 80, "nodePort": 30081}]}});
        hook.reserve_for_create(&mut s).expect("create").abort();
        let mut again = s.clone();
        hook.reserve_for_create(&mut again).expect("free again after abort").commit();
        let mut to_cluster = again.clone();
        to_cluster["spec"]["type"] = json!("ClusterIP");
        hook.reserve_for_update(&mut to_cluster, &again).expect("update").commit();
        let mut other = json!({"metadata": {"name": "x"}, "spec": {"type": "NodePort", "ports": [{"port": 80, "nodePort": 30081}]}});
        hook.reserve_for_create(&mut other).expect("freed by the committed update");
    }
}
