//! The one text fold every store matches on: case-, accent- and width-insensitive.

use unicode_normalization::char::{decompose_compatible, is_combining_mark};

/// Pushes the fold of one character: its compatibility decomposition
/// (`ﬁ` → `fi`, full-width `Ａ` → `A`, `é` → `e` + accent), without
/// combining marks, lower-cased.
fn push_folded(c: char, out: &mut String) {
    if c.is_ascii() {
        out.push(c.to_ascii_lowercase());
        return;
    }
    decompose_compatible(c, |d| {
        if !is_combining_mark(d) {
            for l in d.to_lowercase() {
                if !is_combining_mark(l) {
                    out.push(l);
                }
            }
        }
    });
}

/// Folds text for matching: lower case, accents and other combining marks
/// removed, compatibility forms unified (`Crème Brûlée` → `creme brulee`,
/// `ＡＢＣ` → `abc`). Queries and texts go through the same fold, so a
/// match is a plain substring test of two folded strings.
///
/// ```
/// use session_core::fold_case;
/// assert_eq!(fold_case("Crème BRÛLÉE"), "creme brulee");
/// assert_eq!(fold_case("Straße"), "straße");
/// ```
pub fn fold_case(text: &str) -> String {
    if text.is_ascii() {
        return text.to_ascii_lowercase();
    }
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        push_folded(c, &mut out);
    }
    out
}

/// Whether `text` contains `needle_folded` (already passed through [`fold_case`]), literally.
pub fn contains_folded(text: &str, needle_folded: &str) -> bool {
    memchr::memmem::find(fold_case(text).as_bytes(), needle_folded.as_bytes()).is_some()
}

/// A folded text with, for each of its bytes, the byte offset in the
/// original of the character it came from: how a match in the fold is
/// mapped back to the original text (for snippets).
#[derive(Debug, Clone)]
pub(crate) struct FoldedText {
    /// The fold.
    pub(crate) text: String,
    /// `origin[i]`: where in the original the character behind folded byte `i` starts.
    origin: Vec<usize>,
}

impl FoldedText {
    /// Folds `original`, recording offsets.
    pub(crate) fn new(original: &str) -> Self {
        let mut text = String::with_capacity(original.len());
        let mut origin = Vec::with_capacity(original.len());
        for (at, c) in original.char_indices() {
            let before = text.len();
            push_folded(c, &mut text);
            origin.resize(text.len(), at);
            debug_assert!(origin.len() >= before);
        }
        Self { text, origin }
    }

    /// The original byte offset of folded byte `i` (the original's length past the end).
    pub(crate) fn original_offset(&self, i: usize, original_len: usize) -> usize {
        self.origin.get(i).copied().unwrap_or(original_len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn folds_case_accents_and_width() {
        assert_eq!(fold_case("ÉCOLE Ångström"), "ecole angstrom");
        assert_eq!(fold_case("ＡＢＣ ﬁle"), "abc file");
        assert_eq!(fold_case("İstanbul"), "istanbul");
        assert_eq!(fold_case("日本語"), "日本語");
        assert_eq!(fold_case("100%_DONE"), "100%_done");
    }

    #[test]
    fn folding_twice_changes_nothing() {
        for t in ["Crème", "ǅemal", "ﬃ", "Ω ω Ω", "ẞ", "ﾃｽﾄ", "a\u{0}b"] {
            let once = fold_case(t);
            assert_eq!(fold_case(&once), once, "{t:?}");
        }
    }

    #[test]
    fn keyword_is_literal_and_case_insensitive() {
        let k = fold_case("100%_DONE");
        assert!(contains_folded("it is 100%_done now", &k));
        assert!(!contains_folded("it is 100x_done now", &k));
        assert!(contains_folded("Café crème", &fold_case("cafe CREME")));
    }

    #[test]
    fn offsets_map_folded_bytes_back_to_original_characters() {
        let original = "Zoë ﬁnds";
        let f = FoldedText::new(original);
        assert_eq!(f.text, "zoe finds");
        let at = f.text.find("finds").unwrap_or(0);
        assert_eq!(&original[f.original_offset(at, original.len())..], "ﬁnds");
        let e = f.text.find('e').unwrap_or(0);
        assert_eq!(&original[f.original_offset(e, original.len())..], "ë ﬁnds");
    }
}
