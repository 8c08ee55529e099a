package contract

import (
	"flag"
	"io"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

func TestResolverCarries(t *testing.T) {
	for p, want := range map[corev1.Protocol]bool{"": true, corev1.ProtocolTCP: true, corev1.ProtocolUDP: false, corev1.ProtocolSCTP: false, "tcp": false} {
		if got := ResolverCarries(p); got != want {
			t.Errorf("ResolverCarries(%q) = %v, want %v", p, got, want)
		}
	}
}

func TestParsePortRange(t *testing.T) {
	for _, tt := range []struct {
		in      string
		want    PortRange
		wantErr bool
	}{
		{in: "20000-20999", want: PortRange{20000, 20999}},
		{in: " 1 - 65535 ", want: PortRange{1, 65535}},
		{in: "30000-30000", want: PortRange{30000, 30000}},
		{in: "20999-20000", wantErr: true},
		{in: "0-10", wantErr: true},
		{in: "1-65536", wantErr: true},
		{in: "20000", wantErr: true},
		{in: "x-y", wantErr: true},
		{in: "-1-5", wantErr: true},
		{in: "4294967297-4294967298", wantErr: true},
	} {
		got, err := ParsePortRange(tt.in)
		if (err != nil) != tt.wantErr || got != tt.want {
			t.Errorf("ParsePortRange(%q) = %v, %v; want %v, error %v", tt.in, got, err, tt.want, tt.wantErr)
		}
	}
}

func TestPortRangeFlag(t *testing.T) {
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var r PortRange
	fs.TextVar(&r, "port-range", DefaultPortRange(), "")
	if err := fs.Parse(nil); err != nil || r != (PortRange{DefaultPortRangeStart, DefaultPortRangeEnd}) || r.String() != "20000-20999" {
		t.Fatalf("default: %v, %v", r, err)
	}
	if err := fs.Parse([]string{"--port-range=30000-30009"}); err != nil || r != (PortRange{30000, 30009}) {
		t.Fatalf("--port-range=30000-30009: %v, %v", r, err)
	}
	if err := fs.Parse([]string{"--port-range=30009-30000"}); err == nil {
		t.Fatal("an inverted range was accepted")
	}
}
