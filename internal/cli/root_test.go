package cli

import (
	"bytes"
	"strings"
	"testing"
)

// Command-line mistakes are reported before any connection is attempted and
// exit with 2, like kubectl's usage errors.
func TestMainUsageErrors(t *testing.T) {
	cases := []struct {
		name    string
		args    []string
		wantErr string
	}{
		{name: "status without a name", args: []string{"status"}, wantErr: "expected exactly one ElastiService NAME, got 0 arguments"},
		{name: "wake with two names", args: []string{"wake", "a", "b"}, wantErr: "expected exactly one ElastiService NAME, got 2 arguments"},
		{name: "list with an unknown format", args: []string{"list", "-o", "table"}, wantErr: `unsupported output format "table"; use one of: wide, json, yaml`},
		{name: "status wide", args: []string{"status", "x", "-o", "wide"}, wantErr: `unsupported output format "wide"; use one of: json, yaml`},
		{name: "unknown flag", args: []string{"list", "--bogus"}, wantErr: "unknown flag: --bogus"},
		{name: "bad timeout", args: []string{"wake", "x", "--timeout", "0s"}, wantErr: "--timeout must be positive"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			code := Main(tc.args, &out, &errOut)
			if code != 2 {
				t.Errorf("exit code = %d, want 2; stderr: %s", code, errOut.String())
			}
			if !strings.Contains(errOut.String(), tc.wantErr) {
				t.Errorf("stderr = %q, want it to contain %q", errOut.String(), tc.wantErr)
			}
		})
	}
}
