//! What `--disable` can turn off: the server's components, the built-in add-ons (whose manifests
//! and objects are then removed), or single controllers by the names upstream's
//! `kube-controller-manager --controllers` uses. Names are checked once, when the
//! configuration is read: an unknown one is an error, not a silently running component.

use std::collections::BTreeSet;
use std::fmt;
use std::str::FromStr;

/// A component of `k1s server` that `--disable` can turn off.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Component {
    Controllers,
    Scheduler,
    Proxy,
    /// The cluster DNS server and its `kube-dns` Service (the `dns.yaml` add-on).
    Dns,
    /// The `local-path` StorageClass (the `local-storage.yaml` add-on; k3s's name).
    LocalStorage,
}

impl Component {
    pub const ALL: [Component; 5] =
        [Component::Controllers, Component::Scheduler, Component::Proxy, Component::Dns, Component::LocalStorage];

    pub fn name(self) -> &'static str {
        match self {
            Component::Controllers => "controllers",
            Component::Scheduler => "scheduler",
            Component::Proxy => "proxy",
            Component::Dns => "dns",
            Component::LocalStorage => "local-storage",
        }
    }
}

impl fmt::Display for Component {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Component {
    type Err = ();
    fn from_str(s: &str) -> Result<Self, ()> {
        Component::ALL.into_iter().find(|c| c.name() == s).ok_or(())
    }
}

/// A `--disable` name that is neither a component nor a controller.
#[derive(Debug, thiserror::Error)]
#[error("--disable: unknown component {name:?} (components: {components}; controllers: {controllers})")]
pub struct UnknownComponent {
    pub name: String,
    components: String,
    controllers: String,
}

/// The components and single controllers not to run.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Disabled {
    components: BTreeSet<Component>,
    controllers: BTreeSet<&'static str>,
}

impl Disabled {
    /// Parses `--disable` values (empty entries, as from `--disable=`, are ignored).
    pub fn parse<S: AsRef<str>>(names: &[S]) -> Result<Disabled, UnknownComponent> {
        let mut out = Disabled::default();
        for name in names.iter().map(|n| n.as_ref().trim()).filter(|n| !n.is_empty()) {
            if let Ok(c) = name.parse::<Component>() {
                out.components.insert(c);
            } else if let Some(c) = k1s_controllers::names().find(|c| *c == name) {
                out.controllers.insert(c);
            } else {
                return Err(UnknownComponent {
                    name: name.to_owned(),
                    components: Component::ALL.map(Component::name).join(", "),
                    controllers: k1s_controllers::names().collect::<Vec<_>>().join(", "),
                });
            }
        }
        Ok(out)
    }

    /// Disables `c` (for tests and embedders).
    pub fn with(mut self, c: Component) -> Disabled {
        self.components.insert(c);
        self
    }

    pub fn contains(&self, c: Component) -> bool {
        self.components.contains(&c)
    }

    /// The single controllers not to run.
    pub fn controllers(&self) -> Vec<String> {
        self.controllers.iter().map(|c| (*c).to_owned()).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn components_and_controllers_parse_and_unknown_names_are_refused() {
        let d = Disabled::parse(&["scheduler", " dns", "", "cronjob", "local-storage"]).expect("known names");
        assert!(d.contains(Component::Scheduler) && d.contains(Component::Dns) && d.contains(Component::LocalStorage));
        assert!(!d.contains(Component::Controllers) && !d.contains(Component::Proxy));
        assert_eq!(d.controllers(), vec!["cronjob".to_owned()]);

        let e = Disabled::parse(&["proxy", "traefik"]).expect_err("unknown");
        assert_eq!(e.name, "traefik");
        let msg = e.to_string();
        assert!(msg.starts_with(
            "--disable: unknown component \"traefik\" (components: controllers, scheduler, proxy, dns, local-storage;"
        ));
        assert!(msg.contains("deployment"), "{msg}");
        assert_eq!(Disabled::parse::<&str>(&[]).expect("none"), Disabled::default());
    }
}
