//! ClusterIP and NodePort allocation for Services (upstream's service REST allocators), safe
//! when several API servers share one store.
//!
//! The store is the authority, not this server's memory. Every allocated ClusterIP is a
//! `networking.k8s.io/v1` IPAddress object named after the address whose `parentRef` is the
//! Service (what upstream's allocator keeps since v1.33), every allocated NodePort a
//! reservation key under [`NODE_PORT_PREFIX`] naming its Service. A write that needs addresses
//! creates their reservations create-if-absent, in one transaction, before the Service itself
//! is written: of two servers picking the same address only one succeeds, the other gets
//! `AlreadyExists` and takes its next candidate (or, for an address the client asked for,
//! answers that it is already allocated). A write that then fails deletes what it reserved; a
//! deleted Service, and an update that drops an address, delete the reservations still naming
//! the Service.
//!
//! What a crash between the two writes leaves behind, and Services stored before reservations
//! existed, are put right by [`ServiceAllocator::repair`] (at start and every
//! [`REPAIR_INTERVAL`]): it adds the reservations stored Services lack and removes the ones no
//! Service holds once they are older than [`LEAK_GRACE`] (upstream's 60 s: a Service write in
//! flight holds reservations its stored Service does not show yet).
//!
//! In memory there is only a cache of the taken addresses, to pick free candidates without a
//! store read: it learns from `AlreadyExists`, is reloaded from the store when it shows the
//! range as full and after each repair, and an address it shows as taken is looked up in the
//! store before a request for it is refused.

use crate::error::ApiError;
use crate::object;
use crate::registry::{Allocator, Reservation};
use bytes::Bytes;
use futures::future::BoxFuture;
use k1s_api::FieldError;
use k1s_store::{KeyValue, Op, Store, StoreError};
use serde_json::{json, Value};
use std::collections::{BTreeMap, BTreeSet};
use std::net::{IpAddr, Ipv4Addr};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;
use tokio_util::sync::CancellationToken;

pub const NODE_PORT_MIN: u16 = 30000;
pub const NODE_PORT_MAX: u16 = 32767;

/// Where the IPAddress objects of allocated ClusterIPs are stored.
pub const IP_PREFIX: &str = "/registry/networking.k8s.io/ipaddresses/";
/// Where the reservations of allocated NodePorts are stored, one key per port.
pub const NODE_PORT_PREFIX: &str = "/registry/ranges/servicenodeports/";
const SERVICES_PREFIX: &str = "/registry/services/";
/// Upstream's labels on the IPAddress objects its allocator creates.
const LABEL_MANAGED_BY: &str = "ipaddress.kubernetes.io/managed-by";
const LABEL_IP_FAMILY: &str = "ipaddress.kubernetes.io/ip-family";
const MANAGER: &str = "ipallocator.k8s.io";

/// How often the repair pass runs after the one at start (upstream's repair interval).
pub const REPAIR_INTERVAL: Duration = Duration::from_secs(180);
/// How old a reservation no Service holds must be before the repair removes it.
pub const LEAK_GRACE: Duration = Duration::from_secs(60);

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

/// One allocatable thing: a ClusterIP or a NodePort.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Slot {
    Ip(u32),
    Port(u16),
}

impl Slot {
    /// The store key of its reservation.
    fn key(self) -> String {
        match self {
            Slot::Ip(v) => format!("{IP_PREFIX}{}", Ipv4Addr::from(v)),
            Slot::Port(p) => format!("{NODE_PORT_PREFIX}{p}"),
        }
    }

    fn from_key(key: &str) -> Option<Slot> {
        if let Some(ip) = key.strip_prefix(IP_PREFIX) {
            return ip.parse::<Ipv4Addr>().ok().map(|v| Slot::Ip(u32::from(v)));
        }
        key.strip_prefix(NODE_PORT_PREFIX)?.parse().ok().map(Slot::Port)
    }
}

/// The Service a reservation is for.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Owner {
    namespace: String,
    name: String,
}

