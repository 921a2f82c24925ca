use super::*;

fn hex(s: &str) -> Vec<u8> {
    (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).expect("hex")).collect()
}

fn roundtrip(frames: &[Frame]) -> Vec<Frame> {
    let mut enc = HeaderEncoder::new().expect("encoder");
    let mut dec = HeaderDecoder::new();
    let mut wire = BytesMut::new();
    for f in frames {
        encode(&mut enc, f, &mut wire).expect("encode");
    }
    let mut out = Vec::new();
    while let Some(f) = decode(&mut dec, &mut wire).expect("decode") {
        out.push(f);
    }
    assert!(wire.is_empty(), "bytes left over");
    out
}

fn h(pairs: &[(&str, &str)]) -> Headers {
    pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

#[test]
fn dictionary_is_the_spdy3_one() {
    // Its Adler-32 is the dictionary id every SPDY/3 zlib stream announces.
    let (mut a, mut b) = (1u32, 0u32);
    for x in DICTIONARY {
        a = (a + u32::from(*x)) % 65521;
        b = (b + a) % 65521;
    }
    assert_eq!((b << 16) | a, 0xe3c6_a7c2);
    assert_eq!(DICTIONARY.len(), 1423);
}

#[test]
fn every_frame_type_round_trips_through_one_compression_context() {
    let frames = vec![
        Frame::SynStream {
            stream_id: 1,
            associated_to: 0,
            priority: 0,
            flags: 0,
            headers: h(&[("streamtype", "error")]),
        },
        Frame::SynStream {
            stream_id: 3,
            associated_to: 0,
            priority: 7,
            flags: FLAG_FIN | FLAG_UNIDIRECTIONAL,
            headers: h(&[("streamtype", "data"), ("port", "8080"), ("requestid", "0")]),
        },
        Frame::SynReply { stream_id: 3, flags: 0, headers: Vec::new() },
        Frame::Headers { stream_id: 3, flags: FLAG_FIN, headers: h(&[("a", "1\u{0}2")]) },
        Frame::RstStream { stream_id: 5, status: RST_CANCEL },
        Frame::Settings { flags: 0, entries: vec![Setting { flags: 1, id: 7, value: 65536 }] },
        Frame::Ping { id: 2 },
        Frame::GoAway { last_good_stream_id: 3, status: 0 },
        Frame::WindowUpdate { stream_id: 1, delta: 4096 },
        Frame::Data { stream_id: 1, flags: FLAG_FIN, data: Bytes::from_static(b"hello") },
        Frame::Data { stream_id: 7, flags: 0, data: Bytes::new() },
    ];
    assert_eq!(roundtrip(&frames), frames);
}

#[test]
fn header_names_go_out_lower_case() {
    let f = Frame::SynReply { stream_id: 1, flags: 0, headers: h(&[("X-Stream-Protocol-Version", "v4")]) };
    let out = roundtrip(&[f]);
    assert_eq!(
        out,
        vec![Frame::SynReply { stream_id: 1, flags: 0, headers: h(&[("x-stream-protocol-version", "v4")]) }]
    );
}

#[test]
fn fixed_frames_match_hand_checked_bytes() {
    let mut enc = HeaderEncoder::new().expect("encoder");
    let cases: Vec<(Frame, &str)> = vec![
        (Frame::Data { stream_id: 1, flags: FLAG_FIN, data: Bytes::from_static(b"hi") }, "00000001010000026869"),
        (Frame::Ping { id: 1 }, "800300060000000400000001"),
        (Frame::RstStream { stream_id: 5, status: RST_CANCEL }, "80030003000000080000000500000005"),
        (Frame::GoAway { last_good_stream_id: 0, status: 0 }, "80030007000000080000000000000000"),
        (Frame::WindowUpdate { stream_id: 3, delta: 65536 }, "80030009000000080000000300010000"),
    ];
    for (frame, want) in cases {
        let mut out = BytesMut::new();
        encode(&mut enc, &frame, &mut out).expect("encode");
        assert_eq!(out.to_vec(), hex(want), "{frame:?}");
    }
}

#[test]
fn decodes_header_blocks_compressed_by_another_zlib() {
    // Two SYN_STREAM frames as C zlib (level 9, SPDY/3 dictionary, sync flush) writes them,
    // the second continuing the first's compression context: what spdystream sends.
    let mut wire = BytesMut::from(
        &hex(concat!(
            "80030001000000280000000100000000000078f9e3c6a7c202a62346703a2b294a4dcc851625aca9a08006000000ffff",
            "800300010000001900000003000000000000c22a054ccc29f9a52500000000ffff"
        ))[..],
    );
    let mut dec = HeaderDecoder::new();
    let first = decode(&mut dec, &mut wire).expect("decode").expect("frame");
    let second = decode(&mut dec, &mut wire).expect("decode").expect("frame");
    assert_eq!(
        first,
        Frame::SynStream {
            stream_id: 1,
            associated_to: 0,
            priority: 0,
            flags: 0,
            headers: h(&[("streamtype", "error")])
        }
    );
    assert_eq!(header(&h(&[("streamtype", "stdout")]), "streamType"), Some("stdout"));
    assert!(
        matches!(second, Frame::SynStream { stream_id: 3, ref headers, .. } if header(headers, "streamType") == Some("stdout"))
    );
}

#[test]
fn partial_input_waits_for_the_rest_and_unknown_control_frames_are_skipped() {
    let mut dec = HeaderDecoder::new();
    let full = hex("00000001010000026869");
    let mut wire = BytesMut::from(&full[..5]);
    assert_eq!(decode(&mut dec, &mut wire).expect("decode"), None);
    wire.extend_from_slice(&full[5..]);
    // An unknown control frame type (10, CREDENTIAL) with a 2-byte body, then a PING.
    let mut more = BytesMut::from(&hex("8003000a000000020000")[..]);
    more.extend_from_slice(&hex("800300060000000400000002"));
    let first = decode(&mut dec, &mut wire).expect("decode");
    assert_eq!(first, Some(Frame::Data { stream_id: 1, flags: FLAG_FIN, data: Bytes::from_static(b"hi") }));
    assert_eq!(decode(&mut dec, &mut more).expect("decode"), Some(Frame::Ping { id: 2 }));
}

#[test]
fn wrong_version_and_short_frames_are_errors() {
    let mut dec = HeaderDecoder::new();
    let mut v2 = BytesMut::from(&hex("800200060000000400000001")[..]);
    assert!(matches!(decode(&mut dec, &mut v2), Err(SpdyError::Version(2))));
    let mut short = BytesMut::from(&hex("80030006000000020000")[..]);
    assert!(matches!(decode(&mut dec, &mut short), Err(SpdyError::Malformed { frame: "PING", .. })));
}
