//! libinjection's SQL tokenizer: one token at a time, each byte's class choosing the parser.
//!
//! libinjection reads a value as a SQL fragment in one of three contexts: as is, or as if it
//! followed an opening `'` or `"` (then its first token is the rest of that string). MySQL
//! and ANSI differ in two places: `#` starts a comment only in MySQL, and `--` followed by a
//! non-space is a comment only in ANSI. The tokenizer notes when it met either, because then
//! the value is worth reading again as MySQL.
//!
//! Positions are always within the input (at most `input.len()`), so `pos + 3` cannot
//! overflow; bytes are read with `get`, so reading past the end finds `None`, never panics.

use libinjectionrs::sqli::sqli_data::{CharType, CHAR_MAP};

use super::keywords::{lookup, lookup_within};
use super::token::{kind, Token};

/// What a byte starts. The classes are libinjectionrs's character map (its `CHAR_MAP`, read at
/// compile time), with the classes that share a parser merged.
#[derive(Clone, Copy)]
enum Class {
    White,
    /// `'` or `"`.
    Quote,
    Hash,
    Dollar,
    /// One-character operators: `% ^ + ~`.
    Op1,
    /// Operators that may take two characters: `! & * : < = > |`.
    Op2,
    /// `( ) , ; { }`: a token of that kind.
    Single,
    Dash,
    /// Digits and `.`.
    Number,
    Slash,
    At,
    Word,
    /// The letters that may prefix a string: `b e n q u x` in both cases.
    BPrefix,
    EPrefix,
    NPrefix,
    QPrefix,
    UPrefix,
    XPrefix,
    /// `[`: a T-SQL bracketed name.
    Bracket,
    Backslash,
    Tick,
    /// `?` and `]`.
    Other,
}

const fn class_of(c: CharType) -> Class {
    match c {
        CharType::White => Class::White,
        CharType::String => Class::Quote,
        CharType::Hash => Class::Hash,
        CharType::Money => Class::Dollar,
        CharType::Op1 | CharType::Unary => Class::Op1,
        CharType::Bang | CharType::Op2 => Class::Op2,
        CharType::LeftParens
        | CharType::RightParens
        | CharType::Comma
        | CharType::Semicolon
        | CharType::LeftBrace
        | CharType::RightBrace => Class::Single,
        CharType::Dash => Class::Dash,
        CharType::Number => Class::Number,
        CharType::Slash => Class::Slash,
        CharType::Variable => Class::At,
        CharType::Word => Class::Word,
        CharType::BString => Class::BPrefix,
        CharType::EString => Class::EPrefix,
        CharType::NQString => Class::NPrefix,
        CharType::QString => Class::QPrefix,
        CharType::UString => Class::UPrefix,
        CharType::XString => Class::XPrefix,
        CharType::BWord => Class::Bracket,
        CharType::Backslash => Class::Backslash,
        CharType::Tick => Class::Tick,
        CharType::Other => Class::Other,
    }
}

static CLASSES: [Class; 256] = {
    let mut classes = [Class::Other; 256];
    let mut i = 0;
    while i < 256 {
        classes[i] = class_of(CHAR_MAP[i]);
        i += 1;
    }
    classes
};

/// A set of bytes, as a 256-entry table built at compile time.
const fn byte_set(bytes: &[u8]) -> [bool; 256] {
    let mut set = [false; 256];
    let mut i = 0;
    while i < bytes.len() {
        set[bytes[i] as usize] = true;
        i += 1;
    }
    set
}

/// Per byte, within a word: `WORD_END` ends it, `WORD_SPLIT` (`.` and `` ` ``) may: a word
/// may hold them (`db.table`), but a keyword before one ends the word there (`union.` is
/// `union` then `.`).
static WORD_BYTES: [u8; 256] = {
    let end = byte_set(b" []{}<>:\\?=@!#~+-*/&|^%(),';\t\n\x0b\x0c\r\"\xa0\x00");
    let mut classes = [0u8; 256];
    let mut i = 0;
    while i < 256 {
        if end[i] {
            classes[i] = WORD_END;
        }
        i += 1;
    }
    classes[b'.' as usize] = WORD_SPLIT;
    classes[b'`' as usize] = WORD_SPLIT;
    classes
};
const WORD_END: u8 = 1;
const WORD_SPLIT: u8 = 2;
/// Bytes that end a variable's name (`@name`).
static VAR_END: [bool; 256] = byte_set(b" <>:\\?=@!#~+-*/&|^%(),;'\t\n\x0b\x0c\r`\"");
/// libinjection's whitespace where it asks "is the next byte a space" (after `--`, after a
/// number's `f`/`d` suffix): narrower than the white byte class.
static SPACE: [bool; 256] = byte_set(b" \t\n\x0b\x0c\r\xa0\x00");

