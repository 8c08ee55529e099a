package park

import (
	"errors"
	"io"
	"strings"
	"testing"

	"elasti.dev/elasti/internal/resolver/hold"
)

// oneByteAtATime reads its string a byte per Read, the last one with EOF
// or without, as net/http's body readers may.
type oneByteAtATime struct {
	s          string
	eofWithEnd bool
}

func (r *oneByteAtATime) Read(p []byte) (int, error) {
	if r.s == "" {
		return 0, io.EOF
	}
	p[0], r.s = r.s[0], r.s[1:]
	if r.s == "" && r.eofWithEnd {
		return 1, io.EOF
	}
	return 1, nil
}

func TestEndGuard(t *testing.T) {
	for _, tc := range []struct {
		name string
		// readable and left are what the probe says.
		readable, left bool
		eofWithEnd     bool
		want           string
		wantGone       bool
	}{
		{name: "client there, backlog waiting", readable: true, want: "body"},
		{name: "client there, backlog waiting, EOF with the last byte", readable: true, eofWithEnd: true, want: "body"},
		{name: "client there, backlog drained: live at once", want: "body"},
		{name: "client gone: the last byte never goes", readable: true, left: true, want: "bod", wantGone: true},
		{name: "client gone, EOF with the last byte", readable: true, left: true, eofWithEnd: true, want: "bo", wantGone: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := &oneByteAtATime{s: "body", eofWithEnd: tc.eofWithEnd}
			// A client that left is seen so once its last byte has come:
			// its close rides with it.
			probe := func() (bool, bool) { return tc.readable, tc.left && src.s == "" }
			g := GuardEnd(io.NopCloser(src), probe)
			got, err := io.ReadAll(g)
			if string(got) != tc.want {
				t.Errorf("read %q, want %q", got, tc.want)
			}
			if gone := errors.Is(err, hold.ErrClientGone); gone != tc.wantGone || (!gone && err != nil) {
				t.Errorf("err %v, want ErrClientGone %v", err, tc.wantGone)
			}
		})
	}
	if r := io.NopCloser(strings.NewReader("x")); GuardEnd(r, nil) != r {
		t.Error("with no probe, the body must be passed as is")
	}
}
