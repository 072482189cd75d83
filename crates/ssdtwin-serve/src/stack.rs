//! `ssdtwin serve STACKDIR`: a host stack's volume (a write-shaping tier in front of one
//! namespace of a drive image, docs/host.md) as one NBD export, in real time.
//!
//! The tier is the core's time-free state machine (`host/tier.rs`), timed by the same
//! [`StackTimeline`] the fio runner uses (`engine/stack.rs`): host writes go to the tier
//! (fast-media latency, or the drive's for what bypasses it), reads come from the newest
//! copy, destages run on lanes in the background and reach the drive through the served
//! image's controller and timing model under the backend's one lock, journaled like any
//! command. A lane's next step is submitted at the virtual time its previous step
//! completed, whenever the server next looks (a request or the housekeeping tick), so the
//! drive sees the commands in time order as in the simulated run.
//!
//! **Data.** The tier holds no bytes: the volume's data lives at the volume's address in
//! the namespace's data file (`DIR/data/nsN.img`). The twin keeps no NAND data anywhere:
//! the data file holds each address's newest content while the FTL models where and when
//! NAND is written. A stack changes only where and when the drive is written (a tier copy,
//! the log's host mapping, when a destage happens), never what the volume reads back, so
//! its tier and host map stay metadata, the same split (docs/host.md, "Serving a stack").
//!
//! **A write the tier has no room for** waits, as in the simulated run, until a destage
//! frees room: the model runs its lanes ahead in virtual time to that moment, the write is
//! admitted then and its reply held until it completes; later requests arrive no earlier.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use ssdtwin_core::engine::stack::{HostStack, StackTimeline, Submit};
use ssdtwin_core::engine::{HostCmd, HostOp};
use ssdtwin_core::host::tier::{Policy, WriteOutcome, BLOCK_BYTES};
use ssdtwin_core::journal::Record;
use ssdtwin_core::nvme::{self, NsId, WP_NONE};
use ssdtwin_nbd::{Backend, Done, Errno, Export, ExportInfo};

use crate::backend::{NsCounts, StackRow, TwinBackend};
use crate::config::Pace;
use crate::data::DataFile;
use crate::error::{nbd_errno, ServeError};
use crate::live::SessionSummary;
use crate::state::State;

/// The name of the stack's one export.
pub const STACK_EXPORT: &str = "stack";

/// The stack while it is served: the tier, its timeline, and the lanes' pending events.
struct StackRun {
    stack: HostStack,
    line: StackTimeline,
    /// (virtual ns, lane): a lane's current step completes then. Earliest first.
    events: BinaryHeap<Reverse<(u64, u32)>>,
}

/// A stack's volume as an NBD backend over a served drive image.
pub struct StackBackend {
    twin: Arc<TwinBackend>,
    export: Arc<StackExport>,
}

/// The volume: one export.
pub struct StackExport {
    twin: Arc<TwinBackend>,
    /// Taken after the twin's state lock, never alone (one order, no deadlock). `None`
    /// once closed.
    run: Mutex<Option<StackRun>>,
    /// What the tier looked like when serving stopped.
    stopped: Mutex<Option<HostStack>>,
    data: Arc<DataFile>,
    nsid: u32,
    info: ExportInfo,
    /// The volume's commands and bytes (live.json's and the summary's one export row).
    counts: Arc<NsCounts>,
}

/// Submit drive commands through the served image's timing model, journaled; the drive
/// counts as busy until they complete (no idle GC under a destage).
fn submitter<'s>(
    st: &'s mut State,
    cfg: &'s crate::TwinConfig,
    failed: &'s mut Option<String>,
) -> impl FnMut(u64, HostCmd) -> Result<u64, nvme::Error> + 's {
    move |now, cmd| {
        let timing = st.timing.as_mut().expect("a stack is served with pace model");
        let done = timing.submit(&mut st.img.ctrl, now, cmd)?;
        let (nsid, slba, nlb) = (cmd.nsid.0, cmd.slba, cmd.nlb);
        let r = match cmd.op {
            HostOp::Read => Record::Read { nsid, slba, nlb },
            HostOp::Write => Record::Write { nsid, slba, nlb },
            HostOp::Deallocate => Record::Deallocate { nsid, slba, nlb },
        };
        if let Err(e) = st.append(r, cfg) {
            failed.get_or_insert(e);
        }
        let from = now.max(st.done_v);
        if done > from {
            st.busy_pending_ns += done - from;
        }
        st.done_v = st.done_v.max(done);
        Ok(done)
    }
}

