//! A whole connection over an in-memory duplex: handshake, then transmission if reached.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| ssdtwin_nbd::fuzzing::handshake(data));
