//! SPDY/3 framing as Kubernetes streaming uses it (`Upgrade: SPDY/3.1`, moby/spdystream on the
//! other end): control frames SYN_STREAM, SYN_REPLY, RST_STREAM, SETTINGS, PING, GOAWAY,
//! HEADERS and WINDOW_UPDATE, data frames, and header blocks compressed with one zlib stream
//! per direction primed with the SPDY/3 dictionary. [`session`] runs a client session on top.
//!
//! Flow control windows are not enforced: spdystream neither sends nor honours them.

mod dictionary;
pub(crate) mod session;

use bytes::{Buf, BufMut, Bytes, BytesMut};
use flate2::{Compress, Compression, Decompress, FlushCompress, FlushDecompress};

pub(crate) use dictionary::DICTIONARY;

pub(crate) const VERSION: u16 = 3;
pub(crate) const FLAG_FIN: u8 = 0x01;
#[cfg(test)]
pub(crate) const FLAG_UNIDIRECTIONAL: u8 = 0x02;

const TYPE_SYN_STREAM: u16 = 1;
const TYPE_SYN_REPLY: u16 = 2;
const TYPE_RST_STREAM: u16 = 3;
const TYPE_SETTINGS: u16 = 4;
const TYPE_PING: u16 = 6;
const TYPE_GOAWAY: u16 = 7;
const TYPE_HEADERS: u16 = 8;
const TYPE_WINDOW_UPDATE: u16 = 9;

/// RST_STREAM status codes used here.
pub(crate) const RST_REFUSED_STREAM: u32 = 3;
#[cfg(test)]
pub(crate) const RST_CANCEL: u32 = 5;

/// Largest decompressed header block accepted.
const MAX_HEADER_BLOCK: usize = 1 << 20;

/// Header name/value pairs; names are lower-case on the wire, several values of one name are
/// joined with NUL.
pub(crate) type Headers = Vec<(String, String)>;

/// One frame, unpacked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Frame {
    SynStream { stream_id: u32, associated_to: u32, priority: u8, flags: u8, headers: Headers },
    SynReply { stream_id: u32, flags: u8, headers: Headers },
    RstStream { stream_id: u32, status: u32 },
    Settings { flags: u8, entries: Vec<Setting> },
    Ping { id: u32 },
    GoAway { last_good_stream_id: u32, status: u32 },
    Headers { stream_id: u32, flags: u8, headers: Headers },
    WindowUpdate { stream_id: u32, delta: u32 },
    Data { stream_id: u32, flags: u8, data: Bytes },
}

/// One SETTINGS entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Setting {
    pub flags: u8,
    pub id: u32,
    pub value: u32,
}

