//! NBD wire format: constants and pure encode/decode over byte slices.
//!
//! Nothing here does IO, so every function can be unit-tested and fuzzed on its own.
//! Field layouts follow NetworkBlockDevice/nbd `doc/proto.md`; all integers are
//! big-endian. Decoders for the server's own messages (option replies, simple and
//! structured replies) exist too: the tests' raw client and the fuzz targets use them.

use crate::error::ProtoError;

// ---------------------------------------------------------------- magics
/// "NBDMAGIC": first 8 bytes the server sends.
pub const NBDMAGIC: u64 = 0x4e42_444d_4147_4943;
/// "IHAVEOPT": second greeting word, and the magic of every option request.
pub const IHAVEOPT: u64 = 0x4948_4156_454F_5054;
/// Magic of every fixed-newstyle option reply.
pub const OPTION_REPLY_MAGIC: u64 = 0x0003_e889_0455_65a9;
pub const REQUEST_MAGIC: u32 = 0x2560_9513;
pub const SIMPLE_REPLY_MAGIC: u32 = 0x6744_6698;
pub const STRUCTURED_REPLY_MAGIC: u32 = 0x668e_33ef;
/// Magic of the experimental extended-header requests; never negotiated here.
pub const EXTENDED_REQUEST_MAGIC: u32 = 0x21e4_1c71;

// ---------------------------------------------------------------- handshake flags
pub const FLAG_FIXED_NEWSTYLE: u16 = 1 << 0;
pub const FLAG_NO_ZEROES: u16 = 1 << 1;
/// What this server advertises.
pub const SERVER_HANDSHAKE_FLAGS: u16 = FLAG_FIXED_NEWSTYLE | FLAG_NO_ZEROES;

pub const FLAG_C_FIXED_NEWSTYLE: u32 = 1 << 0;
pub const FLAG_C_NO_ZEROES: u32 = 1 << 1;

// ---------------------------------------------------------------- options
pub const OPT_EXPORT_NAME: u32 = 1;
pub const OPT_ABORT: u32 = 2;
pub const OPT_LIST: u32 = 3;
pub const OPT_PEEK_EXPORT: u32 = 4;
pub const OPT_STARTTLS: u32 = 5;
pub const OPT_INFO: u32 = 6;
pub const OPT_GO: u32 = 7;
pub const OPT_STRUCTURED_REPLY: u32 = 8;
pub const OPT_LIST_META_CONTEXT: u32 = 9;
pub const OPT_SET_META_CONTEXT: u32 = 10;
pub const OPT_EXTENDED_HEADERS: u32 = 11;

pub const REP_ACK: u32 = 1;
pub const REP_SERVER: u32 = 2;
pub const REP_INFO: u32 = 3;
pub const REP_META_CONTEXT: u32 = 4;
const REP_ERR: u32 = 1 << 31;
pub const REP_ERR_UNSUP: u32 = REP_ERR | 1;
pub const REP_ERR_POLICY: u32 = REP_ERR | 2;
pub const REP_ERR_INVALID: u32 = REP_ERR | 3;
pub const REP_ERR_PLATFORM: u32 = REP_ERR | 4;
pub const REP_ERR_TLS_REQD: u32 = REP_ERR | 5;
pub const REP_ERR_UNKNOWN: u32 = REP_ERR | 6;
pub const REP_ERR_SHUTDOWN: u32 = REP_ERR | 7;
pub const REP_ERR_BLOCK_SIZE_REQD: u32 = REP_ERR | 8;
pub const REP_ERR_TOO_BIG: u32 = REP_ERR | 9;

/// True for option reply types that are errors (bit 31 set).
pub fn is_rep_error(reply_type: u32) -> bool {
    reply_type & REP_ERR != 0
}

pub const INFO_EXPORT: u16 = 0;
pub const INFO_NAME: u16 = 1;
pub const INFO_DESCRIPTION: u16 = 2;
pub const INFO_BLOCK_SIZE: u16 = 3;

