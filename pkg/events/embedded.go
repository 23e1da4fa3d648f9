package events

import (
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
)

// readyTimeout bounds how long StartEmbedded waits for the server to accept connections.
const readyTimeout = 10 * time.Second

// EmbeddedOptions configures an embedded NATS server.
type EmbeddedOptions struct {
	// StoreDir is the directory where JetStream keeps its files; required.
	StoreDir string
	// Port is the loopback port to listen on: -1 picks a random free port, 0 does not listen
	// at all (clients connect in process only), a positive value is that port.
	Port int
}

// Embedded is a NATS server with JetStream running inside this process.
type Embedded struct {
	srv       *server.Server
	listening bool
}

// StartEmbedded starts a NATS server with JetStream enabled and waits until it accepts
// connections.
func StartEmbedded(opts EmbeddedOptions) (*Embedded, error) {
	if opts.StoreDir == "" {
		return nil, errors.New("embedded nats: store directory must not be empty")
	}
	if opts.Port < server.RANDOM_PORT {
		return nil, fmt.Errorf("embedded nats: port %d is invalid; use -1 (random), 0 (in process only) or a positive port", opts.Port)
	}
	srv, err := server.NewServer(&server.Options{
		ServerName: "agentmesh-embedded",
		Host:       "127.0.0.1",
		Port:       opts.Port,
		DontListen: opts.Port == 0,
		JetStream:  true,
		StoreDir:   opts.StoreDir,
		NoSigs:     true,
		NoLog:      true,
	})
	if err != nil {
		return nil, fmt.Errorf("embedded nats: %w", err)
	}
	srv.Start()
	e := &Embedded{srv: srv, listening: opts.Port != 0}
	if !srv.ReadyForConnections(readyTimeout) {
		e.Shutdown()
		return nil, fmt.Errorf("embedded nats: not ready for connections after %s", readyTimeout)
	}
	if !srv.JetStreamEnabled() {
		e.Shutdown()
		return nil, fmt.Errorf("embedded nats: JetStream did not start (store directory %q)", opts.StoreDir)
	}
	return e, nil
}

// ClientURL returns the URL clients in other processes connect to, or "" when the server
// listens in process only.
func (e *Embedded) ClientURL() string {
	if !e.listening {
		return ""
	}
	return e.srv.ClientURL()
}

// Port returns the loopback port the server listens on, or 0 when it listens in process only.
// StartEmbedded with this port and the same store directory restarts the server where its
// clients reconnect, with the events it had stored.
func (e *Embedded) Port() int {
	if !e.listening {
		return 0
	}
	return e.srv.Addr().(*net.TCPAddr).Port
}

// Connect opens an in-process client connection to the server.
func (e *Embedded) Connect(opts ...nats.Option) (*nats.Conn, error) {
	opts = append(opts, nats.InProcessServer(e.srv))
	nc, err := nats.Connect(e.ClientURL(), opts...)
	if err != nil {
		return nil, fmt.Errorf("embedded nats: connect: %w", err)
	}
	return nc, nil
}

// Shutdown stops the server and waits until it has stopped.
func (e *Embedded) Shutdown() {
	e.srv.Shutdown()
	e.srv.WaitForShutdown()
}
