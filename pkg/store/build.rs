//! Compiles `proto/etcd/rpc.proto` (the part of etcd's v3 API the etcd backend uses) into a
//! tonic client with protox (pure Rust, no protoc), as `pkg/cri` does for CRI.

use std::path::PathBuf;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let proto_dir = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR")?).join("../../proto/etcd");
    let proto = proto_dir.join("rpc.proto");
    println!("cargo:rerun-if-changed={}", proto.display());
    let descriptors = protox::compile([&proto], [&proto_dir])?;
    tonic_prost_build::configure().build_client(true).build_server(false).compile_fds(descriptors)?;
    Ok(())
}
