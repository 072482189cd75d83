//! Deferred replies through a real server: an export that resolves READ completions later
//! (`Done::deferred`), the way a controller arbitrating among connections does.

use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::common::*;
use ssdtwin_nbd::proto::*;
use ssdtwin_nbd::{Backend, Done, Errno, Export, ExportInfo, MemBackend, Resolver, Server, ServerConfig};

/// A memory disk whose READs are resolved by the test (through `rx`).
struct Deferring {
    mem: Arc<dyn Export>,
    tx: Mutex<Sender<Resolver>>,
}

impl Export for Deferring {
    fn info(&self) -> ExportInfo {
        self.mem.info()
    }
    fn read(&self, offset: u64, buf: &mut [u8]) -> Result<Done, Errno> {
        self.mem.read(offset, buf)?;
        let (done, r) = Done::deferred();
        self.tx.lock().unwrap().send(r).unwrap();
        Ok(done)
    }
    fn write(&self, offset: u64, data: &[u8], fua: bool) -> Result<Done, Errno> {
        self.mem.write(offset, data, fua)
    }
}

struct DeferBackend(Arc<Deferring>);
impl Backend for DeferBackend {
    fn exports(&self) -> Vec<ExportInfo> {
        vec![self.0.info()]
    }
    fn default_export(&self) -> Option<String> {
        Some("disk".into())
    }
    fn open(&self, name: &str) -> Option<Arc<dyn Export>> {
        (name == "disk").then(|| self.0.clone() as Arc<dyn Export>)
    }
}

fn start() -> (ssdtwin_nbd::ServerHandle, Receiver<Resolver>) {
    let (tx, rx) = channel();
    let mem = MemBackend::single("disk", 1 << 20).open("disk").unwrap();
    let b = Arc::new(DeferBackend(Arc::new(Deferring { mem, tx: Mutex::new(tx) })));
    let cfg = ServerConfig { shutdown_grace: Duration::from_millis(500), ..ServerConfig::default() };
    let h = Server::new(b).with_config(cfg).listen_tcp("127.0.0.1:0").unwrap().start().unwrap();
    (h, rx)
}

#[test]
fn deferred_reads_reply_when_resolved_and_others_are_not_held() {
    let (h, rx) = start();
    let mut c = Client::tcp(&h);
    c.negotiate("disk", false, false);
    let data = pattern(3, 4096);
    assert_eq!(c.write(1, 0, &data, 0).error, 0);
    c.request(CMD_READ, 0, 2, 0, 4096, &[]);
    c.request(CMD_READ, 0, 3, 0, 4096, &[]);
    let (r2, r3) = (rx.recv().unwrap(), rx.recv().unwrap());
    // A write behind the two parked reads is answered first.
    assert_eq!(c.write(4, 4096, &data, 0).error, 0);
    // Resolved in the opposite order (the later one sooner): replies follow the times.
    let t = Instant::now();
    r3.at(t);
    r2.at(t + Duration::from_millis(30));
    let a = c.reply(|_| 4096);
    let b = c.reply(|_| 4096);
    assert_eq!((a.cookie, a.error, b.cookie, b.error), (3, 0, 2, 0));
    assert_eq!(b.data, data);
    assert!(t.elapsed() >= Duration::from_millis(30), "a resolved reply still waits for its time");
    // Failed and dropped resolvers become error replies.
    c.request(CMD_READ, 0, 5, 0, 4096, &[]);
    rx.recv().unwrap().fail(Errno::Io);
    let e = c.reply(|_| 0);
    assert_eq!((e.cookie, e.error), (5, Errno::Io.code()));
    c.request(CMD_READ, 0, 6, 0, 4096, &[]);
    drop(rx.recv().unwrap());
    let e = c.reply(|_| 0);
    assert_eq!((e.cookie, e.error), (6, Errno::Shutdown.code()));
    // A client that leaves with a read still unresolved: the server neither hangs nor
    // panics, and stops within its grace period.
    c.request(CMD_READ, 0, 7, 0, 4096, &[]);
    let _unresolved = rx.recv().unwrap();
    drop(c);
    let t = Instant::now();
    h.shutdown();
    assert!(t.elapsed() < Duration::from_secs(3), "shutdown took {:?}", t.elapsed());
}
