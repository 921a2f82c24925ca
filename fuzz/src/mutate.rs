//! The mutations: AFL-style havoc on bytes, and structural edits of JSON documents.

use serde_json::{Map, Value};

/// Bytes that often sit at boundaries of the formats fuzzed here.
const INTERESTING_BYTES: &[u8] = b"\x00\x01\x7f\x80\xff\"\\{}[]:,-.0123456789eE\n\t /%#&*!|?'@=()";
/// Values at integer edges, as text (JSON and selectors read numbers as text).
const INTERESTING_NUMBERS: &[&str] = &[
    "0",
    "-1",
    "1",
    "-0",
    "255",
    "256",
    "65535",
    "2147483647",
    "-2147483648",
    "4294967296",
    "9223372036854775807",
    "-9223372036854775808",
    "18446744073709551615",
    "18446744073709551616",
    "1e308",
    "1e309",
    "-1e309",
    "1.5",
    "0.1",
    "1e-400",
    "NaN",
    "Infinity",
];
/// Strings that break naive text handling.
const INTERESTING_STRINGS: &[&str] = &[
    "",
    " ",
    "\u{0}",
    "\u{7f}",
    "é",
    "\u{feff}",
    "\u{10ffff}",
    "\u{202e}",
    "日本語",
    "%",
    "%zz",
    "%2F",
    "..",
    "../..",
    "/",
    "//",
    "a/b",
    "\\",
    "-",
    "a-",
    "-a",
    "*",
    "?",
    "#",
    "\n",
];

/// The mutation state: a seeded generator, the dictionary and the size limit.
pub struct Mutator {
    rng: fastrand::Rng,
    dictionary: Vec<Vec<u8>>,
    max_len: usize,
}

impl Mutator {
    pub fn new(seed: u64, dictionary: Vec<Vec<u8>>, max_len: usize) -> Mutator {
        Mutator { rng: fastrand::Rng::with_seed(seed), dictionary, max_len }
    }

    /// A number in `0..n` (`n` > 0).
    pub fn below(&mut self, n: usize) -> usize {
        self.rng.usize(..n.max(1))
    }

    /// A new input from `base` (and sometimes `other`).
    pub fn mutate(&mut self, base: &[u8], other: &[u8], json: bool) -> Vec<u8> {
        let mut out = if json && self.rng.bool() {
            match serde_json::from_slice::<Value>(base) {
                Ok(mut doc) => {
                    for _ in 0..1 + self.below(4) {
                        let donor = serde_json::from_slice::<Value>(other).ok();
                        self.mutate_json(&mut doc, donor.as_ref());
                    }
                    let pretty = self.below(4) == 0;
                    let text = if pretty { serde_json::to_vec_pretty(&doc) } else { serde_json::to_vec(&doc) };
                    text.unwrap_or_else(|_| base.to_vec())
                }
                Err(_) => base.to_vec(),
            }
        } else {
            base.to_vec()
        };
        // Structural edits alone half of the time: byte havoc mostly breaks the JSON.
        if !json || self.rng.bool() || out == base {
            let rounds = 1 << self.below(4);
            for _ in 0..rounds {
                self.havoc(&mut out, other);
            }
        }
        out.truncate(self.max_len);
        out
    }