impl StackRun {
    /// Start what destages the tier wants at `now`; their first steps' completions queued.
    fn progress(&mut self, submit: &mut Submit<'_>, now: u64) -> Result<(), nvme::Error> {
        for (lane, done) in self.line.start_destages(&mut self.stack.tier, &self.stack.media, submit, now)? {
            self.events.push(Reverse((done.max(now + 1), lane)));
        }
        Ok(())
    }

    /// The earliest lane event: its step completed; the next step (or new destages) start.
    /// Returns its time, or None with no destage in flight. `start` false: only finish
    /// what was started (the end of a session, as the end of a simulated run).
    fn step(&mut self, submit: &mut Submit<'_>, start: bool) -> Result<Option<u64>, nvme::Error> {
        let Some(Reverse((t, lane))) = self.events.pop() else { return Ok(None) };
        if let Some(done) = self.line.lane_step_done(&mut self.stack.tier, submit, lane, t)? {
            self.events.push(Reverse((done.max(t + 1), lane)));
        }
        if start {
            self.progress(submit, t)?;
        }
        Ok(Some(t))
    }

    /// Every lane event up to `until`, in time order.
    fn advance(&mut self, submit: &mut Submit<'_>, until: u64) -> Result<(), nvme::Error> {
        while self.events.peek().is_some_and(|Reverse((t, _))| *t <= until) {
            self.step(submit, true)?;
        }
        Ok(())
    }
}

impl StackBackend {
    /// Whether the image at `dir` can carry `stack` on namespace `nsid` under `cfg`: the
    /// checks of [`StackBackend::new`], on the image opened read-only, so that a stack the
    /// drive cannot carry is refused before the server opens the drive for writing (which
    /// commits a generation and makes its data files and live.json).
    pub fn check(dir: &std::path::Path, stack: &HostStack, nsid: u32, cfg: &crate::TwinConfig) -> Result<(), ServeError> {
        check_pace_and_tier(stack, cfg)?;
        let img = ssdtwin_core::image::Image::open(dir, false)?;
        export_info(&img, stack, nsid).map(|_| ())
    }

    /// Serve `stack` on namespace `nsid` of the image `twin` opened (pace model only: the
    /// destages run on the model's time).
    pub fn new(twin: Arc<TwinBackend>, stack: HostStack, nsid: u32) -> Result<Arc<StackBackend>, ServeError> {
        check_pace_and_tier(&stack, twin.config())?;
        let inner = &twin.inner;
        let (info, lba) = {
            let g = inner.lock();
            let st = g.as_ref().ok_or_else(|| ServeError::Config("the image is closed".into()))?;
            export_info(&st.img, &stack, nsid)?
        };
        let data = inner.files.get(&nsid).cloned().ok_or_else(|| ServeError::Config(format!("namespace {nsid} has no data file")))?;
        let line = StackTimeline::new(&stack.tier, NsId(nsid), lba);
        let run = StackRun { stack, line, events: BinaryHeap::new() };
        let counts = Arc::new(NsCounts::default());
        // live.json and the summary show the volume, the one export served.
        let row = StackRow { nsid, info: info.clone(), counts: counts.clone() };
        if twin.stack_export.set(row).is_err() {
            return Err(ServeError::Config("the drive already serves a stack".into()));
        }
        let export =
            Arc::new(StackExport { twin: twin.clone(), run: Mutex::new(Some(run)), stopped: Mutex::new(None), data, nsid, info, counts });
        Ok(Arc::new(StackBackend { twin, export }))
    }

    pub fn twin(&self) -> &Arc<TwinBackend> {
        &self.twin
    }

    pub fn export_names(&self) -> Vec<String> {
        vec![STACK_EXPORT.to_string()]
    }

