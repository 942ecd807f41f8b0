//! MIG geometries: how many instances of a profile one GPU holds, for the twin's MIG manager and
//! Bottlerocket's MIG settings alike.

/// Max instances of a MIG profile per GPU (NVIDIA MIG user guide), for the EKS MIG manager path where only a
/// label names the profile. The GPU is recognised by its memory size (and name for the 24 GB A30).
pub(crate) fn mig_instances(product: &str, memory_mib: u64, profile: &str) -> Option<u32> {
    mig_profiles(product, memory_mib)?
        .iter()
        .find(|(p, _)| *p == profile)
        .map(|(_, n)| *n)
}

/// Every MIG profile of the GPU and its most instances per GPU; None for a GPU without MIG.
pub(crate) fn mig_profiles(
    product: &str,
    memory_mib: u64,
) -> Option<&'static [(&'static str, u32)]> {
    const A30: &[(&str, u32)] = &[
        ("1g.6gb", 4),
        ("1g.6gb+me", 1),
        ("2g.12gb", 2),
        ("2g.12gb+me", 1),
        ("4g.24gb", 1),
    ];
    const A100_40: &[(&str, u32)] = &[
        ("1g.5gb", 7),
        ("1g.5gb+me", 1),
        ("1g.10gb", 4),
        ("2g.10gb", 3),
        ("3g.20gb", 2),
        ("4g.20gb", 1),
        ("7g.40gb", 1),
    ];
    const GB80: &[(&str, u32)] = &[
        ("1g.10gb", 7),
        ("1g.10gb+me", 1),
        ("1g.20gb", 4),
        ("2g.20gb", 3),
        ("3g.40gb", 2),
        ("4g.40gb", 1),
        ("7g.80gb", 1),
    ];
    const NVL94: &[(&str, u32)] = &[
        ("1g.12gb", 7),
        ("1g.12gb+me", 1),
        ("1g.24gb", 4),
        ("2g.24gb", 3),
        ("3g.47gb", 2),
        ("4g.47gb", 1),
        ("7g.94gb", 1),
    ];
    const H200: &[(&str, u32)] = &[
        ("1g.18gb", 7),
        ("1g.18gb+me", 1),
        ("1g.35gb", 4),
        ("2g.35gb", 3),
        ("3g.71gb", 2),
        ("4g.71gb", 1),
        ("7g.141gb", 1),
    ];
    const B200: &[(&str, u32)] = &[
        ("1g.23gb", 7),
        ("1g.23gb+me", 1),
        ("1g.45gb", 4),
        ("2g.45gb", 3),
        ("3g.90gb", 2),
        ("4g.90gb", 1),
        ("7g.180gb", 1),
    ];
    const GB200: &[(&str, u32)] = &[
        ("1g.23gb", 7),
        ("1g.47gb", 4),
        ("2g.47gb", 3),
        ("3g.93gb", 2),
        ("4g.93gb", 1),
        ("7g.186gb", 1),
    ];
    let gb = memory_mib as f64 / 1024.0;
    let up = product.to_ascii_uppercase();
    let table: &[(&str, u32)] = if up.contains("A30") {
        A30
    } else if up.contains("GB200") {
        GB200
    } else {
        let classes: [(f64, &[(&str, u32)]); 5] = [
            (40.0, A100_40),
            (80.0, GB80),
            (94.0, NVL94),
            (141.0, H200),
            (180.0, B200),
        ];
        let (c, t) = classes
            .iter()
            .min_by(|a, b| (a.0 - gb).abs().total_cmp(&(b.0 - gb).abs()))?;
        if (c - gb).abs() / c > 0.1
            || !(up.contains("A100")
                || up.contains("H100")
                || up.contains("H200")
                || up.contains("B200"))
        {
            return None;
        }
        t
    };
    Some(table)
}
