//! Integration tests, one binary with a module per topic.
mod clients;
mod common;
mod handshake;
mod shutdown;
mod transmission;