    /// Housekeeping: destage steps due by now, then the drive's own tick.
    pub fn tick(&self) -> Result<(), String> {
        let e = &self.export;
        let r = e.with_model(|st, run, now| {
            let cfg = &e.twin.inner.cfg;
            let mut failed = None;
            let r = run.advance(&mut submitter(st, cfg, &mut failed), now);
            e.settle(r, failed)
        });
        let twin = self.twin.tick();
        match r {
            Ok(()) | Err(Errno::Shutdown) => twin,
            Err(_) => Err(self.twin.failure().unwrap_or_else(|| "a destage failed".into())),
        }
    }

    /// Stop: the destages already started finish (their later steps reach the drive, as at
    /// the end of a simulated run), then the drive is committed. The tier's final state is
    /// then [`StackBackend::stopped_stack`].
    pub fn close(&self) -> Result<Option<SessionSummary>, ServeError> {
        let e = &self.export;
        let drained = {
            let mut g = e.twin.inner.lock();
            let mut rg = e.lock_run();
            match (g.as_mut(), rg.take()) {
                (Some(st), Some(mut run)) => {
                    let cfg = &e.twin.inner.cfg;
                    let mut failed = None;
                    let mut last = st.last_v;
                    let r = (|| {
                        let mut submit = submitter(st, cfg, &mut failed);
                        while let Some(t) = run.step(&mut submit, false)? {
                            last = last.max(t);
                        }
                        Ok::<(), nvme::Error>(())
                    })();
                    st.last_v = last;
                    let r = r.map_err(|err| format!("finishing the destages: {err}")).and_then(|()| failed.map_or(Ok(()), Err));
                    if let Err(why) = &r {
                        e.twin.inner.fail(why.clone());
                    }
                    let checked = run.stack.tier.check().map_err(|c| format!("the tier fails its check after serving: {c}"));
                    *e.stopped.lock().unwrap_or_else(|p| p.into_inner()) = Some(run.stack);
                    r.and(checked)
                }
                _ => Ok(()),
            }
        };
        let summary = self.twin.close()?;
        drained.map_err(ServeError::Failed)?;
        Ok(summary)
    }

    /// The stack as serving left it (after [`StackBackend::close`]).
    pub fn stopped_stack(&self) -> Option<HostStack> {
        self.export.stopped.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }
}

/// A stack is served with the model's pace only, and with a tier whose state checks.
fn check_pace_and_tier(stack: &HostStack, cfg: &crate::TwinConfig) -> Result<(), ServeError> {
    if cfg.pace != Pace::Model {
        return Err(ServeError::Config("a stack is served with --pace model only (its destages run on the model's time)".into()));
    }
    stack.tier.check().map_err(|e| ServeError::Config(format!("the stack's state fails its check: {e}")))
}

