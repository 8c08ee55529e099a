// Package watches is what the operator's controller watches and how: the
// manager's cache kept to what the reconciler reads, with objects trimmed to
// the fields that matter (CacheOptions); the predicates that let through
// only the changes a reconcile acts on; and the mappers that turn a watched
// object's event into the reconcile requests of the ElastiServices that must
// look at it again, through field indexes on ElastiServices. It reads the
// cache only and keeps no state (docs/architecture.md, "Inside the
// operator").
package watches
