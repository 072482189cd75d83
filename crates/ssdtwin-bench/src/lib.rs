//! Nothing but a home for the criterion benches in `benches/` (`cargo bench -p
//! ssdtwin-bench`): a separate crate so that the tests of ssdtwin-core do not build
//! criterion (see Cargo.toml).