impl Owner {
    fn of(svc: &Value) -> Owner {
        Owner {
            namespace: object::namespace(svc).unwrap_or("default").to_string(),
            name: object::name(svc).to_string(),
        }
    }

    /// The stored value of `slot`'s reservation for this Service.
    fn reservation(&self, slot: Slot) -> Bytes {
        let now = object::now_rfc3339();
        let v = match slot {
            Slot::Ip(ip) => json!({
                "apiVersion": "networking.k8s.io/v1",
                "kind": "IPAddress",
                "metadata": {
                    "name": Ipv4Addr::from(ip).to_string(),
                    "uid": uuid::Uuid::new_v4().to_string(),
                    "creationTimestamp": now,
                    "labels": {LABEL_IP_FAMILY: "IPv4", LABEL_MANAGED_BY: MANAGER},
                },
                "spec": {"parentRef": {"group": "", "resource": "services", "namespace": self.namespace, "name": self.name}},
            }),
            Slot::Port(port) => json!({
                "nodePort": port,
                "service": {"namespace": self.namespace, "name": self.name},
                "creationTimestamp": now,
            }),
        };
        object::to_storage(&v)
    }
}

/// A stored reservation as the repair and the release read it.
struct Stored {
    kv: KeyValue,
    /// The Service it names; `None` for an IPAddress that names something else.
    owner: Option<Owner>,
    /// Whether this allocator made it (IPAddress objects of other managers are left alone).
    managed: bool,
    created: Option<jiff::Timestamp>,
}

impl Stored {
    fn read(slot: Slot, kv: KeyValue) -> Stored {
        let v: Value = serde_json::from_slice(&kv.value).unwrap_or(Value::Null);
        let (owner, managed, created) = match slot {
            Slot::Ip(_) => {
                let r = v.pointer("/spec/parentRef");
                let is_service = r.is_some_and(|r| {
                    r.get("group").and_then(Value::as_str).unwrap_or("").is_empty()
                        && r.get("resource").and_then(Value::as_str) == Some("services")
                });
                let owner = r.filter(|_| is_service).map(|r| Owner {
                    namespace: r.get("namespace").and_then(Value::as_str).unwrap_or("").to_string(),
                    name: r.get("name").and_then(Value::as_str).unwrap_or("").to_string(),
                });
                let managed =
                    v.pointer("/metadata/labels").and_then(|l| l.get(LABEL_MANAGED_BY)) == Some(&json!(MANAGER));
                (owner, managed, v.pointer("/metadata/creationTimestamp"))
            }
            Slot::Port(_) => {
                let owner = v.get("service").map(|s| Owner {
                    namespace: s.get("namespace").and_then(Value::as_str).unwrap_or("").to_string(),
                    name: s.get("name").and_then(Value::as_str).unwrap_or("").to_string(),
                });
                (owner, true, v.get("creationTimestamp"))
            }
        };
        let created = created.and_then(Value::as_str).and_then(|t| t.parse().ok());
        Stored { kv, owner, managed, created }
    }
}

/// The addresses the cache knows as taken.
#[derive(Default)]
struct Cache {
    seeded: bool,
    ips: BTreeSet<u32>,
    ports: BTreeSet<u16>,
    next_ip: u32,
    next_port: u16,
}

impl Cache {
    fn contains(&self, s: Slot) -> bool {
        match s {
            Slot::Ip(v) => self.ips.contains(&v),
            Slot::Port(p) => self.ports.contains(&p),
        }
    }
    fn insert(&mut self, s: Slot) {
        match s {
            Slot::Ip(v) => self.ips.insert(v),
            Slot::Port(p) => self.ports.insert(p),
        };
    }
    fn remove(&mut self, s: Slot) {
        match s {
            Slot::Ip(v) => self.ips.remove(&v),
            Slot::Port(p) => self.ports.remove(&p),
        };
    }
}

/// A reservation one write created, with the revision it was created at.
#[derive(Clone, Copy, Debug)]
struct Claim {
    slot: Slot,
    revision: u64,
}

