package v1alpha1

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
)

// Threshold is a number that a manifest may write either as a number
// (threshold: 0.1) or as a string (threshold: "0.1"). KubeElasti manifests use
// strings; YAML users write numbers; both must work.
//
// The value is kept as the text of the number. It always serializes as a JSON
// string.
type Threshold string

// UnmarshalJSON accepts a JSON number or a JSON string.
func (t *Threshold) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		*t = Threshold(s)
		return nil
	}
	var n json.Number
	if err := json.Unmarshal(b, &n); err != nil {
		return fmt.Errorf("threshold must be a number or a string: %w", err)
	}
	*t = Threshold(n.String())
	return nil
}

// MarshalJSON writes the threshold as a JSON string.
func (t Threshold) MarshalJSON() ([]byte, error) {
	return json.Marshal(string(t))
}

// Float64 parses the threshold.
func (t Threshold) Float64() (float64, error) {
	v, err := strconv.ParseFloat(strings.TrimSpace(string(t)), 64)
	if err != nil {
		return 0, fmt.Errorf("threshold %q is not a number", string(t))
	}
	return v, nil
}
