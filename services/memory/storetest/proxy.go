package storetest

import (
	"io"
	"net"
	"net/url"
	"sync"
	"testing"
)

// Proxy forwards TCP connections to a PostgreSQL server until it is cut: then it drops the
// connections it carries and every new one, so the database is out of reach of whoever
// connects through it (the shared server itself is left alone), until it is mended.
type Proxy struct {
	target string
	ln     net.Listener
	wg     sync.WaitGroup

	mu    sync.Mutex
	cut   bool
	conns map[net.Conn]struct{}
}

// NewProxy starts a proxy to the server of dsn, a postgres:// URL, and returns it with dsn
// pointed at it; the proxy stops when t ends.
func NewProxy(t *testing.T, dsn string) (*Proxy, string) {
	t.Helper()
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatalf("the test DSN is not a URL: %v", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &Proxy{target: u.Host, ln: ln, conns: make(map[net.Conn]struct{})}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(func() {
		_ = ln.Close()
		p.setCut(true)
		p.wg.Wait()
	})
	u.Host = ln.Addr().String()
	return p, u.String()
}

// accept forwards each connection until the listener closes.
func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		if !p.track(c) {
			_ = c.Close()
			continue
		}
		up, err := net.Dial("tcp", p.target)
		if err != nil || !p.track(up) {
			p.drop(c)
			if up != nil {
				_ = up.Close()
			}
			continue
		}
		p.wg.Add(2)
		go p.pipe(c, up)
		go p.pipe(up, c)
	}
}

// pipe copies from src to dst, then drops both.
func (p *Proxy) pipe(dst, src net.Conn) {
	defer p.wg.Done()
	_, _ = io.Copy(dst, src)
	p.drop(dst)
	p.drop(src)
}

// track records c unless the proxy is cut.
func (p *Proxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cut {
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

// drop closes c and forgets it.
func (p *Proxy) drop(c net.Conn) {
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
	_ = c.Close()
}

// Cut puts the database out of reach: the proxy drops its connections and every new one.
func (p *Proxy) Cut() { p.setCut(true) }

// Mend lets connections through again.
func (p *Proxy) Mend() { p.setCut(false) }

// setCut cuts the proxy (dropping every connection) or mends it.
func (p *Proxy) setCut(cut bool) {
	p.mu.Lock()
	p.cut = cut
	conns := p.conns
	if cut {
		p.conns = make(map[net.Conn]struct{})
	}
	p.mu.Unlock()
	if cut {
		for c := range conns {
			_ = c.Close()
		}
	}
}