// ---------------------------------------------------------------- transmission flags
pub const TFLAG_HAS_FLAGS: u16 = 1 << 0;
pub const TFLAG_READ_ONLY: u16 = 1 << 1;
pub const TFLAG_SEND_FLUSH: u16 = 1 << 2;
pub const TFLAG_SEND_FUA: u16 = 1 << 3;
pub const TFLAG_ROTATIONAL: u16 = 1 << 4;
pub const TFLAG_SEND_TRIM: u16 = 1 << 5;
pub const TFLAG_SEND_WRITE_ZEROES: u16 = 1 << 6;
pub const TFLAG_SEND_DF: u16 = 1 << 7;
pub const TFLAG_CAN_MULTI_CONN: u16 = 1 << 8;
pub const TFLAG_SEND_RESIZE: u16 = 1 << 9;
pub const TFLAG_SEND_CACHE: u16 = 1 << 10;
pub const TFLAG_SEND_FAST_ZERO: u16 = 1 << 11;

// ---------------------------------------------------------------- commands
pub const CMD_READ: u16 = 0;
pub const CMD_WRITE: u16 = 1;
pub const CMD_DISC: u16 = 2;
pub const CMD_FLUSH: u16 = 3;
pub const CMD_TRIM: u16 = 4;
pub const CMD_CACHE: u16 = 5;
pub const CMD_WRITE_ZEROES: u16 = 6;
pub const CMD_BLOCK_STATUS: u16 = 7;
pub const CMD_RESIZE: u16 = 8;

pub const CMD_FLAG_FUA: u16 = 1 << 0;
pub const CMD_FLAG_NO_HOLE: u16 = 1 << 1;
pub const CMD_FLAG_DF: u16 = 1 << 2;
pub const CMD_FLAG_REQ_ONE: u16 = 1 << 3;
pub const CMD_FLAG_FAST_ZERO: u16 = 1 << 4;
pub const CMD_FLAG_PAYLOAD_LEN: u16 = 1 << 5;

// ---------------------------------------------------------------- structured replies
pub const REPLY_FLAG_DONE: u16 = 1 << 0;
pub const REPLY_TYPE_NONE: u16 = 0;
pub const REPLY_TYPE_OFFSET_DATA: u16 = 1;
pub const REPLY_TYPE_OFFSET_HOLE: u16 = 2;
pub const REPLY_TYPE_BLOCK_STATUS: u16 = 5;
pub const REPLY_TYPE_ERROR: u16 = (1 << 15) | 1;
pub const REPLY_TYPE_ERROR_OFFSET: u16 = (1 << 15) | 2;

/// `base:allocation` extent flags.
pub const STATE_HOLE: u32 = 1 << 0;
pub const STATE_ZERO: u32 = 1 << 1;

pub const META_BASE_ALLOCATION: &str = "base:allocation";

/// Longest string the spec allows (export names, queries, messages).
pub const MAX_STRING_LEN: usize = 4096;

// ---------------------------------------------------------------- sizes
pub const GREETING_LEN: usize = 18;
pub const OPTION_HEADER_LEN: usize = 16;
pub const OPTION_REPLY_HEADER_LEN: usize = 20;
pub const REQUEST_LEN: usize = 28;
pub const SIMPLE_REPLY_LEN: usize = 16;
pub const STRUCTURED_HEADER_LEN: usize = 20;
/// Export-name reply: u64 size + u16 flags (+ 124 zero bytes unless NO_ZEROES).
pub const EXPORT_NAME_REPLY_LEN: usize = 10;
pub const EXPORT_NAME_ZEROES: usize = 124;

// ---------------------------------------------------------------- byte helpers
#[inline]
fn be16(b: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([b[at], b[at + 1]])
}
#[inline]
fn be32(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}
#[inline]
fn be64(b: &[u8], at: usize) -> u64 {
    let mut x = [0u8; 8];
    x.copy_from_slice(&b[at..at + 8]);
    u64::from_be_bytes(x)
}

