//! The detector against libinjectionrs, the reference: same verdict on every input, and the
//! same fingerprint whenever both say injection. Inputs: every keyword alone and around
//! punctuation, keyword pairs, random bytes from a SQL-heavy alphabet, and random sequences
//! of SQL-ish tokens. All generators are seeded, so a failure reproduces; it prints the input.

use libinjectionrs::sqli::sqli_data::SQL_KEYWORDS;

/// libinjectionrs's verdict and fingerprint, as `injection::detect_sqli` used it.
fn reference(input: &[u8]) -> Option<String> {
    let mut state = libinjectionrs::SqliState::new(input, libinjectionrs::SqliFlags::FLAG_NONE);
    state.detect().then(|| state.fingerprint_string())
}

fn ours(input: &[u8]) -> Option<String> {
    super::detect(input).map(|fp| String::from_utf8_lossy(fp.as_bytes()).into_owned())
}

/// Compares on `inputs`; returns how many were injections (so a test can check that its
/// generator reaches both verdicts).
fn compare(inputs: impl IntoIterator<Item = Vec<u8>>) -> (usize, usize) {
    let (mut total, mut hits) = (0, 0);
    for input in inputs {
        let expected = reference(&input);
        let got = ours(&input);
        assert_eq!(
            got,
            expected,
            "input {:?} (bytes {:?})",
            String::from_utf8_lossy(&input),
            input
        );
        total += 1;
        hits += usize::from(expected.is_some());
    }
    (total, hits)
}

/// xorshift64*.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }

    fn pick<T: Copy>(&mut self, items: &[T]) -> T {
        items[self.below(items.len())]
    }
}

fn words() -> Vec<&'static str> {
    SQL_KEYWORDS
        .iter()
        .filter(|k| k.token_type != b'F')
        .map(|k| k.word)
        .collect()
}

#[test]
fn every_keyword_alone_and_in_punctuation() {
    let wraps: [(&str, &str); 10] = [
        ("", ""),
        ("1 ", " 1"),
        ("'", ""),
        ("1' ", " '1"),
        ("(", ")"),
        ("\"", "--"),
        ("", "("),
        ("1 ", " 1 --"),
        ("`", "`"),
        ("-", ".x"),
    ];
    let inputs = SQL_KEYWORDS.iter().flat_map(|k| {
        let lower = k.word.to_ascii_lowercase();
        wraps
            .iter()
            .flat_map(move |(a, b)| [format!("{a}{}{b}", k.word), format!("{a}{lower}{b}")])
            .map(String::into_bytes)
    });
    let (total, hits) = compare(inputs);
    assert!(
        total > 180_000 && hits > 1_000,
        "{total} inputs, {hits} injections"
    );
}

/// Values of one word (`detect`'s shortcut past folding): every keyword in three cases,
/// `_`-joined and digit-suffixed keywords, and random words of letters, digits and `_` up to
/// past the 31 bytes a token keeps. Checks that the shortcut took most of them.
#[test]
fn lone_words() {
    let mut inputs: Vec<Vec<u8>> = Vec::new();
    for w in words() {
        let mixed: String = w
            .chars()
            .enumerate()
            .map(|(i, c)| {
                if i % 2 == 0 {
                    c.to_ascii_lowercase()
                } else {
                    c
                }
            })
            .collect();
        for v in [w.to_string(), w.to_ascii_lowercase(), mixed] {
            inputs.push(format!("{v}_x").into_bytes());
            inputs.push(format!("{v}1").into_bytes());
            inputs.push(v.into_bytes());
        }
    }
    let alphabet: Vec<u8> = (b'a'..=b'z')
        .chain(b'A'..=b'Z')
        .chain(b'0'..=b'9')
        .chain([b'_'])
        .collect();
    let mut rng = Rng(0x5eed_0005);
    for _ in 0..100_000 {
        let len = 1 + rng.below(40);
        inputs.push((0..len).map(|_| rng.pick(&alphabet)).collect());
    }
    let shortcut = inputs
        .iter()
        .filter(|i| super::tokenizer::lone_word_kind(i).is_some())
        .count();
    let (total, _) = compare(inputs);
    assert!(
        shortcut * 2 > total,
        "{shortcut} of {total} took the shortcut"
    );
}

