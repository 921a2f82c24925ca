//! Changes in the manifests folder, from inotify: a file written and closed, created, moved in or
//! out, or deleted. The folder itself removed is made again and watched anew.

use rustix::fs::inotify::{self, CreateFlags, ReadFlags, WatchFlags};
use std::mem::MaybeUninit;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use tokio::io::unix::AsyncFd;

#[derive(Debug, thiserror::Error)]
pub enum WatchError {
    #[error("creating an inotify instance")]
    Init(#[source] std::io::Error),
    #[error("watching {}", dir.display())]
    Add { dir: PathBuf, source: std::io::Error },
    #[error("reading inotify events for {}", dir.display())]
    Read { dir: PathBuf, source: std::io::Error },
}

/// Events that change what the folder holds. Not `MODIFY`: a file is read once it is closed.
fn flags() -> WatchFlags {
    WatchFlags::CLOSE_WRITE
        | WatchFlags::CREATE
        | WatchFlags::DELETE
        | WatchFlags::MOVED_FROM
        | WatchFlags::MOVED_TO
        | WatchFlags::ATTRIB
        | WatchFlags::DELETE_SELF
        | WatchFlags::MOVE_SELF
        | WatchFlags::ONLYDIR
}

/// An inotify watch on one folder.
pub struct FolderWatch {
    dir: PathBuf,
    fd: AsyncFd<OwnedFd>,
    /// The watch ended (the folder was removed or moved): make the folder and watch again.
    lost: bool,
}

impl FolderWatch {
    /// Creates `dir` if needed and watches it. Must run inside a tokio runtime.
    pub fn new(dir: &Path) -> Result<FolderWatch, WatchError> {
        let fd = inotify::init(CreateFlags::NONBLOCK | CreateFlags::CLOEXEC).map_err(|e| WatchError::Init(e.into()))?;
        // `AsyncFd::new` is deprecated because a `T` that merely borrows its descriptor could
        // have it closed while registered; an `OwnedFd` moved in cannot (`register`, the
        // replacement, is an `unsafe fn`, and this crate forbids unsafe code).
        #[allow(deprecated)]
        let fd = AsyncFd::new(fd).map_err(WatchError::Init)?;
        let mut w = FolderWatch { dir: dir.to_path_buf(), fd, lost: true };
        w.rewatch()?;
        Ok(w)
    }

    fn rewatch(&mut self) -> Result<(), WatchError> {
        let add = |source| WatchError::Add { dir: self.dir.clone(), source };
        std::fs::create_dir_all(&self.dir).map_err(add)?;
        inotify::add_watch(self.fd.get_ref(), self.dir.as_path(), flags()).map_err(|e| add(e.into()))?;
        self.lost = false;
        Ok(())
    }

    /// Waits until the folder changed, then takes every event already queued.
    pub async fn changed(&mut self) -> Result<(), WatchError> {
        loop {
            let any = {
                let mut guard =
                    self.fd.readable().await.map_err(|source| WatchError::Read { dir: self.dir.clone(), source })?;
                let mut buf = [MaybeUninit::<u8>::uninit(); 4096];
                let mut reader = inotify::Reader::new(guard.get_inner(), &mut buf);
                let mut any = false;
                loop {
                    match reader.next() {
                        Ok(event) => {
                            any = true;
                            let gone = ReadFlags::IGNORED | ReadFlags::DELETE_SELF | ReadFlags::MOVE_SELF;
                            if event.events().intersects(gone) {
                                self.lost = true;
                            }
                        }
                        Err(rustix::io::Errno::WOULDBLOCK) => break,
                        Err(e) => return Err(WatchError::Read { dir: self.dir.clone(), source: e.into() }),
                    }
                }
                guard.clear_ready();
                any
            };
            if self.lost {
                self.rewatch()?;
            }
            if any {
                return Ok(());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    async fn changes(w: &mut FolderWatch) -> bool {
        tokio::time::timeout(Duration::from_secs(5), w.changed()).await.is_ok_and(|r| r.is_ok())
    }

    #[tokio::test]
    async fn writing_removing_and_recreating_the_folder_are_all_seen() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let dir = tmp.path().join("manifests");
        let mut w = FolderWatch::new(&dir).expect("watch");
        assert!(dir.is_dir(), "the folder is made");
        std::fs::write(dir.join("a.yaml"), "x").expect("write");
        assert!(changes(&mut w).await, "a written file");
        std::fs::remove_file(dir.join("a.yaml")).expect("rm");
        assert!(changes(&mut w).await, "a removed file");
        std::fs::remove_dir(&dir).expect("rmdir");
        assert!(changes(&mut w).await, "the folder removed");
        assert!(dir.is_dir(), "the folder is made again");
        std::fs::write(dir.join("b.yaml"), "x").expect("write");
        assert!(changes(&mut w).await, "a file in the new folder");
    }
}