/// What one write reserved, to delete if the write fails.
#[derive(Debug, Default)]
pub struct Taken {
    claims: Vec<Claim>,
}

impl Taken {
    pub fn slots(&self) -> Vec<Slot> {
        self.claims.iter().map(|c| c.slot).collect()
    }
}

/// What a write asks for.
#[derive(Clone, Copy, Debug)]
enum Ask {
    /// A ClusterIP: the one the client named, or any.
    Ip(Option<u32>),
    /// The NodePort of `spec.ports[index]`: the one named, or any.
    Port { index: usize, port: Option<u16> },
}

impl Ask {
    fn explicit(self) -> Option<Slot> {
        match self {
            Ask::Ip(ip) => ip.map(Slot::Ip),
            Ask::Port { port, .. } => port.map(Slot::Port),
        }
    }
}

/// What one repair pass changed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Repaired {
    /// Reservations created (or pointed at their Service) for addresses stored Services hold.
    pub added: usize,
    /// Reservations no Service held, deleted.
    pub removed: usize,
}

/// The Service allocator of one API server; cheap to clone.
#[derive(Clone)]
pub struct ServiceAllocator {
    inner: Arc<Inner>,
}

struct Inner {
    cidr: Range,
    store: Store,
    cache: Mutex<Cache>,
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

fn invalid(name: &str, errs: Vec<FieldError>) -> ApiError {
    ApiError::invalid("", "Service", name, &errs)
}

fn store_error(what: &str, e: &StoreError) -> ApiError {
    ApiError::internal(format!("{what}: {e}"))
}

impl ServiceAllocator {
    /// `None` for a CIDR [`service_cidr`] refuses.
    pub fn new(cidr: &Cidr, store: Store) -> Option<ServiceAllocator> {
        let inner = Inner { cidr: Range::of(cidr)?, store, cache: Mutex::new(Cache::default()) };
        Some(ServiceAllocator { inner: Arc::new(inner) })
    }

    fn cache(&self) -> Result<MutexGuard<'_, Cache>, ApiError> {
        self.inner.cache.lock().map_err(|_| ApiError::internal("service allocator poisoned"))
    }

    /// The addresses (of this allocator's ranges) the Services in `svc` hold.
    fn held(&self, svc: &Value) -> Vec<Slot> {
        let mut out: Vec<Slot> = cluster_ips(svc)
            .iter()
            .filter_map(|ip| ip.parse::<Ipv4Addr>().ok())
            .filter(|ip| self.inner.cidr.contains(*ip))
            .map(|ip| Slot::Ip(u32::from(ip)))
            .collect();
        for p in ports_of(svc).into_iter().flatten() {
            if (NODE_PORT_MIN..=NODE_PORT_MAX).contains(&p) && !out.contains(&Slot::Port(p)) {
                out.push(Slot::Port(p));
            }
        }
        out
    }

    fn list(&self, prefix: &str) -> Result<Vec<KeyValue>, ApiError> {
        let page = self.inner.store.list(prefix, None, 0, None).map_err(|e| store_error("listing reservations", &e))?;
        Ok(page.items)
    }

    /// The reserved addresses as stored.
    fn stored_slots(&self) -> Result<Vec<Slot>, ApiError> {
        let mut kvs = self.list(IP_PREFIX)?;
        kvs.extend(self.list(NODE_PORT_PREFIX)?);
        Ok(kvs.iter().filter_map(|kv| Slot::from_key(&kv.key)).collect())
    }

    /// Fills the cache from the store: the first time, or again with `force`.
    fn load(&self, force: bool) -> Result<(), ApiError> {
        if !force && self.cache()?.seeded {
            return Ok(());
        }
        let slots = self.stored_slots()?;
        let mut c = self.cache()?;
        if c.seeded && !force {
            return Ok(());
        }
        c.ips.clear();
        c.ports.clear();
        for s in slots {
            c.insert(s);
        }
        c.seeded = true;
        Ok(())
    }

