package handler

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/go-logr/logr"
)

// recoverPanics answers 500 for a request whose handler panicked, instead
// of killing the connection without a word.
type recoverPanics struct {
	next http.Handler
	log  logr.Logger
}

func (h *recoverPanics) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	defer func() {
		if v := recover(); v != nil {
			// ReverseProxy aborts a broken stream this way on purpose.
			if err, ok := v.(error); ok && errors.Is(err, http.ErrAbortHandler) {
				panic(v)
			}
			h.log.Error(fmt.Errorf("panic: %v", v), "request handler panicked")
			http.Error(w, "internal resolver error", http.StatusInternalServerError)
		}
	}()
	h.next.ServeHTTP(w, req)
}
