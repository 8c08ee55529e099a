package contract

import (
	"fmt"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// ResolverCarries reports whether the resolver carries a Service port of this
// protocol. It holds TCP connections and speaks HTTP over them, so only TCP
// ports (an empty protocol means TCP) get a resolver port and a proxy slice
// entry; UDP and SCTP ports are left alone.
func ResolverCarries(protocol corev1.Protocol) bool {
	return protocol == "" || protocol == corev1.ProtocolTCP
}

// Default resolver port range: the resolver pre-opens it and the operator
// allocates from it.
const (
	DefaultPortRangeStart = 20000
	DefaultPortRangeEnd   = 20999
)

// PortRange is the resolver port range, inclusive. Both binaries take it as
// --port-range=START-END and must be given the same one: the resolver opens
// every port of it, the operator allocates from it.
type PortRange struct {
	Start, End int32
}

// DefaultPortRange is DefaultPortRangeStart-DefaultPortRangeEnd.
func DefaultPortRange() PortRange {
	return PortRange{Start: DefaultPortRangeStart, End: DefaultPortRangeEnd}
}

// NewPortRange checks start and end and returns the range: 1 <= start <= end
// <= 65535. It is the one check of a port range, whoever was given it.
func NewPortRange(start, end int) (PortRange, error) {
	if start < 1 || end > 65535 || start > end {
		return PortRange{}, fmt.Errorf("port range %d-%d: want 1 <= START <= END <= 65535", start, end)
	}
	return PortRange{Start: int32(start), End: int32(end)}, nil
}

// ParsePortRange reads START-END, the --port-range flag's spelling.
func ParsePortRange(s string) (PortRange, error) {
	a, b, ok := strings.Cut(s, "-")
	if !ok {
		return PortRange{}, fmt.Errorf("port range %q: want START-END", s)
	}
	start, err1 := strconv.Atoi(strings.TrimSpace(a))
	end, err2 := strconv.Atoi(strings.TrimSpace(b))
	if err1 != nil || err2 != nil {
		return PortRange{}, fmt.Errorf("port range %q: want START-END", s)
	}
	return NewPortRange(start, end)
}

// String is the range as START-END.
func (r PortRange) String() string {
	return fmt.Sprintf("%d-%d", r.Start, r.End)
}

// MarshalText and UnmarshalText let flag.TextVar read a PortRange.
func (r PortRange) MarshalText() ([]byte, error) {
	return []byte(r.String()), nil
}

// UnmarshalText parses START-END with ParsePortRange.
func (r *PortRange) UnmarshalText(b []byte) error {
	p, err := ParsePortRange(string(b))
	if err != nil {
		return err
	}
	*r = p
	return nil
}
