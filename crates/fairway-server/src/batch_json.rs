//! A large batch body split into its jobs' JSON texts, the whole body checked as JSON first,
//! and each job of the plain shape read from its text.
//!
//! `POST /v1/jobs/batch` checks a large body whole before its first job goes to the writer,
//! so that a body broken anywhere submits nothing; each job's text is then read on its own as
//! its part is sent. serde_json did that check by skipping every value as it would parse it
//! (some 2,000 instructions a job of the bench's bulk calls, all before the engine starts);
//! this one finds each job's bounds and proves the body well formed with strings scanned eight
//! bytes at a time and the body's UTF-8 checked once, whole.
//!
//! It accepts exactly what serde_json accepts as `{"jobs": [RawValue, ...]}` for bodies of the
//! plain shape: the object's one key written `"jobs"` without escapes. Any other shape (an
//! escaped key, a second key, the struct written as an array, anything broken) gets `None`,
//! and the caller asks serde_json, which accepts it or names the problem; so this can only
//! make a well-formed plain body faster, never accept what serde_json refuses.
//!
//! Each job is then read on its own: one of the plain shape the SDK writes (the fields of
//! [`PlainJob`], strings without escapes) by [`plain_job`], its fields and its payload's text
//! borrowed from the body, where serde_json would copy the payload into a `RawValue` after
//! checking it a second time; any other job by serde_json, which names what is wrong.
//!
//! The split uses only the standard library, and the check against serde_json
//! ([`check_against_serde_json`]) only serde and serde_json, so that the fuzz workspace
//! compiles this file as it is without building the server (`fuzz/src/batch_json.rs`).

/// Each job's JSON text, as serde_json's `RawValue` would hold it (no surrounding whitespace),
/// if `body` is the plain shape `{"jobs": [...]}` and well-formed JSON; otherwise `None`.
pub fn job_texts(body: &[u8]) -> Option<Vec<&str>> {
    // Non-ASCII bytes can only stand in strings, where serde_json checks them as UTF-8 (each
    // job's text) and so does this, in one pass over the whole body.
    let text = std::str::from_utf8(body).ok()?;
    let mut reader = Reader::new(body);
    reader.ws();
    reader.expect(b'{')?;
    reader.ws();
    reader.expect_all(b"\"jobs\"")?;
    reader.ws();
    reader.expect(b':')?;
    reader.ws();
    reader.expect(b'[')?;
    reader.ws();
    let mut jobs = Vec::new();
    if reader.peek() == Some(b']') {
        reader.at += 1;
    } else {
        loop {
            let start = reader.at;
            reader.value()?;
            // A value starts and ends with an ASCII byte: on character boundaries.
            jobs.push(text.get(start..reader.at)?);
            reader.ws();
            match reader.next()? {
                b',' => reader.ws(),
                b']' => break,
                _ => return None,
            }
        }
    }
    reader.ws();
    reader.expect(b'}')?;
    reader.ws();
    (reader.at == body.len()).then_some(jobs)
}

/// One job of a batch in the plain shape producers write, its fields borrowed from its text:
/// what serde_json reads into `SubmitBody` (wire.rs), for the fields read here.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct PlainJob<'a> {
    /// `id`, the text between its quotes.
    pub id: Option<&'a str>,
    /// `tenant`.
    pub tenant: Option<&'a str>,
    /// `class`.
    pub class: Option<&'a str>,
    /// `priority`.
    pub priority: Option<i32>,
    /// `estimate_ms`.
    pub estimate_ms: Option<u64>,
    /// `deadline_ms`.
    pub deadline_ms: Option<u64>,
    /// `max_attempts`.
    pub max_attempts: Option<u32>,
    /// The payload's JSON text, as serde_json's `RawValue` would hold it.
    pub payload: Option<&'a str>,
}