fn is_in(set: &[bool; 256], b: u8) -> bool {
    set.get(usize::from(b)).copied().unwrap_or(false)
}

/// The kind of the one token `input` is read as when it is one plain word: its first byte
/// starts a word (not a digit, nor `b e n q u x`, which may start a string or a number) and
/// every byte is an ASCII letter, digit or `_` (none ends or splits a word). `None` for any
/// other input.
pub(super) fn lone_word_kind(input: &[u8]) -> Option<u8> {
    let first = *input.first()?;
    if !matches!(CLASSES.get(usize::from(first)), Some(Class::Word)) {
        return None;
    }
    if !input
        .iter()
        .all(|&b| b.is_ascii_alphanumeric() || b == b'_')
    {
        return None;
    }
    // As `Tokenizer::word`: words too long for a token are not looked up.
    Some(if input.len() <= super::token::MAX_TEXT {
        lookup(input)
    } else {
        kind::BAREWORD
    })
}

/// A token as the tokenizer finds it: its kind, where its text is in the input, and its
/// quotes; `Tokenizer::write` makes the `Token` in place.
struct Span {
    kind: u8,
    from: usize,
    to: usize,
    open: u8,
    close: u8,
}

/// Which SQL dialect and starting context a pass reads the input in.
#[derive(Clone, Copy)]
pub(super) struct Context {
    /// 0, or the quote the input is read as following (`'` or `"`).
    pub quote: u8,
    pub mysql: bool,
}

pub(super) struct Tokenizer<'a> {
    input: &'a [u8],
    /// `input` followed by at least `MAX_TEXT` more bytes when it is short enough to have
    /// been copied so (see `detect`), else `input`: a token's text is then copied as one
    /// fixed-size block wherever it ends (a copy of the bytes left was a `memcpy` call).
    padded: &'a [u8],
    pos: usize,
    context: Context,
    /// Whether a `#` or a `--x` was seen: the comments MySQL and ANSI read differently.
    pub saw_dialect_comment: bool,
}