    /// Whether `slot` is reserved in the store (by anyone).
    fn reserved(&self, slot: Slot) -> Result<bool, ApiError> {
        let found = self.inner.store.get(&slot.key()).map_err(|e| store_error("reading a reservation", &e))?;
        Ok(found.is_some())
    }

    fn next_free_ip(&self, c: &mut Cache) -> Option<u32> {
        let size = self.inner.cidr.size();
        // Skip the network address and the first address (the `kubernetes` Service's, reserved
        // unless asked for explicitly) and the broadcast address.
        let usable = size.saturating_sub(3);
        for i in 0..usable {
            let off = 2 + (c.next_ip + i) % usable;
            let ip = self.inner.cidr.base + off;
            if !c.ips.contains(&ip) {
                c.next_ip = (c.next_ip + i + 1) % usable;
                return Some(ip);
            }
        }
        None
    }

    fn next_free_port(c: &mut Cache) -> Option<u16> {
        let span = (NODE_PORT_MAX - NODE_PORT_MIN + 1) as u32;
        let start = if c.next_port == 0 { rand::random_range(0..span) as u16 } else { c.next_port - NODE_PORT_MIN };
        for i in 0..span {
            let p = NODE_PORT_MIN + ((start as u32 + i) % span) as u16;
            if !c.ports.contains(&p) {
                c.next_port = NODE_PORT_MIN + ((p - NODE_PORT_MIN + 1) as u32 % span) as u16;
                return Some(p);
            }
        }
        None
    }

    fn already_allocated(name: &str, ask: Ask) -> ApiError {
        match ask {
            Ask::Ip(ip) => {
                let ip = Ipv4Addr::from(ip.unwrap_or(0)).to_string();
                invalid(
                    name,
                    vec![FieldError::invalid(
                        "spec.clusterIPs",
                        json!([ip]),
                        format!("failed to allocate IP {ip}: provided IP is already allocated"),
                    )],
                )
            }
            Ask::Port { index, port } => invalid(
                name,
                vec![FieldError::invalid(
                    format!("spec.ports[{index}].nodePort"),
                    port.unwrap_or(0),
                    "provided port is already allocated",
                )],
            ),
        }
    }

    fn full(ask: Ask) -> ApiError {
        match ask {
            Ask::Ip(_) => ApiError::internal("failed to allocate a serviceIP: range is full"),
            Ask::Port { .. } => ApiError::internal("failed to allocate a nodePort: range is full"),
        }
    }

