//! Writing values into a Helm release with `helm upgrade`, for the deliveries whose block names a
//! release (`helm`; the next, NVIDIA's standalone device plugin chart, alike): its deployed
//! revision, the upgrade with the release's complete user values, what a failed one says, and
//! the upgrade that gives the user's values back on destroy. Diagnostics name the attributes of
//! the delivery's block (`helm.release`), whichever block that is.

use serde_json::{Value, json};
use tfplugin::object::{DecodeError, FromValue, SingleBlock};
use tfplugin::schema::Attribute;
use tfplugin::{AttrPath, Diagnostic, Diagnostics, Step};

use super::super::diagnostics::kube_diagnostic;
use super::life::{At, Placement, Writing};
use super::values::{self, ValuesTaken};
use crate::cluster::Cluster;
use crate::cluster::helm::{self, ReleaseState};

/// The attributes of a block that names a release: `release`, `namespace` and `chart` (with
/// what each looks like for this delivery's chart), then `chart_version`; `helm_path` is
/// [`helm_path_attribute`].
pub(super) fn release_attributes(release: &str, namespace: &str, chart: &str) -> [Attribute; 4] {
    [
        Attribute::string("release").required().describe(release),
        Attribute::string("namespace")
            .required()
            .describe(namespace),
        Attribute::string("chart").required().describe(chart),
        Attribute::string("chart_version").optional().describe(
            "Chart version for the upgrade. Default: the deployed release's, so only values \
            change.",
        ),
    ]
}

/// Where the plan puts the ConfigMap for a delivery whose block `name` (read as `T`) names a
/// release: the release's namespace (`namespace` of the block).
pub(super) fn release_placement<T: FromValue>(
    config: &tfplugin::Value,
    name: &str,
    namespace: impl Fn(T) -> String,
) -> Result<Placement, DecodeError> {
    let block = SingleBlock::<T>::from_value(config.get(name))
        .map_err(|e| e.under(Step::Attr(name.to_string())))?;
    Ok(match block.0 {
        Some(b) => Placement::In(namespace(b)),
        None => Placement::Default,
    })
}

/// The `helm_path` attribute of a block that names a release.
pub(super) fn helm_path_attribute() -> Attribute {
    Attribute::string("helm_path")
        .optional()
        .describe("The helm executable, Helm 3 or 4. Default `helm` on the PATH.")
}

/// A release as a delivery's block names it (its `release`, `namespace`, `chart`,
/// `chart_version` and helm executable).
pub(super) struct ReleaseBlock<'a> {
    /// The block, for diagnostics: `helm`.
    pub block: &'static str,
    pub helm: &'a str,
    pub release: &'a str,
    pub namespace: &'a str,
    pub chart: &'a str,
    pub chart_version: Option<&'a str>,
}

