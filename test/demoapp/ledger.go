package main

import (
	"fmt"
	"os"
	"strings"
	"sync"
)

// ledger records every request the app executes, one line each, in a file
// that outlives the pod (the end-to-end tests mount a host directory). It is
// how a test proves that a request was executed once, or never: a held
// request whose client gave up must not appear at all. A nil ledger records
// nothing.
type ledger struct {
	mu sync.Mutex
	f  *os.File
}

// openLedger opens path for appending; an empty path gives a nil ledger.
func openLedger(path string) (*ledger, error) {
	if path == "" {
		return nil, nil
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o666)
	if err != nil {
		return nil, fmt.Errorf("open the executed-requests ledger: %w", err)
	}
	return &ledger{f: f}, nil
}

// record writes "kind id" as one line. Pods of the same Deployment append
// to the same file; one short O_APPEND write per line keeps lines whole.
func (l *ledger) record(kind, id string) {
	if l == nil {
		return
	}
	id = strings.Map(func(r rune) rune {
		if r < 0x21 || r > 0x7e {
			return '_'
		}
		return r
	}, id)
	if id == "" {
		id = "-"
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	_, _ = l.f.WriteString(kind + " " + id + "\n")
}
