//! The Service CIDR's blackhole, set with netlink policy-routing rules so that unmatched
//! ClusterIP traffic never leaves the host.
//!
//! A plain `blackhole 10.43.0.0/16` route in the main table would also break the node's own
//! connections to ClusterIPs: `connect()` looks the route up before the `output` hook's DNAT and
//! fails with EINVAL (verified on Linux 6.18). So k1s installs two rules instead:
//!
//! ```text
//! 27440:  from all to 10.43.0.0/16 iif lo lookup main     (the host's own traffic: routed, then DNATed)
//! 27441:  from all to 10.43.0.0/16 blackhole             (forwarded traffic that no Service DNATed)
//! ```
//!
//! Forwarded pod traffic to a Service is DNATed in `prerouting`, before routing, so it never
//! reaches rule 27441. The node's unmatched ClusterIP traffic is dropped by the nft table
//! (`service-endpoints-check`). [`uninstall`](crate::uninstall) removes both rules and nothing else.

use crate::cidr::Cidr;
use futures::TryStreamExt;
use netlink_packet_route::route::RouteHeader;
use netlink_packet_route::rule::{RuleAction, RuleAttribute, RuleMessage};
use rtnetlink::IpVersion;
use std::future::Future;
use std::net::IpAddr;

/// Priority of the rule that keeps the host's own Service traffic routable.
pub const RULE_PRIORITY_HOST: u32 = 27440;
/// Priority of the blackhole rule.
pub const RULE_PRIORITY_BLACKHOLE: u32 = 27441;

