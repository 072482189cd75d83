use super::maps::{all_zero, load_array, save_array};
use super::state_file::{decode_state, encode_state, Generation};
use super::*;
use crate::bigarray::BigArray;
use crate::engine::DeviceTiming;
use crate::journal::{self, Record};
use crate::journal::{JournalWriter, HEADER_LEN};
use crate::nvme::NsId;
use crate::nvme::Pattern;

const PRESET: &str = "kioxia-cm6-r-3.84t";

thread_local! {
    /// Run once by the next `open_once` of this thread between reading CURRENT and reading
    /// the journal: another process's commit landing in that instant.
    pub(super) static BEFORE_JOURNAL: std::cell::Cell<Option<Box<dyn FnOnce()>>> = const { std::cell::Cell::new(None) };
    /// Run by every `open_once` of this thread after it has read the generation's state and
    /// before it parses it (not by an open the hook itself makes): a writer that commits
    /// while each attempt parses.
    pub(super) static AFTER_STATE_READ: std::cell::Cell<Option<Box<dyn FnMut()>>> = const { std::cell::Cell::new(None) };
}

/// A small written image: sequential fill, then random writes (GC has work to do).
fn written(dir: &Path) -> Image {
    let spec = DriveSpec::preset(PRESET).unwrap().scaled(256).unwrap();
    let mut img = Image::create(dir, spec, PRESET, 1).unwrap();
    let cap = img.ctrl.attached(NsId(1)).unwrap().bytes();
    img.ctrl.precondition(NsId(1), Pattern::Sequential, 131072, cap, 1, &mut |_, _| true).unwrap();
    img.ctrl.precondition(NsId(1), Pattern::Random, 4096, cap, 2, &mut |_, _| true).unwrap();
    img.commit().unwrap();
    img
}

/// Background GC in an idle gap, as the engine and the server run it.
fn idle_gc(img: &mut Image) -> u64 {
    let mut t = DeviceTiming::new(img.ctrl.spec(), img.ctrl.ftl_config()).unwrap();
    let moved = t.idle(&mut img.ctrl, 0, 2_000_000_000).unwrap();
    assert!(moved > 0, "the test needs idle GC to move data");
    moved
}

#[test]
fn all_zero_finds_any_nonzero_byte() {
    let mut b = vec![0u8; (1 << 20) + 13];
    assert!(all_zero(&b) && all_zero(&[]));
    for at in [0, 1, 4095, 4096, 517_000, b.len() - 1] {
        b[at] = 0x80;
        assert!(!all_zero(&b), "byte {at}");
        b[at] = 0;
    }
}

#[test]
fn a_sparse_map_loads_its_data_and_leaves_its_holes_unmapped() {
    // 16 MiB of entries: data in the first MiB, at 3 MiB + 4 bytes (one nonzero entry)
    // and in the last MiB; every other 1 MiB run is zero, so `save_array` leaves a hole.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("map.bin");
    let len = 4 << 20;
    let mut a = BigArray::zeroed(len).unwrap();
    for i in (0..1 << 18).chain(len - (1 << 18)..len) {
        a[i] = (i as u32).wrapping_mul(2_654_435_761) | 1;
    }
    a[(3 << 18) + 1] = 7;
    let saved = save_array(&a, &path).unwrap();
    assert_eq!(saved, a.checksum());
    let (b, loaded) = load_array(&path, len).unwrap();
    // The holes were not copied into memory: only the (at most 2 MiB) pages holding
    // data are resident, 3 of the 8 (checked before anything reads the holes, which
    // would map the shared zero page there).
    let resident = b.resident_pages();
    let (pages, touched) = (resident.len(), resident.iter().filter(|&&r| r).count());
    assert!(touched <= 3 * 512, "{touched} of {pages} pages resident after loading a map that is 13/16 holes");
    assert_eq!(loaded, saved, "the checksum covers the holes as zeros");
    assert!(b.as_bytes() == a.as_bytes(), "every entry back");
    // A truncated file is damaged, not a short read.
    let f = fs::OpenOptions::new().write(true).open(&path).unwrap();
    f.set_len((len * 4 - 4096) as u64).unwrap();
    assert!(matches!(load_array(&path, len), Err(MapError::Damaged { .. })));
}

