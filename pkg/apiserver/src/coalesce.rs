//! Write coalescing for HTTP/2 connections.
//!
//! An HTTP/2 connection multiplexes many requests. When a store commit acknowledges a batch of
//! creates, their handlers finish one after another, and each wakes the connection task, which
//! wrote and flushed each reply on its own: one TLS record, one `writev` and one wake-up of the
//! client per reply. [`Coalesce`] holds what the connection writes until it flushes, and puts the
//! flush off while the runtime has other ready tasks (which are typically the handlers of the
//! same batch): when the connection is polled again with nothing new written, or after
//! [`MAX_DEFERRALS`], everything pending goes out in one write. The flush is only put off
//! while other requests of the connection are being handled ([`Busy`]): a connection with one
//! request at a time (kubectl, most watches) writes at once, as before.
//!
//! Only HTTP/2 connections are wrapped: hyper's HTTP/2 codec flushes after every round of
//! frames it writes, so nothing written can stay behind. (Upgraded HTTP/1.1 streams are
//! handed to code that may write without flushing, so they are not.)

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{ready, Context, Poll};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// Bytes held before a write goes through without waiting for a flush.
const LIMIT: usize = 64 * 1024;
/// Flushes put off in a row at most, so a connection kept busy still sends.
const MAX_DEFERRALS: u8 = 16;

/// The requests of a connection whose handlers have not returned yet.
#[derive(Clone, Default)]
pub struct Busy(Arc<AtomicUsize>);

impl Busy {
    /// Counts a request until the returned guard is dropped.
    pub fn enter(&self) -> BusyGuard {
        self.0.fetch_add(1, Ordering::Relaxed);
        BusyGuard(self.0.clone())
    }

    fn any(&self) -> bool {
        self.0.load(Ordering::Relaxed) > 0
    }
}

pub struct BusyGuard(Arc<AtomicUsize>);

impl Drop for BusyGuard {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

pub struct Coalesce<T> {
    inner: T,
    busy: Busy,
    /// Written by the connection, not yet passed to `inner`; `sent` of it already was.
    buf: Vec<u8>,
    sent: usize,
    /// Something was written since the flush was last put off.
    fresh: bool,
    deferrals: u8,
}

impl<T> Coalesce<T> {
    pub fn new(inner: T, busy: Busy) -> Self {
        Coalesce { inner, busy, buf: Vec::new(), sent: 0, fresh: false, deferrals: 0 }
    }
}

impl<T: AsyncWrite + Unpin> Coalesce<T> {
    /// Passes everything held to the inner stream.
    fn poll_drain(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        while self.sent < self.buf.len() {
            let n = ready!(Pin::new(&mut self.inner).poll_write(cx, &self.buf[self.sent..]))?;
            if n == 0 {
                return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
            }
            self.sent += n;
        }
        self.buf.clear();
        self.sent = 0;
        // A burst (a large list) does not keep its buffer for the connection's lifetime.
        if self.buf.capacity() > 2 * LIMIT {
            self.buf.shrink_to(LIMIT);
        }
        Poll::Ready(Ok(()))
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for Coalesce<T> {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for Coalesce<T> {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, data: &[u8]) -> Poll<io::Result<usize>> {
        if self.buf.len() >= LIMIT {
            ready!(self.poll_drain(cx))?;
        }
        self.buf.extend_from_slice(data);
        self.fresh |= !data.is_empty();
        Poll::Ready(Ok(data.len()))
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        if self.buf.len() >= LIMIT {
            ready!(self.poll_drain(cx))?;
        }
        let mut n = 0;
        for b in bufs {
            self.buf.extend_from_slice(b);
            n += b.len();
        }
        self.fresh |= n > 0;
        Poll::Ready(Ok(n))
    }

    fn is_write_vectored(&self) -> bool {
        true
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        if self.fresh && self.deferrals < MAX_DEFERRALS && self.sent < self.buf.len() && self.busy.any() {
            self.fresh = false;
            self.deferrals += 1;
            // Yield as `tokio::task::yield_now` does: the wake-up comes after the tasks that
            // are ready now have run. Another handler of this connection finishing meanwhile
            // wakes us sooner, with more to send, and the flush is put off again.
            let mut yielded = std::pin::pin!(tokio::task::yield_now());
            if yielded.as_mut().poll(cx).is_pending() {
                return Poll::Pending;
            }
        }
        ready!(self.poll_drain(cx))?;
        self.fresh = false;
        self.deferrals = 0;
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        ready!(self.poll_drain(cx))?;
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};
    use tokio::io::AsyncWriteExt;

    /// Records each write it receives; accepts at most `max` bytes per write.
    #[derive(Clone, Default)]
    struct Recorder {
        writes: Arc<Mutex<Vec<Vec<u8>>>>,
        flushes: Arc<Mutex<usize>>,
        max: usize,
    }

    impl AsyncWrite for Recorder {
        fn poll_write(self: Pin<&mut Self>, _: &mut Context<'_>, data: &[u8]) -> Poll<io::Result<usize>> {
            let n = data.len().min(if self.max == 0 { usize::MAX } else { self.max });
            self.writes.lock().expect("lock").push(data[..n].to_vec());
            Poll::Ready(Ok(n))
        }
        fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
            *self.flushes.lock().expect("lock") += 1;
            Poll::Ready(Ok(()))
        }
        fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
            Poll::Ready(Ok(()))
        }
    }