    /// Reserves what `asks` name for `owner`: explicit addresses as asked, the others from the
    /// cache's free candidates; all in one store transaction (none under dry-run). Gives the
    /// address of each ask.
    async fn claim(&self, owner: &Owner, asks: &[Ask], dry_run: bool) -> Result<(Vec<Slot>, Taken), ApiError> {
        if asks.is_empty() {
            return Ok((Vec::new(), Taken::default()));
        }
        self.load(false)?;
        // An explicit address the cache shows as taken is refused only if it is reserved.
        for ask in asks {
            if let Some(slot) = ask.explicit() {
                if self.cache()?.contains(slot) {
                    if self.reserved(slot)? {
                        return Err(Self::already_allocated(&owner.name, *ask));
                    }
                    self.cache()?.remove(slot);
                } else if dry_run && self.reserved(slot)? {
                    return Err(Self::already_allocated(&owner.name, *ask));
                }
            }
        }
        let mut picked: Vec<Option<Slot>> = asks.iter().map(|a| a.explicit()).collect();
        let mut reloaded = false;
        loop {
            let mut full = None;
            {
                let mut c = self.cache()?;
                // What is picked already (explicit asks first) before any automatic pick, so
                // that no automatic pick takes a port another ask of the same write names.
                for s in picked.iter().flatten() {
                    c.insert(*s);
                }
                for (ask, pick) in asks.iter().zip(picked.iter_mut()) {
                    if pick.is_none() {
                        *pick = match ask {
                            Ask::Ip(_) => self.next_free_ip(&mut c).map(Slot::Ip),
                            Ask::Port { .. } => Self::next_free_port(&mut c).map(Slot::Port),
                        };
                    }
                    match pick {
                        Some(s) => c.insert(*s),
                        None => {
                            full = Some(*ask);
                            break;
                        }
                    }
                }
                if full.is_some() || dry_run {
                    for s in picked.iter().flatten() {
                        c.remove(*s);
                    }
                }
            }
            if let Some(ask) = full {
                // The cache may hold addresses other servers have freed since: read the store
                // once before answering that the range is full.
                if reloaded {
                    return Err(Self::full(ask));
                }
                self.load(true)?;
                reloaded = true;
                picked = asks.iter().map(|a| a.explicit()).collect();
                continue;
            }
            let slots: Vec<Slot> = picked.iter().flatten().copied().collect();
            if dry_run {
                return Ok((slots, Taken::default()));
            }
            let ops = slots.iter().map(|s| Op::Create { key: s.key(), value: owner.reservation(*s) }).collect();
            match self.inner.store.txn(ops).await {
                Ok(kvs) => {
                    let claims =
                        slots.iter().zip(kvs).map(|(s, kv)| Claim { slot: *s, revision: kv.mod_revision }).collect();
                    return Ok((slots, Taken { claims }));
                }
                Err(StoreError::AlreadyExists(key)) => {
                    // Another server has it (the cache keeps it as taken): an explicit ask is
                    // refused, an automatic one takes the next candidate.
                    let lost = Slot::from_key(&key);
                    let Some(i) = picked.iter().position(|p| *p == lost && p.is_some()) else {
                        self.forget(&slots)?;
                        return Err(ApiError::internal(format!("reserving service addresses: {key} already exists")));
                    };
                    if asks[i].explicit().is_some() {
                        let others: Vec<Slot> = slots.iter().copied().filter(|s| Some(*s) != lost).collect();
                        self.forget(&others)?;
                        return Err(Self::already_allocated(&owner.name, asks[i]));
                    }
                    picked[i] = None;
                }
                Err(e) => {
                    self.forget(&slots)?;
                    return Err(store_error("reserving service addresses", &e));
                }
            }
        }
    }

    /// Drops `slots` from the cache (not reserved after all).
    fn forget(&self, slots: &[Slot]) -> Result<(), ApiError> {
        let mut c = self.cache()?;
        for s in slots {
            c.remove(*s);
        }
        Ok(())
    }

    /// Allocates what a new Service needs: a ClusterIP unless headless or ExternalName (or
    /// reserves the one asked for), and NodePorts for NodePort/LoadBalancer Services.
    pub async fn allocate_create(&self, svc: &mut Value, dry_run: bool) -> Result<Taken, ApiError> {
        let owner = Owner::of(svc);
        let mut asks = Vec::new();
        if svc_type(svc) != "ExternalName" {
            let asked = svc.pointer("/spec/clusterIP").and_then(Value::as_str).unwrap_or("").to_string();
            if asked != "None" {
                asks.push(Ask::Ip(self.explicit_ip(&owner.name, &asked)?));
            }
        }
        if wants_node_ports(svc) {
            self.port_asks(svc, &owner.name, &BTreeSet::new(), &mut asks)?;
        }
        let (slots, taken) = self.claim(&owner, &asks, dry_run).await?;
        Self::fill(svc, &asks, &slots);
        Ok(taken)
    }

    /// `None` for an empty `asked` (any address), else the address asked for, if it can be.
    fn explicit_ip(&self, name: &str, asked: &str) -> Result<Option<u32>, ApiError> {
        if asked.is_empty() {
            return Ok(None);
        }
        let bad = |why: String| invalid(name, vec![FieldError::invalid("spec.clusterIPs", json!([asked]), why)]);
        let ip: Ipv4Addr = asked.parse().map_err(|_| bad("must be a valid IP address".into()))?;
        let range = self.inner.cidr;
        if !range.contains(ip) || u32::from(ip) == range.base {
            return Err(bad(format!(
                "failed to allocate IP {asked}: the provided IP ({asked}) is not in the valid range. The range of valid IPs is {}/{}",
                Ipv4Addr::from(range.base),
                range.prefix
            )));
        }
        Ok(Some(u32::from(ip)))
    }

