// Package cli is the kubectl-elasti plugin: commands that show why an
// ElastiService is or is not asleep and that wake it or keep it awake.
//
// Every command talks to the API server with the caller's own kubeconfig
// identity, so RBAC decides what each user may do; the plugin needs no server
// of its own. Writes are merge patches of annotations the operator honours
// (see internal/contract), never direct changes to the workload.
package cli
