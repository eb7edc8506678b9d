//! The persisted record types and their framing: the only bytes the store writes.
//!
//! Every record, in every backend, is one frame:
//!
//! ```text
//! offset 0        4          8
//!        +--------+----------+---------------------------+
//!        | len    | crc32    | payload (len bytes)       |
//!        | u32 LE | u32 LE   | postcard(Record::Vn(..))  |
//!        +--------+----------+---------------------------+
//! ```
//!
//! `len` counts the payload bytes only; `crc32` is the CRC-32 (IEEE, as computed by `crc32fast`)
//! of the payload. A frame is stored as one value (one redb value, one PostgreSQL `bytea`), so a
//! decoder knows the frame's true size and checks `len` against it: a torn frame (shorter than its
//! header says) or an extended one is refused before the CRC is even computed.
//!
//! The payload is a postcard-encoded versioned enum ([`LogRecord`], [`SnapshotRecord`]).
//! postcard is not self-describing, so **never reorder or remove variants or fields** of these
//! types or of the engine's [`Event`]; evolve by adding `V2` at the end and upgrading on read.
//!
//! **Architecture invariant:** decoding never panics and never allocates more than a small
//! multiple of its input, whatever the input bytes are (fuzz targets call [`decode_event`]).

use fairway_core::Event;
use fairway_core::varint::varint;
use serde::{Deserialize, Serialize};
use std::fmt;

/// Bytes in a frame header: `len` then `crc32`.
pub const FRAME_HEADER_LEN: usize = 8;

/// The versions of a log record, as they are read back.
///
/// Variant order is the wire format: append new versions, never reorder.
#[derive(Clone, Debug, PartialEq, Deserialize)]
pub enum LogRecord {
    /// Version 1: one engine event (boxed in memory; postcard writes a box as its content).
    V1(Box<Event>),
    /// Version 2: a group of consecutive events (one group commit), each held as its own
    /// framed `V1` record, so that damage inside the group is refused at the LSN of the event
    /// it hit. [`encode_events`] writes it; [`decode_events`] reads it without copying.
    V2(Vec<Bytes>),
}

/// The same wire format as [`LogRecord`], borrowed, so that encoding does not clone the event.
#[derive(Serialize)]
enum LogRecordRef<'a> {
    V1(&'a Event),
}

/// The number of [`LogRecord`] versions this build can read.
const LOG_RECORD_VERSIONS: u32 = 2;

/// The versions of a snapshot record.
///
/// Variant order is the wire format: append new versions, never reorder.
#[derive(Clone, Debug, PartialEq, Deserialize)]
pub enum SnapshotRecord {
    /// Version 1: the engine's opaque snapshot bytes.
    V1(Bytes),
}

/// [`SnapshotRecord`] borrowing its bytes, as serde would write it: the reference
/// [`snapshot_frame_head`] is tested against.
#[cfg(test)]
#[derive(Serialize)]
enum SnapshotRecordRef<'a> {
    V1(BytesRef<'a>),
}

/// The number of [`SnapshotRecord`] versions this build can read.
const SNAPSHOT_RECORD_VERSIONS: u32 = 1;

/// Opaque bytes, encoded as postcard's byte array (a varint length, then the bytes).
///
/// The wire format is the same as a `Vec<u8>`'s, but it is read and written in one copy instead
/// of one serde call per byte, which matters for snapshots of many megabytes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Bytes(pub Vec<u8>);

#[cfg(test)]
struct BytesRef<'a>(&'a [u8]);

#[cfg(test)]
impl Serialize for BytesRef<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_bytes(self.0)
    }
}

impl<'de> Deserialize<'de> for Bytes {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Bytes, D::Error> {
        struct Visitor;
        impl<'de> serde::de::Visitor<'de> for Visitor {
            type Value = Bytes;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a byte array")
            }
            fn visit_bytes<E: serde::de::Error>(self, v: &[u8]) -> Result<Bytes, E> {
                Ok(Bytes(v.to_vec()))
            }
            fn visit_byte_buf<E: serde::de::Error>(self, v: Vec<u8>) -> Result<Bytes, E> {
                Ok(Bytes(v))
            }
        }
        deserializer.deserialize_byte_buf(Visitor)
    }
}