impl<'a> Tokenizer<'a> {
    pub fn new(input: &'a [u8], padded: &'a [u8], context: Context) -> Tokenizer<'a> {
        Tokenizer {
            input,
            padded,
            pos: 0,
            context,
            saw_dialect_comment: false,
        }
    }

    fn at(&self, i: usize) -> Option<u8> {
        self.input.get(i).copied()
    }

    /// A token of `kind` whose text is `input[from..to]`.
    fn make(&self, kind: u8, from: usize, to: usize) -> Span {
        Span {
            kind,
            from,
            to,
            open: 0,
            close: 0,
        }
    }

    /// The text a token of `span` keeps (at most `MAX_TEXT` bytes).
    fn text(&self, span: &Span) -> &'a [u8] {
        let to = span.to.min(span.from + super::token::MAX_TEXT);
        self.slice(span.from, to)
    }

    /// Writes the token of `span` into `out`, field by field.
    fn write(&self, span: &Span, out: &mut Token) {
        out.set_from_input(span.kind, self.padded, span.from, span.to);
        out.open = span.open;
        out.close = span.close;
    }

    fn slice(&self, from: usize, to: usize) -> &'a [u8] {
        self.input.get(from..to).unwrap_or(&[])
    }

    /// Reads the next token into `out` (false at the end of the input). Written in place
    /// rather than returned: a returned token was built field by field and then copied in
    /// wide loads, which could not be forwarded from those narrow stores (a fifth of
    /// detectSQLi's time on a form value was that copy).
    pub fn next_token(&mut self, out: &mut Token) -> bool {
        if self.pos == 0 && self.context.quote != 0 && !self.input.is_empty() {
            // The input continues a string: its first token is that string's rest.
            let mut t = self.string(0, self.context.quote);
            t.open = 0;
            self.write(&t, out);
            return true;
        }
        while let Some(b) = self.at(self.pos) {
            let class = CLASSES.get(usize::from(b)).copied().unwrap_or(Class::Other);
            if self.token(class, b, out) {
                return true;
            }
        }
        false
    }

    /// Reads the token starting at `self.pos` (a byte `b` of class `class`) into `out` and
    /// moves past it; false for whitespace, which is skipped.
    fn token(&mut self, class: Class, b: u8, out: &mut Token) -> bool {
        let pos = self.pos;
        let span = match class {
            Class::White => {
                self.pos = pos + 1;
                return false;
            }
            Class::Quote => self.string(pos + 1, b),
            Class::Hash => {
                self.saw_dialect_comment = true;
                if self.context.mysql {
                    self.line_comment()
                } else {
                    self.single(kind::OPERATOR)
                }
            }
            Class::Dollar => self.dollar(),
            Class::Op1 => self.single(kind::OPERATOR),
            Class::Op2 => self.operator(),
            Class::Single => self.single(b),
            Class::Dash => self.dash(),
            Class::Number => self.number(),
            Class::Slash => {
                if self.at(pos + 1) == Some(b'*') {
                    self.block_comment()
                } else {
                    self.single(kind::OPERATOR)
                }
            }
            Class::At => self.variable(),
            Class::Word => self.word(),
            Class::BPrefix => self.literal_number(|b| matches!(b, b'0' | b'1')),
            Class::XPrefix => self.literal_number(|b| b.is_ascii_hexdigit()),
            Class::EPrefix => self.prefixed_string(),
            Class::NPrefix => {
                if self.at(pos + 1) == Some(b'\'') && pos + 2 < self.input.len() {
                    self.prefixed_string()
                } else {
                    self.oracle_string(pos + 1)
                }
            }
            Class::QPrefix => self.oracle_string(pos),
            Class::UPrefix => self.unicode_string(),
            Class::Bracket => {
                // `[name]`, brackets included; unclosed: the rest.
                let end = memchr::memchr(b']', self.slice(pos, self.input.len()))
                    .map_or(self.input.len(), |i| pos + i + 1);
                self.pos = end;
                self.make(kind::BAREWORD, pos, end)
            }
            Class::Backslash => {
                if self.at(pos + 1) == Some(b'N') {
                    // MySQL's `\N` is NULL.
                    self.pos = pos + 2;
                    self.make(kind::NUMBER, pos, pos + 2)
                } else {
                    self.single(kind::BACKSLASH)
                }
            }
            Class::Tick => self.backticked(pos + 1),
            Class::Other => self.single(kind::UNKNOWN),
        };
        self.write(&span, out);
        true
    }

    /// A one-byte token of `kind`.
    fn single(&mut self, kind: u8) -> Span {
        let pos = self.pos;
        self.pos = pos + 1;
        self.make(kind, pos, pos + 1)
    }

    /// An operator of up to three bytes: `<=>`, a two-byte operator on libinjection's list
    /// (`<=`, `||`, `&&`, ...), else one byte (`:` alone is a colon, unless it ends the input).
    fn operator(&mut self) -> Span {
        let pos = self.pos;
        let len = self.input.len();
        if pos + 1 >= len {
            return self.single(kind::OPERATOR);
        }
        if self.slice(pos, pos + 3) == b"<=>" {
            self.pos = pos + 3;
            return self.make(kind::OPERATOR, pos, pos + 3);
        }
        match lookup_within(self.slice(pos, self.input.len()), 2) {
            kind::BAREWORD => {}
            found => {
                self.pos = pos + 2;
                let k = if found == kind::LOGIC {
                    kind::LOGIC
                } else {
                    kind::OPERATOR
                };
                return self.make(k, pos, pos + 2);
            }
        }
        if self.at(pos) == Some(b':') {
            self.single(kind::COLON)
        } else {
            self.single(kind::OPERATOR)
        }
    }

    /// `-`: an operator, or `--` a comment to the end of the line. `--` followed by a
    /// non-space is a comment only in ANSI; MySQL reads two minus signs.
    fn dash(&mut self) -> Span {
        let pos = self.pos;
        if self.at(pos + 1) != Some(b'-') {
            return self.single(kind::OPERATOR);
        }
        match self.at(pos + 2) {
            None => self.line_comment(),
            Some(b) if is_in(&SPACE, b) => self.line_comment(),
            Some(_) => {
                self.saw_dialect_comment = true;
                if self.context.mysql {
                    self.single(kind::OPERATOR)
                } else {
                    self.line_comment()
                }
            }
        }
    }

    /// A comment from here to the end of the line (the newline is consumed, not kept).
    fn line_comment(&mut self) -> Span {
        let pos = self.pos;
        let rest = self.slice(pos, self.input.len());
        let (end, next) = match memchr::memchr(b'\n', rest) {
            Some(i) => (pos + i, pos + i + 1),
            None => (self.input.len(), self.input.len()),
        };
        self.pos = next;
        self.make(kind::COMMENT, pos, end)
    }

    /// `/* ... */` (or to the end when unclosed). Two forms are evil, i.e. an injection
    /// whatever follows: MySQL's executable `/*!`, and a nested `/*` (as libinjection finds
    /// it: searching up to and including the closing `*`).
    fn block_comment(&mut self) -> Span {
        let pos = self.pos;
        let len = self.input.len();
        let body = self.slice(pos + 2, len);
        let close = memchr::memmem::find(body, b"*/");
        let end = close.map_or(len, |c| pos + 2 + c + 2);
        let nested = close
            .is_some_and(|c| memchr::memmem::find(body.get(..=c).unwrap_or(&[]), b"/*").is_some());
        let evil = nested || self.at(pos + 2) == Some(b'!');
        self.pos = end;
        let k = if evil { kind::EVIL } else { kind::COMMENT };
        self.make(k, pos, end)
    }

    /// A string whose text starts at `start`, up to an unescaped `delim` (escaped by a
    /// backslash, odd-counted, or by doubling); unclosed, it runs to the end.
    fn string(&mut self, start: usize, delim: u8) -> Span {
        let len = self.input.len();
        let mut from = start;
        loop {
            let found = memchr::memchr(delim, self.slice(from, len)).map(|i| from + i);
            let Some(q) = found else {
                self.pos = len;
                let mut t = self.make(kind::STRING, start, len);
                t.open = delim;
                return t;
            };
            if q > 0 && self.backslashes_before(q) % 2 == 1 {
                from = q + 1;
            } else if self.at(q + 1) == Some(delim) {
                from = q + 2;
            } else {
                self.pos = q + 1;
                let mut t = self.make(kind::STRING, start, q);
                t.open = delim;
                t.close = delim;
                return t;
            }
        }
    }

    /// How many backslashes immediately precede position `q`.
    fn backslashes_before(&self, q: usize) -> usize {
        self.slice(0, q)
            .iter()
            .rev()
            .take_while(|&&b| b == b'\\')
            .count()
    }

    /// `` `name` ``: a bareword, or a function when the name is one.
    fn backticked(&mut self, start: usize) -> Span {
        let mut t = self.string(start, b'`');
        t.kind = if lookup(self.text(&t)) == kind::FUNCTION {
            kind::FUNCTION
        } else {
            kind::BAREWORD
        };
        t
    }

    /// `@name` and `@@name` (the text keeps the `@`s), `@'name'`, `@"name"` and
    /// `` @`name` `` (the text is the name).
    fn variable(&mut self) -> Span {
        let pos = self.pos;
        let mut name = pos + 1;
        if self.at(name) == Some(b'@') {
            name += 1;
        }
        let mut t = match self.at(name) {
            Some(b'`') => self.string(name + 1, b'`'),
            Some(q @ (b'\'' | b'"')) => self.string(name + 1, q),
            _ => {
                let rest = self.slice(name, self.input.len());
                let end = name + rest.iter().take_while(|&&b| !is_in(&VAR_END, b)).count();
                self.pos = end;
                self.make(kind::VARIABLE, pos, end)
            }
        };
        t.kind = kind::VARIABLE;
        t
    }

    /// `$`: money (`$1,000.00`, a number), a PostgreSQL dollar-quoted string (`$$...$$`,
    /// `$tag$...$tag$`), or a lone `$` bareword.
    fn dollar(&mut self) -> Span {
        let pos = self.pos;
        let len = self.input.len();
        if pos + 1 == len {
            return self.single(kind::BAREWORD);
        }
        let after = self.slice(pos + 1, len);
        let money = after
            .iter()
            .take_while(|b| b.is_ascii_digit() || matches!(b, b'.' | b','))
            .count();
        if money > 0 {
            if money == 1 && after.first() == Some(&b'.') {
                return self.word();
            }
            self.pos = pos + 1 + money;
            return self.make(kind::NUMBER, pos, self.pos);
        }
        if after.first() == Some(&b'$') {
            return self.dollar_string(pos + 2, b"$$");
        }
        let tag = after.iter().take_while(|b| b.is_ascii_alphabetic()).count();
        if tag > 0 && after.get(tag) == Some(&b'$') {
            let delimiter = self.slice(pos, pos + tag + 2);
            return self.dollar_string(pos + tag + 2, delimiter);
        }
        self.single(kind::BAREWORD)
    }

    /// The string from `start` to `delimiter` (or the end).
    fn dollar_string(&mut self, start: usize, delimiter: &[u8]) -> Span {
        let len = self.input.len();
        let body = self.slice(start, len);
        let mut t = match memchr::memmem::find(body, delimiter) {
            Some(i) => {
                self.pos = start + i + delimiter.len();
                let mut t = self.make(kind::STRING, start, start + i);
                t.close = b'$';
                t
            }
            None => {
                self.pos = len;
                self.make(kind::STRING, start, len)
            }
        };
        t.open = b'$';
        t
    }

    /// A number: `0x1f`, `0b01`, `12`, `1.5`, `.5`, `1.`, `1e5`, `1e-5`, and Oracle's `1f`/`1d`
    /// suffix. `0x`/`0b` without digits, and an exponent without digits (`1e`), are
    /// barewords; `.` alone is a dot.
    fn number(&mut self) -> Span {
        let pos = self.pos;
        let len = self.input.len();
        if self.at(pos) == Some(b'0') {
            let digits: Option<fn(&u8) -> bool> = match self.at(pos + 1) {
                Some(b'x' | b'X') => Some(u8::is_ascii_hexdigit),
                Some(b'b' | b'B') => Some(|b| matches!(b, b'0' | b'1')),
                _ => None,
            };
            if let Some(is_digit) = digits {
                let n = self
                    .slice(pos + 2, len)
                    .iter()
                    .take_while(|b| is_digit(b))
                    .count();
                let k = if n == 0 { kind::BAREWORD } else { kind::NUMBER };
                self.pos = pos + 2 + n;
                return self.make(k, pos, self.pos);
            }
        }
        let digits_from = |i: usize| {
            i + self
                .slice(i, len)
                .iter()
                .take_while(|b| b.is_ascii_digit())
                .count()
        };
        let mut end = digits_from(pos);
        if self.at(end) == Some(b'.') {
            end = digits_from(end + 1);
            if end == pos + 1 {
                self.pos = end;
                return self.make(kind::DOT, pos, pos + 1);
            }
        }
        let mut bad_exponent = false;
        if matches!(self.at(end), Some(b'e' | b'E')) {
            end += 1;
            if matches!(self.at(end), Some(b'+' | b'-')) {
                end += 1;
            }
            let exponent = digits_from(end);
            bad_exponent = exponent == end;
            end = exponent;
        }
        if matches!(self.at(end), Some(b'd' | b'D' | b'f' | b'F')) {
            // Oracle's float/double suffix, when a space, `;`, the end, or `u` (`1fUNION`)
            // follows.
            match self.at(end + 1) {
                None => end += 1,
                Some(b) if is_in(&SPACE, b) || matches!(b, b';' | b'u' | b'U') => end += 1,
                Some(_) => {}
            }
        }
        self.pos = end;
        let k = if bad_exponent {
            kind::BAREWORD
        } else {
            kind::NUMBER
        };
        self.make(k, pos, end)
    }

    /// A word: a keyword (its kind from the list) or a bareword. A keyword followed by `.` or
    /// `` ` `` inside the word is a token of its own (`union.x`).
    fn word(&mut self) -> Span {
        let pos = self.pos;
        let rest = self.slice(pos, self.input.len());
        let mut len = rest.len();
        let mut dotted = false;
        for (i, &b) in rest.iter().enumerate() {
            match WORD_BYTES[usize::from(b)] {
                0 => {}
                WORD_END => {
                    len = i;
                    break;
                }
                _ => dotted = true,
            }
        }
        if dotted {
            let word = rest.get(..len).unwrap_or(rest);
            for (i, _) in word
                .iter()
                .enumerate()
                .filter(|(_, &b)| b == b'.' || b == b'`')
            {
                let k = lookup_within(rest, i);
                if k != kind::BAREWORD {
                    self.pos = pos + i;
                    return self.make(k, pos, pos + i);
                }
            }
        }
        self.pos = pos + len;
        // Words too long for libinjection's token are not looked up.
        let k = if len <= super::token::MAX_TEXT {
            lookup_within(rest, len)
        } else {
            kind::BAREWORD
        };
        self.make(k, pos, pos + len)
    }

    /// `b'0101'` and `x'1f'`: a number when only `digit` bytes are between the quotes, else
    /// the letter starts a word.
    fn literal_number(&mut self, digit: fn(u8) -> bool) -> Span {
        let pos = self.pos;
        let len = self.input.len();
        if pos + 2 >= len || self.at(pos + 1) != Some(b'\'') {
            return self.word();
        }
        let end = pos
            + 2
            + self
                .slice(pos + 2, len)
                .iter()
                .take_while(|&&b| digit(b))
                .count();
        if self.at(end) != Some(b'\'') {
            return self.word();
        }
        self.pos = end + 1;
        self.make(kind::NUMBER, pos, end + 1)
    }

    /// `e'...'` and `n'...'`: a string after a one-letter prefix, else a word.
    fn prefixed_string(&mut self) -> Span {
        let pos = self.pos;
        if pos + 2 >= self.input.len() || self.at(pos + 1) != Some(b'\'') {
            return self.word();
        }
        self.string(pos + 2, b'\'')
    }

    /// `u&'...'`: a Unicode string, marked with `u` for the quotes; else a word.
    fn unicode_string(&mut self) -> Span {
        let pos = self.pos;
        if pos + 2 < self.input.len() && self.slice(pos + 1, pos + 3) == b"&'" {
            let mut t = self.string(pos + 3, b'\'');
            t.open = b'u';
            if t.close == b'\'' {
                t.close = b'u';
            }
            return t;
        }
        self.word()
    }

    /// Oracle's `q'[...]'` (any delimiter from `!` on; brackets pair up), its `q` at `q`
    /// (after an `n` for `nq'...'`); else the letter starts a word.
    fn oracle_string(&mut self, q: usize) -> Span {
        let len = self.input.len();
        let opener = match (self.at(q), self.at(q + 1), self.at(q + 2)) {
            (Some(b'q' | b'Q'), Some(b'\''), Some(d)) if q + 2 < len => d,
            _ => return self.word(),
        };
        // C compares a signed char: bytes from 0x80 are below `!` too.
        if !(b'!'..0x80).contains(&opener) {
            return self.word();
        }
        let closer = match opener {
            b'(' => b')',
            b'[' => b']',
            b'{' => b'}',
            b'<' => b'>',
            d => d,
        };
        let start = q + 3;
        let body = self.slice(start, len);
        let end = body.windows(2).position(|w| w == [closer, b'\'']);
        let mut t = match end {
            Some(i) => {
                self.pos = start + i + 2;
                let mut t = self.make(kind::STRING, start, start + i);
                t.close = b'q';
                t
            }
            None => {
                self.pos = len;
                self.make(kind::STRING, start, len)
            }
        };
        t.open = b'q';
        t
    }
}
