//! The CNI network configuration k1s writes for containerd (design.md §7): one conflist with the
//! `bridge` plugin (gateway on the bridge, masquerade, hairpin) using `host-local` IPAM on the
//! cluster CIDR, then `portmap` for hostPort. No loopback plugin: containerd's CRI plugin sets
//! up the pod's loopback itself, and with `max_conf_num = 1` a loopback entry would be wrong.

use k1s_api::net::Cidr;
use std::net::IpAddr;
use std::path::{Path, PathBuf};

use serde_json::json;

/// The file name k1s writes in the CNI configuration directory.
pub const CONFLIST_FILE: &str = "10-k1s.conflist";
/// The network name in the conflist.
pub const NETWORK_NAME: &str = "k1s";
/// The bridge k1s creates.
pub const DEFAULT_BRIDGE: &str = "cni0";
/// The CNI spec version the conflist declares (Debian's plugins 1.1 and containerd 1.6 speak it).
pub const CNI_VERSION: &str = "1.0.0";

/// Why the conflist could not be rendered or written.
#[derive(Debug, thiserror::Error)]
pub enum CniError {
    #[error("cluster CIDR {cidr:?} is not an IP network in CIDR notation (like 10.42.0.0/16)")]
    InvalidCidr { cidr: String },
    #[error("cluster CIDR {cidr} leaves no room for a gateway and pods")]
    CidrTooSmall { cidr: String },
    #[error("bridge name {name:?} is not a valid interface name (1 to 15 bytes, no '/' or spaces)")]
    InvalidBridgeName { name: String },
    #[error("writing CNI conflist {path}")]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// A parsed CIDR: its network address (host bits cleared), prefix length and first address.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ClusterCidr {
    pub network: IpAddr,
    pub prefix: u8,
    /// The first address of the network: the bridge's address and the pods' gateway.
    pub gateway: IpAddr,
}

impl ClusterCidr {
    /// Parses `10.42.0.0/16` or `fd00:42::/56`: a network with room for the gateway and pods.
    pub fn parse(cidr: &str) -> Result<Self, CniError> {
        let parsed: Cidr = cidr.parse().map_err(|_| CniError::InvalidCidr { cidr: cidr.to_string() })?;
        if parsed.host_bits() < 2 {
            return Err(CniError::CidrTooSmall { cidr: cidr.to_string() });
        }
        let gateway = parsed.nth(1).ok_or_else(|| CniError::CidrTooSmall { cidr: cidr.to_string() })?;
        Ok(Self { network: parsed.network(), prefix: parsed.prefix(), gateway })
    }

    /// `network/prefix`.
    pub fn subnet(&self) -> String {
        format!("{}/{}", self.network, self.prefix)
    }

    fn default_route(&self) -> &'static str {
        match self.network {
            IpAddr::V4(_) => "0.0.0.0/0",
            IpAddr::V6(_) => "::/0",
        }
    }
}

/// Renders the conflist for `cluster_cidr` on bridge `bridge_name`; `mtu` sets the bridge and
/// veth MTU (the plugin's default, the host's, when `None`). `ip_masq` lets the bridge plugin
/// masquerade pod traffic leaving the pod network, with iptables rules per pod; k1s's proxy
/// does that with one nftables rule instead, so it is off while the proxy runs.
pub fn render_conflist(
    cluster_cidr: &str,
    bridge_name: &str,
    mtu: Option<u32>,
    ip_masq: bool,
) -> Result<String, CniError> {
    let cidr = ClusterCidr::parse(cluster_cidr)?;
    if bridge_name.is_empty() || bridge_name.len() > 15 || bridge_name.contains(['/', ' ', '\t', '\n', '\0']) {
        return Err(CniError::InvalidBridgeName { name: bridge_name.to_string() });
    }
    let mut bridge = json!({
        "type": "bridge",
        "bridge": bridge_name,
        "isGateway": true,
        "ipMasq": ip_masq,
        "hairpinMode": true,
    });
    if let (Some(mtu), Some(obj)) = (mtu, bridge.as_object_mut()) {
        obj.insert("mtu".into(), json!(mtu));
    }
    if let Some(obj) = bridge.as_object_mut() {
        obj.insert(
            "ipam".into(),
            json!({
                "type": "host-local",
                "ranges": [[{ "subnet": cidr.subnet(), "gateway": cidr.gateway.to_string() }]],
                "routes": [{ "dst": cidr.default_route() }],
            }),
        );
    }
    let conflist = json!({
        "cniVersion": CNI_VERSION,
        "name": NETWORK_NAME,
        "plugins": [
            bridge,
            { "type": "portmap", "capabilities": { "portMappings": true } },
        ],
    });
    // Serializing a Value cannot fail.
    let mut text = serde_json::to_string_pretty(&conflist).unwrap_or_default();
    text.push('\n');
    Ok(text)
}

