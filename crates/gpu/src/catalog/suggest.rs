//! "Did you mean" for unknown names. Machine type names are long and alike (`g5.12xlarge`,
//! `g6.12xlarge`), so a typo is best answered with the few nearest names rather than the whole list.

/// The `n` names closest to `wanted`: names that start with it first (someone typing `A100` means an
/// A100, not the A10G one edit away), then by case-insensitive edit distance, then by longer common prefix
/// (`p5.24xlarge` is nearer `p5.48xlarge` than `g6.24xlarge`).
pub(super) fn closest<'a>(
    wanted: &str,
    names: impl IntoIterator<Item = &'a str>,
    n: usize,
) -> Vec<&'a str> {
    // Suggestions are for typos; a long input would only cost quadratic time.
    let wanted: String = wanted.to_ascii_lowercase().chars().take(64).collect();
    let mut scored: Vec<(bool, usize, usize, &str)> = names
        .into_iter()
        .map(|name| {
            let lower = name.to_ascii_lowercase();
            let common = wanted
                .chars()
                .zip(lower.chars())
                .take_while(|(a, b)| a == b)
                .count();
            let starts = wanted.len() >= 2 && lower.starts_with(&wanted);
            (
                !starts,
                edit_distance(&wanted, &lower),
                usize::MAX - common,
                name,
            )
        })
        .collect();
    scored.sort();
    scored.dedup_by(|a, b| a.3 == b.3);
    scored.into_iter().take(n).map(|(.., name)| name).collect()
}

/// Levenshtein distance over chars.
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    let mut cur = vec![0; b.len() + 1];
    for (i, ca) in a.chars().enumerate() {
        cur[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let substitute = prev[j] + usize::from(ca != *cb);
            cur[j + 1] = substitute.min(prev[j + 1] + 1).min(cur[j] + 1);
        }
        std::mem::swap(&mut prev, &mut cur);
    }
    prev[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn edit_distance_basics() {
        assert_eq!(edit_distance("kitten", "sitting"), 3);
        assert_eq!(edit_distance("", "abc"), 3);
        assert_eq!(edit_distance("same", "same"), 0);
    }
}