#[test]
fn idle_gc_then_commit_saves_the_maps() {
    // Idle GC moves data without any host write; a commit once linked the old maps under
    // the new state.
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().join("img");
    let mut img = written(&d);
    idle_gc(&mut img);
    let want = img.ctrl.ftl_fingerprint().unwrap();
    img.commit().unwrap();
    drop(img);
    let mut back = Image::open(&d, true).unwrap();
    assert_eq!(back.ctrl.ftl_fingerprint().unwrap(), want);
    back.ctrl.check_full().unwrap();
}

/// Rewrite the committed state.json with `f` applied, keeping its checksum valid (as an
/// older ssdtwin, or a bug, would have written it).
fn rewrite_state(d: &Path, legacy: bool, f: impl FnOnce(&mut Generation)) {
    let (_, gdir) = read_current(d).unwrap();
    let p = gdir.join("state.json");
    let mut g = decode_state(&std::fs::read(&p).unwrap(), &p).unwrap();
    f(&mut g);
    let bytes = if legacy { serde_json::to_vec(&g).unwrap() } else { encode_state(&g) };
    std::fs::write(&p, bytes).unwrap();
}

#[test]
fn a_legacy_generation_whose_maps_are_stale_is_refused_when_they_load() {
    // What the bug left: a version-1 state.json whose FTL state moved on (idle GC) while
    // its maps are the previous generation's.
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().join("img");
    let mut img = written(&d);
    let ctrl_before = img.ctrl.state().clone();
    idle_gc(&mut img);
    let moved_state = img.ctrl.ftl_state().clone();
    drop(img);
    rewrite_state(&d, true, |g| {
        g.ftl = moved_state;
        g.controller = ctrl_before;
        g.maps_changes = None;
    });
    // Metadata still reads (the maps stay on disk)...
    let mut ro = Image::open(&d, false).unwrap();
    // ...and the first command that loads the maps refuses them, naming the generation.
    let e = ro.ctrl.check_full().unwrap_err().to_string();
    assert!(e.contains("drive image damaged") && e.contains("the maps disagree with the saved FTL state"), "{e}");
}

#[test]
fn a_generation_whose_state_moved_on_from_its_maps_is_refused_at_open() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().join("img");
    drop(written(&d));
    rewrite_state(&d, false, |g| g.maps_changes = g.maps_changes.map(|c| c - 1));
    let e = Image::open(&d, false).unwrap_err().to_string();
    assert!(e.contains("moved on from its maps"), "{e}");
}

#[test]
fn state_json_carries_a_checksum() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().join("img");
    drop(written(&d));
    let (_, gdir) = read_current(&d).unwrap();
    let p = gdir.join("state.json");
    let text = std::fs::read_to_string(&p).unwrap();
    // A change that keeps the JSON valid: only the checksum can tell.
    let i = text.find("\"power_cycles\":0").expect("a zero counter to change");
    let bad = format!("{}\"power_cycles\":7{}", &text[..i], &text[i + "\"power_cycles\":0".len()..]);
    std::fs::write(&p, bad).unwrap();
    let e = Image::open(&d, false).unwrap_err().to_string();
    assert!(e.contains("drive image damaged") && e.contains("state.json") && e.contains("checksum"), "{e}");
}

#[test]
fn inconsistent_state_is_refused_at_open_not_run() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().join("img");
    drop(written(&d));
    rewrite_state(&d, false, |g| {
        let mut v = serde_json::to_value(&g.ftl).unwrap();
        v["sbs"][0]["valid"] = serde_json::json!(v["sbs"][0]["valid"].as_u64().unwrap() + 1);
        g.ftl = serde_json::from_value(v).unwrap();
    });
    for writable in [false, true] {
        let e = Image::open(&d, writable).unwrap_err().to_string();
        assert!(e.contains("inconsistent state") && e.contains("valid units"), "{e}");
    }
}

/// A journal of `n` writes for the committed generation, flushed to its file.
fn journal_of_writes(img: &mut Image, n: u64) -> PathBuf {
    let mut j = JournalWriter::create(img.dir(), img.generation()).unwrap();
    for k in 0..n {
        img.ctrl.write(NsId(1), k * 8, 8, &mut crate::nand::NoTiming).unwrap();
        j.append(&Record::Write { nsid: 1, slba: k * 8, nlb: 8 });
    }
    j.write_out().unwrap();
    j.path().to_path_buf()
}

