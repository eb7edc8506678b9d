//! A live job's id as its record holds it: 16 bytes, with the common ids inside them.
//!
//! A `Box<str>` in the record cost 16 bytes plus an allocation of its own (the engine's
//! benchmark measured 16 bytes a queued job for its 16-character ids, 36 for UUIDs; a server
//! 46 to 58 with the SDK's), and a third cache miss on every look-up by id (the index's
//! bucket, then the record, then the id's bytes). A [`JobId`] keeps the same 16
//! bytes in the record and puts two kinds of id inside them:
//!
//! - **short**: up to 16 printable ASCII bytes (`0x20..=0x7E`), as they are;
//! - **UUID**: the canonical text of an RFC 9562 UUID (36 characters, lowercase hex, hyphens
//!   at 8, 13, 18 and 23, the variant bits `10`), as its 16 bytes. The Rust SDK's ids
//!   (UUIDv7) are of this kind.
//!
//! Any other id (longer, non-ASCII, uppercase hex) is on the heap, as before. The text of an
//! id is unchanged by its form: a UUID in another spelling is simply a heap id, and every id
//! reads back exactly as it was given.
//!
//! The last byte tells the forms apart:
//!
//! | last byte | form |
//! | --- | --- |
//! | `0x00` | heap: a pointer, then the length in 7 little-endian bytes |
//! | `0x20..=0x7E` | short, 16 bytes: it is the id's last byte |
//! | `0x80..=0x8F` | short, 0 to 15 bytes: the length in the low four bits, zeros after the id |
//! | `0xC0..=0xFF` | UUID: its byte 8 (variant `10xxxxxx`) with the top bits set to `11`, after its other 15 bytes in order |
//!
//! The heap form is the one place the engine owns memory by hand: a union of the pointer and
//! the bytes, the allocation made and freed through `Box<str>`.

use std::fmt;
use std::ptr::NonNull;

/// An id's bytes as stored: the union's two views.
#[repr(C)]
union Repr {
    heap: Heap,
    bytes: [u8; 16],
}

/// The heap form: the bytes of a `Box<str>` and their length. On every pointer width the
/// struct fills 16 bytes with no padding, so that every byte of either view is initialized.
#[repr(C)]
#[derive(Clone, Copy)]
struct Heap {
    ptr: NonNull<u8>,
    _fill: [u8; 8 - size_of::<usize>()],
    /// The length, little-endian; the last byte (the union's tag) is 0.
    len: [u8; 8],
}

const _: () = assert!(size_of::<Heap>() == 16 && size_of::<Repr>() == 16);

/// The longest id of the short form.
const SHORT_MAX: usize = 16;
/// The length of a UUID's canonical text.
const UUID_LEN: usize = 36;
const TAG_HEAP: u8 = 0x00;
const TAG_SHORT: u8 = 0x80;
const TAG_UUID: u8 = 0xC0;

/// A job's id, 16 bytes; reads back as the exact text it was made from.
pub(crate) struct JobId(Repr);

// SAFETY: a `JobId` owns its heap bytes (as a `Box<str>` would) and never shares them: clones
// copy them, and nothing mutates them after construction.
unsafe impl Send for JobId {}
// SAFETY: as above; shared references only read.
unsafe impl Sync for JobId {}

impl JobId {
    /// The id `id`, in the smallest form that holds it.
    pub fn new(id: &str) -> JobId {
        let b = id.as_bytes();
        if b.len() <= SHORT_MAX {
            let mut bytes = [0u8; 16];
            bytes[..b.len()].copy_from_slice(b);
            if printable(&bytes, b.len()) {
                if b.len() < SHORT_MAX {
                    bytes[15] = TAG_SHORT | b.len() as u8;
                }
                return JobId(Repr { bytes });
            }
        }
        if let Some(uuid) = parse_uuid(b) {
            let mut bytes = [0u8; 16];
            bytes[..8].copy_from_slice(&uuid[..8]);
            bytes[8..15].copy_from_slice(&uuid[9..]);
            bytes[15] = uuid[8] | 0x40;
            return JobId(Repr { bytes });
        }
        let boxed: Box<str> = id.into();
        let len = boxed.len() as u64;
        assert!(len < 1 << 56, "a job id shorter than 2^56 bytes");
        let ptr = NonNull::new(Box::into_raw(boxed).cast::<u8>()).expect("a box is not null");
        JobId(Repr {
            heap: Heap {
                ptr,
                _fill: [0; 8 - size_of::<usize>()],
                len: len.to_le_bytes(),
            },
        })
    }

    fn tag(&self) -> u8 {
        self.bytes()[15]
    }

