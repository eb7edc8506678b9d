//! The embedded backend's write-ahead log: `fairway.wal` beside the redb file.
//!
//! A durable redb commit writes every page the transaction touched (a group commit of one job
//! dirties nine to thirteen 4 KiB pages across the events and payloads trees and redb's own
//! state) and syncs them: on this project's virtio disks an `fdatasync` of nine scattered pages
//! takes about three times as long as one of a single page (docs/store.md). So a commit is
//! instead **one record appended here and one `fdatasync`**, and its redb transaction is
//! committed with `Durability::None` (visible to readers at once, durable with the next durable
//! commit). Every so often a commit is a **checkpoint**: its redb transaction is durable, and
//! the log starts again at offset 0.
//!
//! Record: `magic "FWL1" | len u32 | crc32 u32 | seq u64 | body (len bytes)`, little-endian; the
//! CRC covers `seq` and the body. `seq` numbers commits from 1, over the store's whole life; each
//! redb transaction of a commit records its `seq` in `meta` (`wal_seq`). Body: `first_lsn u64 |
//! events u32 + bytes (the framed log record, or length 0 for none) | puts u32 | (job u32 +
//! bytes, frame u32 + bytes)* | deletes u32 | (job u32 + bytes)*`: exactly what the commit's
//! redb transaction inserts and removes.
//!
//! **Recovery.** On open, redb is at its last durable commit, whose `wal_seq` is `W`. The log
//! is read from offset 0: records `W + 1`, `W + 2`, ... are applied to redb in one durable
//! transaction, and the scan stops at the first record that is torn (bad magic, length or CRC)
//! or out of sequence. Only the last record can be torn, and it was never acknowledged: each
//! record is synced before its commit returns, and the next one is written only after. A
//! record of an earlier round of the log (before the last checkpoint) has a `seq` at most `W`,
//! so it is never taken for a new one.

