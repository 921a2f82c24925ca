//! registries.yaml samples ▶ the hosts.toml files and credentials k1s derives from them; the
//! cases follow k3s's `Test_UnitGetHostConfigs`.

use super::*;

fn files(yaml: &str) -> BTreeMap<String, String> {
    Registries::parse(yaml).expect("parse registries").hosts_files()
}

fn one(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs.iter().map(|(k, v)| (k.to_string(), format!("{HOSTS_TOML_HEADER}{v}"))).collect()
}

#[test]
fn no_registries_give_no_files() {
    assert!(files("").is_empty());
    assert!(files("mirrors: {}\nconfigs: {}\n").is_empty());
}

#[test]
fn plain_http_local_registry_gets_an_http_server() {
    let yaml = "mirrors:\n  \"127.0.0.1:5000\":\n    endpoint:\n      - http://127.0.0.1:5000\n";
    assert_eq!(files(yaml), one(&[("127.0.0.1:5000", "server = \"http://127.0.0.1:5000/v2\"\n")]));
}

#[test]
fn add_plain_http_registry_needs_no_registries_file() {
    let mut registries = Registries::default();
    registries.add_plain_http_registry("127.0.0.1:5000");
    assert_eq!(registries.hosts_files(), one(&[("127.0.0.1:5000", "server = \"http://127.0.0.1:5000/v2\"\n")]));
}

#[test]
fn add_plain_http_registry_keeps_what_the_file_says() {
    let yaml = "mirrors:\n  \"127.0.0.1:5000\":\n    endpoint: [\"https://127.0.0.1:5000\"]\n";
    let mut registries = Registries::parse(yaml).expect("parse");
    registries.add_plain_http_registry("127.0.0.1:5000");
    assert_eq!(registries.mirrors["127.0.0.1:5000"].endpoints, vec!["https://127.0.0.1:5000"]);
}

#[test]
fn default_endpoint_alone_needs_no_file() {
    assert!(files("mirrors:\n  docker.io:\n").is_empty());
    assert!(files("mirrors:\n  docker.io:\n    endpoint:\n      - docker.io\n").is_empty());
    assert!(files("mirrors:\n  registry.example.com:\n").is_empty());
}

#[test]
fn registry_with_only_credentials_gets_its_server() {
    let yaml = "configs:\n  docker.io:\n    auth:\n      username: user\n      password: pass\n";
    assert_eq!(files(yaml), one(&[("docker.io", "server = \"https://registry-1.docker.io/v2\"\n")]));
}

