//! A cluster's node groups listed: ListNodegroups page by page, each group described as soon as
//! its page is in (as many at once as the [`Window`] allows, the groups a read waits for first),
//! and handed on with its Auto Scaling group's node template as soon as that is known.

use std::collections::HashMap;

use super::client::EksClient;
use super::mapping::{eks_location, status_of, to_pool};
use super::template;
use super::window::Window;
use crate::cloud::error::CloudError;
use crate::cloud::pool::{Listening, Location, Pool};
use crate::operation::OpCtx;

impl EksClient {
    /// Every node group of the cluster as a pool, handed to `to` once it is described and its
    /// node template known. The templates of the cluster's groups come beside the describes,
    /// from one read that needs no group name ([`Self::cluster_templates`]); a group that read
    /// missed (or every group, if it failed) is asked after by name, in as few calls as the API
    /// allows, once the describes are done.
    pub(super) async fn list_each(
        &self,
        cluster: &Location,
        ctx: &OpCtx,
        to: &dyn Listening,
    ) -> Result<(), CloudError> {
        let (region, name) = eks_location(cluster)?;
        let client = self.client(region)?;
        let pool_of =
            |ng: &aws_sdk_eks::types::Nodegroup,
             templates: &mut HashMap<String, std::collections::BTreeMap<_, _>>| {
                let mut pool = to_pool(region, name, ng);
                pool.spec.node_template = template::asg_names(ng)
                    .iter()
                    .find_map(|n| templates.remove(n))
                    .unwrap_or_default();
                pool
            };
        // A Bottlerocket group's launch template is read before its pool is handed on; one that
        // cannot be read leaves the pool out, to be read on its own.
        let hand_on = |mut pool: Pool, ng: &aws_sdk_eks::types::Nodegroup| {
            let ng = ng.clone();
            async move {
                match self.read_template(region, &ng, &mut pool, ctx).await {
                    Ok(()) => to.found(pool),
                    Err(e) => tracing::debug!(nodegroup = %pool.spec.name, error = %e,
                        "eks: a node group's launch template was not read; reading the group on its own"),
                }
            }
        };
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        // `tx` goes with the describes: when they end, so does the loop that takes their groups.
        let describes = async move {
            let mut send = |ng| {
                let _ = tx.send(ng);
            };
            self.describe_each(&client, name, ctx, to, &mut send).await
        };
        let templating = async {
            let mut templates = self
                .cluster_templates(region, name, ctx)
                .await
                .unwrap_or_else(|e| {
                    tracing::debug!(error = %e, "the cluster's Auto Scaling groups were not \
                        listed; reading each node group's by name");
                    HashMap::new()
                });
            let mut missed = Vec::new();
            while let Some(ng) = rx.recv().await {
                if status_of(&ng) == "DELETING" {
                    continue;
                }
                let groups = template::asg_names(&ng);
                if groups.is_empty() || groups.iter().any(|n| templates.contains_key(n)) {
                    hand_on(pool_of(&ng, &mut templates), &ng).await;
                } else {
                    missed.push(ng);
                }
            }
            (templates, missed)
        };
        let (described, (mut templates, missed)) = tokio::join!(describes, templating);
        described?;
        if !missed.is_empty() {
            let names: Vec<String> = missed.iter().flat_map(template::asg_names).collect();
            templates.extend(self.templates(region, &names, ctx).await?);
            for ng in &missed {
                hand_on(pool_of(ng, &mut templates), ng).await;
            }
        }
        Ok(())
    }

    /// Every node group of the cluster, described, each handed to `on`: the describes of a page
    /// of ListNodegroups start as soon as the page is in, beside the next page, and as many are
    /// in flight as the list's [`Window`] allows. The groups reads wait for (`to.wanted()`) are
    /// described at once, whatever the window and before their page is in: terraform holds one
    /// of its `-parallelism` slots for each of those reads, so they are bounded by it, and each
    /// would be a describe of its own without the list. The first failure ends the list (a
    /// shared read then falls back to each pool's own read). Groups gone between the list and
    /// their describe are left out.
    async fn describe_each(
        &self,
        client: &aws_sdk_eks::Client,
        cluster: &str,
        ctx: &OpCtx,
        to: &dyn Listening,
        on: &mut (dyn FnMut(aws_sdk_eks::types::Nodegroup) + Send),
    ) -> Result<(), CloudError> {
        use futures_util::stream::{FuturesUnordered, StreamExt};
        use std::collections::{HashSet, VecDeque};
        use std::sync::atomic::Ordering;

        enum Event<P, D> {
            Page(P),
            Described(D),
            Asked,
        }
        let throttles = || self.throttles.load(Ordering::Relaxed);
        let page_of = |token, n| Box::pin(self.list_page(client, cluster, token, n, ctx));
        let describe = |ng: String| async move {
            let described = self.describe(client, cluster, &ng, ctx).await;
            (ng, described)
        };
        let asked = || async {
            match to.asked() {
                Some(asked) => asked.notified().await,
                None => std::future::pending().await,
            }
        };
        let mut pages = 1;
        let mut page = Some(page_of(None, 0));
        let mut queued = VecDeque::new();
        let mut in_flight = FuturesUnordered::new();
        let mut window = Window::new(throttles());
        // Every name given to a describe (or queued for one): a group is described once.
        let mut named = HashSet::new();
        loop {
            for ng in to.wanted() {
                // Not named yet, or queued behind others: described now.
                let queued_at = queued.iter().position(|q| *q == ng);
                if let Some(at) = queued_at {
                    queued.remove(at);
                }
                if named.insert(ng.clone()) || queued_at.is_some() {
                    in_flight.push(describe(ng));
                }
            }
            while in_flight.len() < window.size()
                && let Some(ng) = queued.pop_front()
            {
                in_flight.push(describe(ng));
            }
            let busy = page.is_some() || !in_flight.is_empty();
            let event = tokio::select! {
                listed = async { page.as_mut().expect("only while a page is due").await },
                    if page.is_some() => Event::Page(listed),
                Some(described) = in_flight.next(), if !in_flight.is_empty() => {
                    Event::Described(described)
                }
                () = asked(), if busy => Event::Asked,
                else => break,
            };
            match event {
                Event::Page(listed) => {
                    let (names, next) = listed?;
                    queued.extend(names.into_iter().filter(|ng| named.insert(ng.clone())));
                    page = next.map(|token| page_of(Some(token), pages));
                    pages += 1;
                }
                Event::Described((name, described)) => {
                    window.answered(throttles());
                    match described? {
                        Some(ng) => on(ng),
                        None => to.gone(&name),
                    }
                }
                Event::Asked => {}
            }
        }
        Ok(())
    }
}