#[test]
fn a_damaged_journal_is_refused_then_repaired_with_a_copy_kept() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().join("img");
    let mut img = written(&d);
    let path = journal_of_writes(&mut img, 100);
    drop(img);
    // Flip a byte in the 40th record: the 60 after it are intact.
    let mut b = std::fs::read(&path).unwrap();
    let rec_len = (b.len() - HEADER_LEN) / 100;
    let at = HEADER_LEN + 40 * rec_len + 5;
    b[at] ^= 0x40;
    std::fs::write(&path, &b).unwrap();
    let offset = HEADER_LEN + 40 * rec_len;
    for writable in [false, true] {
        let e = Image::open(&d, writable).unwrap_err().to_string();
        assert!(
            e.contains(&format!("journal.bin: damaged at byte {offset}"))
                && e.contains("59 intact records")
                && e.contains("check --repair"),
            "{e}"
        );
    }
    assert_eq!(std::fs::read(&path).unwrap(), b, "a refused journal is left as it was");
    let mut img = Image::open_with(&d, OpenMode::Repair).unwrap();
    let rec = img.recovery().unwrap().clone();
    assert_eq!(rec.action, RecoveryAction::Repaired);
    assert_eq!((rec.records, rec.dropped_records), (40, 59));
    let copy = rec.kept_copy.clone().unwrap();
    assert_eq!(std::fs::read(&copy).unwrap(), b, "the damaged journal is kept");
    assert!(rec.detail.contains("59 writes"), "{}", rec.detail);
    assert!(!path.exists());
    img.ctrl.check_full().unwrap();
    assert_eq!(img.ctrl.smart_log().host_write_commands, { Image::open(&d, false).unwrap().ctrl.smart_log().host_write_commands });
}

#[test]
fn a_journal_whose_header_does_not_check_is_dropped_whole_by_repair() {
    // The error names `check --repair`; the repair refused the same journal.
    for damage in ["magic", "generation"] {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path().join("img");
        let mut img = written(&d);
        let path = journal_of_writes(&mut img, 10);
        let committed = img.generation();
        drop(img);
        let mut b = std::fs::read(&path).unwrap();
        if damage == "magic" {
            b[0] ^= 0xFF;
            std::fs::write(&path, &b).unwrap();
        } else {
            drop(JournalWriter::create(&d, committed + 5).unwrap()); // a header of a later generation
            b = std::fs::read(&path).unwrap();
        }
        let e = Image::open(&d, true).unwrap_err().to_string();
        assert!(e.contains("journal.bin: damaged at byte 0") && e.contains("check --repair"), "{e}");
        let img = Image::open_with(&d, OpenMode::Repair).unwrap();
        let rec = img.recovery().unwrap().clone();
        assert_eq!((rec.action, rec.records), (RecoveryAction::Repaired, 0), "{damage}");
        assert!(rec.detail.contains("dropped whole"), "{}", rec.detail);
        assert_eq!(std::fs::read(rec.kept_copy.unwrap()).unwrap(), b, "the damaged journal is kept");
        assert!(!path.exists());
        drop(img);
        Image::open(&d, true).unwrap();
    }
}

#[test]
fn a_long_garbage_tail_is_damage_a_short_one_is_a_torn_append() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().join("img");
    let mut img = written(&d);
    let path = journal_of_writes(&mut img, 10);
    drop(img);
    let clean = std::fs::read(&path).unwrap();
    let mut long = clean.clone();
    long.extend_from_slice(&[0xAB; journal::MAX_RECORD_LEN + 1]);
    std::fs::write(&path, &long).unwrap();
    let e = Image::open(&d, true).unwrap_err().to_string();
    assert!(e.contains("damaged at byte") && e.contains("0 intact records"), "{e}");
    let mut short = clean;
    short.extend_from_slice(&[0xAB; journal::MAX_RECORD_LEN - 1]);
    std::fs::write(&path, &short).unwrap();
    let img = Image::open(&d, true).unwrap();
    let rec = img.recovery().unwrap();
    assert_eq!((rec.action, rec.records, rec.ignored_bytes), (RecoveryAction::Replayed, 10, journal::MAX_RECORD_LEN as u64 - 1));
}

