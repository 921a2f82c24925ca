//! A client SPDY session over an upgraded connection: a reader task that decodes frames, answers
//! the peer's pings and turns the rest into [`Event`]s, and a writer task that encodes queued
//! frames. Streams opened here get odd ids; the peer's own streams are refused (the Kubernetes
//! streaming protocols never open any from the server side).

use super::{decode, encode, Frame, HeaderDecoder, HeaderEncoder, Headers, SpdyError, FLAG_FIN, RST_REFUSED_STREAM};
use bytes::{Bytes, BytesMut};
use std::collections::VecDeque;
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

/// Frames queued for the writer; full means the connection is not draining.
const QUEUE: usize = 64;
/// Frames the writer coalesces into one write.
const BATCH: usize = 16;

/// What the peer did.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Event {
    Reply {
        stream_id: u32,
        fin: bool,
    },
    Data {
        stream_id: u32,
        data: Bytes,
        fin: bool,
    },
    Reset {
        stream_id: u32,
        status: u32,
    },
    GoAway,
    /// The connection ended, with the error that ended it if any.
    Closed(Option<String>),
}

/// A handle to send frames on the session.
#[derive(Clone)]
pub(crate) struct FrameSender(mpsc::Sender<Frame>);

impl FrameSender {
    pub(crate) async fn data(&self, stream_id: u32, data: Bytes, fin: bool) -> Result<(), SpdyError> {
        let flags = if fin { FLAG_FIN } else { 0 };
        self.0.send(Frame::Data { stream_id, flags, data }).await.map_err(|_| SpdyError::Closed)
    }
}

pub(crate) struct Session {
    frames: FrameSender,
    events: mpsc::Receiver<Event>,
    /// Events read while waiting for replies, handed out first.
    backlog: VecDeque<Event>,
    next_stream_id: u32,
    reader: AbortOnDrop,
    writer: JoinHandle<()>,
}