#[derive(Debug, thiserror::Error)]
pub(crate) enum SpdyError {
    #[error("decoding a SPDY frame: unsupported version {0}")]
    Version(u16),
    #[error("decoding a SPDY {frame} frame: {reason}")]
    Malformed { frame: &'static str, reason: &'static str },
    #[error("compressing a SPDY header block: {0}")]
    Compress(String),
    #[error("decompressing a SPDY header block: {0}")]
    Decompress(String),
    #[error("encoding a SPDY frame: {0} does not fit in a frame")]
    TooLarge(&'static str),
    #[error("SPDY connection I/O")]
    Io(#[from] std::io::Error),
    #[error("SPDY stream {0}: no reply in time")]
    ReplyTimeout(u32),
    #[error("SPDY stream {stream_id} reset by the peer (status {status})")]
    Reset { stream_id: u32, status: u32 },
    #[error("the SPDY connection closed")]
    Closed,
}

fn malformed(frame: &'static str, reason: &'static str) -> SpdyError {
    SpdyError::Malformed { frame, reason }
}

/// Compresses header blocks for one direction of a connection.
pub(crate) struct HeaderEncoder {
    z: Compress,
}

impl HeaderEncoder {
    pub(crate) fn new() -> Result<HeaderEncoder, SpdyError> {
        let mut z = Compress::new(Compression::best(), true);
        z.set_dictionary(DICTIONARY).map_err(|e| SpdyError::Compress(e.to_string()))?;
        Ok(HeaderEncoder { z })
    }

    fn encode(&mut self, headers: &Headers) -> Result<Vec<u8>, SpdyError> {
        let mut raw = BytesMut::new();
        raw.put_u32(len_u32(headers.len(), "header count")?);
        for (name, value) in headers {
            let name = name.to_ascii_lowercase();
            raw.put_u32(len_u32(name.len(), "header name")?);
            raw.put_slice(name.as_bytes());
            raw.put_u32(len_u32(value.len(), "header value")?);
            raw.put_slice(value.as_bytes());
        }
        let mut out = Vec::with_capacity(raw.len() + 64);
        let mut input: &[u8] = &raw;
        loop {
            if out.capacity() - out.len() < 64 {
                out.reserve(256);
            }
            let before = self.z.total_in();
            self.z
                .compress_vec(input, &mut out, FlushCompress::Sync)
                .map_err(|e| SpdyError::Compress(e.to_string()))?;
            let used = (self.z.total_in() - before) as usize;
            input = &input[used..];
            // A sync flush is complete once all input is in and zlib left room unused.
            if input.is_empty() && out.len() < out.capacity() {
                return Ok(out);
            }
        }
    }
}

/// Decompresses header blocks for one direction of a connection.
pub(crate) struct HeaderDecoder {
    z: Decompress,
}

impl HeaderDecoder {
    pub(crate) fn new() -> HeaderDecoder {
        HeaderDecoder { z: Decompress::new(true) }
    }

    fn decode(&mut self, frame: &'static str, block: &[u8]) -> Result<Headers, SpdyError> {
        let mut out: Vec<u8> = Vec::with_capacity(block.len() * 4 + 256);
        let mut input = block;
        loop {
            if out.capacity() - out.len() < 256 {
                if out.len() >= MAX_HEADER_BLOCK {
                    return Err(SpdyError::Decompress("header block too large".into()));
                }
                out.reserve(out.len().max(1024));
            }
            let (before_in, before_out) = (self.z.total_in(), out.len());
            let result = self.z.decompress_vec(input, &mut out, FlushDecompress::Sync);
            let used = (self.z.total_in() - before_in) as usize;
            input = &input[used..];
            match result {
                Ok(_) => {}
                Err(e) if e.needs_dictionary().is_some() => {
                    self.z.set_dictionary(DICTIONARY).map_err(|e| SpdyError::Decompress(e.to_string()))?;
                    continue;
                }
                Err(e) => return Err(SpdyError::Decompress(e.to_string())),
            }
            let stalled = used == 0 && out.len() == before_out;
            if (input.is_empty() && out.len() < out.capacity()) || stalled {
                break;
            }
        }
        parse_header_block(frame, &out)
    }
}

fn len_u32(n: usize, what: &'static str) -> Result<u32, SpdyError> {
    u32::try_from(n).map_err(|_| SpdyError::TooLarge(what))
}

fn parse_header_block(frame: &'static str, mut b: &[u8]) -> Result<Headers, SpdyError> {
    let short = || malformed(frame, "truncated header block");
    if b.remaining() < 4 {
        return Err(short());
    }
    let count = b.get_u32();
    let mut headers = Vec::with_capacity(count.min(64) as usize);
    for _ in 0..count {
        let mut field = || -> Result<String, SpdyError> {
            if b.remaining() < 4 {
                return Err(short());
            }
            let len = b.get_u32() as usize;
            if b.remaining() < len {
                return Err(short());
            }
            let s = String::from_utf8_lossy(&b[..len]).into_owned();
            b.advance(len);
            Ok(s)
        };
        let name = field()?.to_ascii_lowercase();
        let value = field()?;
        headers.push((name, value));
    }
    Ok(headers)
}

/// The first value of header `name` (names compare case-insensitively).
#[cfg(test)]
pub(crate) fn header<'a>(headers: &'a Headers, name: &str) -> Option<&'a str> {
    headers.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| v.split('\0').next().unwrap_or(""))
}

fn put_control(out: &mut BytesMut, kind: u16, flags: u8, len: usize) -> Result<(), SpdyError> {
    if len > 0x00ff_ffff {
        return Err(SpdyError::TooLarge("control frame"));
    }
    out.put_u16(0x8000 | VERSION);
    out.put_u16(kind);
    out.put_u32((u32::from(flags) << 24) | len as u32);
    Ok(())
}

/// Appends `frame`, encoded, to `out`.
pub(crate) fn encode(enc: &mut HeaderEncoder, frame: &Frame, out: &mut BytesMut) -> Result<(), SpdyError> {
    match frame {
        Frame::SynStream { stream_id, associated_to, priority, flags, headers } => {
            let block = enc.encode(headers)?;
            put_control(out, TYPE_SYN_STREAM, *flags, 10 + block.len())?;
            out.put_u32(stream_id & 0x7fff_ffff);
            out.put_u32(associated_to & 0x7fff_ffff);
            out.put_u8((priority & 0x07) << 5);
            out.put_u8(0);
            out.put_slice(&block);
        }
        Frame::SynReply { stream_id, flags, headers } | Frame::Headers { stream_id, flags, headers } => {
            let kind = if matches!(frame, Frame::SynReply { .. }) { TYPE_SYN_REPLY } else { TYPE_HEADERS };
            let block = enc.encode(headers)?;
            put_control(out, kind, *flags, 4 + block.len())?;
            out.put_u32(stream_id & 0x7fff_ffff);
            out.put_slice(&block);
        }
        Frame::RstStream { stream_id, status } => {
            put_control(out, TYPE_RST_STREAM, 0, 8)?;
            out.put_u32(stream_id & 0x7fff_ffff);
            out.put_u32(*status);
        }
        Frame::Settings { flags, entries } => {
            put_control(out, TYPE_SETTINGS, *flags, 4 + 8 * entries.len())?;
            out.put_u32(len_u32(entries.len(), "settings")?);
            for s in entries {
                out.put_u32((u32::from(s.flags) << 24) | (s.id & 0x00ff_ffff));
                out.put_u32(s.value);
            }
        }
        Frame::Ping { id } => {
            put_control(out, TYPE_PING, 0, 4)?;
            out.put_u32(*id);
        }
        Frame::GoAway { last_good_stream_id, status } => {
            put_control(out, TYPE_GOAWAY, 0, 8)?;
            out.put_u32(last_good_stream_id & 0x7fff_ffff);
            out.put_u32(*status);
        }
        Frame::WindowUpdate { stream_id, delta } => {
            put_control(out, TYPE_WINDOW_UPDATE, 0, 8)?;
            out.put_u32(stream_id & 0x7fff_ffff);
            out.put_u32(delta & 0x7fff_ffff);
        }
        Frame::Data { stream_id, flags, data } => {
            if data.len() > 0x00ff_ffff {
                return Err(SpdyError::TooLarge("data"));
            }
            out.put_u32(stream_id & 0x7fff_ffff);
            out.put_u32((u32::from(*flags) << 24) | data.len() as u32);
            out.put_slice(data);
        }
    }
    Ok(())
}