#[test]
fn links_inside_the_image_are_never_followed() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().join("img");
    let outside = dir.path().join("victim.txt");
    std::fs::write(&outside, b"precious").unwrap();
    let mut img = written(&d);
    // CURRENT.tmp planted as a link: the commit replaces the link, never writes through it.
    std::os::unix::fs::symlink(&outside, d.join("CURRENT.tmp")).unwrap();
    img.commit().unwrap();
    assert_eq!(std::fs::read(&outside).unwrap(), b"precious");
    // A data file planted as a link is refused.
    std::fs::create_dir_all(d.join("data")).unwrap();
    std::os::unix::fs::symlink(&outside, d.join("data/ns1.img")).unwrap();
    let e = img.prepare_data_files().unwrap_err().to_string();
    assert!(e.contains("ns1.img") && e.contains("symbolic link"), "{e}");
    drop(img);
    // LOCK as a link: refused.
    std::fs::remove_file(d.join("LOCK")).unwrap();
    std::os::unix::fs::symlink(&outside, d.join("LOCK")).unwrap();
    let e = Image::open(&d, true).unwrap_err().to_string();
    assert!(e.contains("LOCK") && e.contains("symbolic link"), "{e}");
    assert_eq!(std::fs::read(&outside).unwrap(), b"precious");
}

#[test]
fn a_lock_that_is_a_directory_is_one_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().join("img");
    drop(written(&d));
    std::fs::remove_file(d.join("LOCK")).unwrap();
    std::fs::create_dir(d.join("LOCK")).unwrap();
    let e = Image::open(&d, true).unwrap_err().to_string();
    assert!(e.contains("LOCK is a directory") && !e.contains('\n'), "{e}");
    Image::open(&d, false).unwrap(); // readers need no lock
}

#[test]
fn a_recorded_data_file_that_is_missing_or_resized_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().join("img");
    let mut img = written(&d);
    let files = img.prepare_data_files().unwrap();
    let (_, p) = &files[0];
    let bytes = std::fs::metadata(p).unwrap().len();
    drop(img);
    std::fs::write(p, b"short").unwrap();
    let mut img = Image::open(&d, true).unwrap();
    let e = img.prepare_data_files().unwrap_err().to_string();
    assert!(e.contains("ns1.img: 5 bytes, but namespace 1 has") && e.contains("nvme format"), "{e}");
    std::fs::remove_file(p).unwrap();
    let e = img.prepare_data_files().unwrap_err().to_string();
    assert!(e.contains("ns1.img: missing") && e.contains("restore the file"), "{e}");
    // Formatting the namespace drops the record: serving starts it empty.
    img.ctrl.format(NsId(1), 0, 0).unwrap();
    img.drop_data(1).unwrap();
    img.prepare_data_files().unwrap();
    assert_eq!(std::fs::metadata(p).unwrap().len(), bytes);
}

#[test]
fn dropping_data_is_durable_with_the_command_that_drops_it() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().join("img");
    let mut img = written(&d);
    let files = img.prepare_data_files().unwrap();
    let p = files[0].1.clone();
    let size = std::fs::metadata(&p).unwrap().len();
    // The file is sparse and namespace-sized (gigabytes): mark its first block only.
    let first_block = |p: &Path| {
        let mut b = [0u8; 4096];
        std::io::Read::read_exact(&mut std::fs::File::open(p).unwrap(), &mut b).unwrap();
        b
    };
    std::os::unix::fs::FileExt::write_all_at(&std::fs::OpenOptions::new().write(true).open(&p).unwrap(), &[7u8; 4096], 0).unwrap();
    // Format, then die before the commit: the format never happened, so the data is back.
    img.ctrl.format(NsId(1), 0, 0).unwrap();
    img.drop_data(1).unwrap();
    assert!(!p.exists());
    drop(img);
    let mut img = Image::open(&d, true).unwrap();
    assert_eq!(first_block(&p)[..4], [7, 7, 7, 7], "an uncommitted drop is rolled back");
    assert_eq!(std::fs::metadata(&p).unwrap().len(), size);
    assert!(img.ctrl.namespace_rows()[0].nuse > 0);
    // Format and commit: the data is gone for good, and serving starts it empty.
    img.ctrl.format(NsId(1), 0, 0).unwrap();
    img.drop_data(1).unwrap();
    img.commit().unwrap();
    assert!(!p.exists() && std::fs::read_dir(p.parent().unwrap()).unwrap().next().is_none(), "no leftovers after the commit");
    img.prepare_data_files().unwrap();
    assert!(first_block(&p).iter().all(|&b| b == 0));
    assert_eq!(std::fs::metadata(&p).unwrap().len(), size);
}

