package main

import (
	"fmt"
	"time"

	"github.com/getsentry/sentry-go"
	"github.com/go-logr/logr"
)

// withSentry returns a logger that also reports every Error to Sentry, and a
// flush to call before exiting.
func withSentry(log logr.Logger, dsn, environment string) (logr.Logger, func(), error) {
	if err := sentry.Init(sentry.ClientOptions{Dsn: dsn, Environment: environment, Release: "elasti-resolver"}); err != nil {
		return log, func() {}, fmt.Errorf("init Sentry: %w", err)
	}
	return logr.New(reportingSink{LogSink: log.GetSink()}), func() { sentry.Flush(2 * time.Second) }, nil
}

// reportingSink passes everything to the wrapped sink and Error calls to
// Sentry too, with the log's key/value pairs as context.
type reportingSink struct {
	logr.LogSink
	names []string
	kv    []any
}

func (s reportingSink) Error(err error, msg string, kv ...any) {
	hub := sentry.CurrentHub().Clone()
	hub.WithScope(func(scope *sentry.Scope) {
		fields := sentry.Context{"message": msg}
		all := append(append([]any{}, s.kv...), kv...)
		for i := 0; i+1 < len(all); i += 2 {
			fields[fmt.Sprint(all[i])] = fmt.Sprint(all[i+1])
		}
		scope.SetContext("log", fields)
		if len(s.names) > 0 {
			scope.SetTag("logger", fmt.Sprint(s.names))
		}
		if err == nil {
			err = fmt.Errorf("%s", msg)
		}
		hub.CaptureException(err)
	})
	s.LogSink.Error(err, msg, kv...)
}

func (s reportingSink) WithValues(kv ...any) logr.LogSink {
	return reportingSink{LogSink: s.LogSink.WithValues(kv...), names: s.names, kv: append(append([]any{}, s.kv...), kv...)}
}

func (s reportingSink) WithName(name string) logr.LogSink {
	return reportingSink{LogSink: s.LogSink.WithName(name), names: append(append([]string{}, s.names...), name), kv: s.kv}
}
