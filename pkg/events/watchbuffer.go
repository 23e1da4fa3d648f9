package events

import "github.com/nats-io/nats.go"

// watchBuffer is how many bytes of a run's events a watch asks the server for at a time, and
// so at most holds in the client while its callback is busy (a gRPC client that reads
// slowly): two of the largest messages the connection takes. Without it, a watch asked for
// 500 events at a time whatever their size: replaying a run of large events (tool results
// and answers cut down to a NATS message, a megabyte) held hundreds of megabytes a watch.
func watchBuffer(nc *nats.Conn) int {
	limit := nc.MaxPayload()
	if limit <= 0 {
		limit = defaultMaxPayload
	}
	return int(2 * limit)
}
