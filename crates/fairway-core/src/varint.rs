//! Integers as postcard writes them, for the records encoded by hand (the engine's finished
//! jobs and a snapshot's live jobs; the store's log record headers): unsigned
//! integers as varints (seven bits a byte, low first, the high bit set on every byte but the
//! last), signed ones zigzagged first. Two forms of the same varint: into a buffer on the stack,
//! for a finished record's few fields appended in one copy; pushed onto the output, for a live
//! job's thirty-odd fields, where a buffer's bounds check at each byte cost more than the pushes
//! (BENCHMARKS.md, item 81).

/// Writes `v` at `buf[at..]` as postcard writes an unsigned integer (seven bits a byte, low
/// first, the high bit set on every byte but the last) and returns where it ends.
#[inline]
pub(crate) fn put_varint(buf: &mut [u8; 64], mut at: usize, mut v: u64) -> usize {
    while v >= 0x80 {
        buf[at] = v as u8 | 0x80;
        v >>= 7;
        at += 1;
    }
    buf[at] = v as u8;
    at + 1
}

/// Appends `v` as postcard writes an unsigned integer: seven bits a byte, low first, the high
/// bit set on every byte but the last. A `u128` below 2^64 writes the same bytes.
#[inline]
pub fn varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push(v as u8 | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// How many bytes [`varint`] writes for `v`.
#[inline]
pub(crate) fn varint_len(v: u64) -> usize {
    (64 - (v | 1).leading_zeros() as usize).div_ceil(7)
}

/// [`varint`] for a `u128`: the low bytes of a value past `u64::MAX`, then the rest.
pub(crate) fn varint128(out: &mut Vec<u8>, mut v: u128) {
    while v > u64::MAX as u128 {
        out.push(v as u8 | 0x80);
        v >>= 7;
    }
    varint(out, v as u64);
}

/// A signed integer as postcard writes it: zigzag (0, -1, 1, -2, ...), then a varint.
#[inline]
pub(crate) fn zigzag(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)) as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    // Proves: `varint_len` counts the bytes `varint` writes, and `varint`, `put_varint` and
    // `zigzag` write what postcard writes, at every width's edges.
    #[test]
    fn varints_write_and_count_as_postcard_does() {
        for bits in 0..64 {
            for v in [
                (1u64 << bits) - 1,
                1u64 << bits,
                (1u64 << bits) + 1,
                u64::MAX >> bits,
            ] {
                let mut mine = Vec::new();
                varint(&mut mine, v);
                assert_eq!(mine, postcard::to_stdvec(&v).expect("encodes"), "{v}");
                assert_eq!(varint_len(v), mine.len(), "{v}");
                let mut buf = [7u8; 64];
                let end = put_varint(&mut buf, 3, v);
                assert_eq!(&buf[3..end], &mine[..], "{v}");
                let signed = v as i64;
                let mut mine = Vec::new();
                varint(&mut mine, zigzag(signed));
                assert_eq!(
                    mine,
                    postcard::to_stdvec(&signed).expect("encodes"),
                    "{signed}"
                );
                let wide = (v as u128) << 60;
                let mut mine = Vec::new();
                varint128(&mut mine, wide);
                assert_eq!(mine, postcard::to_stdvec(&wide).expect("encodes"), "{wide}");
            }
        }
    }
}
