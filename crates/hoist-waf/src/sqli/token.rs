//! A token as libinjection keeps it: its kind, and at most 31 bytes of its text.
//!
//! Kinds are the fingerprint characters themselves (`n` bareword, `1` number, `s` string,
//! ...), as in C libinjection: the fingerprint is then the folded tokens' kinds in a row.

/// libinjection stores a token's text in 32 bytes, the last one for a C string's NUL: text
/// beyond 31 bytes is cut, and the cut text is what later rules and lookups see.
pub(super) const MAX_TEXT: usize = 31;

/// Token kinds: each is the character the token contributes to the fingerprint.
pub(super) mod kind {
    /// No token (an empty slot).
    pub const NONE: u8 = 0;
    pub const KEYWORD: u8 = b'k';
    pub const UNION: u8 = b'U';
    pub const GROUP: u8 = b'B';
    pub const EXPRESSION: u8 = b'E';
    pub const SQLTYPE: u8 = b't';
    pub const FUNCTION: u8 = b'f';
    pub const BAREWORD: u8 = b'n';
    pub const NUMBER: u8 = b'1';
    pub const VARIABLE: u8 = b'v';
    pub const STRING: u8 = b's';
    pub const OPERATOR: u8 = b'o';
    pub const LOGIC: u8 = b'&';
    pub const COMMENT: u8 = b'c';
    pub const COLLATE: u8 = b'A';
    pub const LPAREN: u8 = b'(';
    pub const RPAREN: u8 = b')';
    pub const LBRACE: u8 = b'{';
    pub const RBRACE: u8 = b'}';
    pub const DOT: u8 = b'.';
    pub const COMMA: u8 = b',';
    pub const COLON: u8 = b':';
    pub const SEMICOLON: u8 = b';';
    pub const TSQL: u8 = b'T';
    pub const UNKNOWN: u8 = b'?';
    pub const EVIL: u8 = b'X';
    pub const FINGERPRINT: u8 = b'F';
    pub const BACKSLASH: u8 = b'\\';
}

#[derive(Clone, Copy)]
pub(super) struct Token {
    pub kind: u8,
    /// Length of the kept text (at most `MAX_TEXT`).
    len: u8,
    /// For strings: the quote that opened it (0 when the input began inside the string) and
    /// the one that closed it (0 when the input ended inside it). The whitelist reads them.
    pub open: u8,
    pub close: u8,
    text: [u8; MAX_TEXT],
}

impl Token {
    pub const NONE: Token = Token {
        kind: kind::NONE,
        len: 0,
        open: 0,
        close: 0,
        text: [0; MAX_TEXT],
    };

    /// Makes this a token of `kind` whose text is `input[from..to]` (cut to `MAX_TEXT`
    /// bytes), quotes cleared. When the input has `MAX_TEXT` bytes from `from`, they are
    /// copied as a fixed-size block (a few vector moves rather than a `memcpy` call); only
    /// `len` of them count.
    pub fn set_from_input(&mut self, kind: u8, input: &[u8], from: usize, to: usize) {
        self.kind = kind;
        self.open = 0;
        self.close = 0;
        match input.get(from..).and_then(|rest| rest.get(..MAX_TEXT)) {
            Some(block) if to <= input.len() => {
                self.text.copy_from_slice(block);
                // At most 31.
                self.len = to.saturating_sub(from).min(MAX_TEXT) as u8;
            }
            _ => self.set_text(input.get(from..to).unwrap_or(&[])),
        }
    }

    pub fn set_text(&mut self, text: &[u8]) {
        let kept = text.get(..MAX_TEXT).unwrap_or(text);
        if let Some(dst) = self.text.get_mut(..kept.len()) {
            dst.copy_from_slice(kept);
        }
        // `kept` is at most 31 bytes long.
        self.len = kept.len() as u8;
    }

    pub fn text(&self) -> &[u8] {
        self.text.get(..usize::from(self.len)).unwrap_or(&[])
    }

    pub fn len(&self) -> usize {
        usize::from(self.len)
    }

    /// The text's first byte, 0 for an empty text (C reads the terminating NUL there).
    pub fn first(&self) -> u8 {
        self.text().first().copied().unwrap_or(0)
    }

    /// Whether the text is `word` (upper-case ASCII) in any case.
    pub fn is(&self, word: &[u8]) -> bool {
        self.text().eq_ignore_ascii_case(word)
    }

    /// Whether this is one of the operators libinjection treats as unary: `+ - ! ~ !!`
    /// and `NOT`.
    pub fn is_unary(&self) -> bool {
        self.kind == kind::OPERATOR
            && matches!(
                self.text(),
                b"+" | b"-" | b"!" | b"~" | b"!!" | [b'n' | b'N', b'o' | b'O', b't' | b'T']
            )
    }

    /// A one-character arithmetic operator.
    pub fn is_arithmetic(&self) -> bool {
        self.kind == kind::OPERATOR && matches!(self.text(), b"*" | b"/" | b"-" | b"+" | b"%")
    }
}
