//! What the resource took over from others, kept in its private state and given back on
//! destroy, so that a destroy leaves the operator as it was before the resource existed.
//!
//! Each delivery keeps a record of its own type (a [`Record`]) under the record's key of one
//! JSON object. The keys and their shapes are those the provider has always stored (`helm` for
//! the values paths a delivery wrote, whichever delivery that is; `cluster_policy` for
//! ClusterPolicy fields), so private states written before read the same. The handlers hold the
//! whole object, not knowing which delivery writes in it: a write cut short (timeout, stop) is
//! dropped mid-way, and what it recorded before must still be stored.

use serde::Serialize;
use serde::de::DeserializeOwned;
use tfplugin::api::Private;

/// A delivery's record of what it took over.
pub(super) trait Record: Default + Serialize + DeserializeOwned {
    /// Its key in the private state's object.
    const KEY: &'static str;

    /// Nothing recorded: the key is left out.
    fn is_empty(&self) -> bool;
}

/// The private state's object: each record under its key.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct Takeover(serde_json::Map<String, serde_json::Value>);

impl Takeover {
    /// An unreadable object (from another provider version) reads as empty, and so does an
    /// unreadable record: destroy then gives the chart's defaults back, as for an imported config.
    pub(crate) fn load(private: &Private) -> Takeover {
        match serde_json::from_slice(&private.0) {
            Ok(serde_json::Value::Object(records)) => Takeover(records),
            _ => Takeover::default(),
        }
    }

    /// Nothing taken over stores nothing.
    pub(crate) fn store(&self, private: &mut Private) {
        private.0 = if self.0.is_empty() {
            Vec::new()
        } else {
            serde_json::to_vec(&self.0).unwrap_or_default()
        };
    }

    /// A copy of one delivery's record.
    pub(super) fn get<R: Record>(&self) -> R {
        self.0
            .get(R::KEY)
            .and_then(|v| serde_json::from_value(v.clone()).ok())
            .unwrap_or_default()
    }

    /// One delivery's record, to change: it is put back into the object when the returned
    /// handle goes, at the end of the write or when the write is dropped part-way.
    pub(super) fn open<R: Record>(&mut self) -> Open<'_, R> {
        let record = self.get();
        Open {
            takeover: self,
            record,
        }
    }

    fn put<R: Record>(&mut self, record: &R) {
        match serde_json::to_value(record) {
            Ok(v) if !record.is_empty() => {
                self.0.insert(R::KEY.to_string(), v);
            }
            _ => {
                self.0.remove(R::KEY);
            }
        }
    }
}

/// A record open for change (see [`Takeover::open`]).
pub(super) struct Open<'a, R: Record> {
    takeover: &'a mut Takeover,
    record: R,
}

impl<R: Record> std::ops::Deref for Open<'_, R> {
    type Target = R;
    fn deref(&self) -> &R {
        &self.record
    }
}

impl<R: Record> std::ops::DerefMut for Open<'_, R> {
    fn deref_mut(&mut self) -> &mut R {
        &mut self.record
    }
}

impl<R: Record> Drop for Open<'_, R> {
    fn drop(&mut self) {
        self.takeover.put(&self.record);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    #[derive(Default, serde::Serialize, serde::Deserialize)]
    #[serde(transparent)]
    struct Paths(BTreeMap<String, Option<serde_json::Value>>);

    impl Record for Paths {
        const KEY: &'static str = "helm";
        fn is_empty(&self) -> bool {
            self.0.is_empty()
        }
    }

    #[test]
    fn records_keep_the_stored_shape_and_survive_a_dropped_write() {
        let stored = br#"{"helm":{"devicePlugin.config":null,"mig.strategy":"single"}}"#;
        let mut taken = Takeover::load(&Private(stored.to_vec()));
        assert_eq!(taken.get::<Paths>().0.len(), 2);
        {
            let mut open = taken.open::<Paths>();
            open.0.insert("x.config".into(), None);
            // Dropped here, as a write cut short drops it.
        }
        let mut private = Private::default();
        taken.store(&mut private);
        let back: serde_json::Value = serde_json::from_slice(&private.0).unwrap();
        assert_eq!(back["helm"]["x.config"], serde_json::Value::Null);
        assert_eq!(back["helm"]["mig.strategy"], "single");
        taken.open::<Paths>().0.clear();
        taken.store(&mut private);
        assert!(private.0.is_empty(), "nothing taken over stores nothing");
        assert_eq!(
            Takeover::load(&Private(b"not json".to_vec())),
            Takeover::default()
        );
    }
}
