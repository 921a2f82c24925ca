//! Compiles `proto/cri/api.proto` (CRI runtime.v1) into Rust with protox (pure Rust, no protoc)
//! and tonic-prost-build: the client and, for serving fakes over a socket, the server.

use std::path::PathBuf;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let proto_dir = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR")?).join("../../proto/cri");
    let proto = proto_dir.join("api.proto");
    println!("cargo:rerun-if-changed={}", proto.display());
    let descriptors = protox::compile([&proto], [&proto_dir])?;
    tonic_prost_build::configure().build_client(true).build_server(true).compile_fds(descriptors)?;
    Ok(())
}
