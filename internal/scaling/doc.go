// Package scaling moves scale targets and reads the signals that decide when
// they may sleep.
//
// Targets are scaled only through their /scale subresource, resolved with the
// RESTMapper, so a Deployment, a StatefulSet, an Argo Rollout and any custom
// resource with a scale subresource are handled alike. The package also
// pauses and unpauses KEDA ScaledObjects, reads HPA floors, evaluates
// triggers and parses the cron schedules, read in their time zones, of the
// enabledPeriod window and the pre-warm (schedule.go). Each trigger type has a
// file of its own (prometheus.go, podmetrics.go) and one entry in
// Evaluator.byType, the map from type to evaluation. A podMetrics trigger
// scrapes its counter from the target's pods itself and keeps their history
// in the Evaluator's memory (podhistory.go).
//
// Nothing here decides; the controller does. Every function takes its inputs
// explicitly (clients, clock, time) so it can be tested without a cluster.
package scaling
