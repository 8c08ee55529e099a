package main

import (
	"flag"
	"io"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestParseFlags(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		wantErr bool
		check   func(c config) map[string]any
		want    map[string]any
	}{
		{
			name: "defaults",
			args: nil,
			check: func(c config) map[string]any {
				return map[string]any{
					"start": c.resolver.Ports.PortRangeStart, "end": c.resolver.Ports.PortRangeEnd,
					"admin": c.adminAddr, "operator": c.operatorURL, "ca": c.operatorCAFile,
					"hold": c.resolver.Hold.Timeout, "max": c.resolver.Hold.MaxHeld,
					"token":     c.tokenPath,
					"readAhead": c.resolver.Hold.ReadAheadBytes, "headerBytes": c.resolver.HTTP.MaxHeaderBytes,
					"trafficReport": c.resolver.Activation.TrafficReportInterval,
					"linger":        c.resolver.Ports.ReleasedPortLinger,
				}
			},
			want: map[string]any{
				"linger": 30 * time.Second,
				"start":  20000, "end": 20999, "admin": ":8012",
				"operator": "https://elasti-operator.elasti-system.svc:8013",
				"ca":       "/var/run/elasti/activation-ca/ca.crt",
				"hold":     5 * time.Minute, "max": 1000,
				"token":     "/var/run/secrets/elasti.dev/activation/token",
				"readAhead": 64 << 10, "headerBytes": 1 << 20,
				"trafficReport": time.Second,
			},
		},
		{
			name: "overrides",
			args: []string{"--port-range=30000-30009", "--listen-address=127.0.0.1", "--hold-timeout=30s", "--drain-period=1s", "--traffic-report-interval=250ms"},
			check: func(c config) map[string]any {
				return map[string]any{
					"start": c.resolver.Ports.PortRangeStart, "end": c.resolver.Ports.PortRangeEnd,
					"listen": c.resolver.Ports.ListenAddress, "hold": c.resolver.Hold.Timeout, "drain": c.drainPeriod,
					"trafficReport": c.resolver.Activation.TrafficReportInterval,
				}
			},
			want: map[string]any{"start": 30000, "end": 30009, "listen": "127.0.0.1", "hold": 30 * time.Second, "drain": time.Second, "trafficReport": 250 * time.Millisecond},
		},
		{
			name: "watch namespaces",
			args: []string{"--watch-namespaces= team-a,team-b ,"},
			check: func(c config) map[string]any {
				return map[string]any{"namespaces": c.watchNamespaces}
			},
			want: map[string]any{"namespaces": []string{"team-a", "team-b"}},
		},
		{
			name:  "every namespace by default",
			args:  nil,
			check: func(c config) map[string]any { return map[string]any{"all": c.watchNamespaces == nil} },
			want:  map[string]any{"all": true},
		},
		{name: "inverted range", args: []string{"--port-range=30010-30000"}, wantErr: true},
		// One spelling in both binaries: the resolver's old pair is gone.
		{name: "old range flags", args: []string{"--port-range-start=30000", "--port-range-end=30009"}, wantErr: true},
		{name: "stray argument", args: []string{"serve"}, wantErr: true},
		{name: "negative drain", args: []string{"--drain-timeout=-1s"}, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fs := flag.NewFlagSet("elasti-resolver", flag.ContinueOnError)
			fs.SetOutput(io.Discard)
			c, err := parseFlags(fs, tt.args, nil)
			if (err != nil) != tt.wantErr {
				t.Fatalf("parseFlags error = %v, wantErr %v", err, tt.wantErr)
			}
			if tt.wantErr {
				return
			}
			if diff := cmp.Diff(tt.want, tt.check(c)); diff != "" {
				t.Errorf("config (-want +got):\n%s", diff)
			}
		})
	}
}
