//! One namespace as an NBD export ([`NsExport`]): reads and writes of its data file, TRIM
//! and WRITE_ZEROES as holes and deallocations, block status from the file's holes, each
//! request's controller commands through the backend.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;

use ssdtwin_core::image::Image;
use ssdtwin_core::nvme::{self, NsId, WP_NONE};
use ssdtwin_nbd::proto::{STATE_HOLE, STATE_ZERO};
use ssdtwin_nbd::{Done, Errno, Export, ExportInfo, Extent, ZeroFlags};

use super::Inner;
use crate::command::Io;
use crate::data::DataFile;
use crate::error::ServeError;

/// One namespace as an export.
pub struct NsExport {
    pub(super) inner: Arc<Inner>,
    pub(crate) nsid: u32,
    pub(super) lba: u64,
    pub(crate) info: ExportInfo,
    pub(super) data: Arc<DataFile>,
    /// This export's commands and bytes (the session summary's `namespaces`).
    pub(super) counts: NsCounts,
}

/// One export's commands and bytes, counted as the backend's [`super::Counters`] are.
#[derive(Debug, Default)]
pub(crate) struct NsCounts {
    pub(crate) reads: AtomicU64,
    pub(crate) writes: AtomicU64,
    pub(crate) trims: AtomicU64,
    pub(crate) write_zeroes: AtomicU64,
    pub(crate) read_bytes: AtomicU64,
    pub(crate) write_bytes: AtomicU64,
    pub(crate) trim_bytes: AtomicU64,
    pub(crate) write_zeroes_bytes: AtomicU64,
}

fn bump(c: &AtomicU64, by: u64) {
    c.fetch_add(by, Relaxed);
}

/// The export description and block sizes of namespace `nsid`.
pub(super) fn export_info(img: &Image, nsid: u32) -> Result<ExportInfo, ServeError> {
    let ctrl = &img.ctrl;
    let ns = ctrl.namespace(NsId(nsid))?;
    let iu = ctrl.ftl_config().iu_bytes;
    let mut i = ExportInfo::new(format!("ns{nsid}"), ns.bytes());
    i.description = format!(
        "namespace {nsid} of {} at 1/{}: {} blocks of {} B, IU {} KiB{}",
        img.manifest.preset,
        img.manifest.scale,
        ns.nsze,
        ns.lba_bytes,
        iu / 1024,
        if ns.write_protect != WP_NONE { ", write protected" } else { "" }
    );
    i.read_only = ns.write_protect != WP_NONE;
    // 512 B (or the 4 KiB LBA): the smallest IO the namespace can address;
    // preferred = the indirection unit (smaller writes cost a read-modify-write).
    i.block_min = ns.lba_bytes;
    i.block_preferred = iu.max(ns.lba_bytes).max(512);
    i.block_max = 32 << 20;
    i.can_flush = true;
    i.can_fua = true;
    i.can_trim = true;
    i.can_write_zeroes = true;
    i.can_fast_zero = true;
    // One controller, one data store: a flush on any connection covers all.
    i.can_multi_conn = true;
    Ok(i)
}

impl NsExport {
    fn err(&self, e: Errno) -> Errno {
        self.inner.counters.errors.inc();
        e
    }

    /// A failed write to the data file: writes fail from now on.
    fn data_failed(&self, e: ssdtwin_core::fsio::FsError) -> Errno {
        self.err(self.inner.fail(format!("writing the data: {e}")))
    }

    /// The bytes of [`offset`, `offset + len`) that are whole IUs of the namespace.
    fn whole_ius(&self, offset: u64, len: u64) -> (u64, u64) {
        let iu = self.inner.iu_bytes as u64;
        let a = offset.div_ceil(iu) * iu;
        let b = (offset + len) / iu * iu;
        (a, b.max(a))
    }

    fn after_write(&self, fua: bool) -> Result<(), Errno> {
        self.data.written.fetch_add(1, std::sync::atomic::Ordering::Release);
        if fua {
            self.inner.durable(Some(&self.data)).map_err(|e| self.err(e))?;
        }
        Ok(())
    }
}

impl Export for NsExport {
    fn info(&self) -> ExportInfo {
        self.info.clone()
    }

    fn read(&self, offset: u64, buf: &mut [u8]) -> Result<Done, Errno> {
        let c = &self.inner.counters;
        c.reads.inc();
        bump(&self.counts.reads, 1);
        self.data.read(buf, offset).map_err(|e| self.err(e.into()))?;
        let done = self.inner.exec(self.nsid, &[(Io::Read, offset / self.lba, buf.len() as u64 / self.lba)]).map_err(|e| self.err(e))?;
        // Bytes served only: a read the drive answers with an error (a media error) moved none.
        c.read_bytes.inc_by(buf.len() as u64);
        bump(&self.counts.read_bytes, buf.len() as u64);
        Ok(done)
    }

