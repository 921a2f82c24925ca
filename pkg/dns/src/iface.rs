//! Makes the cluster DNS address a local address of the host: an interface `k1s-dns0` holding it
//! as a /32 (/128 for IPv6), so that packets from pods on the bridge are delivered locally (the
//! local routing table is consulted before the main one, so the blackhole route the proxy sets
//! for the Service CIDR does not swallow them) and the server can bind it.
//!
//! The interface is a `dummy` link (as kube-proxy's `kube-ipvs0`); kernels built without the
//! dummy driver (some microVM kernels) get a bridge without ports instead, which holds a local
//! address just as well. Idempotent; [`remove_interface`] undoes it. Netlink sits behind
//! [`Netlink`] so the logic is tested without root.

use std::future::Future;
use std::net::IpAddr;

use futures::TryStreamExt;
use rtnetlink::packet_route::address::AddressAttribute;
use rtnetlink::packet_route::link::LinkFlags;
use rtnetlink::{Handle, LinkBridge, LinkDummy, LinkUnspec};

/// The interface that holds the cluster DNS address.
pub const INTERFACE: &str = "k1s-dns0";

const ENODEV: i32 = 19;
const EEXIST: i32 = 17;
/// What the kernel answers for a link kind it has no driver for.
const EOPNOTSUPP: i32 = 95;

/// The kinds of link that can hold the address, in order of preference.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LinkKind {
    Dummy,
    Bridge,
}

#[derive(Debug, thiserror::Error)]
pub enum IfaceError {
    #[error("opening a netlink socket")]
    Connect(#[source] std::io::Error),
    #[error("looking up link {link}")]
    Lookup { link: String, source: rtnetlink::Error },
    #[error("creating {kind:?} link {link}")]
    Create { link: String, kind: LinkKind, source: rtnetlink::Error },
    #[error("creating link {link}: the kernel supports neither dummy nor bridge links")]
    NoLinkKind { link: String },
    #[error("link {link} vanished right after it was created")]
    Vanished { link: String },
    #[error("bringing link {link} up")]
    SetUp { link: String, source: rtnetlink::Error },
    #[error("listing the addresses of link {link}")]
    ListAddresses { link: String, source: rtnetlink::Error },
    #[error("adding {ip} to link {link}")]
    AddAddress { link: String, ip: IpAddr, source: rtnetlink::Error },
    #[error("deleting link {link}")]
    Delete { link: String, source: rtnetlink::Error },
}

/// What [`ensure_local_address`] needs to know about a link.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LinkState {
    pub index: u32,
    pub up: bool,
}

/// The few netlink operations the DNS address needs.
pub trait Netlink: Send + Sync {
    fn link(&self, name: &str) -> impl Future<Output = Result<Option<LinkState>, IfaceError>> + Send;
    /// Creates a link of `kind`; one that already exists is not an error. `Ok(false)` when the
    /// kernel has no driver for `kind`.
    fn add_link(&self, name: &str, kind: LinkKind) -> impl Future<Output = Result<bool, IfaceError>> + Send;
    fn set_up(&self, name: &str, index: u32) -> impl Future<Output = Result<(), IfaceError>> + Send;
    fn addresses(&self, name: &str, index: u32) -> impl Future<Output = Result<Vec<IpAddr>, IfaceError>> + Send;
    /// Adds a host address; one already present is not an error.
    fn add_address(&self, name: &str, index: u32, ip: IpAddr) -> impl Future<Output = Result<(), IfaceError>> + Send;
    fn delete_link(&self, name: &str, index: u32) -> impl Future<Output = Result<(), IfaceError>> + Send;
}

/// Ensures `link` exists (a dummy, else a bridge), is up and holds `ip`.
pub async fn ensure_local_address<N: Netlink>(netlink: &N, link: &str, ip: IpAddr) -> Result<(), IfaceError> {
    let state = match netlink.link(link).await? {
        Some(state) => state,
        None => {
            let mut created = None;
            for kind in [LinkKind::Dummy, LinkKind::Bridge] {
                if netlink.add_link(link, kind).await? {
                    created = Some(kind);
                    break;
                }
            }
            let kind = created.ok_or_else(|| IfaceError::NoLinkKind { link: link.to_string() })?;
            tracing::info!(%link, ?kind, "created the cluster DNS interface");
            netlink.link(link).await?.ok_or_else(|| IfaceError::Vanished { link: link.to_string() })?
        }
    };
    if !state.up {
        netlink.set_up(link, state.index).await?;
    }
    if !netlink.addresses(link, state.index).await?.contains(&ip) {
        netlink.add_address(link, state.index, ip).await?;
        tracing::info!(%link, %ip, "added the cluster DNS address");
    }
    Ok(())
}