    /// The NodePorts `svc`'s ports ask for, except those in `owned` (held already).
    fn port_asks(&self, svc: &Value, name: &str, owned: &BTreeSet<u16>, asks: &mut Vec<Ask>) -> Result<(), ApiError> {
        let mut seen = BTreeSet::new();
        for (index, p) in ports_of(svc).into_iter().enumerate() {
            match p {
                Some(n) => {
                    if owned.contains(&n) || !seen.insert(n) {
                        continue;
                    }
                    if !(NODE_PORT_MIN..=NODE_PORT_MAX).contains(&n) {
                        return Err(invalid(
                            name,
                            vec![FieldError::invalid(
                                format!("spec.ports[{index}].nodePort"),
                                n,
                                format!("provided port is not in the valid range. The range of valid ports is {NODE_PORT_MIN}-{NODE_PORT_MAX}"),
                            )],
                        ));
                    }
                    asks.push(Ask::Port { index, port: Some(n) });
                }
                None => asks.push(Ask::Port { index, port: None }),
            }
        }
        Ok(())
    }

    /// Writes the addresses automatic asks got into the Service.
    fn fill(svc: &mut Value, asks: &[Ask], slots: &[Slot]) {
        for (ask, slot) in asks.iter().zip(slots) {
            match (ask, slot) {
                (Ask::Ip(None), Slot::Ip(ip)) => {
                    let s = Ipv4Addr::from(*ip).to_string();
                    svc["spec"]["clusterIP"] = json!(s);
                    svc["spec"]["clusterIPs"] = json!([s]);
                }
                (Ask::Port { index, port: None }, Slot::Port(p)) => {
                    if let Some(port) = svc.pointer_mut(&format!("/spec/ports/{index}")) {
                        port["nodePort"] = json!(p);
                    }
                }
                _ => {}
            }
        }
    }

    /// Allocates what an update adds (a ClusterIP when it stops being ExternalName, NodePorts
    /// when its type starts needing them or it gains ports), and gives the addresses the update
    /// gives up, to release once it is written.
    pub async fn allocate_update(
        &self,
        new: &mut Value,
        old: &Value,
        dry_run: bool,
    ) -> Result<(Taken, Vec<Slot>), ApiError> {
        let owner = Owner::of(old);
        let mut asks = Vec::new();
        if svc_type(new) != "ExternalName" {
            let asked = new.pointer("/spec/clusterIP").and_then(Value::as_str).unwrap_or("").to_string();
            if asked != "None" && !cluster_ips(old).contains(&asked) {
                asks.push(Ask::Ip(self.explicit_ip(&owner.name, &asked)?));
            }
        }
        let old_ports: BTreeSet<u16> = ports_of(old).into_iter().flatten().collect();
        if wants_node_ports(new) {
            self.port_asks(new, &owner.name, &old_ports, &mut asks)?;
        } else if let Some(ports) = new.pointer_mut("/spec/ports").and_then(Value::as_array_mut) {
            for p in ports.iter_mut() {
                if let Some(m) = p.as_object_mut() {
                    m.remove("nodePort");
                }
            }
        }
        let (slots, taken) = self.claim(&owner, &asks, dry_run).await?;
        Self::fill(new, &asks, &slots);
        let kept: BTreeSet<Slot> = self.held(new).into_iter().collect();
        let freed = self.held(old).into_iter().filter(|s| !kept.contains(s)).collect();
        Ok((taken, freed))
    }

    /// Deletes the reservations a failed write created.
    pub async fn release_taken(&self, t: &Taken) {
        if t.claims.is_empty() {
            return;
        }
        let ops = t.claims.iter().map(|c| Op::Delete { key: c.slot.key(), expected: Some(c.revision) }).collect();
        if let Err(e) = self.inner.store.txn(ops).await {
            // Taken over or already gone: each one on its own; what is left the repair frees.
            tracing::debug!(error = %e, "releasing service addresses together failed; one by one");
            for c in &t.claims {
                let _ = self.inner.store.delete(&c.slot.key(), Some(c.revision)).await;
            }
        }
        let _ = self.forget(&t.slots());
    }