/// Why a frame could not be decoded. None of these is ever "skip and go on": the store reports
/// the record (by LSN or name) and refuses to recover past it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CodecError {
    /// Fewer bytes than a frame header.
    TooShort {
        /// Bytes present.
        len: usize,
    },
    /// The header's length disagrees with the bytes stored: a torn or overwritten record.
    LengthMismatch {
        /// Payload length the header claims.
        header: u32,
        /// Payload bytes actually present.
        actual: usize,
    },
    /// The payload's CRC does not match the header: the bytes changed after they were written.
    Checksum {
        /// CRC in the header.
        stored: u32,
        /// CRC of the payload as read.
        computed: u32,
    },
    /// The record is of a version this build does not know (written by a newer build).
    UnknownVersion {
        /// Version found (1-based, as in `V1`).
        found: u32,
        /// Newest version this build reads.
        supported: u32,
    },
    /// The payload passed its CRC but is not a valid record: a bug in the writer, or a
    /// persisted type that was changed incompatibly.
    Malformed(String),
    /// A record too large to frame (its payload must fit a `u32` length).
    TooLarge {
        /// Payload bytes.
        len: usize,
    },
}

impl fmt::Display for CodecError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CodecError::TooShort { len } => write!(
                f,
                "record is {len} bytes, shorter than its {FRAME_HEADER_LEN}-byte header"
            ),
            CodecError::LengthMismatch { header, actual } => write!(
                f,
                "header says {header} payload bytes but {actual} are stored (torn or overwritten record)"
            ),
            CodecError::Checksum { stored, computed } => write!(
                f,
                "checksum mismatch: header has {stored:#010x}, payload hashes to {computed:#010x}"
            ),
            CodecError::UnknownVersion { found, supported } => write!(
                f,
                "record version {found} is newer than this build reads (up to {supported}); upgrade fairway"
            ),
            CodecError::Malformed(why) => write!(f, "malformed record payload: {why}"),
            CodecError::TooLarge { len } => {
                write!(f, "record payload of {len} bytes does not fit a frame")
            }
        }
    }
}

impl std::error::Error for CodecError {}

/// Frames an event as `[len][crc32][postcard(LogRecord::V1(event))]`.
pub fn encode_event(event: &Event) -> Result<Vec<u8>, CodecError> {
    frame(&LogRecordRef::V1(event))
}

/// Decodes one framed event (a `V1` record), verifying its length, CRC and version. A group
/// (`V2`) is refused as `Malformed`: read it with [`decode_events`].
pub fn decode_event(bytes: &[u8]) -> Result<Event, CodecError> {
    let payload = unframe(bytes)?;
    check_version(payload, LOG_RECORD_VERSIONS)?;
    match take_varint(payload)? {
        (0, event) => take_all::<Event>(event),
        _ => Err(CodecError::Malformed(
            "a group of events (log record version 2), not one event".into(),
        )),
    }
}

/// Frames consecutive events as one log record, `[len][crc32][postcard(LogRecord::V2(frames))]`,
/// where each of `frames` is the event's own [`encode_event`] frame. One record per group
/// commit: the embedded store inserts one value per turn instead of one per event.
pub fn encode_events(events: &[Event]) -> Result<Vec<u8>, CodecError> {
    let mut out = Vec::with_capacity(FRAME_HEADER_LEN + 10 + events.len() * 64);
    out.extend_from_slice(&[0; FRAME_HEADER_LEN]);
    varint(&mut out, 1);
    varint(&mut out, events.len() as u64);
    let mut scratch = Vec::new();
    for event in events {
        scratch.clear();
        scratch.extend_from_slice(&[0; FRAME_HEADER_LEN]);
        let frame = seal(
            postcard::to_extend(&LogRecordRef::V1(event), scratch)
                .map_err(|e| CodecError::Malformed(e.to_string()))?,
        )?;
        varint(&mut out, frame.len() as u64);
        out.extend_from_slice(&frame);
        scratch = frame;
    }
    seal(out)
}