    fn havoc(&mut self, data: &mut Vec<u8>, other: &[u8]) {
        let len = data.len();
        match self.below(16) {
            0 if len > 0 => {
                let i = self.below(len);
                data[i] ^= 1 << self.below(8);
            }
            1 if len > 0 => {
                let i = self.below(len);
                data[i] = INTERESTING_BYTES[self.below(INTERESTING_BYTES.len())];
            }
            2 if len > 0 => {
                let i = self.below(len);
                data[i] = self.rng.u8(..);
            }
            3 | 4 => {
                let word = self.word();
                let at = self.below(len + 1);
                data.splice(at..at, word);
            }
            5 if len > 0 => {
                // Overwrite with a dictionary word.
                let word = self.word();
                let at = self.below(len);
                let end = (at + word.len()).min(len);
                data.splice(at..end, word);
            }
            6 if len > 1 => {
                let (a, b) = self.range(len);
                data.drain(a..b);
            }
            7 if len > 1 => {
                let (a, b) = self.range(len);
                let chunk = data[a..b].to_vec();
                let at = self.below(len + 1);
                data.splice(at..at, chunk);
            }
            8 if len > 0 => {
                // A chunk repeated many times: deep nesting, long runs, many fields.
                let (a, b) = self.range(len);
                let b = b.min(a + 8).max(a + 1);
                let chunk = data[a..b].to_vec();
                let times = [2, 16, 128, 129, 1000, 10_000][self.below(6)];
                let repeated: Vec<u8> =
                    chunk.iter().copied().cycle().take((chunk.len() * times).min(self.max_len)).collect();
                data.splice(a..a, repeated);
            }
            9 if !other.is_empty() => {
                // Splice: the head of this input with the tail of another.
                let cut = self.below(len + 1);
                let from = self.below(other.len());
                data.truncate(cut);
                data.extend_from_slice(&other[from..]);
            }
            10 if len > 0 => {
                data.truncate(self.below(len));
            }
            11 => {
                let n = INTERESTING_NUMBERS[self.below(INTERESTING_NUMBERS.len())].as_bytes().to_vec();
                self.replace_digits(data, n);
            }
            12 => {
                let s = INTERESTING_STRINGS[self.below(INTERESTING_STRINGS.len())].as_bytes().to_vec();
                let at = self.below(len + 1);
                data.splice(at..at, s);
            }
            14 => {
                // Balanced nesting as text, far past any decoder's depth limit.
                let (open, close): (&[u8], &[u8]) =
                    [(&b"["[..], &b"]"[..]), (b"{\"a\":", b"}"), (b"- ", b""), (b"{a: ", b"}")][self.below(4)];
                let depth = [129, 1000, 10_000, 100_000][self.below(4)];
                let depth = depth.min(self.max_len.saturating_sub(len) / (open.len() + close.len()));
                let mut nested = open.repeat(depth);
                nested.append(data);
                nested.extend(close.repeat(depth));
                *data = nested;
            }
            13 if len > 1 => {
                // Swap two bytes (reorders delimiters).
                let (a, b) = (self.below(len), self.below(len));
                data.swap(a, b);
            }
            _ => {
                // Protobuf and length prefixes: a varint of an edge value.
                let v = [0u64, 1, 127, 128, 0x7fff_ffff, u64::MAX, 1 << 35][self.below(7)];
                let mut bytes = Vec::new();
                let mut x = v;
                while x >= 0x80 {
                    bytes.push((x as u8) | 0x80);
                    x >>= 7;
                }
                bytes.push(x as u8);
                let at = self.below(len + 1);
                data.splice(at..at, bytes);
            }
        }
    }

    fn word(&mut self) -> Vec<u8> {
        if !self.dictionary.is_empty() && self.below(4) != 0 {
            let i = self.below(self.dictionary.len());
            return self.dictionary[i].clone();
        }
        INTERESTING_STRINGS[self.below(INTERESTING_STRINGS.len())].as_bytes().to_vec()
    }

    fn range(&mut self, len: usize) -> (usize, usize) {
        let a = self.below(len);
        let max = (len - a).min(64);
        (a, a + 1 + self.below(max))
    }

    /// Replaces a run of digits (or, without one, a random position) with `n`.
    fn replace_digits(&mut self, data: &mut Vec<u8>, n: Vec<u8>) {
        let starts: Vec<usize> = (0..data.len())
            .filter(|&i| data[i].is_ascii_digit() && (i == 0 || !data[i - 1].is_ascii_digit()))
            .collect();
        if starts.is_empty() {
            let at = self.below(data.len() + 1);
            data.splice(at..at, n);
            return;
        }
        let start = starts[self.below(starts.len())];
        let end = (start..data.len()).find(|&i| !data[i].is_ascii_digit()).unwrap_or(data.len());
        data.splice(start..end, n);
    }

