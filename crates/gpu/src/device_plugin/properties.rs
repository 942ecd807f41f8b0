//! Bounded property tests of the device plugin config parser, which reads untrusted YAML: any
//! mutation of a valid document gives a config or an error and never a panic; nesting far beyond
//! any real document and alias bombs are refused. The cargo-fuzz target under fuzz/ explores the
//! same function without a bound.

use proptest::prelude::*;

/// A valid encoding with a few bytes flipped, cut or repeated.
fn mutate(mut bytes: Vec<u8>, edits: &[(usize, u8, u8)]) -> Vec<u8> {
    for &(pos, kind, byte) in edits {
        if bytes.is_empty() {
            bytes.push(byte);
            continue;
        }
        let at = pos % bytes.len();
        match kind % 4 {
            0 => bytes[at] = byte,
            1 => bytes.truncate(at),
            2 => bytes.insert(at, byte),
            _ => {
                let tail = bytes[at..].to_vec();
                bytes.extend_from_slice(&tail);
            }
        }
    }
    bytes
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 1500, ..ProptestConfig::default() })]

    #[test]
    fn the_parser_survives_mutations(
        edits in prop::collection::vec((any::<usize>(), any::<u8>(), 0x20u8..0x7f), 1..6),
    ) {
        let valid = crate::device_plugin_config_yaml(&crate::SharingMode::TimeSlicing {
            replicas: 10,
            rename_by_default: true,
            fail_requests_greater_than_one: false,
        })
        .unwrap();
        let bytes = mutate(valid.into_bytes(), &edits);
        if let Ok(text) = std::str::from_utf8(&bytes) {
            let _ = super::parse(text);
        }
    }
}

#[test]
fn deep_nesting_is_refused_not_a_stack_overflow() {
    // A YAML document of 100,000 nested flow sequences.
    let depth = 100_000;
    let deep_yaml = format!("{}{}", "[".repeat(depth), "]".repeat(depth));
    super::parse(&deep_yaml).expect_err("refused");
}

#[test]
fn yaml_alias_bombs_are_refused() {
    // Each level doubles the previous one by alias: expanded, 2^30 entries.
    let mut doc = String::from("a0: &a0 [x, x]\n");
    for i in 1..30 {
        doc.push_str(&format!("a{i}: &a{i} [*a{p}, *a{p}]\n", p = i - 1));
    }
    doc.push_str("version: v1\n");
    super::parse(&doc).expect_err("an alias bomb is refused");
}