#[test]
fn docker_io_mirrors_are_listed_in_order_before_the_server() {
    let yaml = "\
mirrors:
  docker.io:
    endpoint:
      - https://mirror.example.com
      - registry.example.org/prefix/v2
      - localhost:5000
      - https://127.0.0.1:5443
      - docker.io
configs:
  mirror.example.com:
    tls:
      ca_file: /etc/ssl/mirror-ca.pem
      cert_file: /etc/ssl/client.pem
      key_file: /etc/ssl/client-key.pem
  registry.example.org:
    tls:
      insecure_skip_verify: true
";
    let expected = "\
server = \"https://registry-1.docker.io/v2\"

[host.\"https://mirror.example.com/v2\"]
  capabilities = [\"pull\", \"resolve\"]
  ca = [\"/etc/ssl/mirror-ca.pem\"]
  client = [[\"/etc/ssl/client.pem\", \"/etc/ssl/client-key.pem\"]]

[host.\"https://registry.example.org/prefix/v2\"]
  capabilities = [\"pull\", \"resolve\"]
  override_path = true
  skip_verify = true

[host.\"http://localhost:5000/v2\"]
  capabilities = [\"pull\", \"resolve\"]

[host.\"https://127.0.0.1:5443/v2\"]
  capabilities = [\"pull\", \"resolve\"]
";
    let got = files(yaml);
    // Registries with settings of their own also get their own file.
    let mirror = "server = \"https://mirror.example.com/v2\"\nca = [\"/etc/ssl/mirror-ca.pem\"]\nclient = [[\"/etc/ssl/client.pem\", \"/etc/ssl/client-key.pem\"]]\n";
    let org = "server = \"https://registry.example.org/v2\"\nskip_verify = true\n";
    assert_eq!(
        got,
        one(&[("docker.io", expected), ("mirror.example.com", mirror), ("registry.example.org", org)]),
        "{got:#?}"
    );
}

#[test]
fn endpoint_forms_normalize_like_k3s() {
    let cases = [
        ("registry.example.com", "https://registry.example.com/v2", false),
        ("https://registry.example.com", "https://registry.example.com/v2", false),
        ("https://registry.example.com/v2", "https://registry.example.com/v2", false),
        ("registry.example.com:443", "https://registry.example.com:443/v2", false),
        ("1.2.3.4:443", "https://1.2.3.4:443/v2", false),
        ("localhost:5000", "http://localhost:5000/v2", false),
        ("127.0.0.1:5000", "http://127.0.0.1:5000/v2", false),
        ("[::1]:5000", "http://[::1]:5000/v2", false),
        ("https://localhost:5000", "https://localhost:5000/v2", false),
        ("localhost:443", "https://localhost:443/v2", false),
        ("docker.io", "https://registry-1.docker.io/v2", false),
        ("registry.example.com/prefix/v2", "https://registry.example.com/prefix/v2", true),
    ];
    for (input, url, override_path) in cases {
        let (_, got, got_override) = normalize_endpoint(input).expect(input);
        assert_eq!((got.to_string().as_str(), got_override), (url, override_path), "{input}");
    }
    for bad in ["", "ftp://x", "https://", "host:port", "user@host"] {
        assert!(normalize_endpoint(bad).is_none(), "{bad:?}");
    }
}

#[test]
fn duplicate_endpoints_in_different_forms_are_listed_once() {
    let yaml = "mirrors:\n  docker.io:\n    endpoint:\n      - registry.example.com\n      - https://registry.example.com\n      - https://registry.example.com/v2\n";
    let expected = "server = \"https://registry-1.docker.io/v2\"\n\n[host.\"https://registry.example.com/v2\"]\n  capabilities = [\"pull\", \"resolve\"]\n";
    assert_eq!(files(yaml), one(&[("docker.io", expected)]));
}

#[test]
fn mirror_credentials_come_from_the_mirror_host_config() {
    let yaml = "\
mirrors:
  docker.io:
    endpoint: [\"https://registry.example.com/v2\"]
configs:
  registry.example.com:
    auth: {username: user, password: pass}
";
    let got = files(yaml);
    // registry.example.com gets its own file (it has settings); credentials stay out of both.
    assert_eq!(
        got,
        one(&[
            (
                "docker.io",
                "server = \"https://registry-1.docker.io/v2\"\n\n[host.\"https://registry.example.com/v2\"]\n  capabilities = [\"pull\", \"resolve\"]\n"
            ),
            ("registry.example.com", "server = \"https://registry.example.com/v2\"\n"),
        ])
    );
    assert!(got.values().all(|text| !text.contains("pass")));
}

#[test]
fn registry_tls_settings_go_to_the_top_level() {
    let yaml = "\
configs:
  \"localhost:5000\":
    tls:
      insecure_skip_verify: true
      ca_file: /ca.pem
mirrors:
  \"localhost:5000\":
    endpoint: [\"https://localhost:5000\"]
";
    let expected = "server = \"http://localhost:5000/v2\"\nca = [\"/ca.pem\"]\nskip_verify = true\n\n[host.\"https://localhost:5000/v2\"]\n  capabilities = [\"pull\", \"resolve\"]\n  ca = [\"/ca.pem\"]\n  skip_verify = true\n";
    assert_eq!(files(yaml), one(&[("localhost:5000", expected)]));
}

#[test]
fn wildcard_registry_goes_to_the_default_directory_without_a_server() {
    let yaml = "mirrors:\n  \"*\":\n    endpoint: [\"http://127.0.0.1:5000\"]\n";
    let expected = "\n[host.\"http://127.0.0.1:5000/v2\"]\n  capabilities = [\"pull\", \"resolve\"]\n";
    assert_eq!(files(yaml), one(&[("_default", expected)]));
}

#[test]
fn yaml_forms_of_k3s_files_parse() {
    let yaml = "\
mirrors:
  docker.io:
  quay.io:
    endpoint: null
    rewrite:
      \"^library/(.*)\": \"mirrored/$1\"
configs:
  ghcr.io:
    auth:
      identitytoken: tok
  gcr.io:
    auth:
      identity_token: tok2
      auth: dXNlcjpwYXNz
  empty.example.com:
";
    let registries = Registries::parse(yaml).expect("parse");
    assert_eq!(registries.mirrors["docker.io"], Mirror::default());
    assert_eq!(registries.mirrors["quay.io"].rewrite["^library/(.*)"], "mirrored/$1");
    assert_eq!(registries.configs["ghcr.io"].auth.as_ref().and_then(|a| a.identity_token.as_deref()), Some("tok"));
    assert_eq!(registries.configs["gcr.io"].auth.as_ref().and_then(|a| a.auth.as_deref()), Some("dXNlcjpwYXNz"));
    assert_eq!(registries.configs["empty.example.com"], RegistryConfig::default());
}

#[test]
fn malformed_yaml_is_a_parse_error_naming_the_file() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("registries.yaml");
    std::fs::write(&path, "mirrors: [not, a, map]\n").expect("write");
    let err = Registries::load(&path).expect_err("parse error");
    assert!(matches!(&err, RegistriesError::Parse { path: p, .. } if *p == path), "{err}");
}

#[test]
fn missing_registries_file_means_no_registries() {
    let dir = tempfile::tempdir().expect("tempdir");
    let loaded = Registries::load(&dir.path().join("absent.yaml")).expect("load");
    assert_eq!(loaded, Registries::default());
}

#[test]
fn credentials_for_image_use_the_registry_the_image_names() {
    let yaml = "\
configs:
  docker.io:
    auth: {username: hub, password: hubpass}
  \"127.0.0.1:5000\":
    auth: {username: local, password: localpass}
";
    let registries = Registries::parse(yaml).expect("parse");
    let hub = registries.credentials_for_image("busybox:1.36").expect("docker.io creds");
    assert_eq!(hub.registry, "docker.io");
    assert_eq!(hub.server_address, "https://registry-1.docker.io");
    assert_eq!(hub.auth.username.as_deref(), Some("hub"));
    let local = registries.credentials_for_image("127.0.0.1:5000/busybox:1.36").expect("local creds");
    assert_eq!(local.server_address, "https://127.0.0.1:5000");
    assert_eq!(local.auth.password.as_deref(), Some("localpass"));
    assert!(registries.credentials_for_image("quay.io/x/y:1").is_none());
}

#[test]
fn containerd_auths_cover_the_host_containerd_contacts() {
    let yaml = "configs:\n  docker.io:\n    auth: {username: hub, password: p}\n  ghcr.io:\n    tls: {insecure_skip_verify: true}\n";
    let auths = Registries::parse(yaml).expect("parse").containerd_auths();
    let hosts: Vec<&str> = auths.keys().map(String::as_str).collect();
    assert_eq!(hosts, vec!["docker.io", "registry-1.docker.io"]);
}

#[test]
fn image_registry_follows_docker_reference_rules() {
    let cases = [
        ("busybox", "docker.io"),
        ("library/busybox:1.36", "docker.io"),
        ("index.docker.io/library/busybox", "docker.io"),
        ("127.0.0.1:5000/busybox:1.36", "127.0.0.1:5000"),
        ("localhost/busybox", "localhost"),
        ("ghcr.io/owner/image@sha256:abc", "ghcr.io"),
    ];
    for (image, registry) in cases {
        assert_eq!(image_registry(image), registry, "{image}");
    }
}

#[test]
fn write_hosts_dir_replaces_generated_files_and_keeps_foreign_ones() {
    let dir = tempfile::tempdir().expect("tempdir");
    let certs = dir.path().join("certs.d");
    // A stale k1s file, and a directory someone else manages.
    std::fs::create_dir_all(certs.join("old.example.com")).expect("mkdir");
    std::fs::write(
        certs.join("old.example.com/hosts.toml"),
        format!("{HOSTS_TOML_HEADER}server = \"https://old.example.com/v2\"\n"),
    )
    .expect("write");
    std::fs::create_dir_all(certs.join("mine.example.com")).expect("mkdir");
    std::fs::write(certs.join("mine.example.com/hosts.toml"), "server = \"x\"\n").expect("write");

    let mut registries = Registries::default();
    registries.add_plain_http_registry("127.0.0.1:5000");
    let written = registries.write_hosts_dir(&certs).expect("write hosts");
    assert_eq!(written, vec![certs.join("127.0.0.1:5000/hosts.toml")]);
    assert!(!certs.join("old.example.com").exists(), "stale k1s dir removed");
    assert!(certs.join("mine.example.com/hosts.toml").exists(), "foreign dir kept");
    assert_eq!(
        std::fs::read_to_string(&written[0]).expect("read"),
        format!("{HOSTS_TOML_HEADER}server = \"http://127.0.0.1:5000/v2\"\n")
    );
}

#[test]
fn pull_endpoints_are_mirrors_in_order_then_the_registry_with_their_credentials() {
    let r = Registries::parse(
        "mirrors:\n  docker.io:\n    endpoint: [\"https://mirror.example.com\", \"127.0.0.1:5001\"]\nconfigs:\n  mirror.example.com:\n    auth: {username: u, password: p}\n",
    )
    .expect("parse");
    let eps = r.pull_endpoints("docker.io");
    let hosts: Vec<(&str, bool)> = eps.iter().map(|e| (e.host.as_str(), e.plain_http)).collect();
    assert_eq!(hosts, vec![("mirror.example.com", false), ("127.0.0.1:5001", true), ("docker.io", false)]);
    assert_eq!(eps[0].auth.as_ref().and_then(|a| a.username.as_deref()), Some("u"));
    assert!(eps[1].auth.is_none());
}

#[test]
fn pull_endpoints_of_a_loopback_registry_without_mirrors_use_plain_http() {
    let eps = Registries::default().pull_endpoints("127.0.0.1:5000");
    assert_eq!(eps, vec![PullEndpoint { host: "127.0.0.1:5000".into(), plain_http: true, auth: None, tls: None }]);
}