/// Inputs around the length up to which `detect` copies the input next to spare bytes for
/// the tokenizer (`PADDED_INPUT`), with tokens ending at the input's end (whose text is
/// then copied from the spare bytes, or not).
#[test]
fn inputs_around_the_padded_length() {
    let tails = [
        " 1 union select 1",
        "' or '1'='1",
        " and 1=1 --",
        " foo",
        "1",
        " /* x",
        "\"a",
        " @@version",
        " 0x1f",
        " `x`",
    ];
    let mut inputs = Vec::new();
    for len in super::PADDED_INPUT - 40..super::PADDED_INPUT + 40 {
        for (i, tail) in tails.iter().enumerate() {
            let fill = ["x", "a b ", "1 ", "'", "ab_cd "][i % 5];
            let mut v = fill.repeat(len / fill.len() + 1).into_bytes();
            v.truncate(len.saturating_sub(tail.len()));
            v.extend_from_slice(tail.as_bytes());
            inputs.push(v);
        }
    }
    let (total, hits) = compare(inputs);
    assert!(
        hits > 0 && hits < total,
        "{total} inputs, {hits} injections"
    );
}

#[test]
fn keyword_pairs() {
    let words = words();
    let separators = [" ", "", "(", " /**/ ", ".", "\t", ",", "'"];
    let mut rng = Rng(0x5eed_0001);
    let mut inputs = Vec::new();
    for (i, first) in words.iter().enumerate() {
        // Each word with the next (multi-word keywords are adjacent in the sorted list) and
        // with random others.
        let mut seconds = vec![words[(i + 1) % words.len()]];
        seconds.extend((0..24).map(|_| rng.pick(&words)));
        for second in seconds {
            let sep = rng.pick(&separators);
            let tail = rng.pick(&["", " 1", "(1)", " x", "--", "'"]);
            inputs.push(format!("{first}{sep}{second}{tail}").into_bytes());
            inputs.push(format!("1 {first} {second} 1").into_bytes());
        }
    }
    let (total, hits) = compare(inputs);
    assert!(hits > 1_000, "{total} inputs, {hits} injections");
}

#[test]
fn random_bytes() {
    let mut alphabet: Vec<u8> = (b'a'..=b'z')
        .chain(b'A'..=b'Z')
        .chain(b'0'..=b'9')
        .collect();
    alphabet.extend_from_slice(b" \t\n\r\x0b\x0c'\"`(),;.-+*/=<>!|&^%@#$:?[]{}\\~");
    alphabet.extend_from_slice(&[0x00, 0xa0, 0x80, 0xc3, 0xa9, 0xff, 0x7f, 0x01]);
    // Letters starting special tokens, and common punctuation, more often.
    let heavy = b"  ''\"--/**/#1100xXbBnNqQuUeE@@()";
    let mut rng = Rng(0x5eed_0002);
    let inputs = (0..220_000).map(|_| {
        let len = rng.below(41);
        (0..len)
            .map(|_| {
                if rng.below(3) == 0 {
                    rng.pick(heavy)
                } else {
                    rng.pick(&alphabet)
                }
            })
            .collect::<Vec<u8>>()
    });
    let (total, hits) = compare(inputs);
    assert!(hits > 1_000, "{total} inputs, {hits} injections");
}