/// Frames already framed events (each a `V1` record) as one `V2` group record.
pub fn group_frames(frames: &[&[u8]]) -> Result<Vec<u8>, CodecError> {
    let len: usize = frames.iter().map(|f| f.len() + 5).sum();
    let mut out = Vec::with_capacity(FRAME_HEADER_LEN + 10 + len);
    out.extend_from_slice(&[0; FRAME_HEADER_LEN]);
    varint(&mut out, 1);
    varint(&mut out, frames.len() as u64);
    for frame in frames {
        varint(&mut out, frame.len() as u64);
        out.extend_from_slice(frame);
    }
    seal(out)
}

/// A log record's damage: the index, within the record, of the event it hit (0 when it is in
/// what the record's own header covers and no event can be named), and what is wrong.
pub type RecordError = (usize, CodecError);

/// Decodes one log record of either version into its events: one for `V1`, the group for
/// `V2`. Every event's own frame is checked too. When the record's frame is damaged, the
/// error names the first event whose own frame is damaged, so that the store refuses the
/// record at that event's LSN.
pub fn decode_events(bytes: &[u8]) -> Result<Vec<Event>, RecordError> {
    split_record(bytes)?
        .into_iter()
        .enumerate()
        .map(|(i, frame)| decode_event(frame).map_err(|e| (i, e)))
        .collect()
}

/// The events' frames of one log record, checked by the record's own length and CRC (not yet
/// each event's): the record itself for `V1`, its frames for `V2`.
pub fn split_record(bytes: &[u8]) -> Result<Vec<&[u8]>, RecordError> {
    let payload = match unframe(bytes) {
        Ok(payload) => payload,
        Err(e) => return Err(locate_damage(bytes, e)),
    };
    check_version(payload, LOG_RECORD_VERSIONS).map_err(|e| (0, e))?;
    let (version, rest) = take_varint(payload).map_err(|e| (0, e))?;
    if version == 0 {
        return Ok(vec![bytes]);
    }
    let (count, mut rest) = take_varint(rest).map_err(|e| (0, e))?;
    if count == 0 {
        return Err((0, CodecError::Malformed("a group of no events".into())));
    }
    // Each frame is at least a header: a count beyond that is not what a writer wrote.
    if count > (rest.len() / FRAME_HEADER_LEN) as u64 {
        return Err((
            0,
            CodecError::Malformed(format!("a group claims {count} events")),
        ));
    }
    let mut frames = Vec::with_capacity(count as usize);
    for i in 0..count as usize {
        let (frame, after) = take_frame(rest).map_err(|e| (i, e))?;
        frames.push(frame);
        rest = after;
    }
    if !rest.is_empty() {
        return Err((
            frames.len() - 1,
            CodecError::Malformed(format!("{} trailing bytes after the group", rest.len())),
        ));
    }
    Ok(frames)
}

/// How many events a log record holds, read from its header (`None` when the record's frame
/// is damaged; recovery then refuses it).
pub fn record_len(bytes: &[u8]) -> Option<u64> {
    let payload = unframe(bytes).ok()?;
    match take_varint(payload).ok()? {
        (0, _) => Some(1),
        (1, rest) => take_varint(rest).ok().map(|(count, _)| count),
        _ => None,
    }
}

/// Names the event a damaged record's frame error is about: the first event of a group
/// whose own frame fails its checks, read past the record's failed header. A record whose
/// frames all check (its own header was hit) is refused at its first event.
fn locate_damage(bytes: &[u8], error: CodecError) -> RecordError {
    let mut rest = bytes.get(FRAME_HEADER_LEN..).unwrap_or(&[]);
    let Ok((1, after)) = take_varint(rest) else {
        return (0, error);
    };
    let Ok((count, after)) = take_varint(after) else {
        return (0, error);
    };
    rest = after;
    for i in 0..count.min(rest.len() as u64) as usize {
        match take_varint(rest) {
            Ok((len, after)) => {
                let Some(end) = usize::try_from(len).ok().filter(|&l| l <= after.len()) else {
                    // Its length runs past the record: it was cut short (its own length check
                    // says so), or its length was hit.
                    return (i, decode_event(after).err().unwrap_or(error));
                };
                if let Err(e) = decode_event(&after[..end]) {
                    return (i, e);
                }
                rest = &after[end..];
            }
            // The record ends before this event's frame: cut short (its length is wrong), it
            // is the first event missing; at its full length, the count was hit.
            Err(_) => {
                let cut = matches!(error, CodecError::LengthMismatch { .. });
                return (if cut { i } else { 0 }, error);
            }
        }
    }
    (0, error)
}

