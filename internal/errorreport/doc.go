// Package errorreport sends the errors the binaries log to Sentry as well,
// when SENTRY_DSN is set. It wraps a logr.Logger, so code keeps logging the
// usual way and reporting stays opt-in.
package errorreport
