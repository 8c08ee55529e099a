// Package docs keeps the README and the user documentation in docs/ honest
// against the code and against each other: every flag, metric, condition
// reason and Event reason the binaries define is documented, with the
// defaults the code gives; the supported Kubernetes versions are the
// Makefile's; every test a page names exists; every page is in the index;
// relative links and their anchors resolve; the README stays short; and
// nothing cites a design document outside the repository.
package docs