/// One length-prefixed frame of a group, and what follows it.
fn take_frame(bytes: &[u8]) -> Result<(&[u8], &[u8]), CodecError> {
    let (len, rest) = take_varint(bytes)?;
    match usize::try_from(len).ok().filter(|&l| l <= rest.len()) {
        Some(len) => Ok(rest.split_at(len)),
        None => Err(CodecError::Malformed(format!(
            "a frame of {len} bytes in a group with {} left",
            rest.len()
        ))),
    }
}

/// A postcard varint (unsigned LEB128), and what follows it.
fn take_varint(bytes: &[u8]) -> Result<(u64, &[u8]), CodecError> {
    postcard::take_from_bytes::<u64>(bytes)
        .map_err(|e| CodecError::Malformed(format!("a length: {e}")))
}

/// Frames the engine's opaque snapshot bytes as `[len][crc32][postcard(SnapshotRecord::V1(bytes))]`.
pub fn encode_snapshot(bytes: &[u8]) -> Result<Vec<u8>, CodecError> {
    let mut out = snapshot_frame_head(&[bytes])?;
    out.extend_from_slice(bytes);
    Ok(out)
}

/// What [`encode_snapshot`] writes before the snapshot's bytes, given as `pieces` one after
/// the other (the frame's header, the record's variant and the bytes' length): that head
/// followed by the pieces is the whole frame. A snapshot holds the engine's whole state (tens
/// of MB on a busy server, most of it shared with the engine, see `SnapshotSource`), so a
/// store that writes it to a file writes the head and the pieces one after the other instead
/// of copying the state into one frame.
pub fn snapshot_frame_head(pieces: &[&[u8]]) -> Result<Vec<u8>, CodecError> {
    let bytes_len: usize = pieces.iter().map(|p| p.len()).sum();
    // postcard: the variant index (`V1` is 0), then the bytes as a varint length and the bytes.
    let mut head = vec![0; FRAME_HEADER_LEN];
    varint(&mut head, 0);
    varint(&mut head, bytes_len as u64);
    let payload_len = head.len() - FRAME_HEADER_LEN + bytes_len;
    let len = u32::try_from(payload_len).map_err(|_| CodecError::TooLarge { len: payload_len })?;
    let mut crc = crc32fast::Hasher::new();
    crc.update(&head[FRAME_HEADER_LEN..]);
    for piece in pieces {
        crc.update(piece);
    }
    head[0..4].copy_from_slice(&len.to_le_bytes());
    head[4..8].copy_from_slice(&crc.finalize().to_le_bytes());
    Ok(head)
}

/// Decodes one framed snapshot back to the engine's bytes, verifying its length, CRC and version.
pub fn decode_snapshot(bytes: &[u8]) -> Result<Vec<u8>, CodecError> {
    let payload = unframe(bytes)?;
    check_version(payload, SNAPSHOT_RECORD_VERSIONS)?;
    match take_all::<SnapshotRecord>(payload)? {
        SnapshotRecord::V1(Bytes(bytes)) => Ok(bytes),
    }
}

/// Frames opaque bytes (a job payload) as `[len][crc32][bytes]`, with no version enum: the bytes
/// are the producer's, and the store never interprets them.
pub fn encode_blob(bytes: &[u8]) -> Result<Vec<u8>, CodecError> {
    let mut out = Vec::with_capacity(FRAME_HEADER_LEN + bytes.len());
    out.extend_from_slice(&[0; FRAME_HEADER_LEN]);
    out.extend_from_slice(bytes);
    seal(out)
}

