package events

import (
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"time"

	"github.com/agentmesh/agentmesh/pkg/config"
	"github.com/nats-io/nats.go"
)

// reconnectWait is the pause between two reconnection attempts to NATS.
const reconnectWait = time.Second

// Connect connects a service to the NATS server at url under name. The connection never gives
// up: it retries the first connection and reconnects forever after an outage (nats.go gives up
// after 60 attempts by default, which left a replica without events for good), buffering what
// is published meanwhile, and logs each disconnection and reconnection. The credentials the URL
// carries (a password or a token) are masked wherever it shows the URL: its logs and errors.
// A URL that does not parse is an error wrapping config.ErrInvalid (a configuration error, exit
// 4), not one of a server that cannot be reached.
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
	if err := checkURL(url); err != nil {
		msg := fmt.Sprintf("connect to NATS at %s: invalid NATS URL: %v", url, err)
		return nil, &hiddenError{msg: creds.from(msg), err: errors.Join(config.ErrInvalid, err)}
	}
	nc, err := nats.Connect(url, opts...)
	if err != nil {
		msg := fmt.Sprintf("connect to NATS at %s: %v", url, err)
		return nil, &hiddenError{msg: creds.from(msg), err: err}
	}
	return nc, nil
}

// checkURL parses each server of a NATS URL (a comma-separated list) as nats.Connect does,
// which takes a server without a scheme as nats://: the error of one that does not parse.
func checkURL(servers string) error {
	for server := range strings.SplitSeq(servers, ",") {
		server = strings.TrimSpace(server)
		if server == "" {
			continue
		}
		if !strings.Contains(server, "://") {
			server = "nats://" + server
		}
		if _, err := url.Parse(server); err != nil {
			return err
		}
	}
	return nil
}
