//! OpenAPI v2 and v3 documents generated from the k8s-openapi schemas, with the `x-kubernetes-*`
//! extensions kubectl reads, and the schema registry the patch algorithms use.