/// A job's fields if its text is a JSON object of the plain shape: each key at most once,
/// written without escapes and one of `PlainJob`'s; strings without escapes; integers without
/// a fraction or an exponent, in their field's range; a payload of any JSON value but `null`.
/// Anything else (another field, an escape, a `null`, a duplicate key, a number serde_json
/// would read as a float, broken JSON) gets `None`, and the caller asks serde_json, which
/// reads it or names the problem. So where this answers, serde_json answers the same.
pub fn plain_job(text: &str) -> Option<PlainJob<'_>> {
    let mut reader = Reader::new(text.as_bytes());
    let mut job = PlainJob::default();
    reader.ws();
    reader.expect(b'{')?;
    reader.ws();
    if reader.peek() == Some(b'}') {
        reader.at += 1;
    } else {
        loop {
            let key = reader.plain_str(text)?;
            reader.ws();
            reader.expect(b':')?;
            reader.ws();
            match key {
                "id" => once(&mut job.id, reader.plain_str(text)?)?,
                "tenant" => once(&mut job.tenant, reader.plain_str(text)?)?,
                "class" => once(&mut job.class, reader.plain_str(text)?)?,
                "priority" => once(&mut job.priority, reader.integer()?.try_into().ok()?)?,
                "estimate_ms" => once(&mut job.estimate_ms, reader.integer()?.try_into().ok()?)?,
                "deadline_ms" => once(&mut job.deadline_ms, reader.integer()?.try_into().ok()?)?,
                "max_attempts" => once(&mut job.max_attempts, reader.integer()?.try_into().ok()?)?,
                "payload" => {
                    let start = reader.at;
                    if reader.peek() == Some(b'n') {
                        return None; // `null`: serde_json reads no payload
                    }
                    reader.value()?;
                    once(&mut job.payload, text.get(start..reader.at)?)?
                }
                _ => return None,
            }
            reader.ws();
            match reader.next()? {
                b',' => reader.ws(),
                b'}' => break,
                _ => return None,
            }
        }
    }
    reader.ws();
    (reader.at == text.len()).then_some(job)
}

/// Sets a field not yet set (serde_json refuses a duplicate field).
fn once<T>(slot: &mut Option<T>, value: T) -> Option<()> {
    slot.is_none().then(|| *slot = Some(value))
}

/// A cursor over the body and the containers open around it.
struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
    /// `{` or `[` for each container the current value is inside, innermost last (no depth
    /// limit, as serde_json's skipping has none: the body's size bounds it).
    open: Vec<u8>,
}

/// Eight bytes, each 0x01 or 0x80, for the word-at-a-time string scan.
const ONES: u64 = u64::from_ne_bytes([0x01; 8]);
const HIGHS: u64 = u64::from_ne_bytes([0x80; 8]);

/// Each byte of `word` that is zero gets its high bit set in the result, and no byte before the
/// first zero byte does (borrows only run upward), so the lowest set bit finds the first one.
fn zero_bytes(word: u64) -> u64 {
    word.wrapping_sub(ONES) & !word & HIGHS
}

