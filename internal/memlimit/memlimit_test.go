package memlimit

import (
	"math"
	"runtime/debug"
	"strings"
	"testing"
)

func TestFromEnv(t *testing.T) {
	t.Cleanup(func() { debug.SetMemoryLimit(math.MaxInt64) })
	tests := []struct {
		name    string
		env     map[string]string
		want    int64
		wantErr string
	}{
		{name: "nothing set", env: nil, want: 0},
		{name: "the container's limit", env: map[string]string{Env: "536870912"}, want: 483183820},
		{name: "GOMEMLIMIT wins", env: map[string]string{Env: "536870912", "GOMEMLIMIT": "100MiB"}, want: 0},
		{name: "not a number", env: map[string]string{Env: "512Mi"}, wantErr: "ELASTI_MEMORY_LIMIT=\"512Mi\""},
		{name: "zero", env: map[string]string{Env: "0"}, wantErr: "positive integer"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			debug.SetMemoryLimit(math.MaxInt64)
			got, err := FromEnv(func(k string) string { return tt.env[k] })
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want one containing %q", err, tt.wantErr)
				}
				if l := debug.SetMemoryLimit(-1); l != math.MaxInt64 {
					t.Fatalf("the runtime's limit was set to %d on an error", l)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Fatalf("limit %d, want %d", got, tt.want)
			}
			wantRuntime := tt.want
			if wantRuntime == 0 {
				wantRuntime = math.MaxInt64
			}
			if l := debug.SetMemoryLimit(-1); l != wantRuntime {
				t.Fatalf("the runtime's limit is %d, want %d", l, wantRuntime)
			}
		})
	}
}