/// The reader task ends with the session even if the peer never closes the connection.
struct AbortOnDrop(JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

impl Session {
    /// Starts a session on `io`, an upgraded connection whose server speaks SPDY/3.1.
    pub(crate) fn start<IO>(io: IO) -> Result<Session, SpdyError>
    where
        IO: AsyncRead + AsyncWrite + Send + 'static,
    {
        let encoder = HeaderEncoder::new()?;
        let (rd, wr) = tokio::io::split(io);
        let (tx, rx) = mpsc::channel(QUEUE);
        let (etx, erx) = mpsc::channel(QUEUE);
        let writer = tokio::spawn(write_loop(wr, rx, encoder));
        let reader = tokio::spawn(read_loop(rd, etx, tx.downgrade()));
        Ok(Session {
            frames: FrameSender(tx),
            events: erx,
            backlog: VecDeque::new(),
            next_stream_id: 1,
            reader: AbortOnDrop(reader),
            writer,
        })
    }

    pub(crate) fn sender(&self) -> FrameSender {
        self.frames.clone()
    }

    /// Opens a stream with `headers` and returns its id (without waiting for the reply).
    pub(crate) async fn open(&mut self, headers: Headers) -> Result<u32, SpdyError> {
        let stream_id = self.next_stream_id;
        self.next_stream_id += 2;
        let frame = Frame::SynStream { stream_id, associated_to: 0, priority: 0, flags: 0, headers };
        self.frames.0.send(frame).await.map_err(|_| SpdyError::Closed)?;
        Ok(stream_id)
    }

    /// Waits until the peer replied to each of `ids`; other events are kept for later.
    /// spdystream drops data sent on a stream it has not yet replied to, so callers wait here
    /// before writing.
    pub(crate) async fn await_replies(&mut self, ids: &[u32], timeout: Duration) -> Result<(), SpdyError> {
        let mut waiting: Vec<u32> = ids.to_vec();
        let deadline = tokio::time::Instant::now() + timeout;
        while !waiting.is_empty() {
            let ev = match tokio::time::timeout_at(deadline, self.events.recv()).await {
                Ok(Some(ev)) => ev,
                Ok(None) => return Err(SpdyError::Closed),
                Err(_) => return Err(SpdyError::ReplyTimeout(waiting[0])),
            };
            match ev {
                Event::Reply { stream_id, .. } => waiting.retain(|id| *id != stream_id),
                Event::Reset { stream_id, status } if waiting.contains(&stream_id) => {
                    return Err(SpdyError::Reset { stream_id, status })
                }
                Event::Closed(_) => return Err(SpdyError::Closed),
                other => self.backlog.push_back(other),
            }
        }
        Ok(())
    }

    /// The next event; `None` once the connection is gone and every event was handed out.
    pub(crate) async fn next_event(&mut self) -> Option<Event> {
        if let Some(ev) = self.backlog.pop_front() {
            return Some(ev);
        }
        self.events.recv().await
    }

    /// Says goodbye (GOAWAY) and waits briefly for queued frames to go out.
    pub(crate) async fn close(self) {
        let last = self.next_stream_id.saturating_sub(2);
        let _ = self.frames.0.send(Frame::GoAway { last_good_stream_id: last, status: 0 }).await;
        let Session { frames, writer, reader, .. } = self;
        // The writer ends once every sender is gone (callers' clones included).
        drop(frames);
        let _ = tokio::time::timeout(Duration::from_secs(2), writer).await;
        drop(reader);
    }
}

async fn write_loop<W: AsyncWrite>(wr: W, mut rx: mpsc::Receiver<Frame>, mut encoder: HeaderEncoder) {
    tokio::pin!(wr);
    let mut out = BytesMut::new();
    while let Some(first) = rx.recv().await {
        let mut frame = Some(first);
        let mut n = 0;
        while let Some(f) = frame.take() {
            if let Err(e) = encode(&mut encoder, &f, &mut out) {
                tracing::debug!(error = %e, "dropping a SPDY frame that cannot be encoded");
            }
            n += 1;
            if n < BATCH {
                frame = rx.try_recv().ok();
            }
        }
        if let Err(e) = async {
            wr.write_all(&out).await?;
            wr.flush().await
        }
        .await
        {
            tracing::debug!(error = %e, "SPDY write failed");
            return;
        }
        out.clear();
    }
    let _ = wr.shutdown().await;
}

async fn read_loop<R: AsyncRead>(rd: R, events: mpsc::Sender<Event>, frames: mpsc::WeakSender<Frame>) {
    tokio::pin!(rd);
    let mut decoder = HeaderDecoder::new();
    let mut buf = BytesMut::with_capacity(32 * 1024);
    let reply = |frame: Frame| {
        let frames = frames.clone();
        async move {
            if let Some(tx) = frames.upgrade() {
                let _ = tx.send(frame).await;
            }
        }
    };
    let end = loop {
        let frame = match decode(&mut decoder, &mut buf) {
            Ok(Some(f)) => f,
            Ok(None) => {
                if buf.capacity() - buf.len() < 4096 {
                    buf.reserve(32 * 1024);
                }
                match rd.read_buf(&mut buf).await {
                    Ok(0) => break None,
                    Ok(_) => continue,
                    Err(e) => break Some(e.to_string()),
                }
            }
            Err(e) => break Some(e.to_string()),
        };
        let event = match frame {
            Frame::SynReply { stream_id, flags, .. } => Event::Reply { stream_id, fin: flags & FLAG_FIN != 0 },
            Frame::Data { stream_id, flags, data } => Event::Data { stream_id, data, fin: flags & FLAG_FIN != 0 },
            Frame::Headers { stream_id, flags, .. } if flags & FLAG_FIN != 0 => {
                Event::Data { stream_id, data: Bytes::new(), fin: true }
            }
            Frame::RstStream { stream_id, status } => Event::Reset { stream_id, status },
            Frame::GoAway { .. } => Event::GoAway,
            Frame::Ping { id } => {
                // Our pings are odd; answer the peer's (even) ones.
                if id % 2 == 0 {
                    reply(Frame::Ping { id }).await;
                }
                continue;
            }
            Frame::SynStream { stream_id, .. } => {
                reply(Frame::RstStream { stream_id, status: RST_REFUSED_STREAM }).await;
                continue;
            }
            Frame::Headers { .. } | Frame::Settings { .. } | Frame::WindowUpdate { .. } => continue,
        };
        if events.send(event).await.is_err() {
            return;
        }
    };
    let _ = events.send(Event::Closed(end)).await;
}

#[cfg(test)]
mod tests {
    use super::super::header;
    use super::*;

    /// A minimal SPDY server end for tests: replies to every stream, echoes data back with the
    /// stream type prefixed, and pings once.
    async fn echo_server<IO: AsyncRead + AsyncWrite + Send + 'static>(io: IO) {
        let (rd, wr) = tokio::io::split(io);
        tokio::pin!(rd);
        tokio::pin!(wr);
        let mut enc = HeaderEncoder::new().expect("encoder");
        let mut dec = HeaderDecoder::new();
        let mut buf = BytesMut::new();
        let mut types = std::collections::HashMap::new();
        let mut out = BytesMut::new();
        encode(&mut enc, &Frame::Ping { id: 2 }, &mut out).expect("ping");
        wr.write_all(&out).await.expect("write");
        loop {
            let frame = match decode(&mut dec, &mut buf).expect("decode") {
                Some(f) => f,
                None => {
                    if rd.read_buf(&mut buf).await.expect("read") == 0 {
                        return;
                    }
                    continue;
                }
            };
            let mut out = BytesMut::new();
            match frame {
                Frame::SynStream { stream_id, headers, .. } => {
                    types.insert(stream_id, header(&headers, "streamType").unwrap_or("").to_string());
                    encode(&mut enc, &Frame::SynReply { stream_id, flags: 0, headers: Vec::new() }, &mut out)
                        .expect("reply");
                }
                Frame::Data { stream_id, flags, data } => {
                    let mut echoed = types.get(&stream_id).cloned().unwrap_or_default().into_bytes();
                    echoed.extend_from_slice(&data);
                    let f = Frame::Data { stream_id, flags, data: echoed.into() };
                    encode(&mut enc, &f, &mut out).expect("data");
                }
                Frame::Ping { id } => assert_eq!(id, 2, "the client answers the server's ping"),
                Frame::GoAway { .. } => return,
                other => panic!("unexpected frame {other:?}"),
            }
            wr.write_all(&out).await.expect("write");
        }
    }

    #[tokio::test]
    async fn client_session_opens_streams_waits_for_replies_and_exchanges_data() {
        let (client, server) = tokio::io::duplex(64 * 1024);
        let server = tokio::spawn(echo_server(server));
        let mut s = Session::start(client).expect("session");
        let a = s.open(vec![("streamType".into(), "stdin".into())]).await.expect("open");
        let b = s.open(vec![("streamType".into(), "resize".into())]).await.expect("open");
        assert_eq!((a, b), (1, 3));
        s.await_replies(&[a, b], Duration::from_secs(5)).await.expect("replies");
        s.sender().data(a, Bytes::from_static(b"hi"), true).await.expect("send");
        let ev = tokio::time::timeout(Duration::from_secs(5), s.next_event()).await.expect("in time");
        assert_eq!(ev, Some(Event::Data { stream_id: 1, data: Bytes::from_static(b"stdinhi"), fin: true }));
        s.close().await;
        tokio::time::timeout(Duration::from_secs(5), server).await.expect("server ends").expect("server");
    }

    #[tokio::test]
    async fn a_closed_connection_ends_the_event_stream() {
        let (client, server) = tokio::io::duplex(1024);
        let mut s = Session::start(client).expect("session");
        drop(server);
        let ev = tokio::time::timeout(Duration::from_secs(5), s.next_event()).await.expect("in time");
        assert_eq!(ev, Some(Event::Closed(None)));
        let id = s.open(Vec::new()).await.unwrap_or(1);
        assert!(matches!(
            s.await_replies(&[id], Duration::from_millis(200)).await,
            Err(SpdyError::Closed | SpdyError::ReplyTimeout(_))
        ));
    }
}