/// Decodes a framed blob, verifying its length and CRC.
pub fn decode_blob(bytes: &[u8]) -> Result<Vec<u8>, CodecError> {
    unframe(bytes).map(<[u8]>::to_vec)
}

fn frame<T: Serialize>(record: &T) -> Result<Vec<u8>, CodecError> {
    let out = postcard::to_extend(record, vec![0; FRAME_HEADER_LEN])
        .map_err(|e| CodecError::Malformed(e.to_string()))?;
    seal(out)
}

/// Fills in the header of a frame whose payload follows `FRAME_HEADER_LEN` placeholder bytes.
fn seal(mut out: Vec<u8>) -> Result<Vec<u8>, CodecError> {
    let payload_len = out.len() - FRAME_HEADER_LEN;
    let len = u32::try_from(payload_len).map_err(|_| CodecError::TooLarge { len: payload_len })?;
    let crc = crc32fast::hash(&out[FRAME_HEADER_LEN..]);
    out[0..4].copy_from_slice(&len.to_le_bytes());
    out[4..8].copy_from_slice(&crc.to_le_bytes());
    Ok(out)
}

/// Checks a frame's header against its bytes and returns the payload.
fn unframe(bytes: &[u8]) -> Result<&[u8], CodecError> {
    let (Some(len), Some(crc), Some(payload)) = (
        bytes.get(0..4),
        bytes.get(4..8),
        bytes.get(FRAME_HEADER_LEN..),
    ) else {
        return Err(CodecError::TooShort { len: bytes.len() });
    };
    let mut word = [0u8; 4];
    word.copy_from_slice(len);
    let header = u32::from_le_bytes(word);
    word.copy_from_slice(crc);
    let stored = u32::from_le_bytes(word);
    // Compare in u64 so that a huge header can never wrap on a 32-bit target.
    if u64::from(header) != payload.len() as u64 {
        return Err(CodecError::LengthMismatch {
            header,
            actual: payload.len(),
        });
    }
    let computed = crc32fast::hash(payload);
    if computed != stored {
        return Err(CodecError::Checksum { stored, computed });
    }
    Ok(payload)
}

/// Refuses a record written by a newer build with a clear error rather than postcard's generic
/// "bad enum" (postcard writes the variant index first, as a varint `u32`).
fn check_version(payload: &[u8], versions: u32) -> Result<(), CodecError> {
    let (index, _) = postcard::take_from_bytes::<u32>(payload)
        .map_err(|e| CodecError::Malformed(format!("no version tag: {e}")))?;
    if index >= versions {
        return Err(CodecError::UnknownVersion {
            found: index.saturating_add(1),
            supported: versions,
        });
    }
    Ok(())
}

/// Decodes a whole payload: trailing bytes mean the record is not what the writer wrote.
fn take_all<'a, T: Deserialize<'a>>(payload: &'a [u8]) -> Result<T, CodecError> {
    let (value, rest) = postcard::take_from_bytes::<T>(payload)
        .map_err(|e| CodecError::Malformed(e.to_string()))?;
    if !rest.is_empty() {
        return Err(CodecError::Malformed(format!(
            "{} trailing bytes after the record",
            rest.len()
        )));
    }
    Ok(value)
}

#[cfg(test)]
mod tests {
    use super::*;
    use fairway_core::event::{AfterAttempt, AttemptEnd, Placement};
    use fairway_core::{Dur, JobSpec, Time};

    fn sample_events() -> Vec<Event> {
        let mut spec = JobSpec::new("job-1", "acme/ml");
        spec.class = Some("batch".into());
        spec.demand.insert("cpu".into(), 2.5);
        spec.requires.insert("pool".into(), "gpu".into());
        spec.estimate = Some(Dur(5_000_000_000));
        vec![
            Event::JobAccepted {
                at: Time(7),
                seq: 1,
                spec,
                estimate: Dur(5_000_000_000),
                deferred_until: None,
                wfq_tag: u128::MAX,
                cost: 12,
            },
            Event::LeaseGranted {
                at: Time(9),
                job: "job-1".into(),
                attempt: 1,
                epoch: 3,
                expires: Time(100),
                placements: vec![Placement {
                    worker: "w1".into(),
                    pool: "gpu".into(),
                    members: 1,
                }],
                charges: vec![1, 2, 3],
                estimate: Dur(5),
                policy_version: 1,
                borrowed: false,
                drr: Some((1, -5, 2)),
                worker_share: 500_000_000,
            },
            Event::AttemptEnded {
                at: Time(10),
                job: "job-1".into(),
                epoch: 3,
                end: AttemptEnd::Failed { retryable: true },
                usage: Dur(1),
                progress: None,
                after: AfterAttempt::Requeue {
                    not_before: Some(Time(20)),
                    seq: 4,
                    retry: true,
                },
            },
        ]
    }