impl ReleaseBlock<'_> {
    /// The deployed revision; None after a diagnostic (missing, pending).
    pub(super) async fn deployed(
        &self,
        at: &At<'_>,
        diags: &mut Diagnostics,
    ) -> Option<helm::Release> {
        let b = self.block;
        match helm::read_release(at.cluster, self.namespace, self.release).await {
            Ok(ReleaseState::Deployed(r)) => Some(r),
            Ok(ReleaseState::Pending(r)) => {
                diags.push(self.diagnostic(&format!(
                    "revision {} is {}: another helm operation is in progress or was interrupted. \
                    Wait for it, or `helm rollback` it, then apply again.",
                    r.revision, r.status
                )));
                None
            }
            Ok(ReleaseState::Missing) => {
                diags.push(self.diagnostic(&format!(
                    "no deployed revision found (no Secret \
                    sh.helm.release.v1.<release>.v<N> with status deployed). Check {b}.release \
                    and {b}.namespace."
                )));
                None
            }
            Err(e) => {
                diags.push(kube_diagnostic(
                    "read the Helm release",
                    at.desired.access,
                    &e,
                ));
                None
            }
        }
    }

    /// The chart version to upgrade to: the block's, else the deployed one, so only values
    /// change.
    pub(super) fn version<'a>(&'a self, deployed: &'a helm::Release) -> Option<&'a str> {
        self.chart_version.or(Some(deployed.chart_version.as_str()))
    }

    /// The release's user values, complete: helm is handed all of them with --reset-values, so
    /// nothing of ours lingers and nothing of the user's is lost.
    pub(super) fn user_values(deployed: &helm::Release) -> Value {
        match &deployed.config {
            Value::Object(_) => deployed.config.clone(),
            _ => json!({}),
        }
    }

    pub(super) fn diagnostic(&self, e: &str) -> Diagnostic {
        Diagnostic::error(
            "Helm upgrade failed",
            format!(
                "Release {}/{} ({}.release): {e}",
                self.namespace, self.release, self.block
            ),
        )
        .at(AttrPath::attr(self.block)
            .with_index(0)
            .with_attr("release"))
    }

    /// Runs `helm upgrade` with `values`, against the cluster `at` reaches, stopping before the
    /// operation's deadline; None after a diagnostic.
    pub(super) async fn upgrade(
        &self,
        at: &At<'_>,
        deployed: &helm::Release,
        values: &Value,
        force: Option<&str>,
        w: &mut Writing,
        diags: &mut Diagnostics,
    ) -> Option<()> {
        let run = helm::Upgrade {
            helm: self.helm,
            release: self.release,
            chart: self.chart,
            namespace: self.namespace,
            chart_version: self.version(deployed),
            timeout: w.helm_timeout(),
            force,
        }
        .run(values, &at.kubernetes)
        .await;
        match run {
            Ok(_) => Some(()),
            Err(e) => {
                diags.push(self.failure(at.cluster, &e.to_string(), w).await);
                None
            }
        }
    }

    /// Destroy: the release gets back the user values it had where this resource wrote
    /// (`owned`, and the paths `taken` records); where there is no record (an imported config)
    /// the values are removed and the chart's defaults come back. None after a diagnostic.
    pub(super) async fn give_back(
        &self,
        at: &At<'_>,
        taken: &ValuesTaken,
        owned: Vec<(String, Value)>,
        w: &mut Writing,
        diags: &mut Diagnostics,
    ) -> Option<()> {
        let deployed = match helm::read_release(at.cluster, self.namespace, self.release).await {
            // Nothing to give back to.
            Ok(ReleaseState::Missing) => return Some(()),
            Ok(_) => self.deployed(at, diags).await?,
            Err(e) => {
                diags.push(kube_diagnostic(
                    "read the Helm release",
                    at.desired.access,
                    &e,
                ));
                return None;
            }
        };
        let mut user = Self::user_values(&deployed);
        values::apply(&mut user, &taken.give_back(owned));
        self.upgrade(at, &deployed, &user, None, w, diags).await
    }

    /// The diagnostic of a failed `helm upgrade`; when helm stopped at a hook, it names the hook
    /// Jobs that did not finish (helm 3 only says it timed out).
    async fn failure(&self, c: &Cluster, e: &str, w: &Writing) -> Diagnostic {
        if !e.contains("hook") {
            return self.diagnostic(e);
        }
        let jobs = c
            .unfinished_hook_jobs(self.namespace)
            .await
            .unwrap_or_default();
        let named = if jobs.is_empty() {
            String::new()
        } else {
            format!(" Still running: {}.", jobs.join(", "))
        };
        Diagnostic::error(
            "Helm hook did not finish",
            format!(
                "Release {}/{} ({}.release): `helm upgrade` waits for the chart's hooks, and one \
                    did not finish in time (helm was given --timeout {}s of this operation's \
                    {}s).{named} Check why the Job's pods do not complete (`kubectl -n {} describe \
                    job ...`), or raise the resource's `timeouts`. helm said: {e}",
                self.namespace,
                self.release,
                self.block,
                w.helm_given.as_secs(),
                w.limit.as_secs(),
                self.namespace,
            ),
        )
        .at(AttrPath::attr("timeouts"))
    }
}