/// The stack's export on namespace `nsid` of `img` and the namespace's LBA size, or why the
/// drive cannot carry the stack.
fn export_info(img: &ssdtwin_core::image::Image, stack: &HostStack, nsid: u32) -> Result<(ExportInfo, u64), ServeError> {
    let ctrl = &img.ctrl;
    if ctrl.arbitration().weights.is_some() {
        // As `ssdtwin fio` refuses it (engine/fio.rs): the stack's commands have no
        // submission queue of their own to arbitrate.
        return Err(ServeError::Config("weighted round robin arbitration (feature 01h) is not modelled under a host stack".into()));
    }
    let ns =
        ctrl.attached(NsId(nsid)).map_err(|_| ServeError::Config(format!("the stack's namespace {nsid} is not attached to the drive")))?;
    if ns.write_protect != WP_NONE {
        return Err(ServeError::Config(format!("the stack's namespace {nsid} is write protected")));
    }
    let cfg = &stack.tier.config;
    if ns.bytes() != cfg.drive_bytes || ctrl.ftl_config().iu_bytes as u64 != cfg.iu_bytes || ns.lba_bytes as u64 > BLOCK_BYTES {
        return Err(ServeError::Config(format!(
            "the stack was made for a {} byte namespace with {} byte IUs; namespace {nsid} has {} bytes, {} byte IUs and {} byte blocks",
            cfg.drive_bytes,
            cfg.iu_bytes,
            ns.bytes(),
            ctrl.ftl_config().iu_bytes,
            ns.lba_bytes
        )));
    }
    // Whole 4 KiB blocks only: the server lets requests reach a final partial block of an
    // export, which the tier (whole blocks) would answer without ever storing or destaging.
    let mut i = ExportInfo::new(STACK_EXPORT, stack.tier.user_bytes() / BLOCK_BYTES * BLOCK_BYTES);
    // The policy as stack.toml and `ssdtwin stack --policy` name it.
    let policy = match cfg.policy {
        Policy::IuFill => "iu-fill",
        Policy::Log => "log",
    };
    i.description = format!(
        "host stack: {policy} tier of {} bytes on {} over namespace {nsid} of {} at 1/{}",
        cfg.capacity_bytes, stack.media.name, img.manifest.preset, img.manifest.scale
    );
    // The tier maps 4 KiB blocks: the server refuses anything smaller or unaligned.
    i.block_min = BLOCK_BYTES as u32;
    i.block_preferred = (cfg.iu_bytes as u32).max(BLOCK_BYTES as u32);
    // A log appends a whole write to the tier, which must always get room for it. A write
    // the log has no room for makes it destage for that write whatever its watermarks
    // (host/tier.rs, `wanted_blocks`: short stripes leave, down to an empty log if need
    // be), so any write up to its capacity gets in; a larger one would find the log empty
    // and nothing to wait for (ENOSPC). The largest power of two within the capacity (the
    // room above the high watermark, which this was before the tier destaged for a waiting
    // write, refused nbdcopy's default 256 KiB requests to a 1 MiB log with EINVAL).
    let fits = if cfg.policy == Policy::Log { 1u64 << cfg.capacity_bytes.max(1).ilog2() } else { u64::MAX };
    i.block_max = (32u64 << 20).min(fits).max(i.block_preferred as u64) as u32;
    i.can_flush = true;
    i.can_fua = true;
    i.can_trim = true;
    i.can_multi_conn = true;
    Ok((i, ns.lba_bytes as u64))
}

impl Backend for StackBackend {
    fn exports(&self) -> Vec<ExportInfo> {
        vec![self.export.info.clone()]
    }

    fn default_export(&self) -> Option<String> {
        Some(STACK_EXPORT.to_string())
    }

    fn open(&self, name: &str) -> Option<Arc<dyn Export>> {
        (name == STACK_EXPORT).then(|| self.export.clone() as Arc<dyn Export>)
    }
}

impl StackExport {
    fn lock_run(&self) -> MutexGuard<'_, Option<StackRun>> {
        self.run.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// `f` under the twin's lock and then the stack's, at the current virtual time (never
    /// before the latest arrival the model has seen).
    fn with_model<R>(&self, f: impl FnOnce(&mut State, &mut StackRun, u64) -> Result<R, Errno>) -> Result<R, Errno> {
        let inner = &self.twin.inner;
        let mut g = inner.lock();
        let st = g.as_mut().ok_or(Errno::Shutdown)?;
        let mut rg = self.lock_run();
        let run = rg.as_mut().ok_or(Errno::Shutdown)?;
        let now = inner.now_v().max(st.last_v);
        f(st, run, now)
    }

    /// A drive or journal failure while the model ran: sticky (writes fail from now on).
    fn settle(&self, r: Result<(), nvme::Error>, failed: Option<String>) -> Result<(), Errno> {
        let inner = &self.twin.inner;
        if let Some(why) = failed {
            return Err(inner.fail(why));
        }
        r.map_err(|e| inner.fail(format!("the stack's drive command failed: {e}")))
    }

    fn err(&self, e: Errno) -> Errno {
        self.twin.inner.counters.errors.inc();
        e
    }

    /// The reply time of a request that completes at virtual `done_v`, arrived at `now_v`.
    fn reply(&self, st: &mut State, now_v: u64, done_v: u64, write: bool) -> Done {
        let inner = &self.twin.inner;
        inner.observe_latency(write, done_v.saturating_sub(now_v));
        st.last_v = st.last_v.max(now_v);
        Done::at(inner.start + Duration::from_nanos(done_v))
    }

