//! What a cut salvage makes keeps of its original: pieces of it, in order, between the joints its
//! truncations write. [`derivable`] answers "can this text be a cut of that original?" by finding
//! each piece in the original, so a text that carries anything the original does not (a pasted
//! suffix after new content, a note spliced between two real pieces) is not taken for a cut.
//!
//! Design decision (provenance is content, not form): a recoverable suffix naming a key only says
//! which original a text claims. Before this module, a cut was recognised by its suffix and by
//! its first 256 bytes matching the original's head, so a text that began like an archived
//! original and then said something new was cut again without being archived, and the loss
//! check excused it the same way. Now every byte of a cut must be accounted for: a piece of the
//! original, a joint salvage writes, or (at a piece's edge, left by a cut of a cut) part of one.
//! A cut that strips blocks without writing a joint (reasoning blocks) is not recognised and is
//! archived again before it is cut further: that costs an archive entry, never content.

/// The joints salvage's truncations write between the pieces they keep; `#` stands for a run of
/// ASCII digits. Every cut the recovery crate makes uses one of these (its tests check that each
/// of its reductions is [`derivable`] from what it cut).
pub const CUT_JOINTS: &[&str] = &[
    crate::truncate::TRUNCATED_JOINT,
    "\n\n... [# chars omitted for context efficiency] ...\n\n",
    "\n[... # chars of tool result omitted (# total) ...]\n",
    "\n[... # chars omitted from old tool result ...]\n",
    "…[tool markup compacted, # chars]",
];

/// The most pieces a cut is made of (a cut of a cut of a cut has a handful).
const MAX_PIECES: usize = 64;

/// The fewest bytes a piece between two joints keeps.
const MIN_INNER_PIECE: usize = 16;

/// The longest joint, in bytes, with room for its numbers.
const JOINT_MAX: usize = 128;

/// Matches `template` (with `#` for a number) against the start of `s`: the length it covers
/// when `s` starts with a whole joint; `Err(true)` when `s` ends inside the joint (all of `s`
/// fits the joint's start); `Err(false)` when they differ. A number is a count salvage wrote of
/// bytes or characters of the original: no more digits than `max` has, and (when whole) not over
/// `max`, so a joint cannot carry a run of digits of its own (review of the cut rule, finding 1).
/// With `reversed`, `template` and `s` are read backwards (the end of a joint) and so are the
/// numbers.
fn match_joint(template: &[u8], s: &[u8], max: u64, reversed: bool) -> Result<usize, bool> {
    let (mut i, mut j) = (0usize, 0usize);
    while let Some(&tc) = template.get(i) {
        if tc == b'#' {
            let run = s.get(j..).unwrap_or_default();
            let digits = run.iter().take_while(|c| c.is_ascii_digit()).count();
            let whole = j.saturating_add(digits) < s.len();
            if digits == 0 && whole {
                return Err(false);
            }
            if !number_ok(run.get(..digits).unwrap_or_default(), max, reversed, whole) {
                return Err(false);
            }
            if !whole {
                return Err(true);
            }
            j = j.saturating_add(digits);
        } else {
            match s.get(j) {
                None => return Err(true),
                Some(&c) if c == tc => j = j.saturating_add(1),
                Some(_) => return Err(false),
            }
        }
        i = i.saturating_add(1);
    }
    Ok(j)
}

/// True when a run of digits can be a count of at most `max`: no more digits than `max` has and,
/// when the run is whole, a value not over `max`.
fn number_ok(run: &[u8], max: u64, reversed: bool, whole: bool) -> bool {
    let width = max.checked_ilog10().map_or(1, |d| d.saturating_add(1)) as usize;
    if run.len() > width {
        return false;
    }
    if !whole {
        return true;
    }
    let text: String = if reversed {
        run.iter().rev().map(|b| *b as char).collect()
    } else {
        run.iter().map(|b| *b as char).collect()
    };
    text.parse::<u64>().is_ok_and(|v| v <= max)
}

/// The length of the whole joint `s` starts with, if it starts with one.
fn joint_at(s: &str, max: u64) -> Option<usize> {
    CUT_JOINTS.iter().find_map(|t| match_joint(t.as_bytes(), s.as_bytes(), max, false).ok())
}

/// True when all of `s` is the beginning of some joint (a cut of a cut ended inside it).
fn joint_start(s: &str, max: u64) -> bool {
    !s.is_empty()
        && CUT_JOINTS.iter().any(|t| match_joint(t.as_bytes(), s.as_bytes(), max, false) == Err(true))
}