#[test]
fn random_token_sequences() {
    let words = words();
    let pieces: &[&str] = &[
        "0x1f",
        "0X",
        "0b01",
        "0b2",
        "1e5",
        "1e",
        "1e+",
        "1.5",
        ".5",
        "1.",
        ".",
        "12",
        "1f",
        "1d",
        "1fUNION",
        "$1,000.00",
        "$.",
        "$",
        "$$x$$",
        "$tag$y$tag$",
        "$$open",
        "'x'",
        "'x",
        "''",
        "'a''b'",
        "'a\\'b'",
        "\"y\"",
        "\"y",
        "\"a\"\"b\"",
        "`t`",
        "`",
        "``",
        "`open",
        "/* c */",
        "/*! 50000 */",
        "/*/**/",
        "/*",
        "*/",
        "--",
        "-- x",
        "--x",
        "#",
        "# x\n",
        "\n",
        ";",
        ";;",
        "(",
        ")",
        "((",
        "))",
        "{",
        "}",
        "{``",
        ",",
        ".",
        ":",
        "::",
        "=",
        "<=>",
        "<>",
        "!=",
        "!!",
        "||",
        "&&",
        "|",
        "&",
        "^",
        "~",
        "+",
        "-",
        "*",
        "/",
        "%",
        "!",
        "?",
        "[a b]",
        "[x",
        "]",
        "\\",
        "\\N",
        "\\%",
        "@a",
        "@@b",
        "@",
        "@@",
        "@`v`",
        "@'s'",
        "@\"d\"",
        "N'x'",
        "n'x",
        "X'1f'",
        "x'zz'",
        "E'e'",
        "e'",
        "Q'[q]'",
        "q'<q>'",
        "nq'(x)'",
        "q'",
        "U&'u'",
        "u&",
        "b'01'",
        "B'2'",
        "\u{a0}",
        "\u{e9}t\u{e9}",
        "\x00",
        " ",
        "  ",
        "\t",
        "\r\n",
        "NOT",
        "not",
        "IN",
        "LIKE",
        "user",
        "USER_ID",
        "collate",
        "utf8_bin",
        "into outfile",
        "INTO OUTFILE",
        "sp_password",
        "IF",
        "select",
        "union",
        "or",
        "and",
        "1=1",
        "admin",
        "x.y",
        "union.all",
        "a`b",
        "sleep(5)",
        "char(",
        "0",
        "9999999999999999999999999999999999999",
        "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
    ];
    let mut rng = Rng(0x5eed_0003);
    let inputs = (0..300_000).map(|_| {
        let n = 1 + rng.below(8);
        let mut s = String::new();
        for _ in 0..n {
            let piece = if rng.below(3) == 0 {
                rng.pick(&words)
            } else {
                rng.pick(pieces)
            };
            s.push_str(piece);
            match rng.below(4) {
                0 | 1 => s.push(' '),
                2 => {}
                _ => {
                    s.push_str(rng.pick(&["\t", "(", ")", ",", "'", "\"", "\n", "/**/", "-", "."]))
                }
            }
        }
        s.into_bytes()
    });
    let (total, hits) = compare(inputs);
    assert!(hits > 10_000, "{total} inputs, {hits} injections");
}

/// Every byte after each token-starting prefix, inside a few contexts: the tokenizer's
/// byte-level decisions (string delimiters, signed-char comparisons, word ends) one by one.
#[test]
fn every_byte_after_each_prefix() {
    let prefixes: [&[u8]; 24] = [
        b"q'", b"Q'", b"nq'", b"N'", b"n", b"b'", b"x'", b"e'", b"u&'", b"u&", b"$", b"$$", b"$a",
        b"@", b"@@", b"`", b"[", b"\\", b"0x", b"0b", b".", b"1", b"-", b"/",
    ];
    let contexts: [(&[u8], &[u8]); 7] = [
        (b"", b""),
        (b"", b"-- x"),
        (b"", b"/* x"),
        (b"1 ", b"x' or 1=1 --"),
        (b"'", b"x\xc3' union select 1"),
        (b"", b" or 1=1"),
        (b"1\" ", b"\x00\" and 2>1#"),
    ];
    let mut inputs = Vec::new();
    for prefix in prefixes {
        for byte in 0..=255u8 {
            for (before, after) in contexts {
                let mut input = before.to_vec();
                input.extend_from_slice(prefix);
                input.push(byte);
                input.extend_from_slice(after);
                inputs.push(input);
            }
        }
    }
    let (total, hits) = compare(inputs);
    assert!(hits > 5_000, "{total} inputs, {hits} injections");
}

#[test]
fn known_values() {
    assert_eq!(ours(b"1' or '1'='1").as_deref(), Some("s&sos"));
    assert_eq!(
        ours(b"admin'--").as_deref(),
        reference(b"admin'--").as_deref()
    );
    assert_eq!(ours(b"1 union select 1"), reference(b"1 union select 1"));
    assert!(ours(b"1 union select 1").is_some());
    assert_eq!(ours(b"Some ordinary text with words and numbers 12"), None);
    assert_eq!(ours(b""), None);
}
