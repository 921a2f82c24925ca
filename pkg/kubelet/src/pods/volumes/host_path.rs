//! hostPath `type` checks, as upstream's `checkTypeInternal`: `DirectoryOrCreate` and
//! `FileOrCreate` create what is missing (0755 directories, 0644 files), the other types only
//! check, and an empty type checks nothing.

use super::SetUpCause;
use std::os::unix::fs::{FileTypeExt as _, OpenOptionsExt as _, PermissionsExt as _};
use std::path::Path;

fn not(path: &Path, what: &str) -> SetUpCause {
    SetUpCause::HostPathType { message: format!("hostPath type check failed: {} is not {what}", path.display()) }
}

/// Checks (and for the `…OrCreate` types, creates) `path` as `type_` demands.
pub fn check_type(path: &Path, type_: Option<&str>) -> Result<(), SetUpCause> {
    let stat = || std::fs::metadata(path).ok();
    match type_.unwrap_or("") {
        "" => Ok(()),
        "DirectoryOrCreate" if stat().is_none() => std::fs::create_dir_all(path)
            .and_then(|()| std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)))
            .map_err(|error| SetUpCause::Io { op: "creating", path: path.to_path_buf(), error }),
        "DirectoryOrCreate" | "Directory" => match stat() {
            Some(m) if m.is_dir() => Ok(()),
            _ => Err(not(path, "a directory")),
        },
        "FileOrCreate" if stat().is_none() => std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o644)
            .open(path)
            .map(drop)
            .map_err(|error| SetUpCause::Io { op: "creating", path: path.to_path_buf(), error }),
        "FileOrCreate" | "File" => match stat() {
            Some(m) if m.is_file() => Ok(()),
            _ => Err(not(path, "a file")),
        },
        "Socket" => match stat() {
            Some(m) if m.file_type().is_socket() => Ok(()),
            _ => Err(not(path, "a socket file")),
        },
        "CharDevice" => match stat() {
            Some(m) if m.file_type().is_char_device() => Ok(()),
            _ => Err(not(path, "a character device")),
        },
        "BlockDevice" => match stat() {
            Some(m) if m.file_type().is_block_device() => Ok(()),
            _ => Err(not(path, "a block device")),
        },
        other => Err(SetUpCause::HostPathType { message: format!("{other} is an invalid volume type") }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn or_create_types_create_what_is_missing() {
        let tmp = tempfile::tempdir().expect("tmp");
        let dir = tmp.path().join("a/b");
        check_type(&dir, Some("DirectoryOrCreate")).expect("dir");
        assert!(dir.is_dir());
        assert_eq!(std::fs::metadata(&dir).expect("meta").permissions().mode() & 0o777, 0o755);
        let file = tmp.path().join("f");
        check_type(&file, Some("FileOrCreate")).expect("file");
        assert!(file.is_file());
        // Existing ones are left alone.
        check_type(&dir, Some("DirectoryOrCreate")).expect("dir again");
        check_type(&file, Some("FileOrCreate")).expect("file again");
        // FileOrCreate does not create parents (upstream's makeFile).
        assert!(check_type(&tmp.path().join("x/y"), Some("FileOrCreate")).is_err());
    }

    #[test]
    fn checks_report_upstream_messages() {
        let tmp = tempfile::tempdir().expect("tmp");
        let file = tmp.path().join("f");
        std::fs::write(&file, b"x").expect("write");
        let msg = |p: &Path, t: &str| check_type(p, Some(t)).map_err(|e| e.to_string()).err();
        assert_eq!(
            msg(&file, "Directory"),
            Some(format!("hostPath type check failed: {} is not a directory", file.display()))
        );
        assert_eq!(
            msg(tmp.path(), "File"),
            Some(format!("hostPath type check failed: {} is not a file", tmp.path().display()))
        );
        assert_eq!(
            msg(&file, "Socket"),
            Some(format!("hostPath type check failed: {} is not a socket file", file.display()))
        );
        assert_eq!(
            msg(&file, "BlockDevice"),
            Some(format!("hostPath type check failed: {} is not a block device", file.display()))
        );
        assert_eq!(msg(&file, "Bogus"), Some("Bogus is an invalid volume type".to_string()));
        assert_eq!(msg(&tmp.path().join("missing"), ""), None);
        assert_eq!(msg(&file, "File"), None);
        assert_eq!(msg(Path::new("/dev/null"), "CharDevice"), None);
    }

    #[test]
    fn a_unix_socket_passes_the_socket_check() {
        let tmp = tempfile::tempdir().expect("tmp");
        let sock = tmp.path().join("s.sock");
        let _listener = std::os::unix::net::UnixListener::bind(&sock).expect("bind");
        check_type(&sock, Some("Socket")).expect("socket");
    }
}