#[test]
fn a_read_only_open_beside_a_committing_writer_is_never_damage() {
    // A served image commits while `nvme vendor-log` opens it read-only: the writer points
    // CURRENT at the next generation and removes the one the reader was opening (a CI run
    // read "gen-000002/l2p.bin: missing"). The reader opens again instead.
    let dir = tempfile::tempdir().unwrap();
    let mut img = Image::create(dir.path(), DriveSpec::preset(PRESET).unwrap().scaled(454).unwrap(), PRESET, 1).unwrap();
    img.commit().unwrap();
    let stop = std::sync::atomic::AtomicBool::new(false);
    let opens = std::thread::scope(|s| {
        let writer = s.spawn(|| {
            let mut commits = 0;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                img.commit().unwrap();
                commits += 1;
            }
            commits
        });
        // Every open is tried before anything is asserted, so a failure stops the writer
        // and the scope ends instead of waiting on it. 300 opens at least, until the writer
        // has committed 10 times (a loaded machine may start it late; at most 3000).
        let (mut failed, mut opens) = (Vec::new(), 0);
        while opens < 3000 && (opens < 300 || read_current(dir.path()).map_or(true, |(g, _)| g < 12)) {
            opens += 1;
            if let Err(e) = Image::open(dir.path(), false) {
                failed.push(e.to_string());
            }
        }
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        (failed, opens, writer.join().unwrap())
    });
    let (failed, opens, commits) = opens;
    assert!(commits >= 10, "the writer must commit during the opens ({commits} commits)");
    assert!(failed.is_empty(), "{} of {opens} read-only opens failed, e.g. {}", failed.len(), failed[0]);
}

#[test]
fn a_read_only_open_gets_through_a_writer_that_commits_during_every_parse() {
    // A writer committing continuously removes a generation every few milliseconds. A
    // read-only open that pinned its maps only after parsing the state and building the
    // controller (milliseconds on a loaded machine) lost the race on each of its retries
    // and called a sound image damaged (a CI run: "gen-000126/l2p.bin: missing"). Here the
    // writer commits (and removes the reader's generation) during every attempt's parse.
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().join("img");
    drop(lightly_written(&d));
    let server = d.clone();
    let commits = std::rc::Rc::new(std::cell::Cell::new(0u32));
    let counted = commits.clone();
    AFTER_STATE_READ.with(|h| {
        h.set(Some(Box::new(move || {
            let mut w = Image::open(&server, true).unwrap();
            w.ctrl.precondition(NsId(1), Pattern::Random, 4096, 64 << 10, 10 + u64::from(counted.get()), &mut |_, _| true).unwrap();
            w.commit().unwrap();
            counted.set(counted.get() + 1);
        })))
    });
    let opened = Image::open(&d, false);
    AFTER_STATE_READ.with(|h| h.set(None));
    let mut view = opened.unwrap_or_else(|e| panic!("a sound image called damaged after {} commits: {e}", commits.get()));
    assert_eq!(commits.get(), 1, "the first attempt holds its generation");
    assert_eq!(view.generation() + 1, read_current(&d).unwrap().0, "the view is the generation before the writer's commit");
    view.ctrl.check_full().unwrap();
}

/// A small image whose maps hold data (a little random writing), committed.
fn lightly_written(dir: &Path) -> Image {
    let mut img = Image::create(dir, DriveSpec::preset(PRESET).unwrap().scaled(454).unwrap(), PRESET, 1).unwrap();
    img.ctrl.precondition(NsId(1), Pattern::Random, 4096, 1 << 20, 1, &mut |_, _| true).unwrap();
    img.commit().unwrap();
    img
}

#[test]
fn a_read_only_view_loads_the_maps_of_its_generation_after_a_writer_moved_on() {
    // The maps load lazily, at the first command that needs them (`ssdtwin check`, a
    // scratch run). A writer that commits meanwhile removes the reader's generation: the
    // load read "gen-000002/p2l.bin: missing" and called a sound image damaged.
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().join("img");
    let mut writer = lightly_written(&d);
    let committed = writer.ctrl.ftl_fingerprint().unwrap();
    let mut reader = Image::open(&d, false).unwrap();
    assert!(!reader.ctrl.maps_loaded());
    for seed in 2..4 {
        writer.ctrl.precondition(NsId(1), Pattern::Random, 4096, 1 << 20, seed, &mut |_, _| true).unwrap();
        writer.commit().unwrap();
    }
    let gone = d.join(gen_name(reader.generation()));
    assert!(!gone.exists(), "the writer removed the reader's generation");
    assert_eq!(removed_files_held(&gone), 2, "the reader holds its generation's two maps");
    // The reader sees the generation it opened, whole: its maps, not the writer's newer ones.
    reader.ctrl.check_full().unwrap();
    assert_eq!(reader.ctrl.ftl_fingerprint().unwrap(), committed);
    // Loaded, the maps are not read again: the removed files are let go (their disk freed).
    assert_eq!(removed_files_held(&gone), 0, "the reader let its loaded maps' files go");
    assert_ne!(writer.ctrl.ftl_fingerprint().unwrap(), committed);
    drop(writer);
    Image::open(&d, false).unwrap().ctrl.check_full().unwrap();
}

