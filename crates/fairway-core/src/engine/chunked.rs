//! A vector kept in chunks of [`CHUNK`] elements, for the engine's job records.
//!
//! A vector that doubles copies everything it holds inside one push: at 2^19 job records
//! (176 bytes each) that is 92 MB copied, onto fresh pages, inside one submission, while the
//! whole engine waits. This one grows a chunk at a time and never moves what it holds; an
//! element is found through the chunk table (a few hundred pointers at 10^6 jobs, always in
//! cache). The first chunk grows as a vector does, so that a small engine holds little.

use std::collections::VecDeque;
use std::ops::{Index, IndexMut};

/// Elements per chunk.
pub(crate) const CHUNK: usize = 1 << CHUNK_BITS;
const CHUNK_BITS: u32 = 11;

#[derive(Clone, Debug)]
pub(crate) struct Chunked<T> {
    /// Every chunk but the last holds [`CHUNK`] elements.
    chunks: VecDeque<Vec<T>>,
    len: usize,
}

impl<T> Default for Chunked<T> {
    fn default() -> Self {
        Chunked {
            chunks: VecDeque::new(),
            len: 0,
        }
    }
}

impl<T> Chunked<T> {
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn push(&mut self, value: T) {
        if self.chunks.back().is_none_or(|c| c.len() == CHUNK) {
            let chunk = if self.chunks.is_empty() {
                Vec::new()
            } else {
                Vec::with_capacity(CHUNK)
            };
            self.chunks.push_back(chunk);
        }
        self.chunks
            .back_mut()
            .expect("a chunk with room")
            .push(value);
        self.len += 1;
    }

    pub fn get(&self, i: usize) -> Option<&T> {
        (i < self.len).then(|| &self[i])
    }

    pub fn get_mut(&mut self, i: usize) -> Option<&mut T> {
        (i < self.len).then(|| &mut self[i])
    }

    /// In index order.
    pub fn iter(&self) -> impl Iterator<Item = &T> {
        self.chunks.iter().flatten()
    }
}

impl<T> Index<usize> for Chunked<T> {
    type Output = T;

    #[inline]
    fn index(&self, i: usize) -> &T {
        &self.chunks[i >> CHUNK_BITS][i & (CHUNK - 1)]
    }
}

impl<T> IndexMut<usize> for Chunked<T> {
    #[inline]
    fn index_mut(&mut self, i: usize) -> &mut T {
        &mut self.chunks[i >> CHUNK_BITS][i & (CHUNK - 1)]
    }
}

impl<T> FromIterator<T> for Chunked<T> {
    fn from_iter<I: IntoIterator<Item = T>>(iter: I) -> Self {
        let mut out = Chunked::default();
        for value in iter {
            out.push(value);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Proves: across chunk boundaries, elements keep their indexes, are written in place and
    // are listed in order; nothing already held moves when the vector grows.
    #[test]
    fn behaves_as_a_vector_without_moving_what_it_holds() {
        let n = 3 * CHUNK + 5;
        let mut v: Chunked<usize> = (0..CHUNK + 1).collect();
        let first = &v[0] as *const usize;
        for i in CHUNK + 1..n {
            v.push(i);
        }
        assert_eq!(first, &v[0] as *const usize, "the first element stayed put");
        assert_eq!(v.len(), n);
        for i in [0, CHUNK - 1, CHUNK, 2 * CHUNK, n - 1] {
            assert_eq!(v[i], i);
            v[i] += 1_000_000;
        }
        let listed: Vec<usize> = v.iter().copied().collect();
        let mut expected: Vec<usize> = (0..n).collect();
        for i in [0, CHUNK - 1, CHUNK, 2 * CHUNK, n - 1] {
            expected[i] += 1_000_000;
        }
        assert_eq!(listed, expected);
        assert!(v.chunks.iter().skip(1).all(|c| c.capacity() == CHUNK));
        assert_eq!(v.get(n - 1), Some(&(n - 1 + 1_000_000)));
        assert_eq!(v.get(n), None);
        assert_eq!(v.get_mut(n), None);
    }
}
