//! Transmission request header decoding and validation against negotiated session parameters.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| ssdtwin_nbd::fuzzing::request(data));