    // Proves: every event survives encode then decode unchanged, and the frame header holds the
    // payload's true length and CRC.
    #[test]
    fn round_trip() {
        for event in sample_events() {
            let frame = encode_event(&event).unwrap();
            let len = u32::from_le_bytes(frame[0..4].try_into().unwrap()) as usize;
            assert_eq!(len, frame.len() - FRAME_HEADER_LEN);
            let crc = u32::from_le_bytes(frame[4..8].try_into().unwrap());
            assert_eq!(crc, crc32fast::hash(&frame[FRAME_HEADER_LEN..]));
            assert_eq!(decode_event(&frame).unwrap(), event);
        }
        let snapshot = vec![0u8, 1, 2, 255, 7];
        assert_eq!(
            decode_snapshot(&encode_snapshot(&snapshot).unwrap()).unwrap(),
            snapshot
        );
        assert_eq!(
            decode_snapshot(&encode_snapshot(&[]).unwrap()).unwrap(),
            b""
        );
        assert_eq!(decode_blob(&encode_blob(b"xyz").unwrap()).unwrap(), b"xyz");
    }

    // Proves: the borrowed encoder writes exactly what `LogRecord::V1` means on the wire (so the
    // persisted type really is `LogRecord`), and a snapshot's `Bytes` has `Vec<u8>`'s wire format.
    #[test]
    fn wire_format_is_the_versioned_enum() {
        #[derive(Serialize)]
        enum Owned {
            V1(Event),
        }
        for event in sample_events() {
            let frame = encode_event(&event).unwrap();
            let expected = postcard::to_stdvec(&Owned::V1(event.clone())).unwrap();
            assert_eq!(&frame[FRAME_HEADER_LEN..], &expected[..]);
            assert_eq!(frame[FRAME_HEADER_LEN], 0, "V1 is variant index 0");
        }
        #[derive(Serialize)]
        enum OwnedSnapshot {
            V1(Vec<u8>),
        }
        let frame = encode_snapshot(&[9, 8, 7]).unwrap();
        let expected = postcard::to_stdvec(&OwnedSnapshot::V1(vec![9, 8, 7])).unwrap();
        assert_eq!(&frame[FRAME_HEADER_LEN..], &expected[..]);
        // The head written before the state is the generic framing of the borrowed record, at
        // the lengths where the varint grows a byte.
        for len in [0, 1, 127, 128, 16_383, 16_384, 2_097_151, 2_097_152] {
            let state: Vec<u8> = (0..len).map(|i| (i * 7 + 3) as u8).collect();
            let generic = super::frame(&SnapshotRecordRef::V1(BytesRef(&state))).unwrap();
            assert_eq!(encode_snapshot(&state).unwrap(), generic, "{len} bytes");
            assert_eq!(decode_snapshot(&generic).unwrap(), state);
        }
    }

    /// Calls `check` with each copy of `frame` that has one bit flipped, and that bit's byte.
    fn each_flipped_bit(frame: &[u8], mut check: impl FnMut(usize, &[u8])) {
        for bit in 0..frame.len() * 8 {
            let mut bad = frame.to_vec();
            bad[bit / 8] ^= 1 << (bit % 8);
            check(bit / 8, &bad);
        }
    }

    /// Whether `err` is what a frame's own checks say of damaged bytes. Inside a group, a
    /// damaged length prefix can also cut an event's frame shorter than a header.
    fn is_damage(err: &CodecError, in_group: bool) -> bool {
        match err {
            CodecError::LengthMismatch { .. } | CodecError::Checksum { .. } => true,
            CodecError::TooShort { .. } => in_group,
            _ => false,
        }
    }