/// True when all of `s` is the end of some joint (a cut of a cut began inside it): `s` reversed
/// is the beginning of the joint reversed.
fn joint_end(s: &str, max: u64) -> bool {
    if s.is_empty() {
        return false;
    }
    let rs: Vec<u8> = s.bytes().rev().collect();
    CUT_JOINTS.iter().any(|t| {
        let rt: Vec<u8> = t.bytes().rev().collect();
        match match_joint(&rt, &rs, max, true) {
            Ok(n) => n == rs.len(),
            Err(partial) => partial,
        }
    })
}

/// `piece` without what a cut of a cut can leave at its edges: the end of a joint at its start
/// (not for the first piece, which is the original's head) and the start of one at its end.
fn trimmed(piece: &str, first: bool, max: u64) -> &str {
    let mut p = piece;
    if !first {
        // The longest start of `p` (within a joint's length) that is the end of a joint.
        let cut = p
            .char_indices()
            .map(|(i, c)| i.saturating_add(c.len_utf8()))
            .take_while(|e| *e <= JOINT_MAX)
            .filter(|e| p.get(..*e).is_some_and(|x| joint_end(x, max)))
            .last();
        if let Some(e) = cut {
            p = p.get(e..).unwrap_or_default();
        }
    }
    // The longest end of `p` (within a joint's length) that is the start of a joint.
    let from = p.len().saturating_sub(JOINT_MAX);
    let cut = p
        .char_indices()
        .map(|(i, _)| i)
        .filter(|i| *i >= from)
        .find(|i| p.get(*i..).is_some_and(|x| joint_start(x, max)));
    match cut {
        Some(i) => p.get(..i).unwrap_or_default(),
        None => p,
    }
}

/// The pieces of `body` between the whole joints in it, in order.
fn pieces(body: &str, max: u64) -> Vec<&str> {
    let mut out = Vec::new();
    let mut start = 0usize;
    let mut at = 0usize;
    while let Some(rel) = body.get(at..).and_then(|r| r.find(['\n', '…'])) {
        let pos = at.saturating_add(rel);
        match body.get(pos..).and_then(|x| joint_at(x, max)) {
            Some(len) => {
                out.push(body.get(start..pos).unwrap_or_default());
                start = pos.saturating_add(len);
                at = start;
            }
            None => {
                // Past the character found (both are valid UTF-8 boundaries ahead).
                let step = body.get(pos..).and_then(|r| r.chars().next()).map_or(1, char::len_utf8);
                at = pos.saturating_add(step);
            }
        }
    }
    out.push(body.get(start..).unwrap_or_default());
    out
}

