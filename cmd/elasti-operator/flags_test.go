package main

import (
	"flag"
	"io"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestParseFlags(t *testing.T) {
	env := map[string]string{"POD_NAMESPACE": "platform"}
	getenv := func(k string) string { return env[k] }
	parse := func(args ...string) (options, error) {
		fs := flag.NewFlagSet("test", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		return parseFlags(fs, args, getenv, nil)
	}
	o, err := parse()
	if err != nil {
		t.Fatal(err)
	}
	got := []any{o.controller.ResolverNamespace, o.resolverServiceAccount, o.leaderElectionNamespace, o.controller.PortRangeStart, o.controller.PortRangeEnd, o.controller.PortQuarantine, o.controller.PollingInterval, o.activationAddr}
	want := []any{"platform", "platform/elasti-resolver", "platform", int32(20000), int32(20999), 2 * time.Minute, 30 * time.Second, ":8013"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("defaults (-want +got)\n%s", diff)
	}
	o, err = parse("--port-range=30000-30009", "--watch-namespaces=a, b", "--grace-period=5s", "--activation-audiences=elasti", "--port-quarantine=0s")
	if err != nil {
		t.Fatal(err)
	}
	if o.controller.PortRangeStart != 30000 || o.controller.PortRangeEnd != 30009 || cmp.Diff([]string{"a", "b"}, o.controller.WatchNamespaces) != "" ||
		o.controller.GracePeriod != 5*time.Second || cmp.Diff([]string{"elasti"}, o.activationAudiences) != "" || o.controller.PortQuarantine != 0 {
		t.Errorf("parsed %+v", o)
	}
	for _, bad := range [][]string{{"--port-range=20999-20000"}, {"--port-range=x"}, {"--port-range=0-10"}, {"--resolver-service-account=nobody"}, {"--polling-interval=0s"}, {"--port-quarantine=-1s"}} {
		if _, err := parse(bad...); err == nil {
			t.Errorf("%v accepted", bad)
		}
	}
}