/// Deletes `link` (and with it its addresses); returns whether it existed.
pub async fn remove_interface<N: Netlink>(netlink: &N, link: &str) -> Result<bool, IfaceError> {
    match netlink.link(link).await? {
        Some(state) => {
            netlink.delete_link(link, state.index).await?;
            Ok(true)
        }
        None => Ok(false),
    }
}

/// [`Netlink`] over an rtnetlink socket.
pub struct RtNetlink {
    handle: Handle,
}

impl RtNetlink {
    /// Opens a netlink socket; its I/O runs on a task that ends when this value is dropped.
    pub fn connect() -> Result<RtNetlink, IfaceError> {
        let (connection, handle, _) = rtnetlink::new_connection().map_err(IfaceError::Connect)?;
        tokio::spawn(connection);
        Ok(RtNetlink { handle })
    }
}

fn errno(e: &rtnetlink::Error) -> Option<i32> {
    match e {
        rtnetlink::Error::NetlinkError(m) => Some(-m.raw_code()),
        _ => None,
    }
}

impl Netlink for RtNetlink {
    async fn link(&self, name: &str) -> Result<Option<LinkState>, IfaceError> {
        let mut links = self.handle.link().get().match_name(name.to_string()).execute();
        match links.try_next().await {
            Ok(Some(msg)) => {
                Ok(Some(LinkState { index: msg.header.index, up: msg.header.flags.contains(LinkFlags::Up) }))
            }
            Ok(None) => Ok(None),
            Err(e) if errno(&e) == Some(ENODEV) => Ok(None),
            Err(source) => Err(IfaceError::Lookup { link: name.to_string(), source }),
        }
    }

    async fn add_link(&self, name: &str, kind: LinkKind) -> Result<bool, IfaceError> {
        let message = match kind {
            LinkKind::Dummy => LinkDummy::new(name).up().build(),
            LinkKind::Bridge => LinkBridge::new(name).up().build(),
        };
        match self.handle.link().add(message).execute().await {
            Ok(()) => Ok(true),
            Err(e) if errno(&e) == Some(EEXIST) => Ok(true),
            Err(e) if errno(&e) == Some(EOPNOTSUPP) => Ok(false),
            Err(source) => Err(IfaceError::Create { link: name.to_string(), kind, source }),
        }
    }

    async fn set_up(&self, name: &str, index: u32) -> Result<(), IfaceError> {
        self.handle
            .link()
            .set(LinkUnspec::new_with_index(index).up().build())
            .execute()
            .await
            .map_err(|source| IfaceError::SetUp { link: name.to_string(), source })
    }

    async fn addresses(&self, name: &str, index: u32) -> Result<Vec<IpAddr>, IfaceError> {
        let err = |source| IfaceError::ListAddresses { link: name.to_string(), source };
        let mut stream = self.handle.address().get().set_link_index_filter(index).execute();
        let mut out = Vec::new();
        while let Some(msg) = stream.try_next().await.map_err(err)? {
            for attr in msg.attributes {
                if let AddressAttribute::Address(ip) | AddressAttribute::Local(ip) = attr {
                    if !out.contains(&ip) {
                        out.push(ip);
                    }
                }
            }
        }
        Ok(out)
    }

    async fn add_address(&self, name: &str, index: u32, ip: IpAddr) -> Result<(), IfaceError> {
        let prefix = if ip.is_ipv4() { 32 } else { 128 };
        match self.handle.address().add(index, ip, prefix).execute().await {
            Err(e) if errno(&e) != Some(EEXIST) => {
                Err(IfaceError::AddAddress { link: name.to_string(), ip, source: e })
            }
            _ => Ok(()),
        }
    }

    async fn delete_link(&self, name: &str, index: u32) -> Result<(), IfaceError> {
        match self.handle.link().del(index).execute().await {
            Err(e) if errno(&e) != Some(ENODEV) => Err(IfaceError::Delete { link: name.to_string(), source: e }),
            _ => Ok(()),
        }
    }
}

#[cfg(test)]
pub(crate) mod fake {
    //! An in-memory [`Netlink`] that records the changes asked of it.
    use super::*;
    use std::sync::Mutex;

    /// (name, index, up, addresses)
    pub type FakeLink = (String, u32, bool, Vec<IpAddr>);