#[derive(Debug, thiserror::Error)]
pub enum RouteError {
    #[error("opening a netlink route socket")]
    Connect(#[source] std::io::Error),
    #[error("listing IPv4 routing rules")]
    List(#[source] rtnetlink::Error),
    #[error("adding routing rule {priority} for {cidr}")]
    Add { priority: u32, cidr: Cidr, source: rtnetlink::Error },
    #[error("deleting routing rule {priority}")]
    Delete { priority: u32, source: rtnetlink::Error },
}

/// The routing boundary.
pub trait Routes: Send + Sync {
    /// Installs (or corrects) the Service CIDR rules.
    fn ensure(&self, service_cidr: Cidr) -> impl Future<Output = Result<(), RouteError>> + Send;
    /// Removes the rules k1s installed (by their priorities), if any.
    fn remove(&self) -> impl Future<Output = Result<(), RouteError>> + Send;
}

/// Rules through rtnetlink in the caller's network namespace.
#[derive(Clone, Copy, Debug, Default)]
pub struct NetlinkRoutes;

/// A netlink handle whose connection task stops with it.
struct Conn {
    handle: rtnetlink::Handle,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Conn {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn connect() -> Result<Conn, RouteError> {
    let (conn, handle, _) = rtnetlink::new_connection().map_err(RouteError::Connect)?;
    Ok(Conn { handle, task: tokio::spawn(conn) })
}

fn priority(m: &RuleMessage) -> Option<u32> {
    m.attributes.iter().find_map(|a| match a {
        RuleAttribute::Priority(p) => Some(*p),
        _ => None,
    })
}

fn destination(m: &RuleMessage) -> Option<IpAddr> {
    m.attributes.iter().find_map(|a| match a {
        RuleAttribute::Destination(d) => Some(*d),
        _ => None,
    })
}

fn iifname(m: &RuleMessage) -> Option<&str> {
    m.attributes.iter().find_map(|a| match a {
        RuleAttribute::Iifname(n) => Some(n.as_str()),
        _ => None,
    })
}

/// Whether an installed rule is exactly what k1s wants at its priority.
fn is_wanted(m: &RuleMessage, cidr: Cidr) -> bool {
    let dst_ok = destination(m) == Some(IpAddr::V4(cidr.network())) && m.header.dst_len == cidr.prefix();
    match priority(m) {
        Some(RULE_PRIORITY_HOST) => {
            dst_ok
                && iifname(m) == Some("lo")
                && m.header.action == RuleAction::ToTable
                && m.header.table == RouteHeader::RT_TABLE_MAIN
        }
        Some(RULE_PRIORITY_BLACKHOLE) => dst_ok && m.header.action == RuleAction::Blackhole,
        _ => false,
    }
}

async fn ours(handle: &rtnetlink::Handle) -> Result<Vec<RuleMessage>, RouteError> {
    let all: Vec<RuleMessage> =
        handle.rule().get(IpVersion::V4).execute().try_collect().await.map_err(RouteError::List)?;
    Ok(all.into_iter().filter(|m| matches!(priority(m), Some(RULE_PRIORITY_HOST | RULE_PRIORITY_BLACKHOLE))).collect())
}

impl Routes for NetlinkRoutes {
    async fn ensure(&self, cidr: Cidr) -> Result<(), RouteError> {
        let c = connect()?;
        let existing = ours(&c.handle).await?;
        let complete = [RULE_PRIORITY_HOST, RULE_PRIORITY_BLACKHOLE]
            .iter()
            .all(|p| existing.iter().any(|m| priority(m) == Some(*p) && is_wanted(m, cidr)));
        if complete && existing.len() == 2 {
            return Ok(());
        }
        for m in existing {
            let priority = priority(&m).unwrap_or_default();
            c.handle.rule().del(m).execute().await.map_err(|source| RouteError::Delete { priority, source })?;
        }
        let net = cidr.network();
        c.handle
            .rule()
            .add()
            .v4()
            .destination_prefix(net, cidr.prefix())
            .input_interface("lo")
            .table_id(u32::from(RouteHeader::RT_TABLE_MAIN))
            .action(RuleAction::ToTable)
            .priority(RULE_PRIORITY_HOST)
            .execute()
            .await
            .map_err(|source| RouteError::Add { priority: RULE_PRIORITY_HOST, cidr, source })?;
        let mut blackhole =
            c.handle.rule().add().v4().destination_prefix(net, cidr.prefix()).priority(RULE_PRIORITY_BLACKHOLE);
        blackhole.message_mut().header.action = RuleAction::Blackhole;
        blackhole.message_mut().header.table = RouteHeader::RT_TABLE_UNSPEC;
        blackhole.execute().await.map_err(|source| RouteError::Add {
            priority: RULE_PRIORITY_BLACKHOLE,
            cidr,
            source,
        })?;
        tracing::info!(%cidr, "service CIDR blackholed for forwarded traffic");
        Ok(())
    }

    async fn remove(&self) -> Result<(), RouteError> {
        let c = connect()?;
        for m in ours(&c.handle).await? {
            let priority = priority(&m).unwrap_or_default();
            c.handle.rule().del(m).execute().await.map_err(|source| RouteError::Delete { priority, source })?;
        }
        Ok(())
    }
}

/// Records calls (tests of the sync loop).
#[derive(Clone, Default)]
pub struct FakeRoutes {
    pub ensured: std::sync::Arc<std::sync::Mutex<Vec<Cidr>>>,
}

impl Routes for FakeRoutes {
    async fn ensure(&self, cidr: Cidr) -> Result<(), RouteError> {
        if let Ok(mut e) = self.ensured.lock() {
            e.push(cidr);
        }
        Ok(())
    }

    async fn remove(&self) -> Result<(), RouteError> {
        if let Ok(mut e) = self.ensured.lock() {
            e.clear();
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use netlink_packet_route::AddressFamily;

    fn rule(prio: u32, dst: &str, len: u8, action: RuleAction, table: u8, iif: Option<&str>) -> RuleMessage {
        let mut m = RuleMessage::default();
        m.header.family = AddressFamily::Inet;
        m.header.dst_len = len;
        m.header.action = action;
        m.header.table = table;
        m.attributes.push(RuleAttribute::Priority(prio));
        m.attributes.push(RuleAttribute::Destination(dst.parse().expect("ip")));
        if let Some(i) = iif {
            m.attributes.push(RuleAttribute::Iifname(i.into()));
        }
        m
    }

    #[test]
    fn wanted_rules_match_cidr_action_and_interface() {
        let cidr: Cidr = "10.43.0.0/16".parse().expect("cidr");
        assert!(is_wanted(&rule(RULE_PRIORITY_HOST, "10.43.0.0", 16, RuleAction::ToTable, 254, Some("lo")), cidr));
        assert!(is_wanted(&rule(RULE_PRIORITY_BLACKHOLE, "10.43.0.0", 16, RuleAction::Blackhole, 0, None), cidr));
        assert!(!is_wanted(&rule(RULE_PRIORITY_HOST, "10.43.0.0", 16, RuleAction::ToTable, 254, None), cidr));
        assert!(!is_wanted(&rule(RULE_PRIORITY_BLACKHOLE, "10.44.0.0", 16, RuleAction::Blackhole, 0, None), cidr));
        assert!(!is_wanted(&rule(RULE_PRIORITY_BLACKHOLE, "10.43.0.0", 24, RuleAction::Blackhole, 0, None), cidr));
        assert!(!is_wanted(&rule(100, "10.43.0.0", 16, RuleAction::Blackhole, 0, None), cidr));
    }
}
