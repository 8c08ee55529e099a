// Package targets watches the scale targets' metadata, so that a change
// to a target (a scale by someone else, a new pod template) reconciles the
// ElastiServices naming it, and a target's resourceVersion can be read
// without an API call. Targets can be of any scalable kind, so Watches
// starts one metadata-only watch per kind the first time a target of that
// kind is read through /scale (Ensure), never waits for one to sync, and says why a
// kind's watch cannot serve, as a Ready reason and message (Problem):
// ReasonWatchForbidden when the operator may not list the kind,
// ReasonWatchNotSynced otherwise, after SyncTimeout.
//
// Index, IndexValues and Key index ElastiServices by their target's group,
// kind and name, for the watches' map function and for finding two
// ElastiServices that name one target.
//
// It writes nothing. It reads the cache it was given and, only while a
// kind's watch has not synced, lists one object of that kind live.
package targets
