//! The built-in add-ons: manifests embedded in the binary (from `deploy/manifests/`), written into
//! `<data-dir>/server/manifests` at start with their template variables filled in, where the
//! deployer applies them like any user manifest. k1s's own copy is rewritten at every start
//! unless a `NAME.yaml.skip` file sits next to it; `--disable NAME` removes the file, and the
//! deployer then deletes its objects.

use crate::Component;
use std::path::{Path, PathBuf};

/// One built-in add-on.
pub struct Addon {
    /// The file name in the manifests folder.
    pub file: &'static str,
    /// The `--disable` name that removes it.
    pub component: Component,
    /// The manifest, with `%{VARIABLE}%` placeholders.
    pub template: &'static str,
}

pub const BUILT_IN: [Addon; 2] = [
    Addon { file: "dns.yaml", component: Component::Dns, template: include_str!("../../../deploy/manifests/dns.yaml") },
    Addon {
        file: "local-storage.yaml",
        component: Component::LocalStorage,
        template: include_str!("../../../deploy/manifests/local-storage.yaml"),
    },
];

/// Values of the template variables (k3s's names).
pub struct Variables {
    /// `%{CLUSTER_DNS}%`
    pub cluster_dns: String,
    /// `%{CLUSTER_DOMAIN}%`
    pub cluster_domain: String,
}

impl Variables {
    pub fn render(&self, template: &str) -> String {
        template.replace("%{CLUSTER_DNS}%", &self.cluster_dns).replace("%{CLUSTER_DOMAIN}%", &self.cluster_domain)
    }
}

#[derive(Debug, thiserror::Error)]
#[error("writing the built-in manifest {}", path.display())]
pub struct StageError {
    pub path: PathBuf,
    #[source]
    pub source: std::io::Error,
}

/// Writes (or, when disabled, removes) the built-in manifests in `dir`.
pub fn stage(dir: &Path, vars: &Variables, disabled: impl Fn(Component) -> bool) -> Result<(), StageError> {
    let err = |path: &Path| {
        let path = path.to_path_buf();
        move |source: std::io::Error| StageError { path, source }
    };
    std::fs::create_dir_all(dir).map_err(err(dir))?;
    for addon in &BUILT_IN {
        let path = dir.join(addon.file);
        if disabled(addon.component) {
            match std::fs::remove_file(&path) {
                Ok(()) => {
                    tracing::info!(file = %path.display(), component = %addon.component, "disabled: removed the built-in manifest")
                }
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(err(&path)(e)),
            }
            continue;
        }
        if dir.join(format!("{}.skip", addon.file)).exists() {
            tracing::info!(file = %path.display(), "a .skip file keeps the built-in manifest as it is");
            continue;
        }
        let text = vars.render(addon.template);
        if std::fs::read_to_string(&path).is_ok_and(|old| old == text) {
            continue;
        }
        // Written aside and renamed: the deployer never reads half a file.
        let tmp = dir.join(format!(".{}.tmp", addon.file));
        std::fs::write(&tmp, &text).map_err(err(&tmp))?;
        std::fs::rename(&tmp, &path).map_err(err(&path))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars() -> Variables {
        Variables { cluster_dns: "10.43.0.10".into(), cluster_domain: "cluster.local".into() }
    }

    #[test]
    fn built_in_manifests_parse_and_name_what_k1s_serves() {
        for addon in &BUILT_IN {
            let text = vars().render(addon.template);
            assert!(!text.contains("%{"), "{}: every variable is filled in", addon.file);
            let objects = k1s_controllers::deploy::parse(addon.file, text.as_bytes()).expect("valid manifest");
            assert!(!objects.is_empty(), "{}", addon.file);
        }
        let dns =
            k1s_controllers::deploy::parse("dns.yaml", vars().render(BUILT_IN[0].template).as_bytes()).expect("dns");
        assert_eq!(dns[0]["spec"]["clusterIP"], "10.43.0.10");
        assert_eq!(dns[0]["metadata"]["annotations"]["k1s.io/node-local"], "true");
        let storage = k1s_controllers::deploy::parse("local-storage.yaml", BUILT_IN[1].template.as_bytes())
            .expect("local-storage");
        assert_eq!(storage[0]["provisioner"], k1s_api::storage::LOCAL_PATH_PROVISIONER);
        assert_eq!(storage[0]["metadata"]["annotations"][k1s_api::storage::IS_DEFAULT_CLASS], "true");
    }

    #[test]
    fn staging_writes_our_copies_honours_skip_files_and_removes_disabled_ones() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let dir = tmp.path().join("manifests");
        stage(&dir, &vars(), |_| false).expect("stage");
        let dns = std::fs::read_to_string(dir.join("dns.yaml")).expect("dns.yaml");
        assert!(dns.contains("clusterIP: \"10.43.0.10\""), "{dns}");
        assert!(dir.join("local-storage.yaml").exists());

        // Our own copies are rewritten; a skipped one is left as the user edited it.
        std::fs::write(dir.join("dns.yaml"), "edited").expect("edit");
        std::fs::write(dir.join("local-storage.yaml"), "edited").expect("edit");
        std::fs::write(dir.join("local-storage.yaml.skip"), "").expect("skip");
        stage(&dir, &vars(), |_| false).expect("stage");
        assert_eq!(std::fs::read_to_string(dir.join("dns.yaml")).expect("dns.yaml"), dns);
        assert_eq!(std::fs::read_to_string(dir.join("local-storage.yaml")).expect("kept"), "edited");

        stage(&dir, &vars(), |c| c == Component::Dns).expect("stage");
        assert!(!dir.join("dns.yaml").exists(), "--disable dns removes the file");
        let left: Vec<_> = std::fs::read_dir(&dir)
            .expect("dir")
            .filter_map(|e| e.ok()?.file_name().into_string().ok())
            .filter(|n| n.starts_with('.'))
            .collect();
        assert!(left.is_empty(), "no temporary files are left: {left:?}");
    }
}
