//! Integration tests of serving a drive image, one binary.
// The NBD client helpers of ssdtwin-nbd's own tests (one copy: the protocol crate owns them).
#[path = "../../../ssdtwin-nbd/tests/it/common.rs"]
mod common;
mod stack;
mod twin;