    /// A host write through the tier at `now`: admitted when there is room (waiting for
    /// destages if need be, as the simulated run does); the completion time and arrival.
    fn tier_write(&self, st: &mut State, run: &mut StackRun, now: u64, offset: u64, len: u64) -> Result<(u64, u64), Errno> {
        let cfg = &self.twin.inner.cfg;
        let mut failed = None;
        let mut now = now;
        let r = (|| -> Result<Result<u64, Errno>, nvme::Error> {
            let mut submit = submitter(st, cfg, &mut failed);
            run.advance(&mut submit, now)?;
            let mut stalled = false;
            let (tier_bytes, drive) = loop {
                match run.stack.tier.write(offset, len) {
                    WriteOutcome::Accepted { tier_bytes, drive } => break (tier_bytes, drive),
                    WriteOutcome::Full => {
                        if !stalled {
                            stalled = true;
                            run.stack.tier.counters.stalls += 1;
                        }
                        // The refused write may make the tier destage (it evicts for room
                        // below its high watermark): start that, then nothing frees room
                        // until the next destage step completes.
                        run.progress(&mut submit, now)?;
                        match run.step(&mut submit, true)? {
                            Some(t) => now = now.max(t),
                            None => return Ok(Err(Errno::NoSpc)),
                        }
                    }
                }
            };
            let mut t = if tier_bytes > 0 { run.line.media(&run.stack.media, now, tier_bytes, true) } else { now };
            t = t.max(run.line.drive(&mut submit, now, &drive)?);
            run.progress(&mut submit, now)?;
            Ok(Ok(t.max(now + 1)))
        })();
        let r = match r {
            Ok(x) => self.settle(Ok(()), failed).and(x),
            Err(e) => self.settle(Err(e), failed).map(|()| 0),
        };
        r.map(|done| (done, now))
    }
}

impl Export for StackExport {
    fn info(&self) -> ExportInfo {
        self.info.clone()
    }

    fn read(&self, offset: u64, buf: &mut [u8]) -> Result<Done, Errno> {
        let c = &self.twin.inner.counters;
        c.reads.inc();
        self.counts.reads.fetch_add(1, Relaxed);
        self.data.read(buf, offset).map_err(|e| self.err(e.into()))?;
        let len = buf.len() as u64;
        self.with_model(|st, run, now| {
            let cfg = &self.twin.inner.cfg;
            let mut failed = None;
            let mut read_err = None;
            // The tier's read counters (host bytes read, tier hits) as this read added them.
            let mut counted = None;
            let r = (|| {
                let mut submit = submitter(st, cfg, &mut failed);
                run.advance(&mut submit, now)?;
                let plan = run.stack.tier.read(offset, len);
                counted = Some(plan.tier_bytes);
                let t = if plan.tier_bytes > 0 { run.line.media(&run.stack.media, now, plan.tier_bytes, false) } else { now };
                // The read's own drive errors (a media error, protection information) are
                // this request's, as on a served drive; a destage's are sticky.
                let t = match run.line.drive(&mut submit, now, &plan.drive) {
                    Ok(d) => t.max(d),
                    Err(e) => {
                        read_err = Some(nbd_errno(&e, false));
                        t
                    }
                };
                run.progress(&mut submit, now)?;
                Ok(t.max(now + 1))
            })();
            let served = match r {
                Ok(t) => self.settle(Ok(()), failed).map(|()| t),
                Err(e) => Err(self.settle(Err(e), failed).err().unwrap_or(Errno::Io)),
            }
            .and_then(|t| read_err.map_or(Ok(t), Err));
            let done = match served {
                Ok(t) => t,
                Err(e) => {
                    // Nothing was served, whichever error ended the read (its own drive
                    // error, or a destage's or the journal's, sticky): the stack's read
                    // counters count what the host got, as the server's read bytes do.
                    if let Some(tier_bytes) = counted {
                        let counters = &mut run.stack.tier.counters;
                        counters.host_read_bytes -= len;
                        counters.read_hit_bytes -= tier_bytes;
                    }
                    return Err(e);
                }
            };
            self.twin.inner.counters.read_bytes.inc_by(len);
            self.counts.read_bytes.fetch_add(len, Relaxed);
            Ok(self.reply(st, now, done, false))
        })
        .map_err(|e| self.err(e))
    }

