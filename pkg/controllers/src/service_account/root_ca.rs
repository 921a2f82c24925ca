//! The root CA publisher: every namespace has a ConfigMap `kube-root-ca.crt` whose `ca.crt` is
//! the cluster CA, so that pods can verify the API server; edited or deleted, it is restored.

use super::{is_active, per_namespace};
use crate::Context;
use k1s_runtime::api_error::{is_already_exists, is_namespace_terminating, is_not_found};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, PostParams};
use kube::runtime::reflector::ObjectRef;
use std::collections::BTreeMap;
use std::sync::Arc;

pub const NAME: &str = "kube-root-ca.crt";
pub const KEY: &str = "ca.crt";
pub const DESCRIPTION_ANNOTATION: &str = "kubernetes.io/description";
pub const DESCRIPTION: &str = "Contains a CA bundle that can be used to verify the kube-apiserver when using internal \
endpoints such as the internal service IP or kubernetes.default.svc. No other usage is guaranteed across \
distributions of Kubernetes clusters.";

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("creating ConfigMap {NAME} in namespace {namespace}")]
    Create { namespace: String, source: kube::Error },
    #[error("updating ConfigMap {NAME} in namespace {namespace}")]
    Update { namespace: String, source: kube::Error },
}

/// What to write in one namespace.
#[derive(Debug, PartialEq)]
pub enum Plan {
    Nothing,
    Create(ConfigMap),
    Update(ConfigMap),
}

/// Compares the namespace's ConfigMap with the CA: only `data` and the description annotation
/// are owned; other annotations, labels and `binaryData` are left alone.
pub fn plan(ns: &Namespace, existing: Option<&ConfigMap>, ca_pem: &str) -> Plan {
    let data = BTreeMap::from([(KEY.to_string(), ca_pem.to_string())]);
    match existing {
        None if is_active(ns) => Plan::Create(ConfigMap {
            metadata: ObjectMeta {
                name: Some(NAME.into()),
                namespace: ns.metadata.name.clone(),
                annotations: Some(BTreeMap::from([(DESCRIPTION_ANNOTATION.to_string(), DESCRIPTION.to_string())])),
                ..Default::default()
            },
            data: Some(data),
            ..Default::default()
        }),
        None => Plan::Nothing,
        Some(cm) => {
            let described = cm
                .metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(DESCRIPTION_ANNOTATION))
                .is_some_and(|d| !d.is_empty());
            if cm.data.as_ref() == Some(&data) && described {
                return Plan::Nothing;
            }
            let mut cm = cm.clone();
            cm.data = Some(data);
            cm.metadata
                .annotations
                .get_or_insert_with(BTreeMap::new)
                .insert(DESCRIPTION_ANNOTATION.into(), DESCRIPTION.into());
            Plan::Update(cm)
        }
    }
}

pub async fn run(ctx: Arc<Context>) {
    let client = ctx.client.clone();
    let ca = Arc::new(ctx.root_ca_pem.clone());
    per_namespace::<ConfigMap, _, _, _>(ctx, "root-ca-cert-publisher", NAME, move |ns, maps| {
        let client = client.clone();
        let ca = ca.clone();
        async move {
            let name = ns.metadata.name.clone().unwrap_or_default();
            let existing = maps.get(&ObjectRef::new(NAME).within(&name));
            let api = Api::<ConfigMap>::namespaced(client, &name);
            match plan(&ns, existing.as_deref(), &ca) {
                Plan::Nothing => Ok(()),
                Plan::Create(cm) => match api.create(&PostParams::default(), &cm).await {
                    Ok(_) => Ok(()),
                    // A stale cache: the watch event that follows brings us back.
                    Err(e) if is_already_exists(&e) => Ok(()),
                    Err(e) if is_not_found(&e) || is_namespace_terminating(&e) => Ok(()),
                    Err(source) => Err(Error::Create { namespace: name, source }),
                },
                Plan::Update(cm) => match api.replace(NAME, &PostParams::default(), &cm).await {
                    Ok(_) => Ok(()),
                    Err(e) if is_not_found(&e) => Ok(()),
                    Err(source) => Err(Error::Update { namespace: name, source }),
                },
            }
        }
    })
    .await;
}

#[cfg(test)]
mod tests {
    use super::*;

    const CA: &str = "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n";

    fn ns() -> Namespace {
        Namespace { metadata: ObjectMeta { name: Some("team".into()), ..Default::default() }, ..Default::default() }
    }

    #[test]
    fn a_missing_configmap_is_created_with_the_ca_and_description() {
        let Plan::Create(cm) = plan(&ns(), None, CA) else { panic!("expected a create") };
        assert_eq!(cm.metadata.name.as_deref(), Some(NAME));
        assert_eq!(cm.data.as_ref().and_then(|d| d.get(KEY)).map(String::as_str), Some(CA));
        assert_eq!(
            cm.metadata.annotations.as_ref().and_then(|a| a.get(DESCRIPTION_ANNOTATION)).map(String::as_str),
            Some(DESCRIPTION)
        );
    }

    #[test]
    fn an_edited_configmap_gets_the_ca_back_and_keeps_its_other_fields() {
        let Plan::Create(mut cm) = plan(&ns(), None, CA) else { panic!("expected a create") };
        cm.metadata.labels = Some(BTreeMap::from([("team".to_string(), "a".to_string())]));
        cm.data = Some(BTreeMap::from([(KEY.to_string(), "tampered".to_string()), ("x".to_string(), "y".to_string())]));
        let Plan::Update(fixed) = plan(&ns(), Some(&cm), CA) else { panic!("expected an update") };
        assert_eq!(fixed.data, Some(BTreeMap::from([(KEY.to_string(), CA.to_string())])));
        assert_eq!(fixed.metadata.labels, cm.metadata.labels);
    }

    #[test]
    fn an_up_to_date_configmap_needs_nothing() {
        let Plan::Create(cm) = plan(&ns(), None, CA) else { panic!("expected a create") };
        assert_eq!(plan(&ns(), Some(&cm), CA), Plan::Nothing);
    }

    #[test]
    fn a_terminating_namespace_gets_no_new_configmap() {
        let mut ns = ns();
        ns.metadata.deletion_timestamp =
            Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(jiff::Timestamp::UNIX_EPOCH));
        assert_eq!(plan(&ns, None, CA), Plan::Nothing);
    }
}