/// Cursor over a byte slice that fails instead of panicking when data runs out.
struct Take<'a> {
    b: &'a [u8],
}
impl<'a> Take<'a> {
    fn u16(&mut self) -> Result<u16, ProtoError> {
        Ok(be16(self.bytes(2)?, 0))
    }
    fn u32(&mut self) -> Result<u32, ProtoError> {
        Ok(be32(self.bytes(4)?, 0))
    }
    fn u64(&mut self) -> Result<u64, ProtoError> {
        Ok(be64(self.bytes(8)?, 0))
    }
    fn bytes(&mut self, n: usize) -> Result<&'a [u8], ProtoError> {
        if self.b.len() < n {
            return Err(ProtoError::Truncated);
        }
        let (h, t) = self.b.split_at(n);
        self.b = t;
        Ok(h)
    }
    /// A u32-length-prefixed string, bounded by the spec's 4096-byte limit.
    fn string32(&mut self) -> Result<&'a [u8], ProtoError> {
        let n = self.u32()? as usize;
        if n > MAX_STRING_LEN {
            return Err(ProtoError::StringTooLong);
        }
        self.bytes(n)
    }
    fn rest(&mut self) -> &'a [u8] {
        std::mem::take(&mut self.b)
    }
}

// ---------------------------------------------------------------- greeting
/// The server's first message: NBDMAGIC, IHAVEOPT, handshake flags.
pub fn encode_greeting(flags: u16) -> [u8; GREETING_LEN] {
    let mut b = [0u8; GREETING_LEN];
    b[0..8].copy_from_slice(&NBDMAGIC.to_be_bytes());
    b[8..16].copy_from_slice(&IHAVEOPT.to_be_bytes());
    b[16..18].copy_from_slice(&flags.to_be_bytes());
    b
}

/// Decode the greeting (client side); returns the handshake flags.
pub fn decode_greeting(b: &[u8]) -> Result<u16, ProtoError> {
    if b.len() < GREETING_LEN {
        return Err(ProtoError::Truncated);
    }
    if be64(b, 0) != NBDMAGIC || be64(b, 8) != IHAVEOPT {
        return Err(ProtoError::BadMagic);
    }
    Ok(be16(b, 16))
}

// ---------------------------------------------------------------- option requests
/// Header of a client option request (`IHAVEOPT`, option, data length).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OptionHeader {
    pub option: u32,
    pub len: u32,
}

impl OptionHeader {
    pub fn decode(b: &[u8]) -> Result<Self, ProtoError> {
        if b.len() < OPTION_HEADER_LEN {
            return Err(ProtoError::Truncated);
        }
        if be64(b, 0) != IHAVEOPT {
            return Err(ProtoError::BadMagic);
        }
        Ok(OptionHeader { option: be32(b, 8), len: be32(b, 12) })
    }
    pub fn encode(&self) -> [u8; OPTION_HEADER_LEN] {
        let mut b = [0u8; OPTION_HEADER_LEN];
        b[0..8].copy_from_slice(&IHAVEOPT.to_be_bytes());
        b[8..12].copy_from_slice(&self.option.to_be_bytes());
        b[12..16].copy_from_slice(&self.len.to_be_bytes());
        b
    }
}

/// Data of `NBD_OPT_INFO` / `NBD_OPT_GO`: export name and the information requested.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InfoRequest<'a> {
    pub name: &'a [u8],
    pub infos: Vec<u16>,
}

impl<'a> InfoRequest<'a> {
    /// Strict: the declared lengths must account for the data exactly.
    pub fn decode(data: &'a [u8]) -> Result<Self, ProtoError> {
        let mut t = Take { b: data };
        let name = t.string32()?;
        let n = t.u16()? as usize;
        let list = t.bytes(n * 2)?;
        if !t.rest().is_empty() {
            return Err(ProtoError::TrailingData);
        }
        let infos = list.chunks_exact(2).map(|c| be16(c, 0)).collect();
        Ok(InfoRequest { name, infos })
    }
    pub fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&(self.name.len() as u32).to_be_bytes());
        out.extend_from_slice(self.name);
        out.extend_from_slice(&(self.infos.len() as u16).to_be_bytes());
        for i in &self.infos {
            out.extend_from_slice(&i.to_be_bytes());
        }
    }
}

/// Data of `NBD_OPT_LIST_META_CONTEXT` / `NBD_OPT_SET_META_CONTEXT`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MetaContextRequest<'a> {
    pub name: &'a [u8],
    pub queries: Vec<&'a [u8]>,
}