    // Proves: flipping any single bit anywhere in a frame is detected (as a length or checksum
    // error), never decoded into a different event and never a panic.
    #[test]
    fn every_flipped_bit_is_detected() {
        for event in sample_events() {
            each_flipped_bit(&encode_event(&event).unwrap(), |byte, bad| {
                let err = decode_event(bad).expect_err("a flipped bit must be detected");
                assert!(is_damage(&err, false), "byte {byte}: {err:?}");
            });
        }
    }

    // Proves: a record cut short at any length (a torn write) is refused.
    #[test]
    fn truncated_record_is_detected() {
        let frame = encode_event(&sample_events()[0]).unwrap();
        for cut in 0..frame.len() {
            let err = decode_event(&frame[..cut]).expect_err("a truncated record must fail");
            if cut < FRAME_HEADER_LEN {
                assert_eq!(err, CodecError::TooShort { len: cut });
            } else {
                assert!(matches!(err, CodecError::LengthMismatch { .. }), "{err:?}");
            }
        }
        // Bytes appended after a valid record are refused too.
        let mut longer = frame.clone();
        longer.push(0);
        assert!(matches!(
            decode_event(&longer),
            Err(CodecError::LengthMismatch { .. })
        ));
    }

    // Proves: a record of a newer version (variant index 2 = `V3`), correctly framed, is refused
    // with a version error that names both versions, not decoded as something else, by both
    // decoders.
    #[test]
    fn newer_version_is_refused() {
        let mut frame = encode_event(&sample_events()[1]).unwrap();
        frame[FRAME_HEADER_LEN] = 2;
        let frame = seal(frame).unwrap();
        let err = decode_event(&frame).unwrap_err();
        assert_eq!(
            err,
            CodecError::UnknownVersion {
                found: 3,
                supported: 2
            }
        );
        assert!(err.to_string().contains("version 3"), "{err}");
        assert_eq!(decode_events(&frame), Err((0, err)));
        let mut snap = encode_snapshot(b"abc").unwrap();
        snap[FRAME_HEADER_LEN] = 5;
        let snap = seal(snap).unwrap();
        assert!(matches!(
            decode_snapshot(&snap),
            Err(CodecError::UnknownVersion { found: 6, .. })
        ));
    }

    // Proves: a correctly framed payload that is not a valid record (garbage, or a valid record
    // followed by extra bytes) is `Malformed`, not a panic and not a partial decode.
    #[test]
    fn malformed_payload_is_refused() {
        let garbage = seal([vec![0; FRAME_HEADER_LEN], vec![0, 0xff, 0xff]].concat()).unwrap();
        assert!(matches!(
            decode_event(&garbage),
            Err(CodecError::Malformed(_))
        ));
        let mut frame = encode_event(&sample_events()[2]).unwrap();
        frame.push(0);
        let frame = seal(frame).unwrap();
        let err = decode_event(&frame).unwrap_err();
        assert!(matches!(err, CodecError::Malformed(ref why) if why.contains("trailing")));
        assert!(matches!(
            decode_event(&seal(vec![0; FRAME_HEADER_LEN]).unwrap()),
            Err(CodecError::Malformed(_))
        ));
    }

    // Proves: a header claiming a huge length is refused without allocating or reading past the
    // input (the check uses the bytes present, not the claim).
    #[test]
    fn huge_length_claim_is_refused() {
        let mut frame = vec![0xff; FRAME_HEADER_LEN];
        frame.extend_from_slice(b"abc");
        assert_eq!(
            decode_event(&frame),
            Err(CodecError::LengthMismatch {
                header: u32::MAX,
                actual: 3
            })
        );
    }

