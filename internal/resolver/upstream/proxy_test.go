package upstream

import (
	"testing"
	"time"
)

func TestFormatColdStart(t *testing.T) {
	for d, want := range map[time.Duration]string{
		1234567 * time.Microsecond: "1.235s",
		80 * time.Millisecond:      "0.080s",
		90 * time.Second:           "90.000s",
		400 * time.Microsecond:     "0.000s",
	} {
		if got := formatColdStart(d); got != want {
			t.Errorf("formatColdStart(%s) = %q, want %q", d, got, want)
		}
	}
}