    fn written(r: &Recorder) -> Vec<Vec<u8>> {
        r.writes.lock().expect("lock").clone()
    }

    #[tokio::test]
    async fn writes_wait_for_the_flush_and_go_out_as_one() {
        let rec = Recorder::default();
        let busy = Busy::default();
        let _handling = busy.enter();
        let mut c = Coalesce::new(rec.clone(), busy.clone());
        c.write_all(b"one ").await.expect("write");
        let n = c.write_vectored(&[io::IoSlice::new(b"two "), io::IoSlice::new(b"three")]).await.expect("write");
        assert_eq!(n, 9, "all slices are taken");
        assert!(written(&rec).is_empty(), "nothing goes out before the flush");
        c.flush().await.expect("flush");
        assert_eq!(written(&rec), vec![b"one two three".to_vec()]);
        assert_eq!(*rec.flushes.lock().expect("lock"), 1);
        // A flush with nothing held flushes the inner stream at once.
        c.flush().await.expect("flush");
        assert_eq!(written(&rec).len(), 1);
        assert_eq!(*rec.flushes.lock().expect("lock"), 2);
    }

    #[tokio::test]
    async fn the_first_flush_yields_and_a_flush_with_nothing_new_sends() {
        let rec = Recorder::default();
        let busy = Busy::default();
        let handling = busy.enter();
        let mut c = Coalesce::new(rec.clone(), busy.clone());
        c.write_all(b"a").await.expect("write");
        let waker = futures::task::noop_waker();
        let mut cx = Context::from_waker(&waker);
        assert!(Pin::new(&mut c).poll_flush(&mut cx).is_pending(), "the first flush is put off");
        // Written meanwhile: put off again.
        assert!(Pin::new(&mut c).poll_write(&mut cx, b"b").is_ready());
        assert!(Pin::new(&mut c).poll_flush(&mut cx).is_pending());
        assert!(written(&rec).is_empty());
        // Nothing new since: it goes out, all of it in one write.
        assert!(matches!(Pin::new(&mut c).poll_flush(&mut cx), Poll::Ready(Ok(()))));
        assert_eq!(written(&rec), vec![b"ab".to_vec()]);
        // With no other request being handled, nothing is put off.
        drop(handling);
        assert!(Pin::new(&mut c).poll_write(&mut cx, b"c").is_ready());
        assert!(matches!(Pin::new(&mut c).poll_flush(&mut cx), Poll::Ready(Ok(()))));
        assert_eq!(written(&rec), vec![b"ab".to_vec(), b"c".to_vec()]);
    }

    #[tokio::test]
    async fn a_connection_that_keeps_writing_is_flushed_after_the_limit_of_deferrals() {
        let rec = Recorder::default();
        let busy = Busy::default();
        let _handling = busy.enter();
        let mut c = Coalesce::new(rec.clone(), busy.clone());
        let waker = futures::task::noop_waker();
        let mut cx = Context::from_waker(&waker);
        let mut polls = 0;
        loop {
            assert!(Pin::new(&mut c).poll_write(&mut cx, b"x").is_ready());
            polls += 1;
            if Pin::new(&mut c).poll_flush(&mut cx).is_ready() {
                break;
            }
            assert!(polls <= MAX_DEFERRALS as usize, "the flush was put off forever");
        }
        assert_eq!(polls, MAX_DEFERRALS as usize + 1);
        assert_eq!(written(&rec).concat().len(), polls);
    }

    #[tokio::test]
    async fn past_the_limit_writes_go_through_and_partial_inner_writes_are_resumed() {
        let rec = Recorder { max: 10_000, ..Default::default() };
        let mut c = Coalesce::new(rec.clone(), Busy::default());
        let chunk = vec![7u8; LIMIT];
        c.write_all(&chunk).await.expect("write");
        assert!(written(&rec).is_empty());
        c.write_all(b"more").await.expect("write");
        // The held 64 KiB went out (in pieces the inner stream accepted) before "more" was taken.
        assert_eq!(written(&rec).concat().len(), LIMIT);
        c.shutdown().await.expect("shutdown");
        let all = written(&rec).concat();
        assert_eq!(all.len(), LIMIT + 4);
        assert_eq!(&all[LIMIT..], b"more");
    }
}