impl<'a> MetaContextRequest<'a> {
    pub fn decode(data: &'a [u8]) -> Result<Self, ProtoError> {
        let mut t = Take { b: data };
        let name = t.string32()?;
        let n = t.u32()? as usize;
        // Each query takes at least 4 bytes, so a count beyond that is a lie; checking
        // first keeps a hostile count from sizing the Vec.
        if n > t.b.len() / 4 {
            return Err(ProtoError::Truncated);
        }
        let mut queries = Vec::with_capacity(n);
        for _ in 0..n {
            queries.push(t.string32()?);
        }
        if !t.rest().is_empty() {
            return Err(ProtoError::TrailingData);
        }
        Ok(MetaContextRequest { name, queries })
    }
    pub fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&(self.name.len() as u32).to_be_bytes());
        out.extend_from_slice(self.name);
        out.extend_from_slice(&(self.queries.len() as u32).to_be_bytes());
        for q in &self.queries {
            out.extend_from_slice(&(q.len() as u32).to_be_bytes());
            out.extend_from_slice(q);
        }
    }
}

// ---------------------------------------------------------------- option replies
/// Header of a server option reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OptionReplyHeader {
    pub option: u32,
    pub reply_type: u32,
    pub len: u32,
}

impl OptionReplyHeader {
    pub fn decode(b: &[u8]) -> Result<Self, ProtoError> {
        if b.len() < OPTION_REPLY_HEADER_LEN {
            return Err(ProtoError::Truncated);
        }
        if be64(b, 0) != OPTION_REPLY_MAGIC {
            return Err(ProtoError::BadMagic);
        }
        Ok(OptionReplyHeader { option: be32(b, 8), reply_type: be32(b, 12), len: be32(b, 16) })
    }
}

/// Append one option reply (header + payload) to `out`.
pub fn encode_option_reply(out: &mut Vec<u8>, option: u32, reply_type: u32, payload: &[&[u8]]) {
    let len: usize = payload.iter().map(|p| p.len()).sum();
    out.extend_from_slice(&OPTION_REPLY_MAGIC.to_be_bytes());
    out.extend_from_slice(&option.to_be_bytes());
    out.extend_from_slice(&reply_type.to_be_bytes());
    out.extend_from_slice(&(len as u32).to_be_bytes());
    for p in payload {
        out.extend_from_slice(p);
    }
}

/// `NBD_REP_SERVER`: u32 name length, name, description (may be empty).
pub fn encode_rep_server(out: &mut Vec<u8>, option: u32, name: &str, description: &str) {
    let nl = (name.len() as u32).to_be_bytes();
    encode_option_reply(out, option, REP_SERVER, &[&nl, name.as_bytes(), description.as_bytes()]);
}

/// `NBD_REP_INFO` carrying `NBD_INFO_EXPORT` (u16 type, u64 size, u16 flags).
pub fn encode_info_export(out: &mut Vec<u8>, option: u32, size: u64, tflags: u16) {
    encode_option_reply(out, option, REP_INFO, &[&INFO_EXPORT.to_be_bytes(), &size.to_be_bytes(), &tflags.to_be_bytes()]);
}

/// `NBD_REP_INFO` carrying `NBD_INFO_NAME` or `NBD_INFO_DESCRIPTION`.
pub fn encode_info_string(out: &mut Vec<u8>, option: u32, info: u16, s: &str) {
    encode_option_reply(out, option, REP_INFO, &[&info.to_be_bytes(), s.as_bytes()]);
}

/// `NBD_REP_INFO` carrying `NBD_INFO_BLOCK_SIZE` (u16 type, u32 min, preferred, max).
pub fn encode_info_block_size(out: &mut Vec<u8>, option: u32, min: u32, pref: u32, max: u32) {
    encode_option_reply(
        out,
        option,
        REP_INFO,
        &[&INFO_BLOCK_SIZE.to_be_bytes(), &min.to_be_bytes(), &pref.to_be_bytes(), &max.to_be_bytes()],
    );
}

/// `NBD_REP_META_CONTEXT`: u32 context id, name.
pub fn encode_rep_meta_context(out: &mut Vec<u8>, option: u32, id: u32, name: &str) {
    encode_option_reply(out, option, REP_META_CONTEXT, &[&id.to_be_bytes(), name.as_bytes()]);
}

/// The reply to `NBD_OPT_EXPORT_NAME`: size, flags, and 124 zeroes unless NO_ZEROES.
pub fn encode_export_name_reply(out: &mut Vec<u8>, size: u64, tflags: u16, no_zeroes: bool) {
    out.extend_from_slice(&size.to_be_bytes());
    out.extend_from_slice(&tflags.to_be_bytes());
    if !no_zeroes {
        out.extend_from_slice(&[0u8; EXPORT_NAME_ZEROES]);
    }
}