    // Proves: a group of events survives encode then decode unchanged, says how many events it
    // holds, and holds each event as exactly that event's own `V1` frame; a `V1` record reads
    // as a group of one; one event alone is refused by `decode_event` when it is a group.
    #[test]
    fn a_group_round_trips_and_holds_each_event_framed() {
        let events = sample_events();
        let record = encode_events(&events).unwrap();
        assert_eq!(decode_events(&record).unwrap(), events);
        assert_eq!(record_len(&record), Some(events.len() as u64));
        let frames = split_record(&record).unwrap();
        for (frame, event) in frames.iter().zip(&events) {
            assert_eq!(*frame, encode_event(event).unwrap().as_slice());
        }
        assert_eq!(group_frames(&frames).unwrap(), record);
        let single = encode_event(&events[0]).unwrap();
        assert_eq!(decode_events(&single).unwrap(), vec![events[0].clone()]);
        assert_eq!(record_len(&single), Some(1));
        assert!(matches!(
            decode_event(&record),
            Err(CodecError::Malformed(ref why)) if why.contains("group")
        ));
    }

    // Proves: a group's payload is postcard's encoding of `LogRecord::V2` holding the events'
    // frames, so that the persisted type really is `LogRecord`.
    #[test]
    fn a_group_is_the_versioned_enum() {
        #[derive(Serialize)]
        enum Owned {
            V1(Box<Event>),
            V2(Vec<Vec<u8>>),
        }
        let events = sample_events();
        let frames: Vec<Vec<u8>> = events.iter().map(|e| encode_event(e).unwrap()).collect();
        let expected = postcard::to_stdvec(&Owned::V2(frames.clone())).unwrap();
        assert_eq!(
            &encode_events(&events).unwrap()[FRAME_HEADER_LEN..],
            &expected[..]
        );
        let single = postcard::to_stdvec(&Owned::V1(Box::new(events[0].clone()))).unwrap();
        assert_eq!(&frames[0][FRAME_HEADER_LEN..], &single[..]);
        let read: LogRecord = postcard::from_bytes(&expected).unwrap();
        assert_eq!(read, LogRecord::V2(frames.into_iter().map(Bytes).collect()));
    }

    /// The byte range of each event's part of a group record (its length prefix and frame).
    fn event_ranges(record: &[u8]) -> Vec<std::ops::Range<usize>> {
        let frames = split_record(record).unwrap();
        let mut end = record.len();
        let mut ranges: Vec<_> = frames
            .iter()
            .rev()
            .map(|f| {
                let mut prefix = Vec::new();
                varint(&mut prefix, f.len() as u64);
                let start = end - f.len() - prefix.len();
                let range = start..end;
                end = start;
                range
            })
            .collect();
        ranges.reverse();
        ranges
    }

    // Proves: flipping any single bit of a group record is refused, and named at the event
    // whose part of the record it hit (its length prefix or its frame); a bit of the record's
    // own header, version or count is named at the first event.
    #[test]
    fn every_flipped_bit_in_a_group_is_refused_at_its_event() {
        let record = encode_events(&sample_events()).unwrap();
        let ranges = event_ranges(&record);
        each_flipped_bit(&record, |byte, bad| {
            let (at, err) = decode_events(bad).expect_err("a flipped bit must be refused");
            let expected = ranges.iter().position(|r| r.contains(&byte)).unwrap_or(0);
            assert_eq!(at, expected, "byte {byte}: {err:?}");
            assert!(is_damage(&err, true), "byte {byte}: {err:?}");
        });
    }

    // Proves: a group record cut short anywhere (a torn write) is refused, at the event whose
    // part it cut into (or the first one it left out entirely).
    #[test]
    fn a_truncated_group_is_refused_at_the_event_cut() {
        let record = encode_events(&sample_events()).unwrap();
        let ranges = event_ranges(&record);
        for cut in 0..record.len() {
            let (at, err) = decode_events(&record[..cut]).expect_err("a cut record must fail");
            let expected = ranges.iter().position(|r| r.end > cut).unwrap_or(0);
            if cut < FRAME_HEADER_LEN {
                assert_eq!((at, err), (0, CodecError::TooShort { len: cut }));
            } else if cut > ranges[0].start {
                assert_eq!(at, expected, "cut at {cut}: {err:?}");
            } else {
                assert_eq!(at, 0, "cut at {cut}: {err:?}");
            }
        }
    }
}
