//! What one refresh shares between clusters: a read that answers for many clusters at once, taken
//! once per refresh instead of once per cluster. GKE's pool sizes come from Compute's
//! `instanceGroupManagers.aggregatedList`, and its node pools from the project's cluster list
//! over every location, one list each per project whatever the number of clusters in it, so the
//! clusters of one project share them.
//!
//! A module of its own, depending on nothing of `cloud`, so that the [`NodePools`] trait (in
//! `pool`) can hand it to a client and the refresh's shared reads (`shared`) can own it without
//! either importing the other. Values are kept by a key the client chooses (the project, named
//! for its API) and typed by the client; this module knows neither.
//!
//! The rules are those of the refresh's per-cluster snapshots (see `shared`): a value belongs to
//! one refresh and never outlives [`MAX_AGE`]; the refresh drops them all when it begins and on
//! any write to a cluster (a write to one cluster changes what a project-wide list says of it);
//! a read that failed is kept as failed for the refresh, so the clusters that rely on it fall
//! back to their own reads rather than each trying the list again.
//!
//! [`NodePools`]: super::pool::NodePools

use std::any::Any;
use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use tokio::sync::OnceCell;

/// How long a snapshot serves reads at most, whatever the walk.
pub(super) const MAX_AGE: Duration = Duration::from_secs(120);

type Value = Option<Arc<dyn Any + Send + Sync>>;

struct Entry {
    /// When the read was started.
    at: Instant,
    value: OnceCell<Value>,
}

/// The values one refresh shares between clusters, by key.
#[derive(Default)]
pub struct AcrossClusters {
    entries: Mutex<HashMap<String, Arc<Entry>>>,
}

impl AcrossClusters {
    /// The value under `key`, taken by `take` if this refresh has none yet; readers that come
    /// while it is being taken wait for it. None when `take` failed (and stays None for the
    /// refresh).
    pub async fn get_or_take<T, F, Fut>(&self, key: &str, take: F) -> Option<Arc<T>>
    where
        T: Any + Send + Sync,
        F: FnOnce() -> Fut,
        Fut: Future<Output = Option<T>>,
    {
        let entry = {
            let mut entries = self.lock();
            match entries.get(key).filter(|e| e.at.elapsed() < MAX_AGE) {
                Some(e) => e.clone(),
                None => {
                    let e = Arc::new(Entry {
                        at: Instant::now(),
                        value: OnceCell::new(),
                    });
                    entries.insert(key.to_string(), e.clone());
                    e
                }
            }
        };
        let value = entry
            .value
            .get_or_init(|| async {
                let taken = take().await?;
                Some(Arc::new(taken) as Arc<dyn Any + Send + Sync>)
            })
            .await;
        value.clone()?.downcast::<T>().ok()
    }

    /// Drops every value: a refresh begins, or a cluster is written to.
    pub fn clear(&self) {
        self.lock().clear();
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Arc<Entry>>> {
        self.entries.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[tokio::test]
    async fn one_take_per_key_until_cleared_and_a_failure_is_kept() {
        let across = AcrossClusters::default();
        let takes = AtomicUsize::new(0);
        let take = |n: u32| {
            let takes = &takes;
            move || async move {
                takes.fetch_add(1, Ordering::SeqCst);
                Some(n)
            }
        };
        let (a, b) = tokio::join!(
            across.get_or_take("p", take(1)),
            across.get_or_take("p", take(2))
        );
        assert_eq!((a.as_deref(), b.as_deref()), (Some(&1), Some(&1)));
        assert_eq!(takes.load(Ordering::SeqCst), 1, "taken once for both");
        assert_eq!(across.get_or_take("q", take(3)).await.as_deref(), Some(&3));
        across.clear();
        assert_eq!(across.get_or_take("p", take(4)).await.as_deref(), Some(&4));
        assert_eq!(takes.load(Ordering::SeqCst), 3);

        let failed = across
            .get_or_take::<u32, _, _>("f", || async { None })
            .await;
        assert_eq!(failed, None);
        let again = across.get_or_take("f", take(5)).await;
        assert_eq!(again, None, "a failed read stays failed for the refresh");
    }
}
