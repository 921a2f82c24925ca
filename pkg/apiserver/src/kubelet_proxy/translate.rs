//! Exec and attach over WebSocket `v5.channel.k8s.io` translated to SPDY/3.1
//! `v4.channel.k8s.io` towards the kubelet (upstream's `StreamTranslatorHandler`): the CRI
//! streaming servers (containerd 1.6) only speak the older protocols, and only SPDY can
//! half-close stdin.
//!
//! WebSocket side: messages whose first byte is the channel (0 stdin, 1 stdout, 2 stderr,
//! 3 error, 4 resize; 255 followed by a channel closes that channel). The client may send them
//! as binary or as text frames: upstream's `wsstream.Conn` reads both alike, and the Python
//! client sends `str` input as text. SPDY side: one stream per channel, named by its
//! `streamType` header; the error stream carries the final `Status`.

use super::spdy::session::{Event, FrameSender, Session};
use super::spdy::SpdyError;
use super::websocket::{self, MessageSink, MessageSource};
use bytes::{BufMut, Bytes, BytesMut};
use futures::{SinkExt, StreamExt};
use serde_json::{json, Value};
use std::time::Duration;
use tokio_tungstenite::tungstenite::Message;

pub(crate) const PROTOCOL_V5: &str = "v5.channel.k8s.io";
/// What the translator asks the kubelet for.
pub(crate) const SPDY_PROTOCOL: &str = "v4.channel.k8s.io";

const CH_STDIN: u8 = 0;
const CH_STDOUT: u8 = 1;
const CH_STDERR: u8 = 2;
const CH_ERROR: u8 = 3;
const CH_RESIZE: u8 = 4;
const CH_CLOSE: u8 = 255;

/// How long the kubelet may take to accept the streams.
const REPLY_TIMEOUT: Duration = Duration::from_secs(30);
/// How long a finished session waits for the client to close (upstream's finishTimeout).
const FINISH_TIMEOUT: Duration = Duration::from_secs(15 * 60);

/// Which streams the session has (the request's `stdin`/`stdout`/`stderr`/`tty`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct StreamOptions {
    pub stdin: bool,
    pub stdout: bool,
    pub stderr: bool,
    pub tty: bool,
}

/// SPDY stream ids of an established session.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Streams {
    error: u32,
    stdin: Option<u32>,
    stdout: Option<u32>,
    stderr: Option<u32>,
    resize: Option<u32>,
}

/// Opens the streams the options call for, in client-go's order, and waits for the kubelet
/// to accept them all.
pub(crate) async fn open_streams(session: &mut Session, opts: StreamOptions) -> Result<Streams, SpdyError> {
    let stream = |t: &str| vec![("streamType".to_string(), t.to_string())];
    let mut s = Streams { error: session.open(stream("error")).await?, ..Default::default() };
    if opts.stdin {
        s.stdin = Some(session.open(stream("stdin")).await?);
    }
    if opts.stdout {
        s.stdout = Some(session.open(stream("stdout")).await?);
    }
    if opts.stderr && !opts.tty {
        s.stderr = Some(session.open(stream("stderr")).await?);
    }
    if opts.tty {
        s.resize = Some(session.open(stream("resize")).await?);
    }
    let ids: Vec<u32> = [Some(s.error), s.stdin, s.stdout, s.stderr, s.resize].into_iter().flatten().collect();
    session.await_replies(&ids, REPLY_TIMEOUT).await?;
    Ok(s)
}

fn framed(channel: u8, data: &[u8]) -> Message {
    let mut b = BytesMut::with_capacity(data.len() + 1);
    b.put_u8(channel);
    b.put_slice(data);
    Message::Binary(b.freeze())
}

/// The Status for the client's error channel, from what the kubelet wrote on its error
/// stream: nothing means success; a Status passes through as it is.
pub(crate) fn final_status(error_stream: &[u8]) -> Value {
    if error_stream.iter().all(u8::is_ascii_whitespace) {
        return json!({"metadata": {}, "status": "Success"});
    }
    match serde_json::from_slice::<Value>(error_stream) {
        Ok(v) if v.get("status").is_some() => v,
        _ => json!({
            "metadata": {},
            "status": "Failure",
            "message": format!("Internal error occurred: {}", String::from_utf8_lossy(error_stream).trim()),
            "reason": "InternalError",
            "code": 500,
        }),
    }
}

