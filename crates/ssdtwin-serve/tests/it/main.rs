//! Integration tests of serving a drive image, one binary.
mod common;
mod twin;
