//! `store_record`: the store's record decoders ([`decode_event`], [`decode_events`],
//! [`decode_snapshot`], [`decode_blob`]) on arbitrary bytes, and the round trip of whatever
//! decodes.
//!
//! The first byte chooses the mode; the rest is the input:
//!
//! - even: the input is a whole frame, as read back from a backend (a corrupted record must be
//!   refused by its length or CRC check, never panic);
//! - odd: the input is a payload, sealed here with a correct header, so that mutations reach the
//!   postcard decoder behind the CRC (what a writer bug, or a record that was changed
//!   incompatibly, would present).
//!
//! Round trip: a decoded blob re-encodes to the identical frame. A decoded event or snapshot
//! re-encodes to a frame that decodes to the same value and re-encodes to itself (encoding is a
//! fixed point), and that is never longer than the input. It may differ from the input where
//! the input is not in the encoder's canonical form, which postcard accepts on read and the
//! store never writes: an integer spelled with a longer varint than needed (shorter once
//! re-encoded, finding F1), or a map's keys out of order or repeated (re-encoded in key order,
//! of the same length or shorter, finding F9). See docs/reliability.md.
//!
//! A decoded snapshot is also handed to [`Engine::restore`], which must not panic.

use fairway_core::{Engine, EngineConfig};
use fairway_store::codec::{
    FRAME_HEADER_LEN, decode_blob, decode_event, decode_events, decode_snapshot, encode_blob,
    encode_event, encode_events, encode_snapshot, record_len,
};

/// Frames `payload` as the store does: `[len u32 LE][crc32 u32 LE][payload]`.
pub fn seal(payload: &[u8]) -> Vec<u8> {
    let mut frame = Vec::with_capacity(FRAME_HEADER_LEN + payload.len());
    frame.extend_from_slice(&(payload.len() as u32).to_le_bytes());
    frame.extend_from_slice(&crc32fast::hash(payload).to_le_bytes());
    frame.extend_from_slice(payload);
    frame
}

/// Checks the round trip of a frame that decoded: `reencoded` is its re-encoding, `again` the
/// re-encoding of what `reencoded` decodes to; `value` and `value_again` are the two decoded
/// values, as `Debug` text (so that a NaN compares equal to itself).
fn check_round_trip(
    what: &str,
    frame: &[u8],
    reencoded: &[u8],
    again: &[u8],
    (value, value_again): (String, String),
) {
    assert_eq!(
        value, value_again,
        "{what}: the re-encoding decodes to another value"
    );
    assert_eq!(again, reencoded, "{what}: re-encoding is not a fixed point");
    // Non-canonical inputs (overlong varints, map keys out of order or repeated) re-encode to
    // other bytes, but never to more of them.
    assert!(
        reencoded.len() <= frame.len(),
        "{what}: a decoded frame re-encodes to more bytes\n input {frame:02x?}\n again {reencoded:02x?}"
    );
}

/// Runs one input.
pub fn run(data: &[u8]) {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    let sealed;
    let frame = if mode & 1 == 0 {
        rest
    } else {
        sealed = seal(rest);
        &sealed
    };
    if let Ok(event) = decode_event(frame) {
        let reencoded = encode_event(&event).expect("a decoded event encodes");
        let decoded = decode_event(&reencoded).expect("a re-encoded event decodes");
        let again = encode_event(&decoded).expect("a decoded event encodes");
        let values = (format!("{event:?}"), format!("{decoded:?}"));
        check_round_trip("event", frame, &reencoded, &again, values);
    }
    match decode_events(frame) {
        Ok(events) => {
            assert_eq!(record_len(frame), Some(events.len() as u64));
            let reencoded = encode_events(&events).expect("decoded events encode");
            let decoded = decode_events(&reencoded).expect("re-encoded events decode");
            let again = encode_events(&decoded).expect("decoded events encode");
            // A one-event `V1` record re-encodes as a group: compare the groups only.
            if frame.get(FRAME_HEADER_LEN) == Some(&1) {
                let values = (format!("{events:?}"), format!("{decoded:?}"));
                check_round_trip("group", frame, &reencoded, &again, values);
            } else {
                assert_eq!(again, reencoded, "group: re-encoding is not a fixed point");
            }
        }
        Err((index, _)) => {
            // Every event takes at least a frame header: damage is named within the bytes.
            assert!(
                index <= frame.len() / FRAME_HEADER_LEN,
                "damage named at event {index} of a record of {} bytes",
                frame.len()
            );
        }
    }
    if let Ok(bytes) = decode_snapshot(frame) {
        let reencoded = encode_snapshot(&bytes).expect("decoded snapshot bytes encode");
        let decoded = decode_snapshot(&reencoded).expect("a re-encoded snapshot decodes");
        let again = encode_snapshot(&decoded).expect("decoded snapshot bytes encode");
        let values = (format!("{bytes:?}"), format!("{decoded:?}"));
        check_round_trip("snapshot", frame, &reencoded, &again, values);
        let _ = Engine::restore(&bytes, EngineConfig::default());
    }
    if let Ok(bytes) = decode_blob(frame) {
        let reencoded = encode_blob(&bytes).expect("a decoded blob encodes");
        assert_eq!(
            reencoded, frame,
            "a blob does not re-encode to the same frame"
        );
    }
}