/// Runs one translated session until the command ends or the client goes away.
pub(crate) async fn run(
    mut sink: impl MessageSink,
    mut source: impl MessageSource,
    mut session: Session,
    streams: Streams,
    opts: StreamOptions,
) {
    // Tells the client the session is up: an empty message on the lowest channel it reads.
    let first = if opts.stdout {
        CH_STDOUT
    } else if opts.stderr && !opts.tty {
        CH_STDERR
    } else {
        CH_ERROR
    };
    if sink.send(framed(first, &[])).await.is_err() {
        session.close().await;
        return;
    }
    let frames = session.sender();
    // Input streams still open; a closed one is forgotten so later input is dropped.
    let mut inputs = streams;
    let mut error_buf = Vec::new();
    let mut open = Open { error: true, stdout: streams.stdout.is_some(), stderr: streams.stderr.is_some() };
    let ended = loop {
        tokio::select! {
            msg = source.next() => match msg {
                Some(Ok(Message::Binary(b))) => {
                    if !forward_input(&frames, &mut inputs, &b).await {
                        session.close().await;
                        return;
                    }
                }
                Some(Ok(Message::Text(t))) => {
                    if !forward_input(&frames, &mut inputs, t.as_bytes()).await {
                        session.close().await;
                        return;
                    }
                }
                Some(Ok(Message::Ping(p))) => {
                    let _ = sink.send(Message::Pong(p)).await;
                }
                Some(Ok(Message::Close(_))) | None | Some(Err(_)) => {
                    // The client left: nothing more to tell it.
                    session.close().await;
                    return;
                }
                Some(Ok(_)) => {}
            },
            ev = session.next_event() => match ev {
                Some(Event::Data { stream_id, data, fin }) => {
                    let channel = if Some(stream_id) == streams.stdout {
                        Some(CH_STDOUT)
                    } else if Some(stream_id) == streams.stderr {
                        Some(CH_STDERR)
                    } else {
                        None
                    };
                    let delivered = match channel {
                        Some(c) if !data.is_empty() => sink.send(framed(c, &data)).await.is_ok(),
                        Some(_) => true,
                        None => {
                            if stream_id == streams.error {
                                error_buf.extend_from_slice(&data);
                            }
                            true
                        }
                    };
                    if !delivered {
                        session.close().await;
                        return;
                    }
                    if fin {
                        open.finish(stream_id, &streams);
                    }
                    if open.all_done() {
                        break None;
                    }
                }
                Some(Event::Reset { stream_id, .. }) => {
                    open.finish(stream_id, &streams);
                    if open.all_done() {
                        break None;
                    }
                }
                Some(Event::Reply { .. } | Event::GoAway) => {}
                Some(Event::Closed(err)) => break err,
                None => break None,
            },
        }
    };
    if let Some(e) = &ended {
        if error_buf.is_empty() {
            error_buf = format!("error reading from the kubelet: {e}").into_bytes();
        }
    }
    session.close().await;
    let status = final_status(&error_buf);
    let _ = sink.send(framed(CH_ERROR, &serde_json::to_vec(&status).unwrap_or_default())).await;
    websocket::close_normally(&mut sink).await;
    websocket::drain_until_closed(&mut sink, &mut source, FINISH_TIMEOUT).await;
}

/// Which kubelet streams may still carry output.
struct Open {
    error: bool,
    stdout: bool,
    stderr: bool,
}

impl Open {
    fn finish(&mut self, id: u32, s: &Streams) {
        if id == s.error {
            self.error = false;
        } else if Some(id) == s.stdout {
            self.stdout = false;
        } else if Some(id) == s.stderr {
            self.stderr = false;
        }
    }
    fn all_done(&self) -> bool {
        !self.error && !self.stdout && !self.stderr
    }
}

