package main

import (
	"context"
	"errors"
	"io"
	"net"
)

// serveTCPEcho copies every byte each connection sends back to it, until ctx
// ends.
func serveTCPEcho(ctx context.Context, lis net.Listener) error {
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
			_, _ = io.Copy(conn, conn)
		}()
	}
}
