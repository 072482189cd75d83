//! NBD server for ssdtwin drive images (see docs/architecture.md).
