//! libinjection's folding: the token stream boiled down to at most five tokens, whose kinds
//! are the fingerprint.
//!
//! Folding reads tokens into a small window and rewrites it: `1 + 1` becomes `1`, `( (`
//! becomes `(`, `NOT IN` one keyword, `- 1` after a keyword `1`, and so on; comments are set
//! aside (only a trailing one counts). The rules look at two tokens (`two_token_rule`), and
//! when none applies at three (`three_token_rule`); when none applies either, the window
//! moves one token right. Many rules restart from the window's start, so earlier tokens can
//! fold with what a later rule produced.
//!
//! The window's state is libinjection's: `pos` (where the next token goes) and `left` (how
//! many tokens are settled). Some rules assume `pos == left + 2` (or `+ 3`) and simply drop
//! the window's last tokens; after a restart that is not always so, and libinjection's
//! fingerprints depend on it, so the bookkeeping here is exactly theirs. Where libinjectionrs
//! differs from C, libinjectionrs is followed: its `, - 1` rule drops the window's last three
//! tokens and restarts, where C backs `left` up to `pos - 3`.

use super::token::{kind, Token, MAX_TEXT};
use super::tokenizer::{Context, Tokenizer};

/// libinjection keeps five folded tokens; reading sometimes looks at a sixth.
pub(super) const MAX_TOKENS: usize = 5;
const SLOTS: usize = MAX_TOKENS + 3;

/// What a rule did to the window.
enum Flow {
    /// The window changed: look at it again from the top.
    Again,
    /// Nothing (or nothing final) happened: go on to the next stage.
    Next,
    /// `{` followed by an empty backticked name: evil, folding stops here.
    Evil,
}

/// One pass of folding over the input; after `run`, what it produced.
pub(super) struct Folded<'a> {
    lexer: Tokenizer<'a>,
    /// The window. After `run`: the folded tokens, a trailing comment included, in
    /// `tokens[..count]`.
    pub tokens: [Token; SLOTS],
    pub count: usize,
    /// How many tokens the tokenizer produced (comments included): the whitelist reads
    /// "no folding happened" from it.
    pub tokens_seen: usize,
    /// Whether reading the input as MySQL could tell a different story (`#`, `--x` seen).
    pub wants_mysql: bool,
    pos: usize,
    left: usize,
    more: bool,
    /// The last token read, when it was a comment (comments never enter the window).
    last_comment: Option<Token>,
}

/// Kinds that may merge into a multi-word keyword (`NOT` `IN`, `UNION` `ALL`, ...): the
/// first word's, and the second's (which may also be a logic operator, as in `IS NOT`).
fn merges_first(k: u8) -> bool {
    matches!(
        k,
        kind::KEYWORD
            | kind::BAREWORD
            | kind::OPERATOR
            | kind::UNION
            | kind::FUNCTION
            | kind::EXPRESSION
            | kind::TSQL
            | kind::SQLTYPE
    )
}

/// Kinds a unary operator can apply to: `- 1`, `- x`, `- @a`, `- 'a'`, `- f(`.
fn is_operand(k: u8) -> bool {
    matches!(
        k,
        kind::NUMBER | kind::BAREWORD | kind::VARIABLE | kind::STRING | kind::FUNCTION
    )
}

fn merges_second(k: u8) -> bool {
    merges_first(k) || k == kind::LOGIC
}

/// Words that are functions when `(` follows (T-SQL and MySQL names common enough to be
/// column names otherwise).
const FUNCTION_BEFORE_PAREN: [&[u8]; 11] = [
    b"USER_ID",
    b"USER_NAME",
    b"DATABASE",
    b"PASSWORD",
    b"USER",
    b"CURRENT_USER",
    b"CURRENT_DATE",
    b"CURRENT_TIME",
    b"CURRENT_TIMESTAMP",
    b"LOCALTIME",
    b"LOCALTIMESTAMP",
];

/// Operands of the `x op y` and `x, y` folds.
fn is_value(k: u8) -> bool {
    matches!(
        k,
        kind::BAREWORD | kind::NUMBER | kind::STRING | kind::VARIABLE
    )
}

/// `a b` as one token when they are a multi-word keyword (`NOT IN`, `UNION ALL`, `ORDER
/// BY`): `a` with the keyword's kind, and both texts as written with one space between.
fn merge(a: &Token, b: &Token) -> Option<Token> {
    let (x, y) = (a.text(), b.text());
    let len = x.len() + 1 + y.len();
    if len > MAX_TEXT || !super::keywords::could_merge(x) {
        return None;
    }
    // One byte more than the text holds, so lookups read whole eight-byte chunks.
    let mut joined = [b' '; MAX_TEXT + 1];
    joined.get_mut(..x.len())?.copy_from_slice(x);
    joined.get_mut(x.len() + 1..len)?.copy_from_slice(y);
    match super::keywords::lookup_within(&joined, len) {
        kind::BAREWORD => None,
        k => {
            let mut merged = *a;
            merged.kind = k;
            merged.set_text(joined.get(..len)?);
            Some(merged)
        }
    }
}

