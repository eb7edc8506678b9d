//! Property tests of the record codec over random events and arbitrary bytes.

mod common;

use fairway_store::codec::{self, CodecError};
use fairway_store::{decode_event, encode_event};
use proptest::prelude::*;

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    // Proves: every valid event of every variant survives encode then decode unchanged.
    #[test]
    fn any_event_round_trips(event in common::event()) {
        let frame = encode_event(&event).unwrap();
        prop_assert_eq!(decode_event(&frame).unwrap(), event);
    }

    // Proves: a single flipped bit anywhere in any event's frame is detected, never decoded.
    #[test]
    fn any_flipped_bit_is_detected(event in common::event(), at in any::<prop::sample::Index>(), bit in 0u8..8) {
        let mut frame = encode_event(&event).unwrap();
        let i = at.index(frame.len());
        frame[i] ^= 1 << bit;
        let result = decode_event(&frame);
        prop_assert!(
            matches!(result, Err(CodecError::LengthMismatch { .. } | CodecError::Checksum { .. })),
            "flipped bit {} of byte {} gave {:?}", bit, i, result
        );
    }

    // Proves: any group of valid events survives encode then decode unchanged, and a single
    // flipped bit anywhere in its record is refused, named at an event of the group.
    #[test]
    fn any_group_round_trips_and_any_flipped_bit_is_refused(
        events in proptest::collection::vec(common::event(), 1..12),
        at in any::<prop::sample::Index>(),
        bit in 0u8..8,
    ) {
        let mut record = codec::encode_events(&events).unwrap();
        prop_assert_eq!(codec::decode_events(&record).unwrap(), events.clone());
        prop_assert_eq!(codec::record_len(&record), Some(events.len() as u64));
        let i = at.index(record.len());
        record[i] ^= 1 << bit;
        match codec::decode_events(&record) {
            // A bit of an event's length prefix can make it claim less than a header: TooShort.
            Err((
                index,
                CodecError::LengthMismatch { .. }
                | CodecError::Checksum { .. }
                | CodecError::TooShort { .. },
            )) => {
                prop_assert!(index < events.len(), "named event {} of {}", index, events.len());
            }
            other => prop_assert!(false, "flipped bit {} of byte {} gave {:?}", bit, i, other),
        }
    }

    // Proves: decoding arbitrary bytes returns (an error, almost always) without panicking.
    // The payload-only variant frames the random bytes correctly, so that they get past the CRC
    // and reach the version check and postcard itself.
    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..256)) {
        let _ = decode_event(&bytes);
        let _ = codec::decode_events(&bytes);
        let _ = codec::record_len(&bytes);
        let _ = codec::decode_snapshot(&bytes);
        let _ = codec::decode_blob(&bytes);
        let framed = codec::encode_blob(&bytes).unwrap();
        let _ = decode_event(&framed);
        let _ = codec::decode_events(&framed);
        let _ = codec::record_len(&framed);
        let _ = codec::decode_snapshot(&framed);
    }
}