    /// The heap form's text (the tag must say heap).
    fn heap_str(&self) -> &str {
        debug_assert_eq!(self.tag(), TAG_HEAP);
        // SAFETY: the tag says the heap view was written, from a `Box<str>` this value owns:
        // `len` bytes of valid UTF-8 at `ptr`, freed only by `drop`.
        unsafe {
            let heap = self.0.heap;
            let len = u64::from_le_bytes(heap.len) as usize;
            std::str::from_utf8_unchecked(std::slice::from_raw_parts(heap.ptr.as_ptr(), len))
        }
    }

    /// The inline forms' bytes.
    fn bytes(&self) -> &[u8; 16] {
        // SAFETY: every form initializes all 16 bytes (see `Heap`), and any byte is a `u8`.
        unsafe { &self.0.bytes }
    }

    /// The id's text: borrowed from the record or the heap, or (a UUID) written out on the
    /// stack.
    pub fn as_str(&self) -> IdStr<'_> {
        let bytes = self.bytes();
        match self.tag() {
            TAG_HEAP => IdStr::Borrowed(self.heap_str()),
            t if t >= TAG_UUID => {
                let mut uuid = [0u8; 16];
                uuid[..8].copy_from_slice(&bytes[..8]);
                uuid[8] = t & 0xBF;
                uuid[9..].copy_from_slice(&bytes[8..15]);
                IdStr::Uuid(format_uuid(&uuid))
            }
            t if t & 0xF0 == TAG_SHORT => IdStr::Borrowed(ascii(&bytes[..(t & 0x0F) as usize])),
            _ => IdStr::Borrowed(ascii(bytes)),
        }
    }

    /// The id's text, owned (without `Display`'s formatting machinery, which `to_string`
    /// goes through).
    pub fn to_text(&self) -> String {
        String::from(&*self.as_str())
    }

    /// Whether this is the id `id` (a short id's bytes compared where they are).
    #[inline]
    pub fn is(&self, id: &str) -> bool {
        let bytes = self.bytes();
        match self.tag() {
            TAG_HEAP => self.heap_str() == id,
            t if t >= TAG_UUID => *self.as_str() == *id,
            t if t & 0xF0 == TAG_SHORT => bytes[..(t & 0x0F) as usize] == *id.as_bytes(),
            _ => bytes[..] == *id.as_bytes(),
        }
    }
}

impl Drop for JobId {
    fn drop(&mut self) {
        if self.tag() == TAG_HEAP {
            // SAFETY: the heap view was written from `Box::into_raw` of a `Box<str>` of this
            // length, which this value owns alone; it is rebuilt and dropped once, here.
            unsafe {
                let heap = self.0.heap;
                let len = u64::from_le_bytes(heap.len) as usize;
                drop(Box::from_raw(
                    std::ptr::slice_from_raw_parts_mut(heap.ptr.as_ptr(), len) as *mut str,
                ));
            }
        }
    }
}

impl Clone for JobId {
    fn clone(&self) -> JobId {
        if self.tag() == TAG_HEAP {
            JobId::new(self.heap_str())
        } else {
            // An inline form owns nothing: its bytes are the whole id.
            JobId(Repr {
                bytes: *self.bytes(),
            })
        }
    }
}

impl PartialEq for JobId {
    fn eq(&self, other: &JobId) -> bool {
        *self.as_str() == *other.as_str()
    }
}

impl Eq for JobId {}

/// Ordered as their texts are.
impl Ord for JobId {
    fn cmp(&self, other: &JobId) -> std::cmp::Ordering {
        (*self.as_str()).cmp(&*other.as_str())
    }
}

impl PartialOrd for JobId {
    fn partial_cmp(&self, other: &JobId) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl fmt::Debug for JobId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&*self.as_str(), f)
    }
}

impl fmt::Display for JobId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.as_str())
    }
}

/// A job id's text, as [`JobId::as_str`] gives it.
pub(crate) enum IdStr<'a> {
    Borrowed(&'a str),
    Uuid([u8; UUID_LEN]),
}

impl std::ops::Deref for IdStr<'_> {
    type Target = str;

    fn deref(&self) -> &str {
        match self {
            IdStr::Borrowed(s) => s,
            IdStr::Uuid(text) => ascii(text),
        }
    }
}

