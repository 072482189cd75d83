//! Option data decoders and the option-haggling state machine, checking every reply is well formed.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| ssdtwin_nbd::fuzzing::option(data));
