package mesh

import (
	"net"
	"sync"
)

// holdAddr listens on addr, the address of a service just stopped, and closes every
// connection it accepts, so that callers see the service down (UNAVAILABLE) and no other
// process's server takes the port while the mesh runs. It returns what stops it.
func holdAddr(addr string) (func() error, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			_ = conn.Close()
		}
	})
	return func() error {
		err := ln.Close()
		wg.Wait()
		return err
	}, nil
}
