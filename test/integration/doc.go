// Package integration holds tests of the ElastiService API against a real
// kube-apiserver and etcd. They run with `make test-integration` (build tag
// "integration").
package integration