    fn write(&self, offset: u64, data: &[u8], fua: bool) -> Result<Done, Errno> {
        let c = &self.inner.counters;
        c.writes.inc();
        bump(&self.counts.writes, 1);
        self.inner.admit_write(nvme::OPC_WRITE, self.nsid, offset / self.lba, data.len() as u64 / self.lba).map_err(|e| self.err(e))?;
        // Data first, then the controller and journal, then the write count a FLUSH reads
        // (see the module docs: a flush must only count writes that are in the file).
        self.data.write(data, offset).map_err(|e| self.data_failed(e))?;
        let done = self.inner.exec(self.nsid, &[(Io::Write, offset / self.lba, data.len() as u64 / self.lba)]).map_err(|e| self.err(e))?;
        c.write_bytes.inc_by(data.len() as u64);
        bump(&self.counts.write_bytes, data.len() as u64);
        self.after_write(fua)?;
        Ok(done)
    }

    fn flush(&self) -> Result<Done, Errno> {
        self.inner.counters.flushes.inc();
        self.inner.durable(None).map_err(|e| self.err(e))?;
        Ok(Done::NOW)
    }

    /// TRIM deallocates the whole IUs of the range in the FTL and punches the same bytes
    /// out of the data file, so data and mapping agree (partial IUs keep their data, as
    /// NVMe's advisory deallocate allows).
    fn trim(&self, offset: u64, len: u32, fua: bool) -> Result<Done, Errno> {
        self.inner.counters.trims.inc();
        bump(&self.counts.trims, 1);
        self.inner.admit_write(nvme::OPC_DSM, self.nsid, offset / self.lba, len as u64 / self.lba).map_err(|e| self.err(e))?;
        let (a, b) = self.whole_ius(offset, len as u64);
        self.data.punch(a, b - a).map_err(|e| self.data_failed(e))?;
        let done = self.inner.exec(self.nsid, &[(Io::Dealloc, offset / self.lba, len as u64 / self.lba)]).map_err(|e| self.err(e))?;
        bump(&self.counts.trim_bytes, len as u64);
        self.after_write(fua)?;
        Ok(done)
    }

    /// WRITE_ZEROES: punch the range (it reads as zeroes) and deallocate its whole IUs; the
    /// partial IUs at its edges are written (the drive has to store those zeroes). With
    /// NO_HOLE the range stays allocated and the FTL writes it all.
    fn write_zeroes(&self, offset: u64, len: u32, f: ZeroFlags) -> Result<Done, Errno> {
        self.inner.counters.write_zeroes.inc();
        bump(&self.counts.write_zeroes, 1);
        if f.no_hole && f.fast {
            return Err(Errno::NotSup); // writing zeroes is all the drive can do here
        }
        self.inner.admit_write(nvme::OPC_WRITE_ZEROES, self.nsid, offset / self.lba, len as u64 / self.lba).map_err(|e| self.err(e))?;
        let ops = if f.no_hole {
            self.data.zero_allocated(offset, len as u64).map_err(|e| self.data_failed(e))?;
            vec![(Io::Write, offset / self.lba, len as u64 / self.lba)]
        } else {
            self.data.punch(offset, len as u64).map_err(|e| self.data_failed(e))?;
            self.zero_ops(offset, len as u64)
        };
        let done = self.inner.exec(self.nsid, &ops).map_err(|e| self.err(e))?;
        bump(&self.counts.write_zeroes_bytes, len as u64);
        self.after_write(f.fua)?;
        Ok(done)
    }

    /// Allocation from the data file's holes (SEEK_DATA/SEEK_HOLE): never-written and
    /// trimmed ranges are holes that read as zeroes.
    fn block_status(&self, offset: u64, len: u32, out: &mut Vec<Extent>) -> Result<Done, Errno> {
        self.inner.counters.block_status.inc();
        let end = offset + len as u64;
        let mut pos = offset;
        while pos < end && out.len() < 4096 {
            let (data, hole) =
                ssdtwin_core::fsio::next_data(&self.data.file, pos, end).map_err(|e| self.err(Errno::from(e)))?.unwrap_or((end, end));
            if data > pos {
                out.push(Extent { len: (data - pos) as u32, flags: STATE_HOLE | STATE_ZERO });
                pos = data;
            }
            if pos < hole && out.len() < 4096 {
                out.push(Extent { len: (hole - pos) as u32, flags: 0 });
                pos = hole;
            }
        }
        Ok(Done::NOW)
    }

    fn connection_opened(&self) {
        self.inner.counters.connections_open.inc();
    }

    fn connection_closed(&self) {
        self.inner.counters.connections_open.dec();
        if let Some(arb) = self.inner.lock().as_mut().and_then(|st| st.arb.as_mut()) {
            arb.connection_closed();
        }
    }
}

impl NsExport {
    /// The controller commands of a hole-punching WRITE_ZEROES of [`offset`, `+len`): the
    /// whole IUs deallocated, the partial IUs at its edges written.
    fn zero_ops(&self, offset: u64, len: u64) -> Vec<(Io, u64, u64)> {
        let lba = self.lba;
        let end = offset + len;
        let (a, b) = self.whole_ius(offset, len);
        if a >= b {
            return vec![(Io::Write, offset / lba, len / lba)];
        }
        let mut ops = vec![(Io::Dealloc, a / lba, (b - a) / lba)];
        if offset < a {
            ops.push((Io::Write, offset / lba, (a - offset) / lba));
        }
        if b < end {
            ops.push((Io::Write, b / lba, (end - b) / lba));
        }
        ops
    }
}
