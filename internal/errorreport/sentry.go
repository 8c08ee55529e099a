package errorreport

import (
	"fmt"
	"time"

	"github.com/getsentry/sentry-go"
	"github.com/go-logr/logr"
)

// FromEnv returns log unchanged and a no-op flush when SENTRY_DSN is empty.
// Otherwise it initialises Sentry (environment from SENTRY_ENVIRONMENT, the
// release named after the component) and returns a logger whose Error calls
// are also reported, and a flush to call before exiting.
func FromEnv(log logr.Logger, component string, getenv func(string) string) (logr.Logger, func(), error) {
	dsn := getenv("SENTRY_DSN")
	if dsn == "" {
		return log, func() {}, nil
	}
	opts := sentry.ClientOptions{Dsn: dsn, Environment: getenv("SENTRY_ENVIRONMENT"), Release: component}
	if err := sentry.Init(opts); err != nil {
		return log, func() {}, fmt.Errorf("initialise Sentry: %w", err)
	}
	return Wrap(log, sentry.CurrentHub()), func() { sentry.Flush(2 * time.Second) }, nil
}

// Wrap returns a logger that passes everything to log and also reports
// every Error call to hub, with the logger's names and key/value pairs as
// context.
func Wrap(log logr.Logger, hub *sentry.Hub) logr.Logger {
	return logr.New(reportingSink{LogSink: log.GetSink(), hub: hub})
}

// reportingSink passes everything to the wrapped sink and Error calls to
// Sentry too.
type reportingSink struct {
	logr.LogSink
	hub   *sentry.Hub
	names []string
	kv    []any
}

func (s reportingSink) Error(err error, msg string, kv ...any) {
	hub := s.hub.Clone()
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
	s.LogSink = s.LogSink.WithValues(kv...)
	s.kv = append(append([]any{}, s.kv...), kv...)
	return s
}

func (s reportingSink) WithName(name string) logr.LogSink {
	s.LogSink = s.LogSink.WithName(name)
	s.names = append(append([]string{}, s.names...), name)
	return s
}
