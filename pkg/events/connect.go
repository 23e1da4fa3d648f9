package events

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go"
)

// reconnectWait is the pause between two reconnection attempts to NATS.
const reconnectWait = time.Second

// Connect connects a service to the NATS server at url under name. The connection never gives
// up: it retries the first connection and reconnects forever after an outage (nats.go gives up
// after 60 attempts by default, which left a replica without events for good), buffering what
// is published meanwhile, and logs each disconnection and reconnection. The credentials the URL
// carries (a password or a token) are masked wherever it shows the URL: its logs and errors.
func Connect(url, name string, opts ...nats.Option) (*nats.Conn, error) {
	creds := credentialsOf(url)
	log := slog.With("nats", creds.from(url), "client", name)
	opts = append([]nats.Option{
		nats.Name(name),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(reconnectWait),
		nats.RetryOnFailedConnect(true),
		nats.DisconnectErrHandler(func(nc *nats.Conn, err error) {
			if !nc.IsClosed() { // Close disconnects too: that is no news
				log.Warn("NATS disconnected", "err", err)
			}
		}),
		nats.ReconnectHandler(func(*nats.Conn) { log.Info("NATS reconnected") }),
	}, opts...)
	nc, err := nats.Connect(url, opts...)
	if err != nil {
		msg := fmt.Sprintf("connect to NATS at %s: %v", url, err)
		return nil, &hiddenError{msg: creds.from(msg), err: err}
	}
	return nc, nil
}
