//! Server-side apply (`application/apply-patch+yaml`): merging an applied configuration into the
//! live object with field ownership in `metadata.managedFields` (fieldsV1), conflicts and force.
