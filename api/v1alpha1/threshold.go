package v1alpha1

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
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

// Float64 parses the threshold. It refuses what is not a finite number:
// text that is not a number, NaN, Inf, and numbers beyond float64's range
// such as 1e309, which strconv would read as Inf. A number too small to
// represent, such as 1e-400, reads as 0.
func (t Threshold) Float64() (float64, error) {
	v, err := strconv.ParseFloat(strings.TrimSpace(string(t)), 64)
	switch {
	case errors.Is(err, strconv.ErrRange):
		return 0, fmt.Errorf("threshold %q is out of range; write a number between -1e308 and 1e308", string(t))
	case err != nil:
		return 0, fmt.Errorf("threshold %q is not a number", string(t))
	case math.IsNaN(v) || math.IsInf(v, 0):
		return 0, fmt.Errorf("threshold %q is not a finite number", string(t))
	}
	return v, nil
}