/// Whether the first `len` of `bytes` are printable ASCII, `0x20..=0x7E`: all sixteen at once,
/// as lanes of one integer (a byte-by-byte test was half of `JobId::new`'s 160 instructions).
fn printable(bytes: &[u8; 16], len: usize) -> bool {
    const LOW7: u128 = u128::from_ne_bytes([0x7F; 16]);
    const HIGH: u128 = u128::from_ne_bytes([0x80; 16]);
    const EACH: u128 = u128::from_ne_bytes([0x01; 16]);
    let v = u128::from_le_bytes(*bytes);
    // Per byte, its low seven bits plus 0x60 reach bit 7 when they are at least 0x20, plus
    // 0x01 when they are 0x7F; neither sum carries into the next byte.
    let low = v & LOW7;
    let at_least_space = (low + 0x60 * EACH) & HIGH;
    let delete = (low + EACH) & HIGH;
    let bad = (!at_least_space | delete | v) & HIGH;
    let within = if len >= 16 {
        u128::MAX
    } else {
        (1u128 << (8 * len)) - 1
    };
    bad & within == 0
}

/// The bytes of an inline id's text as text: printable ASCII (a short id's, which `new`
/// checked) or hex digits and hyphens (a UUID's, written by `format_uuid`). Not checked
/// again: checking took 150 instructions of a decision's 10,500 (three reads of its id).
fn ascii(bytes: &[u8]) -> &str {
    debug_assert!(bytes.iter().all(|&c| (0x20..=0x7E).contains(&c)));
    // SAFETY: ASCII, as above, is valid UTF-8.
    unsafe { std::str::from_utf8_unchecked(bytes) }
}

/// Where a UUID's canonical text puts each of its 16 bytes' two hex digits.
const UUID_DIGITS_AT: [usize; 16] = [0, 2, 4, 6, 9, 11, 14, 16, 19, 21, 24, 26, 28, 30, 32, 34];

/// Each byte's two lowercase hex digits.
const HEX_PAIRS: [[u8; 2]; 256] = {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = [[0u8; 2]; 256];
    let mut b = 0;
    while b < 256 {
        out[b] = [DIGITS[b >> 4], DIGITS[b & 0x0F]];
        b += 1;
    }
    out
};

/// Each character's value as a lowercase hex digit, or `0xFF`.
const HEX_VALUES: [u8; 256] = {
    let mut out = [0xFFu8; 256];
    let mut c = 0;
    while c < 10 {
        out[b'0' as usize + c] = c as u8;
        c += 1;
    }
    let mut c = 0;
    while c < 6 {
        out[b'a' as usize + c] = 10 + c as u8;
        c += 1;
    }
    out
};

/// The 16 bytes of `text` if it is a UUID's canonical text with the variant bits `10`.
fn parse_uuid(text: &[u8]) -> Option<[u8; 16]> {
    let text: &[u8; UUID_LEN] = text.try_into().ok()?;
    if [8, 13, 18, 23].iter().any(|&at| text[at] != b'-') {
        return None;
    }
    let mut out = [0u8; 16];
    let mut bad = 0;
    for (byte, &at) in out.iter_mut().zip(&UUID_DIGITS_AT) {
        let (hi, lo) = (
            HEX_VALUES[text[at] as usize],
            HEX_VALUES[text[at + 1] as usize],
        );
        bad |= hi | lo;
        *byte = hi << 4 | lo;
    }
    // A value of 0xFF (not a digit) is the only one with its top bit set.
    (bad & 0x80 == 0 && out[8] & 0xC0 == 0x80).then_some(out)
}