    /// One structural edit somewhere in `doc`.
    fn mutate_json(&mut self, doc: &mut Value, donor: Option<&Value>) {
        let count = count_nodes(doc);
        let target = self.below(count);
        let mut seen = 0;
        let donor_node = donor.and_then(|d| {
            let n = count_nodes(d);
            nth_node(d, self.below(n)).cloned()
        });
        let choice = self.below(12);
        let replacement = match choice {
            0 => Some(self.scalar()),
            1 => Some(Value::Object(Map::new())),
            2 => Some(Value::Array(Vec::new())),
            3 => donor_node,
            _ => None,
        };
        edit_nth(doc, target, &mut seen, &mut |node| match (&replacement, choice) {
            (Some(r), _) => *node = r.clone(),
            (None, 4) => {
                // Wrap once or many times, up to just past serde_json's limit of 128 levels:
                // a deeper `Value` would overflow the stack of the mutations on it (and its
                // drop). Deeper nesting comes from the byte-level `nest`, as text.
                let depth = [1, 2, 64, 127, 128, 129][self.below(6)];
                let mut v = node.take();
                for i in 0..depth {
                    v = if i % 2 == 0 {
                        Value::Array(vec![v])
                    } else {
                        Value::Object(Map::from_iter([("a".into(), v)]))
                    };
                }
                *node = v;
            }
            (None, 5) => match node {
                Value::Object(m) if !m.is_empty() => {
                    let i = self.below(m.len());
                    let key = m.keys().nth(i).cloned().unwrap_or_default();
                    m.remove(&key);
                }
                Value::Array(a) if !a.is_empty() => {
                    let i = self.below(a.len());
                    a.remove(i);
                }
                _ => *node = Value::Null,
            },
            (None, 6) => match node {
                Value::Array(a) if !a.is_empty() => {
                    let i = self.below(a.len());
                    let copy = a[i].clone();
                    let times = [1, 2, 100][self.below(3)];
                    for _ in 0..times {
                        a.push(copy.clone());
                    }
                }
                Value::Object(m) => {
                    let key = String::from_utf8_lossy(&self.word()).into_owned();
                    let value = self.scalar();
                    m.insert(key, value);
                }
                other => *other = Value::Array(vec![other.take()]),
            },
            (None, 7) => {
                // Retype: numbers to strings, strings to numbers, containers to scalars.
                *node = match node.take() {
                    Value::Number(n) => Value::String(n.to_string()),
                    Value::String(s) => s.parse::<serde_json::Number>().map(Value::Number).unwrap_or(Value::Bool(true)),
                    Value::Bool(b) => Value::String(b.to_string()),
                    Value::Null => Value::String("null".into()),
                    Value::Array(a) => a.into_iter().next().unwrap_or(Value::Null),
                    Value::Object(m) => Value::Array(m.into_iter().map(|(_, v)| v).collect()),
                }
            }
            (None, 8) => {
                if let Value::Object(m) = node {
                    // A key from the dictionary with a value of the object's own.
                    let key = String::from_utf8_lossy(&self.word()).into_owned();
                    let value = m.values().next().cloned().unwrap_or(Value::Null);
                    m.insert(key, value);
                } else {
                    *node = self.scalar();
                }
            }
            (None, 9) => {
                if let Value::String(s) = node {
                    let extra = String::from_utf8_lossy(&self.word()).into_owned();
                    let at = (0..=s.len()).filter(|i| s.is_char_boundary(*i)).nth(self.below(s.len() + 1)).unwrap_or(0);
                    s.insert_str(at, &extra);
                } else {
                    *node = self.scalar();
                }
            }
            (None, 10) => {
                if let Value::Object(m) = node {
                    // Rename a key.
                    if let Some(key) = m.keys().nth(self.below(m.len().max(1))).cloned() {
                        let v = m.remove(&key).unwrap_or(Value::Null);
                        let new_key = String::from_utf8_lossy(&self.word()).into_owned();
                        m.insert(new_key, v);
                    }
                } else {
                    *node = self.scalar();
                }
            }
            _ => {
                let big = "x".repeat([1, 63, 64, 253, 254, 1024, 70_000][self.below(7)]);
                *node = Value::String(big);
            }
        });
    }

    fn scalar(&mut self) -> Value {
        match self.below(6) {
            0 => Value::Null,
            1 => Value::Bool(self.rng.bool()),
            2 => INTERESTING_NUMBERS[self.below(INTERESTING_NUMBERS.len())]
                .parse::<serde_json::Number>()
                .map(Value::Number)
                .unwrap_or(Value::Null),
            3 => Value::String(INTERESTING_STRINGS[self.below(INTERESTING_STRINGS.len())].into()),
            4 => Value::String(String::from_utf8_lossy(&self.word()).into_owned()),
            _ => Value::from(self.rng.i64(..)),
        }
    }
}

fn count_nodes(v: &Value) -> usize {
    1 + match v {
        Value::Array(a) => a.iter().map(count_nodes).sum(),
        Value::Object(m) => m.values().map(count_nodes).sum(),
        _ => 0,
    }
}

fn nth_node(v: &Value, n: usize) -> Option<&Value> {
    fn walk<'a>(v: &'a Value, n: usize, seen: &mut usize) -> Option<&'a Value> {
        if *seen == n {
            return Some(v);
        }
        *seen += 1;
        match v {
            Value::Array(a) => a.iter().find_map(|c| walk(c, n, seen)),
            Value::Object(m) => m.values().find_map(|c| walk(c, n, seen)),
            _ => None,
        }
    }
    walk(v, n, &mut 0)
}

/// Applies `edit` to the `n`th node in document order; returns whether it was found.
fn edit_nth(v: &mut Value, n: usize, seen: &mut usize, edit: &mut dyn FnMut(&mut Value)) -> bool {
    if *seen == n {
        edit(v);
        return true;
    }
    *seen += 1;
    match v {
        Value::Array(a) => a.iter_mut().any(|c| edit_nth(c, n, seen, edit)),
        Value::Object(m) => m.values_mut().any(|c| edit_nth(c, n, seen, edit)),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mutations_are_determined_by_the_seed_and_stay_within_the_size_limit() {
        let run = |seed| {
            let mut m = Mutator::new(seed, vec![b"kind".to_vec()], 4096);
            let base = br#"{"kind":"ConfigMap","data":{"a":"1"},"n":[1,2,3]}"#;
            (0..500).map(|_| m.mutate(base, b"other", true)).collect::<Vec<_>>()
        };
        let a = run(7);
        assert_eq!(a, run(7));
        assert_ne!(a, run(8));
        assert!(a.iter().all(|i| i.len() <= 4096));
        // Both kinds of mutation happen: some outputs still parse, some no longer do.
        assert!(a.iter().any(|i| serde_json::from_slice::<Value>(i).is_ok()));
        assert!(a.iter().any(|i| serde_json::from_slice::<Value>(i).is_err()));
    }
}