impl<'a> Reader<'a> {
    fn new(bytes: &'a [u8]) -> Reader<'a> {
        Reader {
            bytes,
            at: 0,
            open: Vec::new(),
        }
    }

    fn peek(&self) -> Option<u8> {
        self.bytes.get(self.at).copied()
    }

    fn next(&mut self) -> Option<u8> {
        let byte = self.peek()?;
        self.at += 1;
        Some(byte)
    }

    fn expect(&mut self, byte: u8) -> Option<()> {
        (self.next()? == byte).then_some(())
    }

    fn expect_all(&mut self, text: &[u8]) -> Option<()> {
        let end = self.at.checked_add(text.len())?;
        (self.bytes.get(self.at..end)? == text).then(|| self.at = end)
    }

    /// JSON's whitespace: space, tab, line feed, carriage return.
    fn ws(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.peek() {
            self.at += 1;
        }
    }

    /// One JSON value, containers walked with `open` rather than recursion.
    fn value(&mut self) -> Option<()> {
        debug_assert!(self.open.is_empty());
        loop {
            // At the start of a value, whitespace already passed.
            match self.next()? {
                b'"' => {
                    self.string()?;
                }
                b'{' => {
                    self.ws();
                    if self.peek() == Some(b'}') {
                        self.at += 1;
                    } else {
                        self.open.push(b'{');
                        self.key()?;
                        continue;
                    }
                }
                b'[' => {
                    self.ws();
                    if self.peek() == Some(b']') {
                        self.at += 1;
                    } else {
                        self.open.push(b'[');
                        continue;
                    }
                }
                b't' => self.expect_all(b"rue")?,
                b'f' => self.expect_all(b"alse")?,
                b'n' => self.expect_all(b"ull")?,
                b'-' => {
                    let first = self.next()?;
                    self.number(first)?
                }
                first @ b'0'..=b'9' => self.number(first)?,
                _ => return None,
            }
            // A value is complete: close the containers it completes, or pass a comma.
            loop {
                let Some(&inside) = self.open.last() else {
                    return Some(());
                };
                self.ws();
                match (self.next()?, inside) {
                    (b',', b'{') => {
                        self.ws();
                        self.key()?;
                        break;
                    }
                    (b',', _) => {
                        self.ws();
                        break;
                    }
                    (b'}', b'{') | (b']', b'[') => {
                        self.open.pop();
                    }
                    _ => return None,
                }
            }
        }
    }

    /// An object's key and its colon, up to its value's first byte.
    #[inline(always)]
    fn key(&mut self) -> Option<()> {
        self.expect(b'"')?;
        self.string()?;
        self.ws();
        self.expect(b':')?;
        self.ws();
        Some(())
    }

    /// A string's rest after its opening quote, through its closing quote: no control byte,
    /// escapes as JSON has them (`\u` and four hex digits, whatever code point they name, as
    /// serde_json's skipping allows). Its UTF-8 was checked with the whole body's. Whether it
    /// held an escape.
    #[inline(always)]
    fn string(&mut self) -> Option<bool> {
        let bytes = self.bytes;
        let mut at = self.at;
        let mut escaped = false;
        loop {
            // Eight bytes at a time up to the first quote, backslash or control byte.
            while let Some(chunk) = bytes.get(at..)?.first_chunk::<8>() {
                let word = u64::from_le_bytes(*chunk);
                let stops = zero_bytes(word ^ (ONES * u64::from(b'"')))
                    | zero_bytes(word ^ (ONES * u64::from(b'\\')))
                    | (word.wrapping_sub(ONES * 0x20) & !word & HIGHS);
                if stops != 0 {
                    at += (stops.trailing_zeros() / 8) as usize;
                    break;
                }
                at += 8;
            }
            let byte = *bytes.get(at)?;
            at += 1;
            match byte {
                b'"' => {
                    self.at = at;
                    return Some(escaped);
                }
                b'\\' => {
                    self.at = at;
                    self.escape()?;
                    at = self.at;
                    escaped = true;
                }
                0..0x20 => return None,
                _ => {} // a plain byte in the last few, scanned one at a time
            }
        }
    }

    /// An escape's rest after its backslash.
    #[cold]
    fn escape(&mut self) -> Option<()> {
        match self.next()? {
            b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't' => Some(()),
            b'u' => {
                for _ in 0..4 {
                    if !self.next()?.is_ascii_hexdigit() {
                        return None;
                    }
                }
                Some(())
            }
            _ => None,
        }
    }

    /// A string (a value or a key) without escapes, its text between the quotes.
    #[inline(always)]
    fn plain_str<'t>(&mut self, text: &'t str) -> Option<&'t str> {
        self.expect(b'"')?;
        let start = self.at;
        let escaped = self.string()?;
        if escaped {
            return None;
        }
        text.get(start..self.at - 1)
    }

    /// An integer as serde_json reads one into an integer field: digits with an optional
    /// minus, no fraction or exponent; `-0` and anything past 20 digits left to serde_json
    /// (it reads them as floats, which an integer field refuses).
    fn integer(&mut self) -> Option<i128> {
        let negative = self.peek() == Some(b'-');
        if negative {
            self.at += 1;
        }
        let start = self.at;
        let first = self.next()?;
        self.number(first)?;
        let digits = self.bytes.get(start..self.at)?;
        if digits.len() > 20 || !digits.iter().all(u8::is_ascii_digit) {
            return None;
        }
        let value = digits
            .iter()
            .fold(0i128, |n, d| n * 10 + i128::from(d - b'0'));
        match (negative, value) {
            (true, 0) => None,
            (true, _) => Some(-value),
            (false, _) => Some(value),
        }
    }

    /// A number's rest after its first digit (`first`, passed already), as JSON has them: no
    /// leading zero, a fraction and an exponent each with at least one digit.
    fn number(&mut self, first: u8) -> Option<()> {
        match first {
            b'0' => {}
            b'1'..=b'9' => self.digits(),
            _ => return None,
        }
        if self.peek() == Some(b'.') {
            self.at += 1;
            self.some_digits()?;
        }
        if let Some(b'e' | b'E') = self.peek() {
            self.at += 1;
            if let Some(b'+' | b'-') = self.peek() {
                self.at += 1;
            }
            self.some_digits()?;
        }
        Some(())
    }

    fn digits(&mut self) {
        while let Some(b'0'..=b'9') = self.peek() {
            self.at += 1;
        }
    }

    fn some_digits(&mut self) -> Option<()> {
        let start = self.at;
        self.digits();
        (self.at > start).then_some(())
    }
}

