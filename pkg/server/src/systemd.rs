//! sd_notify for `Type=notify` units: `STATUS=` lines during the long start steps, `READY=1`
//! once the server is usable (the API serves, and with the agent the node is Ready),
//! `WATCHDOG=1` every half `WatchdogSec` when systemd asks for it (`WATCHDOG_USEC`).
//!
//! Without `NOTIFY_SOCKET` every call does nothing.

use std::os::unix::net::UnixDatagram;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// Sends one notification (`READY=1`, `STATUS=...`) to `$NOTIFY_SOCKET`, if set. Failures are
/// logged, never fatal: systemd not listening must not stop the server.
pub fn notify(message: &str) {
    let Some(path) = std::env::var_os("NOTIFY_SOCKET") else { return };
    let path = path.to_string_lossy().into_owned();
    let sock = match UnixDatagram::unbound() {
        Ok(s) => s,
        Err(e) => {
            tracing::warn!(error = %e, "sd_notify: socket");
            return;
        }
    };
    let payload = format!("{message}\n");
    let res = if let Some(abstract_name) = path.strip_prefix('@') {
        use std::os::linux::net::SocketAddrExt;
        std::os::unix::net::SocketAddr::from_abstract_name(abstract_name.as_bytes())
            .and_then(|a| sock.send_to_addr(payload.as_bytes(), &a))
    } else {
        sock.send_to(payload.as_bytes(), &path)
    };
    if let Err(e) = res {
        tracing::warn!(error = %e, socket = %path, "sd_notify failed");
    }
}

/// `STATUS=<what>`: shown by `systemctl status` while a long step runs.
pub fn status(what: &str) {
    tracing::debug!(status = what, "start-up step");
    notify(&format!("STATUS={what}"));
}

/// The watchdog interval systemd expects pings within, from `WATCHDOG_USEC` (and
/// `WATCHDOG_PID`, when set, must be this process).
pub fn watchdog_interval(usec: Option<&str>, pid: Option<&str>) -> Option<Duration> {
    if let Some(pid) = pid {
        if pid.trim().parse::<u32>().ok()? != std::process::id() {
            return None;
        }
    }
    let usec: u64 = usec?.trim().parse().ok()?;
    (usec > 0).then(|| Duration::from_micros(usec))
}

/// Pings `WATCHDOG=1` every half interval until `cancel` fires, when systemd asked for it.
pub fn spawn_watchdog(cancel: CancellationToken) -> Option<tokio::task::JoinHandle<()>> {
    let usec = std::env::var("WATCHDOG_USEC").ok();
    let pid = std::env::var("WATCHDOG_PID").ok();
    let every = watchdog_interval(usec.as_deref(), pid.as_deref())? / 2;
    tracing::info!(every = ?every, "systemd watchdog enabled");
    Some(tokio::spawn(async move {
        loop {
            notify("WATCHDOG=1");
            tokio::select! {
                _ = cancel.cancelled() => return,
                _ = tokio::time::sleep(every) => {}
            }
        }
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_watchdog_runs_only_for_this_process_with_a_positive_interval() {
        let me = std::process::id().to_string();
        assert_eq!(watchdog_interval(Some("2000000"), None), Some(Duration::from_secs(2)));
        assert_eq!(watchdog_interval(Some("2000000"), Some(&me)), Some(Duration::from_secs(2)));
        assert_eq!(watchdog_interval(Some("2000000"), Some("1")), None, "another process's watchdog");
        assert_eq!(watchdog_interval(Some("0"), None), None);
        assert_eq!(watchdog_interval(None, None), None);
        assert_eq!(watchdog_interval(Some("soon"), None), None);
    }
}
