//! `k1s check`: the preflight `k1s server` runs first, printed in full. Takes the server's
//! flags and config file, so it checks the ports, data dir and components that server would use.

use anyhow::{bail, Result};
use clap::Args;

#[derive(Args, Debug)]
pub struct CheckArgs {
    #[command(flatten)]
    pub server: crate::ServerArgs,
    /// Also check that no port of the NodePort range is in use (default range 30000-32767).
    #[arg(long, value_name = "LOW-HIGH", num_args = 0..=1, default_missing_value = "30000-32767")]
    pub node_port_range: Option<String>,
}

/// Prints every finding; an error when one blocks a start.
pub fn run(args: CheckArgs) -> Result<()> {
    let range = match &args.node_port_range {
        Some(r) => match k1s_server::preflight::parse_port_range(r) {
            Some(r) => Some(r),
            None => bail!("--node-port-range {r:?}: expected LOW-HIGH, e.g. 30000-32767"),
        },
        None => None,
    };
    let config = crate::server_config(args.server)?;
    let mut opts = config.preflight_options();
    opts.node_port_range = range;
    let report = k1s_server::preflight::run(&opts, &k1s_server::preflight::System);
    print!("{}", report.render());
    let failed = report.failures().count();
    if failed > 0 {
        bail!("{failed} check(s) failed: k1s server would refuse to start");
    }
    println!("k1s server can start here");
    Ok(())
}
