//! Which transformations leave a value's prefilter hits as they are.
//!
//! The prefilter ignores ASCII case, and whether a decoder changes a value at all depends
//! only on bytes other than ASCII letters. So a chain of steps that each change nothing, or
//! only case, keeps the original's hits: the engine then needs neither the transformed value
//! nor a scan of it to know that a rule's literals are absent (see `values`, `gates`).

use crate::transforms::{is_space, Transform};

impl Transform {
    /// True when the prefilter's hits on `input` after this transformation are its hits on
    /// `input`: the step changes nothing, or only ASCII case (the prefilter ignores case).
    ///
    /// `is_noop_for` looks only at bytes other than ASCII letters (the case transformations
    /// aside, which are counted here whatever they do), so along a chain of such steps each
    /// intermediate value differs from the original in case only and the answer computed on
    /// the original holds at every step: the whole chain keeps the original's hits.
    pub fn keeps_prefilter_hits(self, input: &[u8]) -> bool {
        match self {
            Transform::Lowercase | Transform::Uppercase => true,
            Transform::CmdLine => cmd_line_changes_case_only(input),
            t => t.is_noop_for(input),
        }
    }

    /// Bit `t as usize` set for each transformation that keeps the prefilter hits of `input`
    /// (see `keeps_prefilter_hits`); compared with a chain's mask (`Chains::mask`). One pass
    /// over the value for what every `is_noop_for` looks for (the tests check that the two
    /// agree), instead of a pass per transformation.
    pub fn hit_keeping_mask(input: &[u8]) -> u64 {
        use Transform::*;
        // One table load per byte and no branch: the byte's class in the low half, and in
        // the high half which classes of the next byte would make a pair worth noting (two
        // tables cost a second load per byte, 5.7 % of a form POST's instructions in all).
        // Four bytes at a time into separate accumulators: one `seen` made every byte wait
        // on the previous byte's OR.
        let (mut seen, mut pairs) = ([0u64; 4], [0u64; 4]);
        let mut follow = 0u64;
        let mut quads = input.chunks_exact(4);
        for q in &mut quads {
            for (k, &b) in q.iter().enumerate() {
                let entry = BYTE_ENTRY[usize::from(b)];
                seen[k] |= entry;
                pairs[k] |= follow & entry;
                follow = entry >> 32;
            }
        }
        for &b in quads.remainder() {
            let entry = BYTE_ENTRY[usize::from(b)];
            seen[0] |= entry;
            pairs[0] |= follow & entry;
            follow = entry >> 32;
        }
        // The classes only: the high halves were ORed in along with them.
        let (seen, pairs) = (seen.map(|s| s as u32), pairs.map(|p| p as u32));
        let seen = seen[0] | seen[1] | seen[2] | seen[3];
        let pairs = pairs[0] | pairs[1] | pairs[2] | pairs[3];
        let pair = |bit: u32, flag: u16| if pairs & bit != 0 { flag } else { 0 };
        let seen = (seen & 0xffff) as u16
            | pair(NEXT_SLASH_AFTER_SLASH, SLASH_SLASH)
            | pair(NEXT_STAR, SLASH_STAR)
            | pair(NEXT_SPACE, SPACE_SPACE)
            | pair(NEXT_CUT, SPACE_CUT);
        let ends_in_space = input.first().is_some_and(|&b| is_space(b))
            || input.last().is_some_and(|&b| is_space(b));
        let kept = |t: Transform, needs_none_of: u16| {
            if seen & needs_none_of == 0 {
                t.bit()
            } else {
                0
            }
        };
        let mut mask = Lowercase.bit() | Uppercase.bit();
        mask |= kept(UrlDecode, PERCENT | PLUS) | kept(UrlDecodeUni, PERCENT | PLUS);
        mask |= kept(HtmlEntityDecode, AMP);
        mask |= kept(JsDecode, BACKSLASH) | kept(CssDecode, BACKSLASH);
        mask |= kept(EscapeSeqDecode, BACKSLASH);
        mask |= kept(Utf8ToUnicode, NON_ASCII);
        mask |= kept(RemoveNulls, NUL) | kept(ReplaceNulls, NUL);
        mask |= kept(RemoveWhitespace, SPACE);
        mask |= kept(CompressWhitespace, OTHER_SPACE | SPACE_SPACE);
        mask |= kept(ReplaceComments, SLASH_STAR);
        mask |= kept(RemoveCommentsChar, COMMENT_CHAR);
        mask |= kept(NormalisePath, DOT | SLASH_SLASH);
        mask |= kept(NormalisePathWin, DOT | BACKSLASH | SLASH_SLASH);
        mask |= kept(
            CmdLine,
            BACKSLASH | CMD_LINE_CHAR | OTHER_SPACE | SPACE_SPACE | SPACE_CUT,
        );
        if !ends_in_space {
            mask |= Trim.bit() | TrimLeft.bit() | TrimRight.bit();
        }
        mask
    }
}