    /// Deletes the reservations of `slots` that still name `owner`.
    async fn release_owned(&self, owner: &Owner, slots: &[Slot]) {
        let mut ops = Vec::new();
        let mut gone = Vec::new();
        for s in slots {
            match self.inner.store.get(&s.key()) {
                Ok(Some(kv)) => {
                    let stored = Stored::read(*s, kv);
                    if stored.managed && stored.owner.as_ref() == Some(owner) {
                        ops.push(Op::Delete { key: s.key(), expected: Some(stored.kv.mod_revision) });
                        gone.push(*s);
                    }
                }
                Ok(None) => gone.push(*s),
                Err(e) => tracing::warn!(key = %s.key(), error = %e, "reading a service address reservation failed"),
            }
        }
        if !ops.is_empty() {
            if let Err(e) = self.inner.store.txn(ops.clone()).await {
                tracing::debug!(error = %e, "releasing service addresses together failed; one by one");
                for op in ops {
                    if let Op::Delete { key, expected } = op {
                        if let Err(e) = self.inner.store.delete(&key, expected).await {
                            tracing::warn!(%key, error = %e, "releasing a service address failed; the repair frees it");
                        }
                    }
                }
            }
        }
        let _ = self.forget(&gone);
    }

    /// Releases everything a deleted Service held.
    pub async fn release_service(&self, svc: &Value) {
        let slots = self.held(svc);
        self.release_owned(&Owner::of(svc), &slots).await;
    }

    /// One repair pass at the current time (see the module doc).
    pub async fn repair(&self) -> Result<Repaired, ApiError> {
        self.repair_at(jiff::Timestamp::now()).await
    }

    /// One repair pass as of `now`: adds the reservations stored Services lack (or points
    /// those naming a Service that does not hold them at one that does), deletes those no
    /// Service holds and older than [`LEAK_GRACE`], then reloads the cache.
    pub async fn repair_at(&self, now: jiff::Timestamp) -> Result<Repaired, ApiError> {
        // Reservations before Services: a reservation is written before its Service, and
        // deleted after it.
        let mut reserved: BTreeMap<Slot, Stored> = BTreeMap::new();
        for kv in self.list(IP_PREFIX)?.into_iter().chain(self.list(NODE_PORT_PREFIX)?) {
            if let Some(slot) = Slot::from_key(&kv.key) {
                reserved.insert(slot, Stored::read(slot, kv));
            }
        }
        let mut holders: BTreeMap<Slot, Vec<Owner>> = BTreeMap::new();
        for kv in self.list(SERVICES_PREFIX)? {
            let Ok(svc) = serde_json::from_slice::<Value>(&kv.value) else { continue };
            let owner = Owner::of(&svc);
            for slot in self.held(&svc) {
                holders.entry(slot).or_default().push(owner.clone());
            }
        }
        let mut done = Repaired::default();
        for (slot, owners) in &holders {
            let Some(first) = owners.first() else { continue };
            if owners.len() > 1 {
                tracing::warn!(key = %slot.key(), services = ?owners, "a service address is held by several Services; recreate all but one");
            }
            match reserved.get(slot) {
                None => {
                    tracing::warn!(key = %slot.key(), service = ?first, "a Service's address was not reserved; repairing");
                    match self.inner.store.create(&slot.key(), first.reservation(*slot)).await {
                        Ok(_) => done.added += 1,
                        Err(StoreError::AlreadyExists(_)) => {}
                        Err(e) => return Err(store_error("repairing a service address reservation", &e)),
                    }
                }
                Some(r) if r.managed && !r.owner.as_ref().is_some_and(|o| owners.contains(o)) => {
                    tracing::warn!(key = %slot.key(), service = ?first, "a service address reservation names another owner; repairing");
                    let update = self.inner.store.update(&r.kv.key, first.reservation(*slot), Some(r.kv.mod_revision));
                    match update.await {
                        Ok(_) => done.added += 1,
                        Err(StoreError::Conflict { .. } | StoreError::NotFound(_)) => {}
                        Err(e) => return Err(store_error("repairing a service address reservation", &e)),
                    }
                }
                Some(_) => {}
            }
        }
        for (slot, r) in &reserved {
            if holders.contains_key(slot) || !r.managed {
                continue;
            }
            let age = r.created.map_or(i64::MAX, |c| now.as_second() - c.as_second());
            if age <= LEAK_GRACE.as_secs() as i64 {
                continue;
            }
            tracing::warn!(key = %slot.key(), service = ?r.owner, "a service address reservation appears to have leaked; cleaning up");
            match self.inner.store.delete(&slot.key(), Some(r.kv.mod_revision)).await {
                Ok(_) => done.removed += 1,
                Err(StoreError::Conflict { .. } | StoreError::NotFound(_)) => {}
                Err(e) => return Err(store_error("removing a leaked service address reservation", &e)),
            }
        }
        self.load(true)?;
        Ok(done)
    }

