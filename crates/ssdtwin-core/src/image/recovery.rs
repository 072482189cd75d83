//! Recovering a journal a server left behind when it did not shut down cleanly: replay and
//! commit (writable), replay in memory (read-only), discard a stale one, or, with
//! `check --repair`, replay the intact part before the damage and keep a copy.

use serde::Serialize;
use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};

use super::{gen_name, lock_held, Image, ImageError, OpenMode};
use crate::fsio::{self, Entry};
use crate::journal::{self, Record, Tail};

/// What opening did with a journal a server left behind.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RecoveryAction {
    /// Writable open: replayed and committed as a new generation.
    Replayed,
    /// Read-only open of an unlocked image: replayed in memory only.
    ReplayedInMemory,
    /// A stale journal (its generation is committed) or one torn while being created.
    Discarded,
    /// `check --repair`: the intact part before the damage replayed, the rest dropped.
    Repaired,
}

/// What [`Image::open`] did with a journal left by a server that did not shut down cleanly.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Recovery {
    pub action: RecoveryAction,
    /// The journal's generation (if its header could be read) and the image's before opening.
    pub journal_generation: Option<u64>,
    pub image_generation: u64,
    pub records: u64,
    /// Bytes after the last intact record (a record torn by the kill, or, when repairing,
    /// the damaged part), not replayed.
    pub ignored_bytes: u64,
    /// Intact records after the damage that a repair dropped.
    pub dropped_records: u64,
    /// Where a repair kept the damaged journal.
    pub kept_copy: Option<PathBuf>,
    pub detail: String,
}

impl std::fmt::Display for Recovery {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "journal {:?}: {}", self.action, self.detail)
    }
}

impl Image {
    /// Replay a journal left by a server that was killed (see [`crate::journal`]).
    ///
    /// Writable: replay, count an unsafe shutdown (the drive lost power without a shutdown
    /// notification), commit a new generation and remove the journal. Read-only: replay in
    /// memory only, and only if no process holds the image lock (a live server is still
    /// appending; readers use its `live.json` instead). A journal of an older generation is
    /// stale (its effects are committed) and is removed by a writer. A damaged journal is
    /// refused (except by [`OpenMode::Repair`]).
    pub(super) fn recover_journal(&mut self, mode: OpenMode) -> Result<(), ImageError> {
        let path = self.dir.join(journal::FILE);
        let bytes = match fsio::read(&path) {
            Ok(b) => b,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(e.into()),
        };
        let writable = mode != OpenMode::ReadOnly;
        if !writable && lock_held(&self.dir) {
            return Ok(());
        }
        let image_generation = self.generation;
        let mut rec = Recovery {
            action: RecoveryAction::Discarded,
            journal_generation: None,
            image_generation,
            records: 0,
            ignored_bytes: 0,
            dropped_records: 0,
            kept_copy: None,
            detail: String::new(),
        };
        let journal_damaged =
            |offset: u64, detail: String| ImageError::JournalDamaged { path: path.clone(), dir: self.dir.clone(), offset, detail };
        match journal::parse_header(&bytes) {
            Err(journal::HeaderError::Short { .. }) => {
                // Torn while being created: the server had not started, nothing was acknowledged.
                rec.detail = format!(
                    "{} is {} bytes, shorter than its header (the server died starting up); nothing to replay",
                    path.display(),
                    bytes.len()
                );
            }
            // A header that does not check, or names a generation the image never had: no
            // record can be trusted to belong to this image. The error says `check --repair`
            // drops the journal from byte 0; a repair that refused it too sent the user round
            // in a circle. It drops all of it, keeping a copy, and opens the committed state.
            Err(why) if mode == OpenMode::Repair => {
                self.drop_whole_journal(&path, &mut rec, &format!("its header does not check ({why})"))?
            }
            Err(why) => return Err(journal_damaged(0, format!("its header does not check ({why})"))),
            Ok(g) if g > image_generation && mode == OpenMode::Repair => {
                let why = format!("it names generation {g}, newer than the image's {image_generation}");
                self.drop_whole_journal(&path, &mut rec, &why)?
            }
            Ok(g) if g < image_generation => {
                rec.journal_generation = Some(g);
                rec.detail = format!(
                    "{} belongs to generation {g}, the image is at {image_generation}: its commands are already committed",
                    path.display()
                );
            }
            Ok(g) if g > image_generation => {
                return Err(journal_damaged(
                    0,
                    format!("it names generation {g}, newer than the image's {image_generation} (CURRENT was changed by hand?)"),
                ));
            }
            Ok(g) => {
                rec.journal_generation = Some(g);
                let parsed = journal::parse(&bytes[journal::HEADER_LEN..]);
                let mut note = String::new();
                match &parsed.tail {
                    Tail::Clean => {}
                    Tail::Torn { bytes, .. } => {
                        rec.ignored_bytes = *bytes;
                        note = format!(" ({bytes} bytes of a torn last record ignored)");
                    }
                    Tail::Damaged { offset, bytes, intact_after } => {
                        if mode != OpenMode::Repair {
                            return Err(journal_damaged(
                                *offset,
                                format!("{} intact records and {bytes} bytes follow a record that does not check", intact_after.len()),
                            ));
                        }
                        let copy = self.keep_copy(&path, g)?;
                        rec.action = RecoveryAction::Repaired;
                        rec.ignored_bytes = *bytes;
                        rec.dropped_records = intact_after.len() as u64;
                        note = format!(
                            "; dropped from byte {offset}: {bytes} bytes holding {} ({}); the data files keep what the server stored; the damaged journal is kept as {}",
                            summarize(intact_after),
                            "commands a client may have seen acknowledged",
                            copy.display()
                        );
                        rec.kept_copy = Some(copy);
                    }
                }
                journal::replay(&mut self.ctrl, &parsed.records).map_err(|e| ImageError::Damaged {
                    path: path.clone(),
                    reason: format!("does not replay onto generation {g}: {e}; move the file away to open the committed state without it"),
                })?;
                self.ctrl.power_cycle(true);
                rec.records = parsed.records.len() as u64;
                if rec.action != RecoveryAction::Repaired {
                    rec.action = if writable { RecoveryAction::Replayed } else { RecoveryAction::ReplayedInMemory };
                }
                rec.detail = format!(
                    "{} records of a server that did not shut down cleanly replayed onto generation {g}{note}",
                    parsed.records.len()
                );
                if writable {
                    self.commit()?;
                }
            }
        }
        if writable {
            fsio::remove_file(&path)?;
            fsio::sync_dir(&self.dir)?;
        }
        self.recovery = Some(rec);
        Ok(())
    }

