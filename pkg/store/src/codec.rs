//! Binary layouts of the three column families.
//!
//! - `kv`:   key ▶ `create_rev u64 | mod_rev u64 | version u64 | value`
//! - `log`:  revision (u64 BE) ▶ `kind u8 | key_len u32 | key | cur header | value_len u32 | value | has_prev u8 | prev header | prev value`
//! - `meta`: `rev` / `compacted` ▶ u64 BE

use crate::store::KeyValue;
use crate::watch::{Event, EventKind};
use bytes::Bytes;

const HEADER: usize = 24;

pub(crate) fn encode_kv(create: u64, modr: u64, version: u64, value: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(HEADER + value.len());
    out.extend_from_slice(&create.to_be_bytes());
    out.extend_from_slice(&modr.to_be_bytes());
    out.extend_from_slice(&version.to_be_bytes());
    out.extend_from_slice(value);
    out
}

fn u64_at(b: &[u8], at: usize) -> Option<u64> {
    b.get(at..at + 8).and_then(|s| s.try_into().ok()).map(u64::from_be_bytes)
}

fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    b.get(at..at + 4).and_then(|s| s.try_into().ok()).map(u32::from_be_bytes)
}

pub(crate) fn decode_kv(key: &[u8], raw: &[u8]) -> Option<KeyValue> {
    Some(KeyValue {
        key: String::from_utf8(key.to_vec()).ok()?,
        create_revision: u64_at(raw, 0)?,
        mod_revision: u64_at(raw, 8)?,
        version: u64_at(raw, 16)?,
        value: Bytes::copy_from_slice(raw.get(HEADER..)?),
    })
}

pub(crate) fn encode_u64(v: u64) -> [u8; 8] {
    v.to_be_bytes()
}

pub(crate) fn decode_u64(b: &[u8]) -> Option<u64> {
    u64_at(b, 0)
}

fn put_kv_header(out: &mut Vec<u8>, kv: &KeyValue) {
    out.extend_from_slice(&kv.create_revision.to_be_bytes());
    out.extend_from_slice(&kv.mod_revision.to_be_bytes());
    out.extend_from_slice(&kv.version.to_be_bytes());
    out.extend_from_slice(&(kv.value.len() as u32).to_be_bytes());
    out.extend_from_slice(&kv.value);
}

pub(crate) fn encode_event(ev: &Event) -> Vec<u8> {
    let mut out = Vec::with_capacity(64 + ev.kv.value.len() + ev.prev.as_ref().map_or(0, |p| p.value.len()));
    out.push(match ev.kind {
        EventKind::Create => 0,
        EventKind::Update => 1,
        EventKind::Delete => 2,
    });
    out.extend_from_slice(&(ev.kv.key.len() as u32).to_be_bytes());
    out.extend_from_slice(ev.kv.key.as_bytes());
    put_kv_header(&mut out, &ev.kv);
    match &ev.prev {
        Some(p) => {
            out.push(1);
            put_kv_header(&mut out, p);
        }
        None => out.push(0),
    }
    out
}

fn read_kv(raw: &[u8], at: &mut usize, key: &str) -> Option<KeyValue> {
    let create_revision = u64_at(raw, *at)?;
    let mod_revision = u64_at(raw, *at + 8)?;
    let version = u64_at(raw, *at + 16)?;
    let len = u32_at(raw, *at + 24)? as usize;
    let start = *at + 28;
    let value = Bytes::copy_from_slice(raw.get(start..start + len)?);
    *at = start + len;
    Some(KeyValue { key: key.to_string(), create_revision, mod_revision, version, value })
}

pub(crate) fn decode_event(revision: u64, raw: &[u8]) -> Option<Event> {
    let kind = match *raw.first()? {
        0 => EventKind::Create,
        1 => EventKind::Update,
        2 => EventKind::Delete,
        _ => return None,
    };
    let klen = u32_at(raw, 1)? as usize;
    let key = std::str::from_utf8(raw.get(5..5 + klen)?).ok()?.to_string();
    let mut at = 5 + klen;
    let kv = read_kv(raw, &mut at, &key)?;
    let prev = match *raw.get(at)? {
        1 => {
            at += 1;
            Some(read_kv(raw, &mut at, &key)?)
        }
        _ => None,
    };
    Some(Event::new(revision, kind, kv, prev))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn event_round_trips_with_and_without_prev() {
        let kv = KeyValue {
            key: "/registry/pods/a/b".into(),
            create_revision: 3,
            mod_revision: 9,
            version: 2,
            value: Bytes::from_static(b"{}"),
        };
        let ev = Event::new(9, EventKind::Update, kv.clone(), Some(kv.clone()));
        let back = decode_event(9, &encode_event(&ev)).expect("decodes");
        assert_eq!(back, ev);
        let ev = Event::new(9, EventKind::Create, kv, None);
        assert_eq!(decode_event(9, &encode_event(&ev)).expect("decodes"), ev);
        assert!(decode_event(1, b"\x07").is_none());
    }
}