/// Passes one client message on to the kubelet; false when the message breaks the protocol
/// and the session must end.
async fn forward_input(frames: &FrameSender, s: &mut Streams, msg: &[u8]) -> bool {
    if is_malformed_close(msg) {
        // Upstream's wsstream.Conn stops reading then, which ends the session.
        tracing::debug!(len = msg.len(), "malformed stream close signal from the client: ending the session");
        return false;
    }
    if let Err(e) = from_client(frames, s, msg).await {
        tracing::debug!(error = %k1s_api::errors::chain(&e), "forwarding client input to the kubelet failed");
    }
    true
}

/// Channels a close signal may name (upstream: the five remotecommand channels).
const CHANNELS: u8 = 5;

/// Whether `msg` is a close signal (channel 255) not followed by exactly one valid channel.
fn is_malformed_close(msg: &[u8]) -> bool {
    msg.first() == Some(&CH_CLOSE) && (msg.len() != 2 || msg[1] >= CHANNELS)
}

async fn from_client(frames: &FrameSender, s: &mut Streams, msg: &[u8]) -> Result<(), SpdyError> {
    let Some((&channel, data)) = msg.split_first() else { return Ok(()) };
    match channel {
        CH_STDIN => {
            if let (Some(id), false) = (s.stdin, data.is_empty()) {
                frames.data(id, Bytes::copy_from_slice(data), false).await?;
            }
        }
        CH_RESIZE => {
            if let Some(id) = s.resize {
                frames.data(id, Bytes::copy_from_slice(data), false).await?;
            }
        }
        CH_CLOSE => {
            let target = match data.first() {
                Some(&CH_STDIN) => s.stdin.take(),
                Some(&CH_RESIZE) => s.resize.take(),
                _ => None,
            };
            if let Some(id) = target {
                // An empty DATA frame with FIN half-closes the stream: the runtime reads EOF.
                frames.data(id, Bytes::new(), true).await?;
            }
        }
        _ => {}
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::spdy::{decode, encode, header, Frame, HeaderDecoder, HeaderEncoder, FLAG_FIN};
    use super::*;
    use std::collections::HashMap;
    use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
    use tokio_tungstenite::tungstenite::protocol::Role;
    use tokio_tungstenite::WebSocketStream;

    #[test]
    fn empty_error_stream_is_success_and_statuses_pass_through() {
        assert_eq!(final_status(b""), json!({"metadata": {}, "status": "Success"}));
        let exit3 = br#"{"metadata":{},"status":"Failure","message":"command terminated with non-zero exit code: error executing command [sh -c exit 3], exit code 3","reason":"NonZeroExitCode","details":{"causes":[{"reason":"ExitCode","message":"3"}]}}"#;
        let s = final_status(exit3);
        assert_eq!(s["reason"], "NonZeroExitCode");
        assert_eq!(s["details"]["causes"][0]["message"], "3");
        let odd = final_status(b"something broke");
        assert_eq!(odd["status"], "Failure");
        assert_eq!(odd["message"], "Internal error occurred: something broke");
    }

    const EXIT_3: &str = r#"{"metadata":{},"status":"Failure","reason":"NonZeroExitCode","details":{"causes":[{"reason":"ExitCode","message":"3"}]}}"#;

    /// What the kubelet received on a stream: its type, the data, and whether FIN was set.
    type Received = (String, Bytes, bool);

    /// A remotecommand v4 server as containerd runs it: accepts the streams, echoes stdin to
    /// stdout upper-cased and resize messages as they are, and when stdin closes writes exit
    /// code 3 on the error stream and goes away.
    async fn remotecommand_server<IO: AsyncRead + AsyncWrite + Send + 'static>(io: IO) {
        recording_remotecommand_server(io, None).await
    }

    /// `remotecommand_server` that also reports every DATA frame it receives.
    async fn recording_remotecommand_server<IO: AsyncRead + AsyncWrite + Send + 'static>(
        io: IO,
        record: Option<tokio::sync::mpsc::UnboundedSender<Received>>,
    ) {
        let (rd, wr) = tokio::io::split(io);
        tokio::pin!(rd);
        tokio::pin!(wr);
        let mut enc = HeaderEncoder::new().expect("encoder");
        let mut dec = HeaderDecoder::new();
        let mut buf = bytes::BytesMut::new();
        let mut by_type: HashMap<String, u32> = HashMap::new();
        let mut types: HashMap<u32, String> = HashMap::new();
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
            let mut out = bytes::BytesMut::new();
            match frame {
                Frame::SynStream { stream_id, headers, .. } => {
                    let t = header(&headers, "streamType").unwrap_or("").to_string();
                    by_type.insert(t.clone(), stream_id);
                    types.insert(stream_id, t);
                    encode(&mut enc, &Frame::SynReply { stream_id, flags: 0, headers: Vec::new() }, &mut out)
                        .expect("reply");
                }
                Frame::Data { stream_id, flags, data } => {
                    let kind = types.get(&stream_id).cloned().unwrap_or_default();
                    if let Some(r) = &record {
                        let _ = r.send((kind.clone(), data.clone(), flags & FLAG_FIN != 0));
                    }
                    let stdout = by_type["stdout"];
                    if kind == "stdin" && !data.is_empty() {
                        let up = Bytes::from(data.to_ascii_uppercase());
                        encode(&mut enc, &Frame::Data { stream_id: stdout, flags: 0, data: up }, &mut out)
                            .expect("data");
                    }
                    if kind == "resize" {
                        let f = Frame::Data { stream_id: stdout, flags: 0, data: data.clone() };
                        encode(&mut enc, &f, &mut out).expect("data");
                    }
                    if kind == "stdin" && flags & FLAG_FIN != 0 {
                        let err = by_type["error"];
                        let status = Bytes::from_static(EXIT_3.as_bytes());
                        encode(&mut enc, &Frame::Data { stream_id: err, flags: FLAG_FIN, data: status }, &mut out)
                            .expect("status");
                        encode(&mut enc, &Frame::GoAway { last_good_stream_id: 0, status: 0 }, &mut out)
                            .expect("goaway");
                        wr.write_all(&out).await.expect("write");
                        return;
                    }
                }
                _ => {}
            }
            wr.write_all(&out).await.expect("write");
        }
    }

    async fn recv(ws: &mut WebSocketStream<tokio::io::DuplexStream>) -> Message {
        tokio::time::timeout(Duration::from_secs(5), ws.next()).await.expect("in time").expect("message").expect("ok")
    }

    #[tokio::test]
    async fn websocket_v5_session_is_translated_to_spdy_and_back() {
        let (spdy_client, spdy_server) = tokio::io::duplex(64 * 1024);
        tokio::spawn(remotecommand_server(spdy_server));
        let mut session = Session::start(spdy_client).expect("session");
        let opts = StreamOptions { stdin: true, stdout: true, stderr: false, tty: true };
        let streams = open_streams(&mut session, opts).await.expect("streams");

        let (ws_client, ws_server) = tokio::io::duplex(64 * 1024);
        let server = WebSocketStream::from_raw_socket(ws_server, Role::Server, None).await;
        let (sink, source) = server.split();
        let translator = tokio::spawn(run(sink, source, session, streams, opts));
        let mut client = WebSocketStream::from_raw_socket(ws_client, Role::Client, None).await;

        // The session announces itself with an empty stdout message.
        assert_eq!(recv(&mut client).await, Message::Binary(Bytes::from_static(&[CH_STDOUT])));
        client.send(Message::Binary(Bytes::from_static(b"\x04{\"Width\":80,\"Height\":24}"))).await.expect("resize");
        assert_eq!(recv(&mut client).await, framed(CH_STDOUT, br#"{"Width":80,"Height":24}"#));
        client.send(Message::Ping(Bytes::from_static(b"hb"))).await.expect("ping");
        assert_eq!(recv(&mut client).await, Message::Pong(Bytes::from_static(b"hb")));
        client.send(framed(CH_STDIN, b"echo hi")).await.expect("stdin");
        assert_eq!(recv(&mut client).await, framed(CH_STDOUT, b"ECHO HI"));
        // Closing stdin (v5's channel 255) ends the command; its status comes on channel 3.
        client.send(Message::Binary(Bytes::from_static(&[CH_CLOSE, CH_STDIN]))).await.expect("close stdin");
        let status = recv(&mut client).await;
        let Message::Binary(b) = status else { panic!("status is binary") };
        assert_eq!(b[0], CH_ERROR);
        let v: Value = serde_json::from_slice(&b[1..]).expect("status json");
        assert_eq!(v["reason"], "NonZeroExitCode");
        assert_eq!(v["details"]["causes"][0]["message"], "3");
        match recv(&mut client).await {
            Message::Close(Some(f)) => assert_eq!(u16::from(f.code), 1000),
            other => panic!("expected a close frame, got {other:?}"),
        }
        drop(client);
        tokio::time::timeout(Duration::from_secs(5), translator).await.expect("translator ends").expect("join");
    }

    #[tokio::test]
    async fn a_client_that_leaves_ends_the_kubelet_session() {
        let (spdy_client, spdy_server) = tokio::io::duplex(64 * 1024);
        let kubelet = tokio::spawn(remotecommand_server(spdy_server));
        let mut session = Session::start(spdy_client).expect("session");
        let opts = StreamOptions { stdin: true, stdout: true, ..Default::default() };
        let streams = open_streams(&mut session, opts).await.expect("streams");
        let (ws_client, ws_server) = tokio::io::duplex(64 * 1024);
        let (sink, source) = WebSocketStream::from_raw_socket(ws_server, Role::Server, None).await.split();
        let translator = tokio::spawn(run(sink, source, session, streams, opts));
        let mut client = WebSocketStream::from_raw_socket(ws_client, Role::Client, None).await;
        assert_eq!(recv(&mut client).await, Message::Binary(Bytes::from_static(&[CH_STDOUT])));
        drop(client);
        tokio::time::timeout(Duration::from_secs(5), translator).await.expect("translator ends").expect("join");
        tokio::time::timeout(Duration::from_secs(5), kubelet).await.expect("kubelet side closed").expect("join");
    }

    /// A translated session without a tty, with the kubelet's DATA frames reported.
    async fn recorded_session() -> (
        WebSocketStream<tokio::io::DuplexStream>,
        tokio::task::JoinHandle<()>,
        tokio::sync::mpsc::UnboundedReceiver<Received>,
    ) {
        let (spdy_client, spdy_server) = tokio::io::duplex(64 * 1024);
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        tokio::spawn(recording_remotecommand_server(spdy_server, Some(tx)));
        let mut session = Session::start(spdy_client).expect("session");
        let opts = StreamOptions { stdin: true, stdout: true, stderr: true, tty: false };
        let streams = open_streams(&mut session, opts).await.expect("streams");
        let (ws_client, ws_server) = tokio::io::duplex(64 * 1024);
        let (sink, source) = WebSocketStream::from_raw_socket(ws_server, Role::Server, None).await.split();
        let translator = tokio::spawn(run(sink, source, session, streams, opts));
        let mut client = WebSocketStream::from_raw_socket(ws_client, Role::Client, None).await;
        assert_eq!(recv(&mut client).await, Message::Binary(Bytes::from_static(&[CH_STDOUT])));
        (client, translator, rx)
    }

    async fn received(rx: &mut tokio::sync::mpsc::UnboundedReceiver<Received>) -> Received {
        tokio::time::timeout(Duration::from_secs(5), rx.recv()).await.expect("in time").expect("a frame")
    }

    fn stdin(data: &str, fin: bool) -> Received {
        ("stdin".to_string(), Bytes::copy_from_slice(data.as_bytes()), fin)
    }

    /// The status the client got on channel 3, then the normal close.
    async fn exit_code(client: &mut WebSocketStream<tokio::io::DuplexStream>) -> String {
        let Message::Binary(b) = recv(client).await else { panic!("status is binary") };
        assert_eq!(b[0], CH_ERROR);
        let v: Value = serde_json::from_slice(&b[1..]).expect("status json");
        match recv(client).await {
            Message::Close(Some(f)) => assert_eq!(u16::from(f.code), 1000),
            other => panic!("expected a close frame, got {other:?}"),
        }
        v["details"]["causes"][0]["message"].as_str().unwrap_or_default().to_string()
    }

    #[tokio::test]
    async fn text_frames_reach_stdin_like_binary_ones() {
        // The Python client sends `str` input as text frames: "\x00" + data.
        let (mut client, translator, mut rx) = recorded_session().await;
        client.send(Message::text("\u{0}echo text\n")).await.expect("text stdin");
        assert_eq!(received(&mut rx).await, stdin("echo text\n", false));
        assert_eq!(recv(&mut client).await, framed(CH_STDOUT, b"ECHO TEXT\n"));
        client.send(framed(CH_STDIN, b"echo binary\n")).await.expect("binary stdin");
        assert_eq!(received(&mut rx).await, stdin("echo binary\n", false));
        assert_eq!(recv(&mut client).await, framed(CH_STDOUT, b"ECHO BINARY\n"));
        // Text is passed on as its UTF-8 bytes; empty messages carry nothing.
        client.send(Message::text("")).await.expect("empty");
        client.send(Message::text("\u{0}h\u{e9}\n")).await.expect("utf-8 stdin");
        assert_eq!(received(&mut rx).await, stdin("h\u{e9}\n", false));
        assert_eq!(recv(&mut client).await, framed(CH_STDOUT, "H\u{e9}\n".as_bytes()));
        client.send(Message::Binary(Bytes::from_static(&[CH_CLOSE, CH_STDIN]))).await.expect("close stdin");
        assert_eq!(received(&mut rx).await, stdin("", true));
        assert_eq!(exit_code(&mut client).await, "3");
        drop(client);
        tokio::time::timeout(Duration::from_secs(5), translator).await.expect("translator ends").expect("join");
    }

    #[tokio::test]
    async fn closing_stdin_half_closes_the_kubelet_stream_and_later_input_is_dropped() {
        let (mut client, translator, mut rx) = recorded_session().await;
        client.send(framed(CH_STDIN, b"last line\n")).await.expect("stdin");
        assert_eq!(received(&mut rx).await, stdin("last line\n", false));
        assert_eq!(recv(&mut client).await, framed(CH_STDOUT, b"LAST LINE\n"));
        // v5's close signal for channel 0: the kubelet's stdin stream gets FIN, that is EOF.
        client.send(Message::Binary(Bytes::from_static(&[CH_CLOSE, CH_STDIN]))).await.expect("close stdin");
        client.send(framed(CH_STDIN, b"too late")).await.expect("stdin after close");
        client.send(Message::Binary(Bytes::from_static(&[CH_CLOSE, CH_STDIN]))).await.expect("close again");
        assert_eq!(received(&mut rx).await, stdin("", true));
        assert_eq!(exit_code(&mut client).await, "3");
        drop(client);
        tokio::time::timeout(Duration::from_secs(5), translator).await.expect("translator ends").expect("join");
        assert!(rx.recv().await.is_none(), "nothing reaches the kubelet after stdin closed");
    }

    #[tokio::test]
    async fn a_malformed_close_signal_ends_the_session_as_upstream() {
        for bad in [&[CH_CLOSE][..], &[CH_CLOSE, CH_STDIN, CH_STDIN][..], &[CH_CLOSE, 5][..]] {
            let (mut client, translator, mut rx) = recorded_session().await;
            client.send(Message::Binary(Bytes::copy_from_slice(bad))).await.expect("bad close");
            tokio::time::timeout(Duration::from_secs(5), translator).await.expect("translator ends").expect("join");
            assert!(rx.recv().await.is_none(), "{bad:?}: the kubelet session ends without input");
            // The client is let go without a status.
            let next = tokio::time::timeout(Duration::from_secs(5), client.next()).await.expect("in time");
            assert!(!matches!(next, Some(Ok(Message::Binary(_)))), "{bad:?}: {next:?}");
        }
    }
}
