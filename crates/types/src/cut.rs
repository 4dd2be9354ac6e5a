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

/// The longest joint, in bytes, with room for its numbers.
const JOINT_MAX: usize = 128;

/// Matches `template` (with `#` for 1+ digits) against the start of `s`: the length it covers
/// when `s` starts with a whole joint; `Err(true)` when `s` ends inside the joint (all of `s`
/// fits the joint's start); `Err(false)` when they differ.
fn match_joint(template: &str, s: &str) -> Result<usize, bool> {
    let (t, b) = (template.as_bytes(), s.as_bytes());
    let (mut i, mut j) = (0usize, 0usize);
    while let Some(&tc) = t.get(i) {
        if tc == b'#' {
            let digits = b.get(j..).unwrap_or_default().iter().take_while(|c| c.is_ascii_digit()).count();
            if j.saturating_add(digits) >= b.len() {
                return Err(true);
            }
            if digits == 0 {
                return Err(false);
            }
            j = j.saturating_add(digits);
        } else {
            match b.get(j) {
                None => return Err(true),
                Some(&c) if c == tc => j = j.saturating_add(1),
                Some(_) => return Err(false),
            }
        }
        i = i.saturating_add(1);
    }
    Ok(j)
}

/// The length of the whole joint `s` starts with, if it starts with one.
fn joint_at(s: &str) -> Option<usize> {
    CUT_JOINTS.iter().find_map(|t| match_joint(t, s).ok())
}

/// True when all of `s` is the beginning of some joint (a cut of a cut ended inside it).
fn joint_start(s: &str) -> bool {
    !s.is_empty() && CUT_JOINTS.iter().any(|t| match_joint(t, s) == Err(true))
}

/// True when all of `s` is the end of some joint (a cut of a cut began inside it): `s` reversed
/// is the beginning of the joint reversed.
fn joint_end(s: &str) -> bool {
    if s.is_empty() {
        return false;
    }
    let rs: String = s.chars().rev().collect();
    CUT_JOINTS.iter().any(|t| {
        let rt: String = t.chars().rev().collect();
        matches!(match_joint(&rt, &rs), Ok(n) if n == rs.len()) || match_joint(&rt, &rs) == Err(true)
    })
}

/// `piece` without what a cut of a cut can leave at its edges: the end of a joint at its start
/// (not for the first piece, which is the original's head) and the start of one at its end.
fn trimmed(piece: &str, first: bool) -> &str {
    let mut p = piece;
    if !first {
        // The longest start of `p` (within a joint's length) that is the end of a joint.
        let cut = p
            .char_indices()
            .map(|(i, c)| i.saturating_add(c.len_utf8()))
            .take_while(|e| *e <= JOINT_MAX)
            .filter(|e| p.get(..*e).is_some_and(joint_end))
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
        .find(|i| p.get(*i..).is_some_and(joint_start));
    match cut {
        Some(i) => p.get(..i).unwrap_or_default(),
        None => p,
    }
}

/// The pieces of `body` between the whole joints in it, in order.
fn pieces(body: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut start = 0usize;
    let mut at = 0usize;
    while let Some(rel) = body.get(at..).and_then(|r| r.find(['\n', '…'])) {
        let pos = at.saturating_add(rel);
        match body.get(pos..).and_then(joint_at) {
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
    let mut pos = 0usize;
    for (i, piece) in pieces(body).into_iter().enumerate() {
        let p = trimmed(piece, i == 0);
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
