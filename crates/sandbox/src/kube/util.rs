//! Random UUIDs, as the API server gives objects and clusters, and the string lists of the
//! policy objects (RBAC rules, webhook rules) with their `*`.

use serde_json::Value;

pub(crate) fn uuid4() -> String {
    let mut b = [0u8; 16];
    for x in b.iter_mut() {
        *x = fastrand::u8(..);
    }
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    let h: String = b.iter().map(|x| format!("{x:02x}")).collect();
    format!(
        "{}-{}-{}-{}-{}",
        &h[0..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..32]
    )
}

/// The strings of a JSON list (others and a missing list give none).
pub(crate) fn strings(v: &Value) -> Vec<&str> {
    v.as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect()
}

/// Whether a policy list names `x`, or `*` for everything.
pub(crate) fn any_of(list: &[&str], x: &str) -> bool {
    list.iter().any(|v| *v == "*" || *v == x)
}
