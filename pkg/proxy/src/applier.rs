//! The applier: keeps what it last applied to `table ip k1s` and turns each new desired
//! [`Ruleset`] into one nft transaction: incremental (only changed chains and map elements, as
//! upstream's nftables proxier does) when it knows the kernel state, a full atomic replacement
//! (`add table; delete table; table { … }` in one transaction) at start, after a failure, or when
//! a base chain or set declaration changes. A failed incremental transaction is retried once as a
//! full replacement.

use crate::nft::{Nft, NftError};
use crate::ruleset::{Ruleset, FAMILY, TABLE};

#[derive(Debug, thiserror::Error)]
pub enum ApplyError {
    #[error("replacing table {FAMILY} {TABLE}")]
    Full(#[source] NftError),
    #[error("removing table {FAMILY} {TABLE}")]
    Delete(#[source] NftError),
}

/// What an `apply` did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Applied {
    /// The kernel already held the desired ruleset.
    Unchanged,
    /// An incremental transaction of this many commands.
    Incremental(usize),
    /// A full replacement.
    Full,
}

pub struct Applier<N: Nft> {
    nft: N,
    current: Option<Ruleset>,
}

impl<N: Nft> Applier<N> {
    pub fn new(nft: N) -> Self {
        Self { nft, current: None }
    }

    /// The ruleset the kernel holds, as far as the applier knows.
    pub fn current(&self) -> Option<&Ruleset> {
        self.current.as_ref()
    }

    /// Forgets the kernel state: the next `apply` replaces the whole table.
    pub fn reset(&mut self) {
        self.current = None;
    }

    /// Makes the kernel hold `desired`.
    pub fn apply(&mut self, desired: &Ruleset) -> Result<Applied, ApplyError> {
        if let Some(current) = &self.current {
            if let Some(script) = desired.diff_script(current) {
                if script.is_empty() {
                    return Ok(Applied::Unchanged);
                }
                let commands = script.lines().count();
                match self.nft.run(&script) {
                    Ok(()) => {
                        self.current = Some(desired.clone());
                        return Ok(Applied::Incremental(commands));
                    }
                    Err(e) => {
                        tracing::warn!(error = %k1s_api::errors::chain(&e), "incremental nftables update failed; replacing the table");
                    }
                }
            }
        }
        self.current = None;
        self.nft.run(&desired.full_script()).map_err(ApplyError::Full)?;
        self.current = Some(desired.clone());
        Ok(Applied::Full)
    }

    /// Removes the table (and nothing else); absent is fine.
    pub fn delete_table(&mut self) -> Result<(), ApplyError> {
        self.current = None;
        self.nft
            .run(&format!("add table {FAMILY} {TABLE}\ndelete table {FAMILY} {TABLE}\n"))
            .map_err(ApplyError::Delete)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nft::FakeNft;
    use crate::ruleset::SetKind;

    fn ruleset(ip: &str) -> Ruleset {
        let mut r = Ruleset::default();
        r.declare_set("cluster-ips", SetKind::Set, &["type ipv4_addr"]);
        r.element("cluster-ips", ip, "");
        r.rule("services", "ip daddr @cluster-ips accept");
        r
    }

    #[test]
    fn first_apply_replaces_the_table_then_updates_are_incremental() {
        let nft = FakeNft::default();
        let mut a = Applier::new(nft.clone());
        assert_eq!(a.apply(&ruleset("10.43.0.1")).expect("apply"), Applied::Full);
        assert_eq!(a.apply(&ruleset("10.43.0.1")).expect("apply"), Applied::Unchanged);
        assert_eq!(a.apply(&ruleset("10.43.0.2")).expect("apply"), Applied::Incremental(2));
        let s = nft.scripts();
        assert_eq!(s.len(), 2, "unchanged rulesets run nothing");
        assert!(s[0].starts_with("add table ip k1s\ndelete table ip k1s\n"));
        assert_eq!(
            s[1],
            "delete element ip k1s cluster-ips { 10.43.0.1 }\nadd element ip k1s cluster-ips { 10.43.0.2 }\n"
        );
    }

    #[test]
    fn failed_incremental_update_falls_back_to_a_full_replacement() {
        let nft = FakeNft::default();
        let mut a = Applier::new(nft.clone());
        a.apply(&ruleset("10.43.0.1")).expect("apply");
        *nft.fail_next.lock().expect("lock") = 1;
        assert_eq!(a.apply(&ruleset("10.43.0.2")).expect("apply"), Applied::Full);
        assert!(nft.scripts().last().expect("script").contains("delete table ip k1s"));
    }

    #[test]
    fn failed_full_replacement_forgets_the_state_and_reports_the_error() {
        let nft = FakeNft::default();
        let mut a = Applier::new(nft.clone());
        a.apply(&ruleset("10.43.0.1")).expect("apply");
        *nft.fail_next.lock().expect("lock") = 2;
        let e = a.apply(&ruleset("10.43.0.2")).expect_err("both attempts fail");
        assert!(e.to_string().contains("replacing table ip k1s"), "{e}");
        assert!(a.current().is_none());
        assert_eq!(a.apply(&ruleset("10.43.0.2")).expect("apply"), Applied::Full, "next sync starts over");
    }
}
