//! Host stacks: layers a host puts in front of a drive. Today one kind, a write-shaping
//! tier on fast media (docs/host.md). The host layer is time-free and never names the
//! controller or the FTL: the engine times what it returns and drives the drive through
//! the controller like any host (crates/ssdtwin-core/tests/it/layers.rs).

pub mod media;
pub mod tier;

#[cfg(test)]
mod tests;