/// True when `body` (a cut's text before its recoverable suffix) can have been cut from
/// `original`: it is shorter, its first piece is a head of the original (every cut keeps one),
/// and each later piece is found in the original after the one before it.
pub fn derivable(body: &str, original: &str) -> bool {
    if body.is_empty() || body.len() >= original.len() {
        return false;
    }
    let max = u64::try_from(original.len()).unwrap_or(u64::MAX);
    let pieces = pieces(body, max);
    // Real cuts have a few long pieces: many joints, or short pieces between them, would let a
    // choice of the original's words say something of its own (review of the cut rule, 8).
    if pieces.len() > MAX_PIECES {
        return false;
    }
    let last = pieces.len().saturating_sub(1);
    let mut pos = 0usize;
    for (i, piece) in pieces.into_iter().enumerate() {
        let p = trimmed(piece, i == 0, max);
        if i > 0 && i < last && p.len() < MIN_INNER_PIECE {
            return false;
        }
        if i == 0 {
            if p.is_empty() || !original.starts_with(p) {
                return false;
            }
            pos = p.len();
            continue;
        }
        if p.is_empty() {
            continue;
        }
        match original.get(pos..).and_then(|rest| rest.find(p)) {
            Some(rel) => pos = pos.saturating_add(rel).saturating_add(p.len()),
            None => return false,
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::truncate::{head, preserve_end, structure_preserving};

    fn original() -> String {
        (0..3000).map(|i| format!("line {i} of the original\n")).collect()
    }

    #[test]
    fn cuts_and_cuts_of_cuts_are_derivable() {
        let o = original();
        let cuts = [
            structure_preserving(&o, 20_000).unwrap_or_default(),
            preserve_end(&o, 4_000).unwrap_or_default(),
            head(&o, 5_000).to_string(),
        ];
        for cut in &cuts {
            assert!(derivable(cut, &o), "{}", head(cut, 80));
            for n in [2, 3, 5, 7] {
                let again = structure_preserving(cut, cut.len() / n).unwrap_or_default();
                assert!(derivable(&again, &o), "1/{n}: {again:?}");
                let third = preserve_end(&again, again.len() / 2).unwrap_or_default();
                assert!(derivable(&third, &o), "1/{n} then half: {third:?}");
            }
        }
    }

    /// Every length of a cut of a cut, so the second cut ends and begins at every byte of the
    /// first one's joint.
    #[test]
    fn a_second_cut_through_any_byte_of_a_joint_is_derivable() {
        let o = original();
        let cut = preserve_end(&o, 2_000).unwrap_or_default();
        for max in 200..900 {
            let again = preserve_end(&cut, max).unwrap_or_default();
            assert!(derivable(&again, &o), "{max}: {again:?}");
        }
        let cut = structure_preserving(&o, 3_000).unwrap_or_default();
        for target in 300..1500 {
            let again = structure_preserving(&cut, target).unwrap_or_default();
            assert!(derivable(&again, &o), "{target}: {again:?}");
        }
    }

    /// The review's case: a text that starts like the original, then says something the original
    /// does not, is no cut of it; nor is new text between two real pieces, nor pieces out of
    /// order, nor a piece the original lacks after a real joint.
    #[test]
    fn new_content_anywhere_is_not_derivable() {
        let o = original();
        let h = head(&o, 400);
        assert!(!derivable(&format!("{h}SECRET-UNIQUE-PAYLOAD and more words"), &o));
        let cut = preserve_end(&o, 4_000).unwrap_or_default();
        let (a, b) = cut.split_at(1_000);
        assert!(!derivable(&format!("{a}an inserted remark{b}"), &o));
        assert!(!derivable(&format!("{h}\n... [truncated] ...\nline 5 of the original\n"), &o)); // out of order
        assert!(!derivable(&format!("{h}\n... [truncated] ...\nnot in the original\n"), &o));
        assert!(!derivable(
            &format!("{h}\n\n... [12 chars omitted for context efficiency] ...\n\nsomething new"),
            &o
        ));
        // Joint-looking text with words in place of its number is no joint.
        assert!(!derivable(
            &format!(
                "{h}\n[... many chars of tool result omitted (3 total) ...]\nline 2999 of the original\n"
            ),
            &o
        ));
        // Not a head of the original, or not shorter than it.
        assert!(!derivable("line 7 of the original\n", &o));
        assert!(!derivable(&o, &o));
        assert!(!derivable("", &o));
    }

    /// The re-review's cases: digits a joint carries beyond a count of the original (a long run,
    /// a value over the original's length, a run at a piece's edge), and a choice of short
    /// pieces of the original spelling something of its own.
    #[test]
    fn joints_carry_no_digits_of_their_own_and_pieces_are_few_and_long() {
        let o = original();
        let (h, t) = (head(&o, 300), crate::truncate::tail(&o, 300));
        let many = "4111111111111111".repeat(100);
        assert!(!derivable(
            &format!("{h}\n\n... [{many} chars omitted for context efficiency] ...\n\n{t}"),
            &o
        ));
        assert!(!derivable(
            &format!("{h}\n[... 4111111111111111 chars of tool result omitted (0123456789 total) ...]\n{t}"),
            &o
        ));
        assert!(
            !derivable(&format!("{h}…[tool markup compacted, 5551234567 chars]{t}"), &o),
            "over the original's length"
        );
        assert!(!derivable(&format!("{h}\n[... 98765432109876543210987654321"), &o), "a long run at the end");
        let digits77 = "27".repeat(38);
        assert!(!derivable(
            &format!("{h}\n... [truncated] ...\n{digits77}7 chars omitted from old tool result ...]\n{t}"),
            &o
        ));
        // Counts within the original's length are what salvage writes.
        let n = o.len() - 600;
        assert!(derivable(&format!("{h}\n\n... [{n} chars omitted for context efficiency] ...\n\n{t}"), &o));
        // Short pieces between joints: a selection of words.
        let pick = format!("{h}\n... [truncated] ...\nline 2999\n... [truncated] ...\nof the\n... [truncated] ...\noriginal\n");
        assert!(!derivable(&pick, &o));
    }

    #[test]
    fn each_joint_separates_pieces() {
        let o = original();
        let h = head(&o, 300);
        let t = crate::truncate::tail(&o, 300);
        for j in CUT_JOINTS {
            let joint = j.replace('#', "1234");
            assert!(derivable(&format!("{h}{joint}{t}"), &o), "{joint:?}");
        }
    }
}
