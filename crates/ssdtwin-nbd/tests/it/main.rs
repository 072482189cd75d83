//! Integration tests, one binary with a module per topic.
mod clients;
mod common;
mod corpus;
mod deferred;
mod handshake;
mod limits;
mod load;
mod shutdown;
mod tls;
mod transmission;
