//! The Kubernetes name patterns this resource checks: in its own schema, in an import ID and in
//! the blocks of the deliveries that name an object (an Argo CD Application's namespace), in a
//! module of their own so that the schema, which lists the deliveries, and the deliveries share
//! them without naming each other.

pub(super) const DNS_LABEL_RE: &str = r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$";
/// What [`DNS_LABEL_RE`] accepts, in words.
pub(super) const DNS_LABEL_HINT: &str =
    "a DNS-1123 label (lowercase letters, digits, '-', up to 63)";
pub(super) const DNS_SUBDOMAIN_RE: &str = r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$";