    /// `check --repair` of a journal whose header cannot be trusted: keep a copy, replay
    /// nothing (the caller removes the file).
    fn drop_whole_journal(&self, path: &Path, rec: &mut Recovery, why: &str) -> Result<(), ImageError> {
        let copy = self.keep_copy(path, self.generation)?;
        rec.action = RecoveryAction::Repaired;
        rec.ignored_bytes = fsio::read(path)?.len() as u64;
        rec.detail = format!(
            "{}: {why}; dropped whole ({} bytes, none replayed); the data files keep what the server stored; the damaged journal is kept as {}",
            path.display(),
            rec.ignored_bytes,
            copy.display()
        );
        rec.kept_copy = Some(copy);
        Ok(())
    }

    /// Copy a damaged journal aside before a repair drops part of it.
    fn keep_copy(&self, path: &Path, generation: u64) -> Result<PathBuf, ImageError> {
        let mut n = 0;
        let copy = loop {
            let name = if n == 0 {
                format!("journal.damaged-{}.bin", gen_name(generation))
            } else {
                format!("journal.damaged-{}.{n}.bin", gen_name(generation))
            };
            let p = self.dir.join(name);
            if matches!(fsio::entry(&p)?, Entry::Missing) {
                break p;
            }
            n += 1;
        };
        let bytes = fsio::read(path)?;
        fsio::write_file_synced(&copy, &bytes)?;
        fsio::sync_dir(&self.dir)?;
        Ok(copy)
    }

    /// What opening did with a journal, if there was one.
    pub fn recovery(&self) -> Option<&Recovery> {
        self.recovery.as_ref()
    }
}

/// Counts of the record kinds a repair drops, in words.
fn summarize(records: &[Record]) -> String {
    let mut counts: BTreeMap<&str, u64> = BTreeMap::new();
    for r in records {
        let k = match r {
            Record::Write { .. } => "writes",
            Record::Read { .. } => "reads",
            Record::Deallocate { .. } => "deallocates",
            Record::IdleGc { .. } => "background-GC steps",
            Record::Clock { .. } => "clock records",
            Record::Check { .. } => "flush checkpoints",
        };
        *counts.entry(k).or_default() += 1;
    }
    if counts.is_empty() {
        return "no intact record".into();
    }
    counts.iter().map(|(k, n)| format!("{n} {k}")).collect::<Vec<_>>().join(", ")
}
