//! Decoders of server messages (simple and structured replies, option replies, greeting).
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| ssdtwin_nbd::fuzzing::reply(data));
