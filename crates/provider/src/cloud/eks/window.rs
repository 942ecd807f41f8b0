//! How many DescribeNodegroup calls an EKS list keeps in flight. EKS has no batch describe, so a
//! refresh of N node groups of one cluster waits N / (calls in flight) round trips; and EKS
//! publishes no request rate for its reads: it throttles per account and Region, a budget this
//! provider shares with everything else the account runs (cluster-autoscaler, Karpenter, CI).
//! So the list opens its window the way TCP opens a congestion window: it starts at [`FIRST`],
//! grows by one with every describe answered while no call of the client was throttled (so it
//! doubles each round trip) up to [`MOST`], and halves, down to [`LEAST`], whenever a call was
//! throttled (or failed on the server's side) since the last answer. A throttled call itself is
//! retried with backoff as any other (`calls`).
//!
//! Measured with the `latency` benchmark (200 node groups of one cluster, 300 ms a request): with
//! 16 describes always in flight the describes took 13 round trips and the plan 3.97 times the
//! plan at no latency; with this window opening at 16 (and the list's pools answered as they are
//! described, those terraform waits for first) 1.7 to 1.9 times over three runs, when the plan
//! at no latency took 1.2 to 1.6 s on that machine; opening at 32, with the groups terraform
//! waits for described outside the window, 2.06 times in one run against a plan at no latency of
//! 1.06 s (so the ratios do not compare), and 1.36 times with terraform's `-parallelism` at 200.
//! 32 is chosen for the quota below, not for a measured gain.

/// The window of a list's first describes: every group of a cluster at EKS's default quota of
/// 30 managed node groups (L-6D54EA21) in one round trip. Terraform's own refresh, at its default
/// `-parallelism` of 10, has 10 reads in flight, and a list stands for many of them; the groups
/// those reads wait for are described outside the window.
pub(super) const FIRST: usize = 32;
/// The most: 200 node groups (well past EKS's default quota of 30 per cluster) in four rounds.
pub(super) const MOST: usize = 64;
/// The least a throttled list falls back to.
pub(super) const LEAST: usize = 4;

/// One list's window. `throttles` is the client's count of throttled calls (it only grows).
#[derive(Debug)]
pub(super) struct Window {
    size: usize,
    throttles_seen: u64,
}

impl Window {
    pub(super) fn new(throttles: u64) -> Window {
        Window {
            size: FIRST,
            throttles_seen: throttles,
        }
    }

    /// Describes the list may have in flight now.
    pub(super) fn size(&self) -> usize {
        self.size
    }

    /// A describe was answered (or gave up); `throttles` is the client's count now.
    pub(super) fn answered(&mut self, throttles: u64) {
        if throttles > self.throttles_seen {
            self.throttles_seen = throttles;
            self.size = (self.size / 2).max(LEAST);
        } else {
            self.size = (self.size + 1).min(MOST);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grows_to_the_most_while_nothing_is_throttled() {
        let mut w = Window::new(7);
        assert_eq!(w.size(), FIRST);
        // One round trip of answers doubles it.
        for _ in 0..FIRST {
            w.answered(7);
        }
        assert_eq!(w.size(), 2 * FIRST);
        for _ in 0..1000 {
            w.answered(7);
        }
        assert_eq!(w.size(), MOST);
    }

    #[test]
    fn halves_once_per_throttle_seen_down_to_the_least() {
        let mut w = Window::new(0);
        for _ in 0..1000 {
            w.answered(0);
        }
        w.answered(1);
        assert_eq!(w.size(), MOST / 2);
        // The same throttle seen again by the next answer is not a second one.
        w.answered(1);
        assert_eq!(w.size(), MOST / 2 + 1);
        for t in 2..20 {
            w.answered(t);
        }
        assert_eq!(w.size(), LEAST);
    }
}
