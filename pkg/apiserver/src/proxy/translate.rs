//! Exec and attach over WebSocket `v5.channel.k8s.io` translated to SPDY/3.1
//! `v4.channel.k8s.io` towards the kubelet (upstream's `StreamTranslatorHandler`): the CRI
//! streaming servers (containerd 1.6) only speak the older protocols, and only SPDY can
//! half-close stdin.
//!
//! WebSocket side: binary messages whose first byte is the channel (0 stdin, 1 stdout, 2 stderr,
//! 3 error, 4 resize; 255 followed by a channel closes that channel). SPDY side: one stream per
//! channel, named by its `streamType` header; the error stream carries the final `Status`.

use super::spdy::session::{Event, FrameSender, Session};
use super::spdy::SpdyError;
use super::websocket::{self, WsSink, WsSource};
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
pub(crate) async fn run(mut sink: WsSink, mut source: WsSource, mut session: Session, streams: Streams, opts: StreamOptions) {
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
                    if let Err(e) = from_client(&frames, &mut inputs, &b).await {
                        tracing::debug!(error = %e, "forwarding client input to the kubelet failed");
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
                    match channel {
                        Some(c) if !data.is_empty() => {
                            if sink.send(framed(c, &data)).await.is_err() {
                                session.close().await;
                                return;
                            }
                        }
                        _ if stream_id == streams.error => error_buf.extend_from_slice(&data),
                        _ => {}
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
                frames.data(id, Bytes::new(), true).await?;
            }
        }
        _ => {}
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
