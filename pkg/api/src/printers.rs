//! Server-side printing: the columns and cells of a `meta.k8s.io/v1` Table for each kind, as
//! upstream's `pkg/printers/internalversion/printers.go`.
