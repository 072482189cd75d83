//! Packed I/O records that travel with a job (docs/fio.md §2.10): a `read_iolog` trace in
//! the job's input, and the engine's `write_iolog` record in its output. They live in the
//! workload layer because [`super::JobSpec`] carries them; the engine (`engine::iolog`)
//! gives them their meaning.

use serde::de::{self, Deserializer, SeqAccess, Visitor};
use serde::{Deserialize, Serialize, Serializer};

/// Packed u64 records (see the module doc); serialised as bytes.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Packed(pub Vec<u8>);

impl Packed {
    pub(crate) fn push(&mut self, fields: &[u64]) {
        for f in fields {
            self.0.extend_from_slice(&f.to_le_bytes());
        }
    }

    pub(crate) fn field(&self, record: usize, width: usize, k: usize) -> u64 {
        let at = (record * width + k) * 8;
        u64::from_le_bytes(self.0[at..at + 8].try_into().expect("8 bytes"))
    }

    pub(crate) fn records(&self, width: usize) -> usize {
        self.0.len() / (width * 8)
    }
}

impl Serialize for Packed {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_bytes(&self.0)
    }
}

impl<'de> Deserialize<'de> for Packed {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Packed;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("bytes (packed little-endian u64 records)")
            }
            fn visit_bytes<E: de::Error>(self, v: &[u8]) -> Result<Packed, E> {
                Ok(Packed(v.to_vec()))
            }
            fn visit_byte_buf<E: de::Error>(self, v: Vec<u8>) -> Result<Packed, E> {
                Ok(Packed(v))
            }
            // JSON has no bytes: a list of byte values (tests).
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Packed, A::Error> {
                let mut out = Vec::new();
                while let Some(b) = seq.next_element::<u8>()? {
                    out.push(b);
                }
                Ok(Packed(out))
            }
        }
        d.deserialize_byte_buf(V)
    }
}

/// A trace to replay (`read_iolog`): records of `REPLAY_FIELDS` u64s, `[kind, offset,
/// len, delay_ns, extra_ns]`. fio (iolog.c `read_iolog_get`, `iolog_delay`) issues an entry
/// no earlier than `delay` after the previous issue; file actions (open, close) between two
/// I/Os wait their own delays in turn, which the parser folds into `extra` (waited in full
/// after the first). With `REPLAY_ABSOLUTE` the entry waits until `delay` after the
/// clone's start instead (version 2 `wait`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReplayTrace {
    pub records: Packed,
}
