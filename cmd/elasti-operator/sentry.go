package main

import (
	"fmt"
	"time"

	"github.com/getsentry/sentry-go"
	"github.com/go-logr/logr"
)

// withSentry reports every logged error to Sentry, in addition to logging
// it. The returned function flushes pending reports.
func withSentry(log logr.Logger, dsn, environment string) (logr.Logger, func(), error) {
	if err := sentry.Init(sentry.ClientOptions{Dsn: dsn, Environment: environment, Release: "elasti-operator"}); err != nil {
		return log, nil, fmt.Errorf("initialise Sentry: %w", err)
	}
	flush := func() { sentry.Flush(2 * time.Second) }
	return logr.New(&sentrySink{LogSink: log.GetSink()}), flush, nil
}

// sentrySink forwards Error calls to Sentry.
type sentrySink struct {
	logr.LogSink
	name string
}

func (s *sentrySink) Error(err error, msg string, kv ...any) {
	hub := sentry.CurrentHub().Clone()
	hub.WithScope(func(scope *sentry.Scope) {
		scope.SetTag("logger", s.name)
		fields := sentry.Context{"message": msg}
		for i := 0; i+1 < len(kv); i += 2 {
			if k, ok := kv[i].(string); ok {
				fields[k] = fmt.Sprint(kv[i+1])
			}
		}
		scope.SetContext("log", fields)
		hub.CaptureException(err)
	})
	s.LogSink.Error(err, msg, kv...)
}

func (s *sentrySink) WithName(name string) logr.LogSink {
	n := name
	if s.name != "" {
		n = s.name + "." + name
	}
	return &sentrySink{LogSink: s.LogSink.WithName(name), name: n}
}

func (s *sentrySink) WithValues(kv ...any) logr.LogSink {
	return &sentrySink{LogSink: s.LogSink.WithValues(kv...), name: s.name}
}