    #[derive(Default)]
    pub struct FakeNetlink {
        pub links: Mutex<Vec<FakeLink>>,
        /// The kernel lacks the dummy driver.
        pub no_dummy: bool,
        pub calls: Mutex<Vec<String>>,
    }

    impl FakeNetlink {
        fn call(&self, c: String) {
            self.calls.lock().expect("calls").push(c);
        }
        pub fn calls(&self) -> Vec<String> {
            self.calls.lock().expect("calls").clone()
        }
    }

    impl Netlink for FakeNetlink {
        async fn link(&self, name: &str) -> Result<Option<LinkState>, IfaceError> {
            let links = self.links.lock().expect("links");
            Ok(links.iter().find(|l| l.0 == name).map(|l| LinkState { index: l.1, up: l.2 }))
        }
        async fn add_link(&self, name: &str, kind: LinkKind) -> Result<bool, IfaceError> {
            self.call(format!("add_link {name} {kind:?}"));
            if self.no_dummy && kind == LinkKind::Dummy {
                return Ok(false);
            }
            let mut links = self.links.lock().expect("links");
            let index = u32::try_from(links.len()).expect("index") + 10;
            links.push((name.to_string(), index, true, Vec::new()));
            Ok(true)
        }
        async fn set_up(&self, name: &str, _index: u32) -> Result<(), IfaceError> {
            self.call(format!("set_up {name}"));
            let mut links = self.links.lock().expect("links");
            links.iter_mut().filter(|l| l.0 == name).for_each(|l| l.2 = true);
            Ok(())
        }
        async fn addresses(&self, name: &str, _index: u32) -> Result<Vec<IpAddr>, IfaceError> {
            let links = self.links.lock().expect("links");
            Ok(links.iter().find(|l| l.0 == name).map(|l| l.3.clone()).unwrap_or_default())
        }
        async fn add_address(&self, name: &str, _index: u32, ip: IpAddr) -> Result<(), IfaceError> {
            self.call(format!("add_address {name} {ip}"));
            let mut links = self.links.lock().expect("links");
            links.iter_mut().filter(|l| l.0 == name).for_each(|l| l.3.push(ip));
            Ok(())
        }
        async fn delete_link(&self, name: &str, _index: u32) -> Result<(), IfaceError> {
            self.call(format!("delete_link {name}"));
            self.links.lock().expect("links").retain(|l| l.0 != name);
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::fake::FakeNetlink;
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().expect("ip")
    }

    #[tokio::test]
    async fn ensuring_twice_creates_the_link_and_adds_the_address_once() {
        let nl = FakeNetlink::default();
        ensure_local_address(&nl, INTERFACE, ip("10.43.0.10")).await.expect("first");
        ensure_local_address(&nl, INTERFACE, ip("10.43.0.10")).await.expect("second");
        assert_eq!(nl.calls(), vec!["add_link k1s-dns0 Dummy", "add_address k1s-dns0 10.43.0.10"]);
    }

    #[tokio::test]
    async fn kernels_without_the_dummy_driver_get_a_bridge() {
        let nl = FakeNetlink { no_dummy: true, ..Default::default() };
        ensure_local_address(&nl, INTERFACE, ip("10.43.0.10")).await.expect("ensure");
        assert_eq!(
            nl.calls(),
            vec!["add_link k1s-dns0 Dummy", "add_link k1s-dns0 Bridge", "add_address k1s-dns0 10.43.0.10"]
        );
    }

    #[tokio::test]
    async fn a_link_left_down_is_brought_up_and_keeps_its_other_addresses() {
        let nl = FakeNetlink::default();
        nl.links.lock().expect("links").push((INTERFACE.into(), 7, false, vec![ip("10.43.0.53")]));
        ensure_local_address(&nl, INTERFACE, ip("10.43.0.10")).await.expect("ensure");
        assert_eq!(nl.calls(), vec!["set_up k1s-dns0", "add_address k1s-dns0 10.43.0.10"]);
        let links = nl.links.lock().expect("links");
        assert_eq!(links[0].3, vec![ip("10.43.0.53"), ip("10.43.0.10")]);
    }

    #[tokio::test]
    async fn removing_deletes_the_link_once_and_tolerates_its_absence() {
        let nl = FakeNetlink::default();
        ensure_local_address(&nl, INTERFACE, ip("10.43.0.10")).await.expect("ensure");
        assert!(remove_interface(&nl, INTERFACE).await.expect("remove"));
        assert!(!remove_interface(&nl, INTERFACE).await.expect("remove again"));
        assert_eq!(nl.calls().iter().filter(|c| c.starts_with("delete_link")).count(), 1);
    }
}