fn format_uuid(uuid: &[u8; 16]) -> [u8; UUID_LEN] {
    let mut out = [b'-'; UUID_LEN];
    for (&byte, &at) in uuid.iter().zip(&UUID_DIGITS_AT) {
        out[at..at + 2].copy_from_slice(&HEX_PAIRS[byte as usize]);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn form(id: &JobId) -> &'static str {
        match id.tag() {
            TAG_HEAP => "heap",
            t if t >= TAG_UUID => "uuid",
            _ => "short",
        }
    }

    #[test]
    fn each_kind_of_id_takes_its_form_and_reads_back_as_given() {
        let cases = [
            ("", "short"),
            ("a", "short"),
            ("job 7", "short"),
            ("0123456789abcdef", "short"),
            ("~~~~~~~~~~~~~~~~", "short"),
            ("0123456789abcdef0", "heap"),
            ("0192d3c4-5e6f-7a8b-9c0d-1e2f3a4b5c6d", "uuid"),
            ("ffffffff-ffff-ffff-bfff-ffffffffffff", "uuid"),
            ("00000000-0000-0000-8000-000000000000", "uuid"),
            // The variant bits are not 10: the text is kept on the heap.
            ("0192d3c4-5e6f-7a8b-cc0d-1e2f3a4b5c6d", "heap"),
            ("0192d3c4-5e6f-7a8b-7c0d-1e2f3a4b5c6d", "heap"),
            // Uppercase, braces, no hyphens: other spellings are other ids.
            ("0192D3C4-5E6F-7A8B-9C0D-1E2F3A4B5C6D", "heap"),
            ("0192d3c45e6f7a8b9c0d1e2f3a4b5c6d", "heap"),
            ("0192d3c4-5e6f-7a8b-9c0d-1e2f3a4b5c6", "heap"),
            ("0192d3c4_5e6f-7a8b-9c0d-1e2f3a4b5c6d", "heap"),
            ("déjà", "heap"),
            ("tab\there", "heap"),
        ];
        for (text, want) in cases {
            let id = JobId::new(text);
            assert_eq!(form(&id), want, "{text:?}");
            assert_eq!(&*id.as_str(), text);
            assert!(id.is(text));
            assert_eq!(id.to_string(), text);
            assert_eq!(format!("{id:?}"), format!("{text:?}"));
            let copy = id.clone();
            drop(id);
            assert_eq!(&*copy.as_str(), text, "a clone outlives its original");
        }
        assert_eq!(size_of::<JobId>(), 16);
    }

    #[test]
    fn printable_is_every_byte_of_the_id_in_space_to_tilde() {
        for c in 0..=255u8 {
            for len in 0..=16 {
                for at in 0..16 {
                    let mut bytes = [b'a'; 16];
                    bytes[len..].fill(0);
                    bytes[at] = c;
                    let want = bytes[..len].iter().all(|&b| (0x20..=0x7E).contains(&b));
                    assert_eq!(printable(&bytes, len), want, "{c:#x} at {at} of {len}");
                }
            }
        }
    }

    // Proves: a UUID is written out as a naive formatting would, for every byte value at
    // every position (the round-trip tests alone would pass a formatter and a parser that
    // agreed on a wrong text only if the explicit cases missed it).
    #[test]
    fn a_uuid_is_written_out_as_its_hex_digits_with_hyphens() {
        let mut bytes = [0u8; 16];
        for round in 0..2_000u32 {
            for (i, b) in bytes.iter_mut().enumerate() {
                *b = (round as u8).wrapping_mul(31).wrapping_add(i as u8 * 17) ^ (round >> 8) as u8;
            }
            let want: String = bytes
                .iter()
                .enumerate()
                .map(|(i, b)| {
                    let hyphen = if matches!(i, 4 | 6 | 8 | 10) { "-" } else { "" };
                    format!("{hyphen}{b:02x}")
                })
                .collect();
            assert_eq!(format_uuid(&bytes), want.as_bytes(), "{bytes:?}");
            assert_eq!(
                parse_uuid(want.as_bytes()).is_some(),
                bytes[8] & 0xC0 == 0x80
            );
        }
    }

    #[test]
    fn ids_of_different_forms_or_texts_differ() {
        let ids = [
            "0123456789abcdef",
            "0123456789abcdeg",
            "0123456789abcde",
            "0192d3c4-5e6f-7a8b-9c0d-1e2f3a4b5c6d",
            "0192d3c4-5e6f-7a8b-9c0d-1e2f3a4b5c6e",
            "0192d3c4-5e6f-7a8b-ac0d-1e2f3a4b5c6d",
            "0192D3C4-5E6F-7A8B-9C0D-1E2F3A4B5C6D",
            "0123456789abcdef0",
        ];
        for a in ids {
            for b in ids {
                assert_eq!(JobId::new(a) == JobId::new(b), a == b, "{a} {b}");
                assert_eq!(JobId::new(a).is(b), a == b, "{a} {b}");
            }
        }
    }

    fn uuid_text() -> impl Strategy<Value = String> {
        (any::<[u8; 16]>(), 0u8..4).prop_map(|(mut u, variant)| {
            u[8] = u[8] & 0x3F | variant << 6;
            String::from_utf8(format_uuid(&u).to_vec()).unwrap()
        })
    }

    proptest! {
        // Proves: any text reads back exactly, whatever form it took, and two ids are equal
        // exactly when their texts are.
        #[test]
        fn any_id_reads_back_exactly(
            a in prop_oneof![
                "[ -~]{0,17}",
                "\\PC{0,40}",
                "[0-9a-f-]{36}",
                uuid_text(),
            ],
            b in prop_oneof!["[ -~]{0,17}", uuid_text()],
        ) {
            let (x, y) = (JobId::new(&a), JobId::new(&b));
            prop_assert_eq!(&*x.as_str(), a.as_str());
            let copy = y.clone();
            prop_assert_eq!(&*copy.as_str(), b.as_str());
            prop_assert_eq!(x == y, a == b);
            prop_assert_eq!(x.cmp(&y), a.cmp(&b));
            prop_assert_eq!(x.is(&b), a == b);
            prop_assert_eq!(form(&x) == "uuid", parse_uuid(a.as_bytes()).is_some());
        }
    }
}