use crate::{Lsn, StoreError};
use std::fs::{File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

/// The log's file inside the data directory.
pub const WAL_FILE_NAME: &str = "fairway.wal";

/// A commit whose record would take the log past this many bytes is a checkpoint instead (a
/// durable redb commit, after which the log starts again at offset 0). Recovery reads at most
/// this much.
pub(crate) const WAL_LIMIT: u64 = 32 << 20;

/// The log grows by this much at a time, written as zeros: a record then overwrites blocks the
/// file already has, and its `fdatasync` writes the data alone. An append past the file's end
/// also changes its size and block map, which the sync must write too: on this project's
/// virtio disks 204 µs p50 against 118 µs for an overwrite (docs/store.md). Zeros end a scan
/// as a torn record does.
const GROW: u64 = 1 << 20;
const _: () = assert!(
    WAL_LIMIT.is_multiple_of(GROW),
    "a grown log stays within the limit"
);

const MAGIC: [u8; 4] = *b"FWL1";
/// Magic, length, CRC, sequence number.
const HEADER: usize = 4 + 4 + 4 + 8;

/// What one commit's redb transaction writes, as the log holds it.
#[derive(Debug, PartialEq)]
pub(crate) struct Entry {
    /// The commit's number.
    pub seq: u64,
    /// The LSN of its first event (meaningful when `events` is set).
    pub first_lsn: Lsn,
    /// The framed log record of its events, if it has any.
    pub events: Option<Vec<u8>>,
    /// Payload puts: job id, framed payload.
    pub puts: Vec<(String, Vec<u8>)>,
    /// Payload deletes.
    pub deletes: Vec<String>,
}

/// One of the log's two files.
struct LogFile {
    file: File,
    path: PathBuf,
    /// Where the next record goes.
    tail: u64,
    /// The file's length: bytes written, records or zeros.
    len: u64,
    /// The number of the last record of the current round (0: none).
    last_seq: u64,
}

/// The open log: two files, [`WAL_FILE_NAME`] and [`WAL_FILE_NAME_2`], one taking the records
/// (the active one). When redb holds every commit of the other durably, the log may move to
/// it ([`Wal::switch`]): it starts again at its offset 0 while the file it left still holds
/// the commits redb does not hold durably yet. So a durable point that leaves later commits
/// out (a snapshot put in force beside commits, see `crate::applier`) still lets a file start
/// again, where one file would have to wait for a durable point with nothing after it.
pub(crate) struct Wal {
    dir: PathBuf,
    files: [Option<LogFile>; 2],
    active: usize,
}

/// The log's second file, created the first time the log moves to it.
pub const WAL_FILE_NAME_2: &str = "fairway.wal.2";

impl LogFile {
    /// Opens `path`, creating it if `create`; `None` if it does not exist and is not to be
    /// created. Returns its content too (at most [`WAL_LIMIT`] bytes).
    fn open(path: PathBuf, create: bool) -> Result<Option<(LogFile, Vec<u8>)>, StoreError> {
        let file = match OpenOptions::new()
            .create(create)
            .truncate(false)
            .read(true)
            .write(true)
            .open(&path)
        {
            Ok(file) => file,
            Err(e) if !create && e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(io("opening", &path)(e)),
        };
        let len = file
            .metadata()
            .map_err(io("reading the size of", &path))?
            .len();
        // Bounded: a record past the limit is never written (that commit is a checkpoint).
        let read = len.min(WAL_LIMIT) as usize;
        let mut content = vec![0; read];
        file.read_exact_at(&mut content, 0)
            .map_err(io("reading", &path))?;
        let log = LogFile {
            file,
            path,
            tail: 0,
            len,
            last_seq: 0,
        };
        Ok(Some((log, content)))
    }
}

impl Wal {
    /// Opens (or creates) the log in `dir` and returns it with the content of its files; the
    /// caller replays what follows its durable `wal_seq` ([`scan_files`]) and then calls
    /// [`Wal::restart`].
    pub(crate) fn open(dir: &Path) -> Result<(Wal, Vec<Vec<u8>>), StoreError> {
        let (first, first_content) =
            LogFile::open(dir.join(WAL_FILE_NAME), true)?.expect("created if missing");
        let second = LogFile::open(dir.join(WAL_FILE_NAME_2), false)?;
        let mut contents = vec![first_content];
        let second = second.map(|(log, content)| {
            contents.push(content);
            log
        });
        let wal = Wal {
            dir: dir.to_owned(),
            files: [Some(first), second],
            active: 0,
        };
        Ok((wal, contents))
    }

    fn active(&mut self) -> &mut LogFile {
        self.files[self.active]
            .as_mut()
            .expect("the active file is open")
    }

    /// Whether a record of `len` bytes fits before the limit.
    pub(crate) fn fits(&self, len: usize) -> bool {
        self.active_tail() + len as u64 <= WAL_LIMIT
    }

    /// Bytes of records redb may not hold durably: the active file's since it started again,
    /// and the other file's if the log left it for a durable point that did not cover it.
    pub(crate) fn tail(&self) -> u64 {
        self.files
            .iter()
            .flatten()
            .filter(|f| f.last_seq > 0)
            .map(|f| f.tail)
            .sum()
    }

    /// Bytes written to the active file since it started again.
    pub(crate) fn active_tail(&self) -> u64 {
        self.files[self.active].as_ref().map_or(0, |f| f.tail)
    }

    /// Appends `record` (from [`encode`]), commit number `seq`, to the active file and syncs
    /// it: durable when this returns. A record that ends past the file's end grows the file to
    /// the next multiple of [`GROW`] with zeros, synced with it.
    pub(crate) fn append(&mut self, record: &[u8], seq: u64) -> Result<(), StoreError> {
        let log = self.active();
        log.file
            .write_all_at(record, log.tail)
            .map_err(io("appending to", &log.path))?;
        let end = log.tail + record.len() as u64;
        if end > log.len {
            let grown = end.div_ceil(GROW) * GROW;
            let zeros = vec![0; (grown - end) as usize];
            log.file
                .write_all_at(&zeros, end)
                .map_err(io("growing", &log.path))?;
            log.len = grown;
        }
        log.file.sync_data().map_err(io("syncing", &log.path))?;
        log.tail = end;
        log.last_seq = seq;
        Ok(())
    }

    /// After a checkpoint: redb holds every commit durably, the next record goes at offset 0
    /// of the active file, and the other holds nothing needed.
    pub(crate) fn restart(&mut self) {
        for log in self.files.iter_mut().flatten() {
            log.tail = 0;
            log.last_seq = 0;
        }
    }

    /// redb holds every commit up to `durable` durably: if that covers the other file's
    /// records, the log moves to it, which starts again at offset 0, and the file it leaves
    /// keeps its records past `durable` until a later durable point. Whether it moved.
    pub(crate) fn switch(&mut self, durable: u64) -> Result<bool, StoreError> {
        let other = 1 - self.active;
        if self.files[other]
            .as_ref()
            .is_some_and(|f| f.last_seq > durable)
        {
            return Ok(false);
        }
        if self.files[self.active]
            .as_ref()
            .is_some_and(|f| f.last_seq <= durable)
        {
            // Nothing past the durable point in the active file either: it starts again.
            self.restart();
            return Ok(true);
        }
        if self.files[other].is_none() {
            let path = self.dir.join(WAL_FILE_NAME_2);
            let (log, _) = LogFile::open(path, true)?.expect("created");
            // Its directory entry must be durable before a record in it is acknowledged.
            crate::redb_store::sync_dir(&self.dir)?;
            self.files[other] = Some(log);
        }
        let log = self.files[other].as_mut().expect("opened above");
        log.tail = 0;
        log.last_seq = 0;
        self.active = other;
        Ok(true)
    }
}

fn io(context: &str, path: &Path) -> impl FnOnce(std::io::Error) -> StoreError {
    let context = format!("{context} the write-ahead log {}", path.display());
    move |source| StoreError::Io { context, source }
}

impl Entry {
    /// About how many bytes it holds.
    pub(crate) fn bytes(&self) -> usize {
        self.events.as_ref().map_or(0, Vec::len)
            + self
                .puts
                .iter()
                .map(|(j, f)| j.len() + f.len())
                .sum::<usize>()
            + self.deletes.iter().map(String::len).sum::<usize>()
    }
}

/// `entry` as one record, header and body, ready for [`Wal::append`].
pub(crate) fn encode(entry: &Entry) -> Result<Vec<u8>, StoreError> {
    let Entry {
        seq,
        first_lsn,
        events,
        puts,
        deletes,
    } = entry;
    let events = events.as_deref();
    let body_len = 8
        + 4
        + events.map_or(0, <[u8]>::len)
        + 4
        + puts
            .iter()
            .map(|(j, f)| 8 + j.len() + f.len())
            .sum::<usize>()
        + 4
        + deletes.iter().map(|j| 4 + j.len()).sum::<usize>();
    let len = u32::try_from(body_len)
        .map_err(|_| StoreError::Invalid(format!("a commit of {body_len} bytes")))?;
    let mut out = Vec::with_capacity(HEADER + body_len);
    out.extend_from_slice(&MAGIC);
    out.extend_from_slice(&len.to_le_bytes());
    out.extend_from_slice(&[0; 4]);
    out.extend_from_slice(&seq.to_le_bytes());
    out.extend_from_slice(&first_lsn.to_le_bytes());
    put_bytes(&mut out, events.unwrap_or_default());
    out.extend_from_slice(&(puts.len() as u32).to_le_bytes());
    for (job, frame) in puts {
        put_bytes(&mut out, job.as_bytes());
        put_bytes(&mut out, frame);
    }
    out.extend_from_slice(&(deletes.len() as u32).to_le_bytes());
    for job in deletes {
        put_bytes(&mut out, job.as_bytes());
    }
    let crc = crc32fast::hash(&out[12..]);
    out[8..12].copy_from_slice(&crc.to_le_bytes());
    Ok(out)
}

fn put_bytes(out: &mut Vec<u8>, bytes: &[u8]) {
    out.extend_from_slice(&(bytes.len() as u32).to_le_bytes());
    out.extend_from_slice(bytes);
}

/// The records of `content` that follow `after` (the durable `wal_seq`), in order: the log
/// of one file ([`scan_files`] for both).
#[cfg(test)]
pub(crate) fn scan(content: &[u8], after: u64) -> Result<Vec<Entry>, StoreError> {
    scan_files(&[content], after)
}

/// The records of the log's files (`contents`) that follow `after` (the durable `wal_seq`), in
/// order.
///
/// Each file's current round starts at offset 0 and goes on while each record is whole and
/// numbered one more than the one before ([`scan_round`]). Together the rounds hold every
/// commit past the durable one: a file starts a new round only once redb holds every commit
/// before durably, and a record of an earlier round past its end is numbered lower, so it ends
/// the round. Their first records may be durable already (redb may make non-durable commits
/// durable on its own, when it closes). Past `after`, the two rounds' records follow each
/// other without a gap (the older file's, then the newer's): a commit missing between them is
/// missing from both redb and the log, and a whole record (its CRC right) that does not decode
/// is damage; both are errors, not torn writes.
pub(crate) fn scan_files(contents: &[&[u8]], after: u64) -> Result<Vec<Entry>, StoreError> {
    let mut out = Vec::new();
    for content in contents {
        out.extend(scan_round(content, after)?);
    }
    out.sort_by_key(|e| e.seq);
    for (expected, entry) in (after + 1..).zip(&out) {
        if entry.seq != expected {
            return Err(damaged(if expected == after + 1 {
                format!(
                    "the log goes on from commit {}, but redb holds commits up to {after} only",
                    entry.seq
                )
            } else {
                format!(
                    "the log holds commit {} after {}: a commit between is missing",
                    entry.seq,
                    expected - 1
                )
            }));
        }
    }
    Ok(out)
}

fn damaged(message: String) -> StoreError {
    StoreError::Backend {
        context: "replaying the write-ahead log".into(),
        message,
    }
}

/// The records of one file's current round numbered past `after`, in order.
fn scan_round(content: &[u8], after: u64) -> Result<Vec<Entry>, StoreError> {
    let mut out = Vec::new();
    let mut at = 0usize;
    let mut previous: Option<u64> = None;
    while let Some(header) = content.get(at..at + HEADER) {
        if header[..4] != MAGIC {
            break;
        }
        let len = u32::from_le_bytes(header[4..8].try_into().expect("4 bytes")) as usize;
        let crc = u32::from_le_bytes(header[8..12].try_into().expect("4 bytes"));
        let seq = u64::from_le_bytes(header[12..20].try_into().expect("8 bytes"));
        let Some(body) = content.get(at + HEADER..at + HEADER + len) else {
            break;
        };
        if crc32fast::hash(&content[at + 12..at + HEADER + len]) != crc
            || previous.is_some_and(|p| seq != p + 1)
        {
            break;
        }
        previous = Some(seq);
        if seq > after {
            out.push(decode(seq, body).ok_or_else(|| {
                damaged(format!(
                    "record {seq} at offset {at} passes its CRC but does not decode"
                ))
            })?);
        }
        at += HEADER + len;
    }
    Ok(out)
}

fn decode(seq: u64, body: &[u8]) -> Option<Entry> {
    let mut r = Reader(body);
    let first_lsn = u64::from_le_bytes(r.take(8)?.try_into().ok()?);
    let events = r.bytes()?;
    let events = (!events.is_empty()).then(|| events.to_vec());
    let mut puts = Vec::new();
    for _ in 0..r.count()? {
        let job = String::from_utf8(r.bytes()?.to_vec()).ok()?;
        puts.push((job, r.bytes()?.to_vec()));
    }
    let mut deletes = Vec::new();
    for _ in 0..r.count()? {
        deletes.push(String::from_utf8(r.bytes()?.to_vec()).ok()?);
    }
    r.0.is_empty().then_some(Entry {
        seq,
        first_lsn,
        events,
        puts,
        deletes,
    })
}

struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let (head, rest) = self.0.split_at_checked(n)?;
        self.0 = rest;
        Some(head)
    }

    fn count(&mut self) -> Option<u32> {
        Some(u32::from_le_bytes(self.take(4)?.try_into().ok()?))
    }

    fn bytes(&mut self) -> Option<&'a [u8]> {
        let n = self.count()? as usize;
        self.take(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(seq: u64) -> Entry {
        Entry {
            seq,
            first_lsn: seq * 10,
            events: Some(b"events".to_vec()),
            puts: vec![("job-a".to_string(), vec![seq as u8; 3])],
            deletes: vec!["job-b".to_string()],
        }
    }

    fn record(seq: u64) -> Vec<u8> {
        encode(&entry(seq)).unwrap()
    }

    fn empty(seq: u64) -> Entry {
        Entry {
            seq,
            first_lsn: 0,
            events: None,
            puts: vec![],
            deletes: vec![],
        }
    }

    #[test]
    fn records_round_trip_in_sequence() {
        let content: Vec<u8> = (1..=3).flat_map(record).collect();
        let entries = scan(&content, 0).unwrap();
        assert_eq!(entries.len(), 3);
        assert_eq!(entries[1], entry(2));
        let none = encode(&empty(4)).unwrap();
        assert_eq!(scan(&none, 3).unwrap()[0], empty(4));
    }

    /// The scan takes only the records after the durable sequence number, stops at a torn or
    /// damaged record, and never takes an earlier round's record (a lower number) for a new one.
    #[test]
    fn the_scan_stops_at_a_torn_record_or_a_break_in_the_sequence() {
        let content: Vec<u8> = (1..=3).flat_map(record).collect();
        assert!(scan(&content, 3).unwrap().is_empty(), "all durable already");
        let seqs = |entries: Vec<Entry>| entries.iter().map(|e| e.seq).collect::<Vec<_>>();
        assert_eq!(
            seqs(scan(&content, 1).unwrap()),
            [2, 3],
            "the round's first record is durable already"
        );
        assert!(
            matches!(
                scan(&content[record(1).len()..], 0),
                Err(StoreError::Backend { .. })
            ),
            "commit 1 is in neither redb nor the log"
        );
        let one = record(1).len();
        for cut in [one + 1, one + HEADER, content.len() - 1] {
            let entries = scan(&content[..cut], 0).unwrap();
            assert_eq!(entries.len(), if cut == content.len() - 1 { 2 } else { 1 });
        }
        let mut flipped = content.clone();
        flipped[one + HEADER + 3] ^= 1;
        assert_eq!(
            scan(&flipped, 0).unwrap().len(),
            1,
            "a bad CRC ends the log"
        );
        // A new round over an old one: record 7 at offset 0, then the old round's record 2.
        let mut rounds = record(7);
        rounds.extend(record(2));
        assert_eq!(scan(&rounds, 6).unwrap().len(), 1);
        assert!(scan(&[0; 64], 0).unwrap().is_empty(), "zeros are no record");
    }

    #[test]
    fn a_whole_record_that_does_not_decode_is_an_error() {
        let mut bad = encode(&empty(1)).unwrap();
        bad.push(0);
        let len = (bad.len() - HEADER) as u32;
        bad[4..8].copy_from_slice(&len.to_le_bytes());
        let crc = crc32fast::hash(&bad[12..]);
        bad[8..12].copy_from_slice(&crc.to_le_bytes());
        assert!(matches!(scan(&bad, 0), Err(StoreError::Backend { .. })));
    }

    #[test]
    fn the_log_appends_and_reopens_with_its_content() {
        let dir = std::env::temp_dir().join(format!("fairway-wal-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let (mut wal, content) = Wal::open(&dir).unwrap();
        assert_eq!(content, vec![Vec::<u8>::new()], "one file, empty");
        wal.append(&record(1), 1).unwrap();
        wal.append(&record(2), 2).unwrap();
        assert_eq!(wal.tail(), (record(1).len() + record(2).len()) as u64);
        let file_len = || std::fs::metadata(dir.join(WAL_FILE_NAME)).unwrap().len();
        assert_eq!(file_len(), GROW, "grown with zeros ahead of the records");
        wal.append(&vec![7; GROW as usize], 3).unwrap();
        assert_eq!(file_len(), 2 * GROW, "grown again, to the next multiple");
        drop(wal);
        let (mut wal, content) = Wal::open(&dir).unwrap();
        assert_eq!(scan(&content[0], 0).unwrap().len(), 2);
        wal.restart();
        wal.append(&record(3), 3).unwrap();
        drop(wal);
        let (_, content) = Wal::open(&dir).unwrap();
        assert_eq!(
            scan(&content[0], 2).unwrap().len(),
            1,
            "record 3 over record 1"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    fn seqs_of(entries: Vec<Entry>) -> Vec<u64> {
        entries.iter().map(|e| e.seq).collect()
    }

    // Proves: the log moves to its other file only when a durable point covers that file's
    // records, and starts again in the same file when it covers the active one's too; read
    // back, the two files' rounds give every commit past the durable one in order, and a
    // commit missing between them (a file lost) is an error, not a shorter log.
    #[test]
    fn the_log_moves_between_its_two_files_at_durable_points() {
        let dir = std::env::temp_dir().join(format!("fairway-wal2-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let (mut wal, _) = Wal::open(&dir).unwrap();
        wal.append(&record(1), 1).unwrap();
        wal.append(&record(2), 2).unwrap();
        assert!(!dir.join(WAL_FILE_NAME_2).exists());
        assert!(wal.switch(1).unwrap(), "the other file holds nothing");
        assert!(dir.join(WAL_FILE_NAME_2).exists());
        assert_eq!(wal.active_tail(), 0);
        wal.append(&record(3), 3).unwrap();
        wal.append(&record(4), 4).unwrap();
        assert_eq!(
            wal.tail(),
            (record(2).len() * 4) as u64,
            "both files hold commits past the durable point"
        );
        assert!(
            wal.switch(2).unwrap(),
            "commit 2, the first file's last, is durable"
        );
        wal.append(&record(5), 5).unwrap();
        assert!(
            !wal.switch(3).unwrap(),
            "commit 4, in the second file, is not durable"
        );
        drop(wal);
        let (_, contents) = Wal::open(&dir).unwrap();
        let contents: Vec<&[u8]> = contents.iter().map(Vec::as_slice).collect();
        assert_eq!(contents.len(), 2);
        assert_eq!(seqs_of(scan_files(&contents, 2).unwrap()), vec![3, 4, 5]);
        assert_eq!(seqs_of(scan_files(&contents, 4).unwrap()), vec![5]);
        assert!(
            matches!(scan_files(&contents, 1), Err(StoreError::Backend { .. })),
            "commit 2 was written over: redb must hold it"
        );
        assert!(
            matches!(
                scan_files(&contents[..1], 2),
                Err(StoreError::Backend { .. })
            ),
            "commits 3 and 4 missing"
        );
        let (mut wal, _) = Wal::open(&dir).unwrap();
        wal.restart();
        wal.append(&record(6), 6).unwrap();
        assert!(wal.switch(6).unwrap());
        assert_eq!(wal.tail(), 0, "every commit durable: the log starts again");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
