// Package docs keeps the user documentation in docs/ honest against the
// code: every flag, metric, condition reason and Event reason the binaries
// define is documented, every page is in the index, and relative links
// resolve.
package docs