    /// Repairs every [`REPAIR_INTERVAL`] until `cancel` fires (the pass at start is the
    /// caller's).
    pub async fn run_repair(self, cancel: CancellationToken) {
        loop {
            tokio::select! {
                _ = cancel.cancelled() => return,
                _ = tokio::time::sleep(REPAIR_INTERVAL) => {}
            }
            match self.repair().await {
                Ok(r) if r != Repaired::default() => {
                    tracing::info!(added = r.added, removed = r.removed, "service address reservations repaired")
                }
                Ok(_) => {}
                Err(e) => tracing::warn!(error = %e, "repairing the service address reservations failed"),
            }
        }
    }
}

/// The group-resource the allocator serves, its key in `Registry::allocators`.
pub const SERVICES: (&str, &str) = ("", "services");

/// A Service write's allocation: what it reserved, and what it gives up once stored.
struct ServiceReservation {
    allocator: ServiceAllocator,
    owner: Owner,
    taken: Taken,
    freed: Vec<Slot>,
}

impl Reservation for ServiceReservation {
    fn commit(self: Box<Self>) -> BoxFuture<'static, ()> {
        Box::pin(async move {
            if !self.freed.is_empty() {
                self.allocator.release_owned(&self.owner, &self.freed).await;
            }
        })
    }

    fn abort(self: Box<Self>) -> BoxFuture<'static, ()> {
        Box::pin(async move { self.allocator.release_taken(&self.taken).await })
    }
}

impl Allocator for ServiceAllocator {
    fn reserve_for_create<'a>(
        &'a self,
        obj: &'a mut Value,
        dry_run: bool,
    ) -> BoxFuture<'a, Result<Box<dyn Reservation>, ApiError>> {
        Box::pin(async move {
            let taken = self.allocate_create(obj, dry_run).await?;
            let r = ServiceReservation { allocator: self.clone(), owner: Owner::of(obj), taken, freed: Vec::new() };
            Ok(Box::new(r) as Box<dyn Reservation>)
        })
    }

    fn reserve_for_update<'a>(
        &'a self,
        new: &'a mut Value,
        old: &'a Value,
        dry_run: bool,
    ) -> BoxFuture<'a, Result<Box<dyn Reservation>, ApiError>> {
        Box::pin(async move {
            let (taken, freed) = self.allocate_update(new, old, dry_run).await?;
            let r = ServiceReservation { allocator: self.clone(), owner: Owner::of(old), taken, freed };
            Ok(Box::new(r) as Box<dyn Reservation>)
        })
    }

    fn release_object<'a>(&'a self, obj: &'a Value) -> BoxFuture<'a, ()> {
        Box::pin(self.release_service(obj))
    }
}

#[cfg(test)]
mod tests;