/// Decoded `NBD_REP_INFO` payload (client side).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Info<'a> {
    Export { size: u64, tflags: u16 },
    Name(&'a [u8]),
    Description(&'a [u8]),
    BlockSize { min: u32, preferred: u32, max: u32 },
    Unknown(u16),
}

pub fn decode_info(payload: &[u8]) -> Result<Info<'_>, ProtoError> {
    let mut t = Take { b: payload };
    let ty = t.u16()?;
    let info = match ty {
        INFO_EXPORT => {
            let size = t.u64()?;
            let tflags = t.u16()?;
            if !t.rest().is_empty() {
                return Err(ProtoError::TrailingData);
            }
            Info::Export { size, tflags }
        }
        INFO_NAME => Info::Name(t.rest()),
        INFO_DESCRIPTION => Info::Description(t.rest()),
        INFO_BLOCK_SIZE => {
            let (min, preferred, max) = (t.u32()?, t.u32()?, t.u32()?);
            if !t.rest().is_empty() {
                return Err(ProtoError::TrailingData);
            }
            Info::BlockSize { min, preferred, max }
        }
        other => Info::Unknown(other),
    };
    Ok(info)
}

// ---------------------------------------------------------------- requests
/// A transmission-phase request header (the WRITE payload follows it on the wire).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Request {
    pub flags: u16,
    pub typ: u16,
    pub cookie: u64,
    pub offset: u64,
    pub len: u32,
}

impl Request {
    pub fn decode(b: &[u8]) -> Result<Self, ProtoError> {
        if b.len() < REQUEST_LEN {
            return Err(ProtoError::Truncated);
        }
        if be32(b, 0) != REQUEST_MAGIC {
            return Err(ProtoError::BadMagic);
        }
        Ok(Request { flags: be16(b, 4), typ: be16(b, 6), cookie: be64(b, 8), offset: be64(b, 16), len: be32(b, 24) })
    }
    pub fn encode(&self) -> [u8; REQUEST_LEN] {
        let mut b = [0u8; REQUEST_LEN];
        b[0..4].copy_from_slice(&REQUEST_MAGIC.to_be_bytes());
        b[4..6].copy_from_slice(&self.flags.to_be_bytes());
        b[6..8].copy_from_slice(&self.typ.to_be_bytes());
        b[8..16].copy_from_slice(&self.cookie.to_be_bytes());
        b[16..24].copy_from_slice(&self.offset.to_be_bytes());
        b[24..28].copy_from_slice(&self.len.to_be_bytes());
        b
    }
}

// ---------------------------------------------------------------- replies
/// Simple reply header; READ data follows it when `error == 0`.
pub fn encode_simple_reply(error: u32, cookie: u64) -> [u8; SIMPLE_REPLY_LEN] {
    let mut b = [0u8; SIMPLE_REPLY_LEN];
    b[0..4].copy_from_slice(&SIMPLE_REPLY_MAGIC.to_be_bytes());
    b[4..8].copy_from_slice(&error.to_be_bytes());
    b[8..16].copy_from_slice(&cookie.to_be_bytes());
    b
}

/// Header of a structured reply chunk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChunkHeader {
    pub flags: u16,
    pub typ: u16,
    pub cookie: u64,
    pub len: u32,
}

impl ChunkHeader {
    pub fn encode(&self) -> [u8; STRUCTURED_HEADER_LEN] {
        let mut b = [0u8; STRUCTURED_HEADER_LEN];
        self.encode_into(&mut b);
        b
    }
    pub fn encode_into(&self, b: &mut [u8]) {
        b[0..4].copy_from_slice(&STRUCTURED_REPLY_MAGIC.to_be_bytes());
        b[4..6].copy_from_slice(&self.flags.to_be_bytes());
        b[6..8].copy_from_slice(&self.typ.to_be_bytes());
        b[8..16].copy_from_slice(&self.cookie.to_be_bytes());
        b[16..20].copy_from_slice(&self.len.to_be_bytes());
    }
}

