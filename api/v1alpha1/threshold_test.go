package v1alpha1

import (
	"encoding/json"
	"math"
	"testing"
)

func TestThresholdJSON(t *testing.T) {
	cases := []struct {
		in      string
		want    Threshold
		wantF   float64
		wantErr bool
	}{
		{in: `0.1`, want: "0.1", wantF: 0.1},
		{in: `"0.1"`, want: "0.1", wantF: 0.1},
		{in: `5`, want: "5", wantF: 5},
		{in: `" 2.5 "`, want: " 2.5 ", wantF: 2.5},
		{in: `-1e3`, want: "-1e3", wantF: -1000},
		{in: `"low"`, want: "low", wantErr: true},
		// Beyond float64's range: strconv reads these as ±Inf.
		{in: `"1e309"`, want: "1e309", wantErr: true},
		{in: `"-1e309"`, want: "-1e309", wantErr: true},
		{in: `1e309`, want: "1e309", wantErr: true},
		{in: `"1.7976931348623159e308"`, want: "1.7976931348623159e308", wantErr: true},
		// strconv accepts these spellings; a threshold must not.
		{in: `"NaN"`, want: "NaN", wantErr: true},
		{in: `"Inf"`, want: "Inf", wantErr: true},
		{in: `"-infinity"`, want: "-infinity", wantErr: true},
		// Below the smallest float64: reads as zero, like any tiny number.
		{in: `"1e-400"`, want: "1e-400", wantF: 0},
		{in: `"1.7976931348623157e308"`, want: "1.7976931348623157e308", wantF: math.MaxFloat64},
		{in: `true`, wantErr: true},
		{in: `{"a":1}`, wantErr: true},
	}
	for _, tc := range cases {
		t.Run(tc.in, func(t *testing.T) {
			var th Threshold
			err := json.Unmarshal([]byte(tc.in), &th)
			if err != nil {
				if !tc.wantErr {
					t.Fatalf("unmarshal %s: %v", tc.in, err)
				}
				return
			}
			if th != tc.want {
				t.Fatalf("unmarshal %s = %q, want %q", tc.in, th, tc.want)
			}
			f, err := th.Float64()
			if (err != nil) != tc.wantErr {
				t.Fatalf("Float64(%q) error = %v, wantErr %v", th, err, tc.wantErr)
			}
			if err == nil && f != tc.wantF {
				t.Fatalf("Float64(%q) = %v, want %v", th, f, tc.wantF)
			}
			out, err := json.Marshal(th)
			if err != nil {
				t.Fatal(err)
			}
			var back Threshold
			if err := json.Unmarshal(out, &back); err != nil || back != th {
				t.Fatalf("round trip %s -> %s -> %q (%v)", tc.in, out, back, err)
			}
		})
	}
}