/// How many files under `dir`, removed since, this process holds open.
fn removed_files_held(dir: &Path) -> usize {
    let prefix = dir.to_string_lossy().to_string();
    std::fs::read_dir("/proc/self/fd")
        .unwrap()
        .flatten()
        .filter_map(|e| std::fs::read_link(e.path()).ok())
        .filter(|t| {
            let t = t.to_string_lossy();
            t.starts_with(&*prefix) && t.ends_with(" (deleted)")
        })
        .count()
}

#[test]
fn read_only_views_load_their_maps_while_a_writer_commits_continuously() {
    // `ssdtwin check` beside a served image: open read-only, then load and check the maps,
    // while another thread changes the maps and commits in a loop.
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().join("img");
    let mut img = lightly_written(&d);
    let stop = std::sync::atomic::AtomicBool::new(false);
    let (failed, commits, reads) = std::thread::scope(|s| {
        let writer = s.spawn(|| {
            let mut commits = 0u64;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                img.ctrl.precondition(NsId(1), Pattern::Random, 4096, 64 << 10, commits + 2, &mut |_, _| true).unwrap();
                img.commit().unwrap();
                commits += 1;
            }
            commits
        });
        let mut failed = Vec::new();
        let mut reads = 0;
        // Every read is tried before anything is asserted, so a failure stops the writer.
        // 60 reads at least, until the writer has committed 10 generations (at most 600).
        while reads < 600 && (reads < 60 || read_current(&d).map_or(true, |(g, _)| g < 10)) {
            reads += 1;
            match Image::open(&d, false) {
                Ok(mut ro) => {
                    // Give the writer time to commit past this generation before the load.
                    std::thread::sleep(std::time::Duration::from_micros(500));
                    if let Err(e) = ro.ctrl.check_full() {
                        failed.push(e.to_string());
                    }
                }
                Err(e) => failed.push(e.to_string()),
            }
        }
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        (failed, writer.join().unwrap(), reads)
    });
    assert!(commits >= 10, "the writer must commit during the reads ({commits} commits)");
    assert!(failed.is_empty(), "{} of {reads} read-only views failed to load their maps, e.g. {}", failed.len(), failed[0]);
    Image::open(&d, false).unwrap().ctrl.check_full().unwrap();
}

#[test]
fn a_read_only_open_that_reads_a_journal_newer_than_its_current_opens_again() {
    // A reader reads CURRENT (generation g); a server commits g+1, starts g+1's journal and
    // stops (killed: the journal stays, the lock goes); the reader then reads that journal,
    // "newer than the image's", and called the image damaged. CURRENT moved: open again.
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_path_buf();
    let img = lightly_written(&d);
    let g = img.generation();
    drop(img);
    let server = d.clone();
    BEFORE_JOURNAL.with(|h| {
        h.set(Some(Box::new(move || {
            let mut w = Image::open(&server, true).unwrap();
            w.commit().unwrap();
            journal_of_writes(&mut w, 10);
        })))
    });
    let view = Image::open(&d, false).unwrap();
    assert_eq!(view.generation(), g + 1, "the reader opened the generation CURRENT moved to");
    let rec = view.recovery().expect("the journal was read");
    assert_eq!((rec.action, rec.records), (RecoveryAction::ReplayedInMemory, 10));
    drop(view);
    // A journal newer than a CURRENT that did not move is still damage, said at once.
    let mut j = JournalWriter::create(&d, g + 5).unwrap();
    j.write_out().unwrap();
    let e = Image::open(&d, false).unwrap_err().to_string();
    assert!(e.contains(&format!("it names generation {}, newer than the image's {}", g + 5, g + 1)), "{e}");
}