/// Takes one complete frame off the front of `buf`; `Ok(None)` when more bytes are needed.
/// Control frames of unknown types are skipped.
pub(crate) fn decode(dec: &mut HeaderDecoder, buf: &mut BytesMut) -> Result<Option<Frame>, SpdyError> {
    loop {
        if buf.len() < 8 {
            return Ok(None);
        }
        let first = u32::from_be_bytes([buf[0], buf[1], buf[2], buf[3]]);
        let flags = buf[4];
        let len = u32::from_be_bytes([0, buf[5], buf[6], buf[7]]) as usize;
        if buf.len() < 8 + len {
            buf.reserve(8 + len - buf.len());
            return Ok(None);
        }
        buf.advance(8);
        let mut body = buf.split_to(len);
        if first & 0x8000_0000 == 0 {
            let stream_id = first & 0x7fff_ffff;
            if stream_id == 0 {
                return Err(malformed("DATA", "stream id 0"));
            }
            return Ok(Some(Frame::Data { stream_id, flags, data: body.freeze() }));
        }
        let version = ((first >> 16) & 0x7fff) as u16;
        if version != VERSION {
            return Err(SpdyError::Version(version));
        }
        let kind = (first & 0xffff) as u16;
        let need = |name: &'static str, n: usize| {
            if len < n {
                Err(malformed(name, "too short"))
            } else {
                Ok(())
            }
        };
        let frame = match kind {
            TYPE_SYN_STREAM => {
                need("SYN_STREAM", 10)?;
                let stream_id = body.get_u32() & 0x7fff_ffff;
                let associated_to = body.get_u32() & 0x7fff_ffff;
                let priority = body.get_u8() >> 5;
                let _slot = body.get_u8();
                let headers = dec.decode("SYN_STREAM", &body)?;
                Frame::SynStream { stream_id, associated_to, priority, flags, headers }
            }
            TYPE_SYN_REPLY | TYPE_HEADERS => {
                let name = if kind == TYPE_SYN_REPLY { "SYN_REPLY" } else { "HEADERS" };
                need(name, 4)?;
                let stream_id = body.get_u32() & 0x7fff_ffff;
                let headers = dec.decode(name, &body)?;
                if kind == TYPE_SYN_REPLY {
                    Frame::SynReply { stream_id, flags, headers }
                } else {
                    Frame::Headers { stream_id, flags, headers }
                }
            }
            TYPE_RST_STREAM => {
                need("RST_STREAM", 8)?;
                Frame::RstStream { stream_id: body.get_u32() & 0x7fff_ffff, status: body.get_u32() }
            }
            TYPE_SETTINGS => {
                need("SETTINGS", 4)?;
                let n = body.get_u32() as usize;
                if body.remaining() < n.saturating_mul(8) {
                    return Err(malformed("SETTINGS", "fewer entries than announced"));
                }
                let entries = (0..n)
                    .map(|_| {
                        let flag_id = body.get_u32();
                        Setting { flags: (flag_id >> 24) as u8, id: flag_id & 0x00ff_ffff, value: body.get_u32() }
                    })
                    .collect();
                Frame::Settings { flags, entries }
            }
            TYPE_PING => {
                need("PING", 4)?;
                Frame::Ping { id: body.get_u32() }
            }
            TYPE_GOAWAY => {
                need("GOAWAY", 8)?;
                Frame::GoAway { last_good_stream_id: body.get_u32() & 0x7fff_ffff, status: body.get_u32() }
            }
            TYPE_WINDOW_UPDATE => {
                need("WINDOW_UPDATE", 8)?;
                Frame::WindowUpdate { stream_id: body.get_u32() & 0x7fff_ffff, delta: body.get_u32() & 0x7fff_ffff }
            }
            other => {
                tracing::debug!(frame_type = other, "skipping an unknown SPDY control frame");
                continue;
            }
        };
        return Ok(Some(frame));
    }
}

#[cfg(test)]
mod tests;