/// Whether `cmdLine` only lowercases `input`: it deletes `\ " ' ^`, turns `,` `;` and other
/// whitespace into a space, collapses spaces and drops a space before `/` or `(`, and none of
/// that applies. Looks at no letter, so it holds for every case variant of `input` too.
fn cmd_line_changes_case_only(input: &[u8]) -> bool {
    !input.iter().any(|&b| {
        matches!(b, b'\\' | b'"' | b'\'' | b'^' | b',' | b';') || (is_space(b) && b != b' ')
    }) && !input
        .windows(2)
        .any(|w| matches!(w, [b' ', b' ' | b'/' | b'(']))
}

// What `hit_keeping_mask` notes about a value's bytes.
const PERCENT: u16 = 1;
const PLUS: u16 = 1 << 1;
const AMP: u16 = 1 << 2;
const BACKSLASH: u16 = 1 << 3;
const NON_ASCII: u16 = 1 << 4;
const NUL: u16 = 1 << 5;
/// Any `is_space` byte.
const SPACE: u16 = 1 << 6;
/// An `is_space` byte other than ' '.
const OTHER_SPACE: u16 = 1 << 7;
const COMMENT_CHAR: u16 = 1 << 8;
const DOT: u16 = 1 << 9;
const SLASH_SLASH: u16 = 1 << 10;
const SLASH_STAR: u16 = 1 << 11;
const SPACE_SPACE: u16 = 1 << 12;
/// `"`, `'`, `^`, `,` or `;`: bytes `cmdLine` deletes or turns into a space.
const CMD_LINE_CHAR: u16 = 1 << 13;
/// A space before `/` or `(`, which `cmdLine` deletes.
const SPACE_CUT: u16 = 1 << 14;

// Classes of a byte as the second of a pair (above the u16 flags): `/` after `/`, `*` after
// `/`, ` ` after ` `, `/` or `(` after ` `.
const NEXT_SLASH_AFTER_SLASH: u32 = 1 << 16;
const NEXT_STAR: u32 = 1 << 17;
const NEXT_SPACE: u32 = 1 << 18;
const NEXT_CUT: u32 = 1 << 19;

/// Per byte, the pair classes of the byte after it that make a pair: after `/`, a `/` or a
/// `*`; after ` `, a ` `, `/` or `(`.
const FOLLOWED_BY: [u32; 256] = {
    let mut t = [0u32; 256];
    t[b'/' as usize] = NEXT_SLASH_AFTER_SLASH | NEXT_STAR;
    t[b' ' as usize] = NEXT_SPACE | NEXT_CUT;
    t
};

/// Per byte, `BYTE_CLASS` in the low 32 bits and `FOLLOWED_BY` in the high 32.
const BYTE_ENTRY: [u64; 256] = {
    let mut t = [0u64; 256];
    let mut b = 0;
    while b < 256 {
        t[b] = BYTE_CLASS[b] as u64 | (FOLLOWED_BY[b] as u64) << 32;
        b += 1;
    }
    t
};

/// Per byte, its `hit_keeping_mask` flags and its pair classes.
const BYTE_CLASS: [u32; 256] = {
    let mut t = [0u32; 256];
    let mut b = 0;
    while b < 256 {
        let c = b as u8;
        let mut f = 0;
        if c == b'%' {
            f |= PERCENT;
        }
        if c == b'+' {
            f |= PLUS;
        }
        if c == b'&' {
            f |= AMP;
        }
        if c == b'\\' {
            f |= BACKSLASH;
        }
        if c >= 0x80 {
            f |= NON_ASCII;
        }
        if c == 0 {
            f |= NUL;
        }
        if is_space(c) {
            f |= SPACE;
            if c != b' ' {
                f |= OTHER_SPACE;
            }
        }
        if matches!(c, b'/' | b'*' | b'-' | b'#') {
            f |= COMMENT_CHAR;
        }
        if c == b'.' {
            f |= DOT;
        }
        if matches!(c, b'"' | b'\'' | b'^' | b',' | b';') {
            f |= CMD_LINE_CHAR;
        }
        t[b] = f as u32
            | match c {
                b'/' => NEXT_SLASH_AFTER_SLASH | NEXT_CUT,
                b'*' => NEXT_STAR,
                b' ' => NEXT_SPACE,
                b'(' => NEXT_CUT,
                _ => 0,
            };
        b += 1;
    }
    t
};
