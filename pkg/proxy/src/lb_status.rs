//! LoadBalancer Services served on the node's own address, like k3s's ServiceLB: the proxy
//! writes `status.loadBalancer.ingress = [{ip: <node IP>, ipMode: VIP}]` for every
//! `type: LoadBalancer` Service without a `loadBalancerClass`, and clears that value again when a
//! Service stops being a LoadBalancer.

use k8s_openapi::api::core::v1::{LoadBalancerIngress, Service};
use kube::api::{Api, Patch, PatchParams};
use std::future::Future;
use std::net::Ipv4Addr;

#[derive(Debug, thiserror::Error)]
pub enum StatusError {
    #[error("patching status.loadBalancer of service {namespace}/{name}")]
    Patch { namespace: String, name: String, source: kube::Error },
}

/// Writes `status.loadBalancer.ingress` (empty clears it).
pub trait StatusWriter: Send + Sync {
    fn set_ingress(
        &self,
        namespace: &str,
        name: &str,
        ingress: Vec<LoadBalancerIngress>,
    ) -> impl Future<Output = Result<(), StatusError>> + Send;
}

/// Merge-patches `services/status` with the proxy's own client.
#[derive(Clone)]
pub struct KubeStatusWriter {
    client: kube::Client,
}

impl KubeStatusWriter {
    pub fn new(client: kube::Client) -> Self {
        Self { client }
    }
}

impl StatusWriter for KubeStatusWriter {
    async fn set_ingress(
        &self,
        namespace: &str,
        name: &str,
        ingress: Vec<LoadBalancerIngress>,
    ) -> Result<(), StatusError> {
        let api: Api<Service> = Api::namespaced(self.client.clone(), namespace);
        let value = if ingress.is_empty() { serde_json::Value::Null } else { serde_json::json!(ingress) };
        let patch = serde_json::json!({"status": {"loadBalancer": {"ingress": value}}});
        api.patch_status(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .map(|_| ())
            .map_err(|source| StatusError::Patch { namespace: namespace.to_string(), name: name.to_string(), source })
    }
}

fn current(svc: &Service) -> Vec<LoadBalancerIngress> {
    svc.status.as_ref().and_then(|s| s.load_balancer.as_ref()).and_then(|lb| lb.ingress.clone()).unwrap_or_default()
}

fn ours(node_ip: Ipv4Addr) -> Vec<LoadBalancerIngress> {
    vec![LoadBalancerIngress { ip: Some(node_ip.to_string()), ip_mode: Some("VIP".into()), ..Default::default() }]
}

/// The ingress to write for `svc`, or `None` when its status is already right or not ours.
pub fn desired_ingress(svc: &Service, node_ip: Ipv4Addr) -> Option<Vec<LoadBalancerIngress>> {
    let spec = svc.spec.as_ref()?;
    let have = current(svc);
    let is_ours = spec.type_.as_deref() == Some("LoadBalancer")
        && spec.load_balancer_class.is_none()
        && crate::service::is_programmed(svc);
    if is_ours {
        let want = ours(node_ip);
        return (have != want).then_some(want);
    }
    // No longer a LoadBalancer (or handed to another class): withdraw what we wrote.
    let lb_class_owner = spec.type_.as_deref() == Some("LoadBalancer");
    (!lb_class_owner && !have.is_empty() && have == ours(node_ip)).then(Vec::new)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::service::tests::svc;
    use k8s_openapi::api::core::v1::{LoadBalancerStatus, ServiceStatus};

    const NODE: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 2);

    fn with_status(mut s: Service, ingress: Vec<LoadBalancerIngress>) -> Service {
        s.status = Some(ServiceStatus {
            load_balancer: Some(LoadBalancerStatus { ingress: Some(ingress) }),
            ..Default::default()
        });
        s
    }

    fn lb() -> Service {
        let mut s = svc("default", "lb", "10.43.0.40", 80);
        s.spec.as_mut().expect("spec").type_ = Some("LoadBalancer".into());
        s
    }

    #[test]
    fn load_balancer_gets_the_node_ip_as_vip() {
        let want = desired_ingress(&lb(), NODE).expect("needs a status");
        assert_eq!(want[0].ip.as_deref(), Some("192.0.2.2"));
        assert_eq!(want[0].ip_mode.as_deref(), Some("VIP"));
        assert_eq!(desired_ingress(&with_status(lb(), want), NODE), None, "already right");
    }

    #[test]
    fn services_of_another_load_balancer_class_are_left_alone() {
        let mut s = lb();
        s.spec.as_mut().expect("spec").load_balancer_class = Some("example.com/lb".into());
        assert_eq!(desired_ingress(&s, NODE), None);
        assert_eq!(desired_ingress(&with_status(s, ours(NODE)), NODE), None);
    }

    #[test]
    fn status_is_withdrawn_when_the_service_stops_being_a_load_balancer() {
        let s = with_status(svc("default", "lb", "10.43.0.40", 80), ours(NODE));
        assert_eq!(desired_ingress(&s, NODE), Some(vec![]));
        let foreign = with_status(
            svc("default", "x", "10.43.0.41", 80),
            vec![LoadBalancerIngress { ip: Some("203.0.113.9".into()), ..Default::default() }],
        );
        assert_eq!(desired_ingress(&foreign, NODE), None, "someone else's status is not ours to clear");
    }
}