impl<'a> Folded<'a> {
    /// `padded`: as `Tokenizer::new` takes it.
    pub fn new(input: &'a [u8], padded: &'a [u8], context: Context) -> Folded<'a> {
        Folded {
            lexer: Tokenizer::new(input, padded, context),
            tokens: [Token::NONE; SLOTS],
            count: 0,
            tokens_seen: 0,
            wants_mysql: false,
            pos: 0,
            left: 0,
            more: true,
            last_comment: None,
        }
    }

    fn kind(&self, i: usize) -> u8 {
        self.tokens.get(i).map_or(kind::NONE, |t| t.kind)
    }

    fn at(&self, i: usize) -> &Token {
        self.tokens.get(i).unwrap_or(&Token::NONE)
    }

    fn set_kind(&mut self, i: usize, k: u8) {
        if let Some(t) = self.tokens.get_mut(i) {
            t.kind = k;
        }
    }

    fn copy(&mut self, from: usize, to: usize) {
        let t = *self.at(from);
        if let Some(slot) = self.tokens.get_mut(to) {
            *slot = t;
        }
    }

    /// The window's size: `left <= pos` always holds.
    fn width(&self) -> usize {
        self.pos.saturating_sub(self.left)
    }

    /// Reads tokens until the window holds `want` (or the input ends, or six are held).
    /// Comments are kept aside, not in the window.
    fn fill(&mut self, want: usize) {
        let mut spare = Token::NONE;
        while self.more && self.pos <= MAX_TOKENS && self.width() < want {
            // Read in place, into the slot after the window (a comment read there is set
            // aside and the slot read into again).
            let slot = match self.tokens.get_mut(self.pos) {
                Some(slot) => slot,
                None => &mut spare,
            };
            if !self.lexer.next_token(slot) {
                self.more = false;
                continue;
            }
            self.tokens_seen += 1;
            if slot.kind == kind::COMMENT {
                self.last_comment = Some(*slot);
            } else {
                self.last_comment = None;
                self.pos += 1;
            }
        }
    }

    pub fn run(&mut self) {
        // Leading comments, `(`, SQL types and unary operators say nothing: skip them.
        loop {
            if !self.lexer.next_token(&mut self.tokens[0]) {
                return self.finish(0, true);
            }
            self.tokens_seen += 1;
            let t = &self.tokens[0];
            let skip =
                matches!(t.kind, kind::COMMENT | kind::LPAREN | kind::SQLTYPE) || t.is_unary();
            if !skip {
                break;
            }
        }
        self.pos = 1;
        loop {
            if self.pos >= MAX_TOKENS && self.five_token_special() {
                // `1,(1)` style groups: keep folding from a short window.
                if self.pos > MAX_TOKENS {
                    self.copy(MAX_TOKENS, 1);
                    self.pos = 2;
                } else {
                    self.pos = 1;
                }
                self.left = 0;
            }
            if !self.more || self.left >= MAX_TOKENS {
                self.left = self.pos;
                break;
            }
            self.fill(2);
            if self.width() < 2 {
                self.left = self.pos;
                continue;
            }
            match self.two_token_rule() {
                Flow::Again => continue,
                Flow::Evil => {
                    let count = self.left + 2;
                    return self.finish_evil(count);
                }
                Flow::Next => {}
            }
            self.fill(3);
            if self.width() < 3 {
                self.left = self.pos;
                continue;
            }
            if let Flow::Again = self.three_token_rule() {
                continue;
            }
            self.left += 1;
        }
        let mut count = self.left.min(MAX_TOKENS);
        // PHP's "magic" backtick comment: an unclosed, empty `` ` `` at the end.
        if count > 2 {
            if let Some(t) = self.tokens.get_mut(count - 1) {
                if t.kind == kind::BAREWORD && t.open == b'`' && t.close == 0 && t.len() == 0 {
                    t.kind = kind::COMMENT;
                }
            }
        }
        if let (Some(comment), Some(slot)) = (self.last_comment, self.tokens.get_mut(count)) {
            if count < MAX_TOKENS {
                *slot = comment;
                count += 1;
            }
        }
        self.finish(count, true)
    }

    fn finish(&mut self, count: usize, publish_stats: bool) {
        self.count = count;
        self.wants_mysql = publish_stats && self.lexer.saw_dialect_comment;
    }

    /// libinjectionrs returns from the `{ ``` case before publishing the tokenizer's comment
    /// statistics: this pass then never asks for a MySQL reading (moot in practice: `X` is
    /// always blacklisted).
    fn finish_evil(&mut self, count: usize) {
        self.finish(count, false);
    }

    /// Five tokens of the shapes `1 o ( 1 )`, `1 , ( 1 )`, `n o ( n )`, `n o ( 1 )`,
    /// `1 ) , ( 1` and `n ) o ( n`.
    fn five_token_special(&self) -> bool {
        let k: [u8; 5] = std::array::from_fn(|i| self.kind(i));
        matches!(
            k,
            [
                kind::NUMBER,
                kind::OPERATOR | kind::COMMA,
                kind::LPAREN,
                kind::NUMBER,
                kind::RPAREN
            ] | [
                kind::BAREWORD,
                kind::OPERATOR,
                kind::LPAREN,
                kind::BAREWORD | kind::NUMBER,
                kind::RPAREN
            ] | [
                kind::NUMBER,
                kind::RPAREN,
                kind::COMMA,
                kind::LPAREN,
                kind::NUMBER
            ] | [
                kind::BAREWORD,
                kind::RPAREN,
                kind::OPERATOR,
                kind::LPAREN,
                kind::BAREWORD
            ]
        )
    }

    /// Drops the window's last `n` tokens.
    fn drop_last(&mut self, n: usize) {
        self.pos = self.pos.saturating_sub(n);
    }

    fn restart(&mut self) {
        self.left = 0;
    }

    fn back_one(&mut self) {
        self.left = self.left.saturating_sub(1);
    }

    /// The rules on the window's first two tokens `a b`, by `a`'s kind. A rule that applies
    /// either changes the window (`Again`) or, for `LIKE` and `COLLATE`, adjusts a kind and
    /// lets the three-token rules look (`Next`).
    fn two_token_rule(&mut self) -> Flow {
        let (l, r) = (self.left, self.left + 1);
        let (a, b) = (self.at(l), self.at(r));
        match a.kind {
            // "foo" "bar" is one string in SQL; `;;` one separator.
            kind::STRING | kind::SEMICOLON if b.kind == a.kind => {
                self.drop_last(1);
                return Flow::Again;
            }
            kind::OPERATOR | kind::LOGIC if b.is_unary() || b.kind == kind::SQLTYPE => {
                self.drop_last(1);
                self.restart();
                return Flow::Again;
            }
            kind::LPAREN if b.is_unary() => {
                self.drop_last(1);
                self.back_one();
                return Flow::Again;
            }
            _ => {}
        }
        if merges_first(a.kind) && merges_second(b.kind) {
            if let Some(merged) = merge(a, b) {
                if let Some(t) = self.tokens.get_mut(l) {
                    *t = merged;
                }
                self.drop_last(1);
                self.back_one();
                return Flow::Again;
            }
        }
        match a.kind {
            // `; IF`: T-SQL's IF statement, not the function.
            kind::SEMICOLON
                if b.kind == kind::FUNCTION
                    && b.text()
                        .get(..2)
                        .is_some_and(|p| p.eq_ignore_ascii_case(b"IF")) =>
            {
                self.set_kind(r, kind::TSQL);
                return Flow::Again;
            }
            kind::BAREWORD | kind::VARIABLE
                if b.kind == kind::LPAREN && FUNCTION_BEFORE_PAREN.iter().any(|w| a.is(w)) =>
            {
                self.set_kind(l, kind::FUNCTION);
                return Flow::Again;
            }
            // `IN (` is an operator; `IN` otherwise (`IN BOOLEAN MODE`) nothing special.
            kind::KEYWORD if a.is(b"IN") || a.is(b"NOT IN") => {
                let k = if b.kind == kind::LPAREN {
                    kind::OPERATOR
                } else {
                    kind::BAREWORD
                };
                self.set_kind(l, k);
                return Flow::Again;
            }
            // `LIKE(` is a function call.
            kind::OPERATOR if a.is(b"LIKE") || a.is(b"NOT LIKE") => {
                if b.kind == kind::LPAREN {
                    self.set_kind(l, kind::FUNCTION);
                }
                return Flow::Next;
            }
            // A type before a value is a cast: keep the value.
            kind::SQLTYPE
                if matches!(
                    b.kind,
                    kind::BAREWORD
                        | kind::NUMBER
                        | kind::SQLTYPE
                        | kind::LPAREN
                        | kind::FUNCTION
                        | kind::VARIABLE
                        | kind::STRING
                ) =>
            {
                self.copy(r, l);
                self.drop_last(1);
                self.restart();
                return Flow::Again;
            }
            // `COLLATE x_y`: too many collations to list; a name with `_` is one. (The check
            // reads the text as UTF-8, as libinjectionrs does.)
            kind::COLLATE if b.kind == kind::BAREWORD => {
                let collation = std::str::from_utf8(b.text()).is_ok_and(|s| s.contains('_'));
                if collation {
                    self.set_kind(r, kind::SQLTYPE);
                    self.restart();
                }
                return Flow::Next;
            }
            // T-SQL reads `\%1` as `0 % 1` and `\1` as `1`.
            kind::BACKSLASH => {
                if b.is_arithmetic() {
                    self.set_kind(l, kind::NUMBER);
                } else {
                    self.copy(r, l);
                    self.drop_last(1);
                }
                self.restart();
                return Flow::Again;
            }
            kind::LPAREN | kind::RPAREN if b.kind == a.kind => {
                self.drop_last(1);
                self.restart();
                return Flow::Again;
            }
            // ODBC's `{x expr}`: drop `{ x`. MySQL's `{ ``.``.id }` is too odd: evil.
            kind::LBRACE if b.kind == kind::BAREWORD => {
                if b.len() == 0 {
                    self.set_kind(r, kind::EVIL);
                    return Flow::Evil;
                }
                self.restart();
                self.drop_last(2);
                return Flow::Again;
            }
            _ => {}
        }
        if b.kind == kind::RBRACE {
            self.drop_last(1);
            self.restart();
            return Flow::Again;
        }
        Flow::Next
    }

    /// The rules on the window's three tokens `a b c`, by `a`'s kind; when none changes the
    /// window the caller moves it one token right.
    fn three_token_rule(&mut self) -> Flow {
        let l = self.left;
        let (a, b, c) = (self.at(l), self.at(l + 1), self.at(l + 2));
        let (ak, bk, ck) = (a.kind, b.kind, c.kind);
        // Rules that fold the three into the first (`1 + 1`, `a.b`, `x, y`, `x::int`).
        let collapse = match ak {
            kind::NUMBER | kind::BAREWORD | kind::VARIABLE | kind::STRING => {
                let arithmetic = bk == kind::OPERATOR
                    && match ak {
                        kind::NUMBER | kind::BAREWORD => {
                            matches!(ck, kind::NUMBER | kind::BAREWORD)
                        }
                        kind::VARIABLE => {
                            matches!(ck, kind::VARIABLE | kind::NUMBER | kind::BAREWORD)
                        }
                        _ => false,
                    };
                let cast = bk == kind::OPERATOR && b.text() == b"::" && ck == kind::SQLTYPE;
                let list = bk == kind::COMMA && is_value(ck);
                let qualified = ak == kind::BAREWORD && bk == kind::DOT && ck == kind::BAREWORD;
                arithmetic || cast || list || qualified
            }
            kind::OPERATOR => bk != kind::LPAREN && ck == kind::OPERATOR,
            kind::LOGIC => ck == kind::LOGIC,
            _ => false,
        };
        if collapse {
            self.drop_last(2);
            self.restart();
            return Flow::Again;
        }
        // Rules that drop the middle token (mostly a unary operator: `SELECT - 1`).
        let unary = b.is_unary();
        let drop_middle = match ak {
            kind::EXPRESSION | kind::GROUP => {
                (unary && (ck == kind::LPAREN || is_operand(ck)))
                    || (ak == kind::EXPRESSION && bk == kind::DOT && ck == kind::BAREWORD)
            }
            kind::KEYWORD => unary && is_operand(ck),
            kind::COMMA if unary && is_value(ck) => {
                // `1,-1`: drop the sign, and back up to fold `1,1` too (libinjectionrs drops
                // the last three tokens and restarts).
                self.copy(l + 2, l + 1);
                self.restart();
                self.drop_last(3);
                return Flow::Again;
            }
            kind::COMMA => unary && matches!(ck, kind::LPAREN | kind::FUNCTION),
            _ => false,
        };
        if drop_middle {
            self.copy(l + 2, l + 1);
            self.drop_last(1);
            self.restart();
            return Flow::Again;
        }
        // `USER(x)` is a column named user, not the zero-argument function.
        if ak == kind::FUNCTION && bk == kind::LPAREN && ck != kind::RPAREN && a.is(b"USER") {
            self.set_kind(l, kind::BAREWORD);
        }
        Flow::Next
    }
}
