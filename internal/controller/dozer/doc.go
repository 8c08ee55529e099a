// Package dozer carries out sleepMode Doze against the API server
// (docs/architecture.md, "Doze"): it reads a target's pods, resizes them to
// spec.doze's floor through the pods/resize subresource and back, and
// reports from their status how far each resize has got. The rules (what
// to write, what to record, how to read the kubelet's answer) are package
// doze's; this package only reads and writes, and the reconciler decides
// what to do with a Report.
//
// Pods are listed live and never watched, as the operator's other reads
// of a target's pods are (internal/controller/rbac.go).
package dozer