/// Panics unless [`job_texts`] and serde_json agree on `body`: whatever the split accepts,
/// serde_json accepts as `{"jobs": [RawValue, ...]}` with the same texts; and whatever
/// serde_json accepts in the plain shape (the key `"jobs"` first, unescaped), the split
/// accepts. For the tests and the fuzz target `batch_json`.
pub fn check_against_serde_json(body: &[u8]) {
    #[derive(serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Texts<'a> {
        #[serde(borrow)]
        jobs: Vec<&'a serde_json::value::RawValue>,
    }
    let split = job_texts(body);
    let serde = serde_json::from_slice::<Texts>(body)
        .map(|t| t.jobs.into_iter().map(|job| job.get()).collect::<Vec<_>>());
    let shown = || String::from_utf8_lossy(body).into_owned();
    match (&split, &serde) {
        (Some(split), Ok(serde)) => assert_eq!(split, serde, "the texts differ for {:?}", shown()),
        (Some(_), Err(e)) => panic!("split accepts what serde_json refuses ({e}): {:?}", shown()),
        (None, Ok(_)) => {
            let mut plain = Reader::new(body);
            plain.ws();
            let plain = plain.expect(b'{').is_some() && {
                plain.ws();
                plain.expect_all(b"\"jobs\"").is_some()
            };
            assert!(
                !plain,
                "split refuses a plain body serde_json accepts: {:?}",
                shown()
            );
        }
        (None, Err(_)) => {}
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::{check_against_serde_json, job_texts};

    #[test]
    fn a_plain_body_splits_into_its_jobs_texts() {
        let body = br#" { "jobs" : [ {"tenant":"a","payload":{"x":[1,-2.5e3,true,null]}} ,
            "text \"quoted\" \u00e9 caf\u00c3\u00a9" ,[],{}, 0 ,-0.1E+2 ] } "#;
        let jobs = job_texts(body).expect("well formed");
        assert_eq!(
            jobs,
            [
                r#"{"tenant":"a","payload":{"x":[1,-2.5e3,true,null]}}"#,
                r#""text \"quoted\" \u00e9 caf\u00c3\u00a9""#,
                "[]",
                "{}",
                "0",
                "-0.1E+2",
            ]
        );
        assert_eq!(job_texts(br#"{"jobs":[]}"#), Some(vec![]));
        assert_eq!(
            job_texts("{\"jobs\":[\"h\u{e9}llo w\u{f6}rld \u{1F600}\"]}".as_bytes()),
            Some(vec!["\"h\u{e9}llo w\u{f6}rld \u{1F600}\""])
        );
    }

    #[test]
    fn broken_or_unusual_bodies_are_left_to_serde_json() {
        for body in [
            &b""[..],
            br#"{"jobs":[1,]}"#,
            br#"{"jobs":[01]}"#,
            br#"{"jobs":[1.]}"#,
            br#"{"jobs":[1e]}"#,
            br#"{"jobs":[-]}"#,
            br#"{"jobs":[tru]}"#,
            br#"{"jobs":[{"a":1,}]}"#,
            br#"{"jobs":[{"a" 1}]}"#,
            br#"{"jobs":[{1:1}]}"#,
            br#"{"jobs":[[1}]]}"#,
            br#"{"jobs":["\x"]}"#,
            br#"{"jobs":["\u12G4"]}"#,
            b"{\"jobs\":[\"a\tb\"]}",
            b"{\"jobs\":[\"\xC3\"]}",
            b"{\"jobs\":[\"\xED\xA0\x80\"]}",
            b"{\"jobs\":[\"abcdefgh\xF5\x80\x80\x80\"]}",
            br#"{"jobs":["unterminated]}"#,
            br#"{"jobs":[1]} x"#,
            br#"{"jobs":[1],"jobs":[2]}"#,
            br#"{"j\u006fbs":[1]}"#,
            br#"[[1]]"#,
        ] {
            assert_eq!(job_texts(body), None, "{}", String::from_utf8_lossy(body));
        }
    }

    /// A deterministic generator of JSON text, mostly valid, for the differential tests
    /// (http.rs's too).
    pub(crate) struct Gen(pub(crate) u64);

    impl Gen {
        pub(crate) fn below(&mut self, n: u64) -> u64 {
            // xorshift64*
            self.0 ^= self.0 >> 12;
            self.0 ^= self.0 << 25;
            self.0 ^= self.0 >> 27;
            (self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 32) % n
        }

        fn pick<'a>(&mut self, from: &[&'a str]) -> &'a str {
            from[self.below(from.len() as u64) as usize]
        }

        fn ws(&mut self, out: &mut String) {
            if self.below(4) == 0 {
                out.push_str(self.pick(&[" ", "\n", "\t ", "\r\n  "]));
            }
        }

        fn string(&mut self, out: &mut String) {
            out.push('"');
            for _ in 0..self.below(24) {
                out.push_str(self.pick(&[
                    "a",
                    "tenant-",
                    "0193a1b2-c3d4",
                    " ",
                    "\\\"",
                    "\\\\",
                    "\\/",
                    "\\n",
                    "\\u00e9",
                    "\\uD83D\\uDE00",
                    "\\ud800",
                    "\u{e9}",
                    "\u{20ac}",
                    "\u{1F600}",
                    "\u{7f}",
                    "xxxxxxxxxxxxxxxx",
                ]));
            }
            out.push('"');
        }

        fn value(&mut self, out: &mut String, depth: u32) {
            match self.below(if depth > 4 { 4 } else { 7 }) {
                0 => self.string(out),
                1 => out.push_str(self.pick(&[
                    "0",
                    "-0",
                    "12",
                    "-3.25",
                    "1e9",
                    "2E-3",
                    "6.02e+23",
                    "1733612345678.123",
                ])),
                2 => out.push_str(self.pick(&["true", "false", "null"])),
                3 => self.string(out),
                4 | 5 => {
                    out.push('{');
                    for k in 0..self.below(5) {
                        if k > 0 {
                            out.push(',');
                        }
                        self.ws(out);
                        self.string(out);
                        self.ws(out);
                        out.push(':');
                        self.ws(out);
                        self.value(out, depth + 1);
                        self.ws(out);
                    }
                    out.push('}');
                }
                _ => {
                    out.push('[');
                    for k in 0..self.below(5) {
                        if k > 0 {
                            out.push(',');
                        }
                        self.ws(out);
                        self.value(out, depth + 1);
                        self.ws(out);
                    }
                    out.push(']');
                }
            }
        }

        fn body(&mut self) -> String {
            let mut out = String::new();
            self.ws(&mut out);
            out.push_str(if self.below(8) == 0 {
                "{\"j\\u006fbs\":["
            } else {
                "{\"jobs\":["
            });
            for k in 0..self.below(12) {
                if k > 0 {
                    out.push(',');
                }
                self.ws(&mut out);
                self.value(&mut out, 0);
                self.ws(&mut out);
            }
            out.push_str("]}");
            self.ws(&mut out);
            out
        }

        /// `body` with a few bytes changed, inserted, removed, or its end cut off.
        fn mutate(&mut self, body: &str) -> Vec<u8> {
            let mut bytes = body.as_bytes().to_vec();
            for _ in 0..=self.below(3) {
                let at = self.below(bytes.len() as u64 + 1) as usize;
                let byte = *b"\"\\{}[]:,.-+eE0u \t\x01\x7f\x80\xc3\xa9\xed\xf4\xff"
                    .get(self.below(25) as usize)
                    .unwrap_or(&b'x');
                match self.below(4) {
                    0 if at < bytes.len() => bytes[at] = byte,
                    1 => bytes.insert(at, byte),
                    2 if at < bytes.len() => {
                        bytes.remove(at);
                    }
                    _ => bytes.truncate(at),
                }
            }
            bytes
        }
    }

    #[test]
    fn the_split_agrees_with_serde_json_on_generated_and_broken_bodies() {
        let mut generate = Gen(0x5eed_2026_1207);
        let (mut split, mut refused) = (0, 0);
        for _ in 0..4_000 {
            let body = generate.body();
            check_against_serde_json(body.as_bytes());
            split += usize::from(job_texts(body.as_bytes()).is_some());
            for _ in 0..8 {
                let broken = generate.mutate(&body);
                check_against_serde_json(&broken);
                refused += usize::from(job_texts(&broken).is_none());
            }
        }
        // Both sides of the comparison were exercised: most generated bodies are plain and
        // well formed, and most mutations break them.
        assert!(split > 3_000, "{split} of 4,000 generated bodies split");
        assert!(
            refused > 16_000,
            "{refused} of 32,000 mutated bodies refused"
        );
    }
}
