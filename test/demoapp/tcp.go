package main

import (
	"context"
	"errors"
	"io"
	"net"
)

// serveTCPEcho copies every byte each connection sends back to it, until ctx
// ends. The first bytes of each connection (up to 64) go into the ledger.
func serveTCPEcho(ctx context.Context, lis net.Listener, executed *ledger) error {
	go func() {
		<-ctx.Done()
		lis.Close()
	}()
	for {
		conn, err := lis.Accept()
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				return nil
			}
			return err
		}
		go func() {
			defer conn.Close()
			first := make([]byte, 64)
			n, err := conn.Read(first)
			if n > 0 {
				executed.record("tcp", string(first[:n]))
				if _, werr := conn.Write(first[:n]); werr != nil {
					return
				}
			}
			if err != nil {
				return
			}
			_, _ = io.Copy(conn, conn)
		}()
	}
}
