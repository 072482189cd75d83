//! Nothing but a home for the benches in `benches/` (`cargo bench -p ssdtwin-bench`): a
//! separate crate so that the tests of ssdtwin-core do not build them (see Cargo.toml).
