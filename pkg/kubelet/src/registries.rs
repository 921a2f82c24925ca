//! `registries.yaml` (k3s format) rendered into containerd `hosts.toml` files.