/// Any reply header a client can meet in the transmission phase.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReplyHeader {
    Simple { error: u32, cookie: u64 },
    Chunk(ChunkHeader),
}

impl ReplyHeader {
    /// Bytes of the header itself; a simple header is 16 bytes, a chunk header 20.
    pub fn wire_len(&self) -> usize {
        match self {
            ReplyHeader::Simple { .. } => SIMPLE_REPLY_LEN,
            ReplyHeader::Chunk(_) => STRUCTURED_HEADER_LEN,
        }
    }
    /// Decode from the start of `b` (needs 16 bytes for simple, 20 for chunks).
    pub fn decode(b: &[u8]) -> Result<Self, ProtoError> {
        if b.len() < 4 {
            return Err(ProtoError::Truncated);
        }
        match be32(b, 0) {
            SIMPLE_REPLY_MAGIC => {
                if b.len() < SIMPLE_REPLY_LEN {
                    return Err(ProtoError::Truncated);
                }
                Ok(ReplyHeader::Simple { error: be32(b, 4), cookie: be64(b, 8) })
            }
            STRUCTURED_REPLY_MAGIC => {
                if b.len() < STRUCTURED_HEADER_LEN {
                    return Err(ProtoError::Truncated);
                }
                Ok(ReplyHeader::Chunk(ChunkHeader { flags: be16(b, 4), typ: be16(b, 6), cookie: be64(b, 8), len: be32(b, 16) }))
            }
            _ => Err(ProtoError::BadMagic),
        }
    }
}

/// Header (20) + offset (8) of an `OFFSET_DATA` chunk carrying `data_len` bytes.
pub fn encode_offset_data_header(cookie: u64, offset: u64, data_len: u32, done: bool) -> [u8; 28] {
    let mut b = [0u8; 28];
    ChunkHeader { flags: if done { REPLY_FLAG_DONE } else { 0 }, typ: REPLY_TYPE_OFFSET_DATA, cookie, len: data_len + 8 }
        .encode_into(&mut b[..20]);
    b[20..28].copy_from_slice(&offset.to_be_bytes());
    b
}

/// Header (20) + error (4) + message length (2) of a final `ERROR` chunk; the message
/// bytes follow on the wire.
pub fn encode_error_chunk_header(cookie: u64, error: u32, msg_len: u16) -> [u8; 26] {
    let mut b = [0u8; 26];
    ChunkHeader { flags: REPLY_FLAG_DONE, typ: REPLY_TYPE_ERROR, cookie, len: 6 + msg_len as u32 }.encode_into(&mut b[..20]);
    b[20..24].copy_from_slice(&error.to_be_bytes());
    b[24..26].copy_from_slice(&msg_len.to_be_bytes());
    b
}

/// Header (20) + context id (4) of a final `BLOCK_STATUS` chunk with `n_extents`
/// descriptors following.
pub fn encode_block_status_header(cookie: u64, context_id: u32, n_extents: u32) -> [u8; 24] {
    let mut b = [0u8; 24];
    ChunkHeader { flags: REPLY_FLAG_DONE, typ: REPLY_TYPE_BLOCK_STATUS, cookie, len: 4 + 8 * n_extents }.encode_into(&mut b[..20]);
    b[20..24].copy_from_slice(&context_id.to_be_bytes());
    b
}

/// Append one block status descriptor.
pub fn encode_extent(out: &mut Vec<u8>, len: u32, flags: u32) {
    out.extend_from_slice(&len.to_be_bytes());
    out.extend_from_slice(&flags.to_be_bytes());
}

/// Decoded error-chunk payload: error, message, and the offset for `ERROR_OFFSET`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ErrorPayload<'a> {
    pub error: u32,
    pub message: &'a [u8],
    pub offset: Option<u64>,
}

/// Decode the payload of an error chunk (`typ` has bit 15 set).
pub fn decode_error_payload(typ: u16, payload: &[u8]) -> Result<ErrorPayload<'_>, ProtoError> {
    let mut t = Take { b: payload };
    let error = t.u32()?;
    let msg_len = t.u16()? as usize;
    let message = t.bytes(msg_len)?;
    let offset = if typ == REPLY_TYPE_ERROR_OFFSET { Some(t.u64()?) } else { None };
    if typ == REPLY_TYPE_ERROR && !t.rest().is_empty() {
        return Err(ProtoError::TrailingData);
    }
    Ok(ErrorPayload { error, message, offset })
}

