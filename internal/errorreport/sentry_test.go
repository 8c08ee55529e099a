package errorreport

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/getsentry/sentry-go"
	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
)

// recorder is a Sentry transport that keeps events in memory: nothing is
// sent anywhere.
type recorder struct {
	mu     sync.Mutex
	events []*sentry.Event
}

func (r *recorder) Flush(time.Duration) bool              { return true }
func (r *recorder) FlushWithContext(context.Context) bool { return true }
func (r *recorder) Configure(sentry.ClientOptions)        {}
func (r *recorder) Close()                                {}
func (r *recorder) SendEvent(e *sentry.Event) {
	r.mu.Lock()
	r.events = append(r.events, e)
	r.mu.Unlock()
}
func (r *recorder) got() []*sentry.Event { r.mu.Lock(); defer r.mu.Unlock(); return r.events }

func TestFromEnvWithoutDSNIsANoOp(t *testing.T) {
	base := logr.Discard()
	log, flush, err := FromEnv(base, "elasti-test", func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	flush()
	if log.GetSink() != base.GetSink() {
		t.Fatal("without SENTRY_DSN the logger must be returned unchanged")
	}
}

func TestFromEnvRejectsABadDSN(t *testing.T) {
	env := map[string]string{"SENTRY_DSN": "not a dsn"}
	if _, _, err := FromEnv(logr.Discard(), "elasti-test", func(k string) string { return env[k] }); err == nil {
		t.Fatal("a malformed SENTRY_DSN must be an error")
	}
}

func TestErrorsAreReportedAndStillLogged(t *testing.T) {
	rec := &recorder{}
	client, err := sentry.NewClient(sentry.ClientOptions{Transport: rec})
	if err != nil {
		t.Fatal(err)
	}
	hub := sentry.NewHub(client, sentry.NewScope())
	var lines []string
	base := funcr.New(func(prefix, args string) { lines = append(lines, prefix+" "+args) }, funcr.Options{})

	log := Wrap(base, hub).WithName("resolver").WithValues("namespace", "demo")
	log.Info("not an error")
	log.Error(errors.New("dial refused"), "forward failed", "elastiservice", "web")

	events := rec.got()
	if len(events) != 1 {
		t.Fatalf("got %d Sentry events, want 1 (only the Error call)", len(events))
	}
	ev := events[0]
	if len(ev.Exception) == 0 || ev.Exception[0].Value != "dial refused" {
		t.Errorf("exception = %+v, want the logged error", ev.Exception)
	}
	ctx := ev.Contexts["log"]
	if ctx["message"] != "forward failed" || ctx["namespace"] != "demo" || ctx["elastiservice"] != "web" {
		t.Errorf("log context = %v, want the message and both key/value pairs", ctx)
	}
	if ev.Tags["logger"] != "[resolver]" {
		t.Errorf("logger tag = %q, want [resolver]", ev.Tags["logger"])
	}
	if len(lines) != 2 || !strings.Contains(lines[1], `"msg"="forward failed"`) {
		t.Errorf("the wrapped logger must still log both calls, got %q", lines)
	}
}