    fn write(&self, offset: u64, data: &[u8], fua: bool) -> Result<Done, Errno> {
        let inner = &self.twin.inner;
        inner.counters.writes.inc();
        self.counts.writes.fetch_add(1, Relaxed);
        inner.check_writable().map_err(|e| self.err(e))?;
        // Data first, then the model and journal, then the write count a FLUSH reads (as a
        // drive export does, backend.rs).
        self.data.write(data, offset).map_err(|e| self.err(inner.fail(format!("writing the data: {e}"))))?;
        let done = self
            .with_model(|st, run, now| {
                st.idle(now, &inner.cfg).map_err(|e| inner.fail(e))?;
                let (done, admitted) = self.tier_write(st, run, now, offset, data.len() as u64)?;
                let d = self.reply(st, now, done, true);
                st.last_v = st.last_v.max(admitted);
                Ok(d)
            })
            .map_err(|e| self.err(e))?;
        inner.counters.write_bytes.inc_by(data.len() as u64);
        self.counts.write_bytes.fetch_add(data.len() as u64, Relaxed);
        self.after_write(fua)?;
        Ok(done)
    }

    fn flush(&self) -> Result<Done, Errno> {
        self.twin.inner.counters.flushes.inc();
        self.twin.inner.durable(None).map_err(|e| self.err(e))?;
        Ok(Done::NOW)
    }

    /// TRIM drops the tier's copies of the range; `iu-fill` deallocates the range on the
    /// drive, whose FTL drops its whole IUs, `log` unmaps the blocks in its own map. The data
    /// file loses what the drive lost (whole IUs for `iu-fill`, as a served drive's TRIM; the
    /// range for `log`), which then reads zeroes; the rest keeps its data, as NBD's advisory
    /// trim allows.
    fn trim(&self, offset: u64, len: u32, fua: bool) -> Result<Done, Errno> {
        let inner = &self.twin.inner;
        inner.counters.trims.inc();
        self.counts.trims.fetch_add(1, Relaxed);
        inner.check_writable().map_err(|e| self.err(e))?;
        let (done, punch) = self
            .with_model(|st, run, now| {
                let cfg = &inner.cfg;
                let mut failed = None;
                let (log, iu) = (run.stack.tier.config.policy == Policy::Log, run.stack.tier.config.iu_bytes);
                let r = (|| {
                    let mut submit = submitter(st, cfg, &mut failed);
                    run.advance(&mut submit, now)?;
                    let ranges = run.stack.tier.trim(offset, len as u64);
                    // A map update on the fast media, as in a simulated run (host_stack.rs).
                    let map = run.line.media(&run.stack.media, now, 0, true);
                    let t = map.max(run.line.trim(&mut submit, now, &ranges)?);
                    run.progress(&mut submit, now)?;
                    // The drive deallocates only the range's whole IUs (partial ones keep
                    // their data and mapping), so only those leave the data file.
                    let (a, b) = (offset.div_ceil(iu) * iu, (offset + len as u64) / iu * iu);
                    Ok((t.max(now + 1), if log { vec![(offset, len as u64)] } else { vec![(a, b.saturating_sub(a))] }))
                })();
                let (t, punch) = match r {
                    Ok(x) => {
                        self.settle(Ok(()), failed)?;
                        x
                    }
                    Err(e) => return Err(self.settle(Err(e), failed).err().unwrap_or(Errno::Io)),
                };
                Ok((self.reply(st, now, t, true), punch))
            })
            .map_err(|e| self.err(e))?;
        for (o, l) in punch {
            self.data.punch(o, l).map_err(|e| self.err(inner.fail(format!("writing the data: {e}"))))?;
        }
        self.counts.trim_bytes.fetch_add(len as u64, Relaxed);
        self.after_write(fua)?;
        Ok(done)
    }

    fn connection_opened(&self) {
        self.twin.inner.counters.connections_open.inc();
    }

    fn connection_closed(&self) {
        self.twin.inner.counters.connections_open.dec();
    }
}

impl StackExport {
    fn after_write(&self, fua: bool) -> Result<(), Errno> {
        self.data.written.fetch_add(1, std::sync::atomic::Ordering::Release);
        if fua {
            self.twin.inner.durable(Some(&self.data)).map_err(|e| self.err(e))?;
        }
        Ok(())
    }

    /// The namespace the stack sits on.
    pub fn nsid(&self) -> u32 {
        self.nsid
    }
}