/// Decode an `OFFSET_DATA` payload into (offset, data).
pub fn decode_offset_data(payload: &[u8]) -> Result<(u64, &[u8]), ProtoError> {
    let mut t = Take { b: payload };
    let off = t.u64()?;
    let data = t.rest();
    if data.is_empty() {
        return Err(ProtoError::Invalid("OFFSET_DATA chunk without data"));
    }
    Ok((off, data))
}

/// Decode an `OFFSET_HOLE` payload into (offset, size).
pub fn decode_offset_hole(payload: &[u8]) -> Result<(u64, u32), ProtoError> {
    if payload.len() != 12 {
        return Err(ProtoError::Invalid("OFFSET_HOLE payload must be 12 bytes"));
    }
    Ok((be64(payload, 0), be32(payload, 8)))
}

/// Decode a `BLOCK_STATUS` payload into (context id, [(length, flags)]).
pub fn decode_block_status(payload: &[u8]) -> Result<(u32, Vec<(u32, u32)>), ProtoError> {
    if payload.len() < 12 || (payload.len() - 4) % 8 != 0 {
        return Err(ProtoError::Invalid("BLOCK_STATUS payload must be 4 + 8n bytes, n >= 1"));
    }
    let ctx = be32(payload, 0);
    let ext = payload[4..].chunks_exact(8).map(|c| (be32(c, 0), be32(c, 4))).collect();
    Ok((ctx, ext))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn greeting_layout() {
        let g = encode_greeting(SERVER_HANDSHAKE_FLAGS);
        assert_eq!(&g[0..8], b"NBDMAGIC");
        assert_eq!(&g[8..16], b"IHAVEOPT");
        assert_eq!(&g[16..18], &[0, 3]);
        assert_eq!(decode_greeting(&g).unwrap(), 3);
        let mut bad = g;
        bad[0] ^= 1;
        assert_eq!(decode_greeting(&bad), Err(ProtoError::BadMagic));
    }

    #[test]
    fn option_header_round_trip_and_magic() {
        let h = OptionHeader { option: OPT_GO, len: 0x0102_0304 };
        let b = h.encode();
        assert_eq!(&b[0..8], b"IHAVEOPT");
        assert_eq!(OptionHeader::decode(&b).unwrap(), h);
        assert_eq!(OptionHeader::decode(&b[..15]), Err(ProtoError::Truncated));
        let mut bad = b;
        bad[7] = 0;
        assert_eq!(OptionHeader::decode(&bad), Err(ProtoError::BadMagic));
    }

    #[test]
    fn info_request_strict_lengths() {
        let r = InfoRequest { name: b"disk0", infos: vec![INFO_BLOCK_SIZE, INFO_NAME] };
        let mut b = Vec::new();
        r.encode(&mut b);
        // 4 (len) + 5 (name) + 2 (count) + 2*2
        assert_eq!(b.len(), 15);
        assert_eq!(InfoRequest::decode(&b).unwrap(), r);
        // One byte short of the declared info list.
        assert_eq!(InfoRequest::decode(&b[..14]), Err(ProtoError::Truncated));
        // Trailing junk is rejected: the spec says name length <= data length - 6 and
        // the count must describe the rest.
        let mut long = b.clone();
        long.push(0);
        assert_eq!(InfoRequest::decode(&long), Err(ProtoError::TrailingData));
        // Name length larger than the data.
        let mut lie = b.clone();
        lie[3] = 200;
        assert!(InfoRequest::decode(&lie).is_err());
        // Empty name and empty list is valid (default export, no infos).
        assert_eq!(InfoRequest::decode(&[0, 0, 0, 0, 0, 0]).unwrap(), InfoRequest { name: b"", infos: vec![] });
    }

    #[test]
    fn meta_context_request_round_trip() {
        let r = MetaContextRequest { name: b"", queries: vec![b"base:allocation", b"qemu:dirty"] };
        let mut b = Vec::new();
        r.encode(&mut b);
        assert_eq!(MetaContextRequest::decode(&b).unwrap(), r);
        assert!(MetaContextRequest::decode(&b[..b.len() - 1]).is_err());
        // A query count far beyond the data must not allocate or panic.
        let hostile = [0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff];
        assert_eq!(MetaContextRequest::decode(&hostile), Err(ProtoError::Truncated));
    }

    #[test]
    fn option_replies_decode() {
        let mut out = Vec::new();
        encode_info_export(&mut out, OPT_GO, 1 << 30, TFLAG_HAS_FLAGS | TFLAG_SEND_FLUSH);
        let h = OptionReplyHeader::decode(&out).unwrap();
        assert_eq!(h, OptionReplyHeader { option: OPT_GO, reply_type: REP_INFO, len: 12 });
        assert_eq!(decode_info(&out[20..]).unwrap(), Info::Export { size: 1 << 30, tflags: TFLAG_HAS_FLAGS | TFLAG_SEND_FLUSH });
        out.clear();
        encode_info_block_size(&mut out, OPT_INFO, 512, 65536, 32 << 20);
        let h = OptionReplyHeader::decode(&out).unwrap();
        assert_eq!(h.len, 14);
        assert_eq!(decode_info(&out[20..]).unwrap(), Info::BlockSize { min: 512, preferred: 65536, max: 32 << 20 });
        out.clear();
        encode_rep_server(&mut out, OPT_LIST, "ns1", "namespace one");
        let h = OptionReplyHeader::decode(&out).unwrap();
        assert_eq!(h.reply_type, REP_SERVER);
        assert_eq!(h.len as usize, 4 + 3 + 13);
        assert_eq!(&out[20..24], &[0, 0, 0, 3]);
        assert!(is_rep_error(REP_ERR_UNSUP) && !is_rep_error(REP_ACK));
        assert_eq!(REP_ERR_TOO_BIG, 0x8000_0009);
    }

    #[test]
    fn request_round_trip() {
        let r = Request { flags: CMD_FLAG_FUA, typ: CMD_WRITE, cookie: u64::MAX - 7, offset: 4096, len: 512 };
        let b = r.encode();
        assert_eq!(&b[0..4], &[0x25, 0x60, 0x95, 0x13]);
        assert_eq!(Request::decode(&b).unwrap(), r);
        let mut bad = b;
        bad[3] = 0x14;
        assert_eq!(Request::decode(&bad), Err(ProtoError::BadMagic));
        assert_eq!(Request::decode(&b[..27]), Err(ProtoError::Truncated));
    }

    #[test]
    fn reply_headers() {
        let s = encode_simple_reply(22, 0xdead_beef);
        assert_eq!(ReplyHeader::decode(&s).unwrap(), ReplyHeader::Simple { error: 22, cookie: 0xdead_beef });
        let d = encode_offset_data_header(9, 4096, 512, true);
        match ReplyHeader::decode(&d).unwrap() {
            ReplyHeader::Chunk(c) => {
                assert_eq!(c, ChunkHeader { flags: REPLY_FLAG_DONE, typ: REPLY_TYPE_OFFSET_DATA, cookie: 9, len: 520 })
            }
            other => panic!("{other:?}"),
        }
        let mut payload = d[20..].to_vec();
        payload.extend_from_slice(&[7u8; 512]);
        let (off, data) = decode_offset_data(&payload).unwrap();
        assert_eq!((off, data.len()), (4096, 512));

        let e = encode_error_chunk_header(3, 5, 4);
        let mut p = e[20..].to_vec();
        p.extend_from_slice(b"oops");
        let ep = decode_error_payload(REPLY_TYPE_ERROR, &p).unwrap();
        assert_eq!(ep, ErrorPayload { error: 5, message: b"oops", offset: None });
        // Message length beyond the payload.
        assert!(decode_error_payload(REPLY_TYPE_ERROR, &p[..8]).is_err());

        let bs = encode_block_status_header(1, 7, 2);
        let mut p = bs[20..].to_vec();
        encode_extent(&mut p, 4096, STATE_HOLE | STATE_ZERO);
        encode_extent(&mut p, 8192, 0);
        assert_eq!(decode_block_status(&p).unwrap(), (7, vec![(4096, 3), (8192, 0)]));
        assert!(decode_block_status(&p[..4]).is_err());
        assert_eq!(ReplyHeader::decode(&[0, 0, 0, 0]), Err(ProtoError::BadMagic));
    }
}