/// Renders the conflist and writes it atomically to `<dir>/10-k1s.conflist` (mode 0644),
/// creating `dir`. Returns the path written.
pub fn write_conflist(
    dir: &Path,
    cluster_cidr: &str,
    bridge_name: &str,
    mtu: Option<u32>,
    ip_masq: bool,
) -> Result<PathBuf, CniError> {
    let text = render_conflist(cluster_cidr, bridge_name, mtu, ip_masq)?;
    let path = dir.join(CONFLIST_FILE);
    crate::containerd::write_atomic(&path, text.as_bytes(), 0o644)
        .map_err(|source| CniError::Write { path: path.clone(), source })?;
    Ok(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    const EXPECTED: &str = r#"{
  "cniVersion": "1.0.0",
  "name": "k1s",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "cni0",
      "isGateway": true,
      "ipMasq": true,
      "hairpinMode": true,
      "mtu": 1450,
      "ipam": {
        "type": "host-local",
        "ranges": [
          [
            {
              "subnet": "10.42.0.0/16",
              "gateway": "10.42.0.1"
            }
          ]
        ],
        "routes": [
          {
            "dst": "0.0.0.0/0"
          }
        ]
      }
    },
    {
      "type": "portmap",
      "capabilities": {
        "portMappings": true
      }
    }
  ]
}
"#;

    #[test]
    fn conflist_has_bridge_with_host_local_then_portmap() {
        let text = render_conflist("10.42.0.0/16", "cni0", Some(1450), true).expect("render");
        assert_eq!(text, EXPECTED);
    }

    #[test]
    fn ip_masq_can_be_left_to_the_proxy() {
        let text = render_conflist("10.42.0.0/16", "cni0", None, false).expect("render");
        let v: serde_json::Value = serde_json::from_str(&text).expect("json");
        assert_eq!(v["plugins"][0]["ipMasq"], serde_json::json!(false));
        assert_eq!(v["plugins"][0]["isGateway"], serde_json::json!(true));
    }

    #[test]
    fn conflist_has_no_loopback_plugin() {
        let text = render_conflist("10.42.0.0/16", "cni0", None, true).expect("render");
        let value: serde_json::Value = serde_json::from_str(&text).expect("valid JSON");
        let types: Vec<&str> =
            value["plugins"].as_array().expect("plugins").iter().filter_map(|p| p["type"].as_str()).collect();
        assert_eq!(types, vec!["bridge", "portmap"]);
        assert!(value["plugins"][0].get("mtu").is_none(), "no MTU unless asked");
    }

    #[test]
    fn host_bits_of_the_cidr_are_cleared_for_subnet_and_gateway() {
        let cidr = ClusterCidr::parse("10.42.7.9/16").expect("parse");
        assert_eq!(cidr.subnet(), "10.42.0.0/16");
        assert_eq!(cidr.gateway.to_string(), "10.42.0.1");
    }

    #[test]
    fn ipv6_cidr_gets_a_v6_gateway_and_default_route() {
        let text = render_conflist("fd00:42::/56", "cni0", None, true).expect("render");
        let value: serde_json::Value = serde_json::from_str(&text).expect("valid JSON");
        let ipam = &value["plugins"][0]["ipam"];
        assert_eq!(ipam["ranges"][0][0]["subnet"], "fd00:42::/56");
        assert_eq!(ipam["ranges"][0][0]["gateway"], "fd00:42::1");
        assert_eq!(ipam["routes"][0]["dst"], "::/0");
    }

    #[test]
    fn malformed_cidrs_are_rejected() {
        for bad in ["10.42.0.0", "10.42.0.0/33", "nope/8", "10.42.0.0/x", ""] {
            assert!(matches!(ClusterCidr::parse(bad), Err(CniError::InvalidCidr { .. })), "{bad}");
        }
        assert!(matches!(ClusterCidr::parse("10.0.0.0/31"), Err(CniError::CidrTooSmall { .. })));
    }

    #[test]
    fn invalid_bridge_names_are_rejected() {
        for bad in ["", "a-very-long-bridge-name", "a/b", "a b"] {
            assert!(
                matches!(render_conflist("10.42.0.0/16", bad, None, true), Err(CniError::InvalidBridgeName { .. })),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn write_conflist_writes_the_k1s_file_atomically() {
        let dir = tempfile::tempdir().expect("tempdir");
        let conf_dir = dir.path().join("net.d");
        let path = write_conflist(&conf_dir, "10.42.0.0/16", "cni0", Some(1450), true).expect("write");
        assert_eq!(path, conf_dir.join("10-k1s.conflist"));
        assert_eq!(std::fs::read_to_string(&path).expect("read"), EXPECTED);
        let names: Vec<String> = std::fs::read_dir(&conf_dir)
            .expect("read dir")
            .filter_map(Result::ok)
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names, vec!["10-k1s.conflist"], "nothing else left in the directory");
    }
}
