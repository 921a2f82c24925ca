//! The nftables boundary: [`Nft`] runs one nft script as one atomic transaction. [`NftCommand`]
//! feeds it to `nft -f -`; [`FakeNft`] records scripts for tests.

use std::io::Write as _;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};

#[derive(Debug, thiserror::Error)]
pub enum NftError {
    #[error("starting {program}")]
    Spawn { program: String, source: std::io::Error },
    #[error("writing the script to {program}")]
    Write { program: String, source: std::io::Error },
    #[error("{program} -f - failed ({status}): {stderr}")]
    Failed { program: String, status: String, stderr: String },
}

/// Runs nft scripts. Every call is one transaction: all of it applies, or none.
pub trait Nft: Send + Sync {
    fn run(&self, script: &str) -> Result<(), NftError>;
}

/// The `nft` binary.
#[derive(Clone, Debug)]
pub struct NftCommand {
    program: PathBuf,
}

impl Default for NftCommand {
    fn default() -> Self {
        Self { program: PathBuf::from("nft") }
    }
}

impl NftCommand {
    pub fn new(program: impl Into<PathBuf>) -> Self {
        Self { program: program.into() }
    }
}

impl Nft for NftCommand {
    fn run(&self, script: &str) -> Result<(), NftError> {
        let program = self.program.display().to_string();
        let mut child = Command::new(&self.program)
            .args(["-f", "-"])
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|source| NftError::Spawn { program: program.clone(), source })?;
        let written = match child.stdin.take() {
            Some(mut stdin) => stdin.write_all(script.as_bytes()),
            None => Ok(()),
        };
        let out = child.wait_with_output().map_err(|source| NftError::Spawn { program: program.clone(), source })?;
        if !out.status.success() {
            return Err(NftError::Failed {
                program,
                status: out.status.to_string(),
                stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
            });
        }
        written.map_err(|source| NftError::Write { program, source })
    }
}

/// Records scripts; fails the next `fail_next` runs (to exercise the applier's recovery).
#[derive(Clone, Default)]
pub struct FakeNft {
    pub scripts: Arc<Mutex<Vec<String>>>,
    pub fail_next: Arc<Mutex<usize>>,
}

impl FakeNft {
    pub fn scripts(&self) -> Vec<String> {
        self.scripts.lock().map(|s| s.clone()).unwrap_or_default()
    }
}

impl Nft for FakeNft {
    fn run(&self, script: &str) -> Result<(), NftError> {
        if let Ok(mut n) = self.fail_next.lock() {
            if *n > 0 {
                *n -= 1;
                return Err(NftError::Failed {
                    program: "fake-nft".into(),
                    status: "exit status: 1".into(),
                    stderr: "injected failure".into(),
                });
            }
        }
        if let Ok(mut s) = self.scripts.lock() {
            s.push(script.to_string());
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_binary_is_a_spawn_error_naming_it() {
        let e = NftCommand::new("/nonexistent/nft").run("list tables").expect_err("no such binary");
        assert!(matches!(e, NftError::Spawn { .. }), "{e}");
        assert!(e.to_string().contains("/nonexistent/nft"), "{e}");
    }

    #[test]
    fn failing_command_reports_its_stderr() {
        // `false` ignores stdin and exits 1: a failed transaction.
        let e = NftCommand::new("false").run("add table ip k1s").expect_err("fails");
        assert!(matches!(e, NftError::Failed { .. }), "{e}");
    }
}
