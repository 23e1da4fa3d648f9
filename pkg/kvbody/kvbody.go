// Package kvbody keeps values too large for one JetStream key-value entry: every NATS message,
// a key-value write included, is bounded by the server's max payload (1 MB by default), so a
// larger value goes to an object store, which chunks it, and the entry keeps its name. The
// run store keeps its large checkpoints and checkpoint log segments this way, the action
// stage its large call records.
package kvbody

import (
	"bytes"
	"context"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"
)

// Margin is what a key-value entry needs beside its value: its subject and headers.
const Margin = 4 << 10

// Fits reports whether a value of n bytes fits in one key-value entry of nc's server.
func Fits(nc *nats.Conn, n int) bool {
	return int64(n) <= nc.MaxPayload()-Margin
}

// MaxChunk is the largest chunk Put stores a body in: the object store's default.
const MaxChunk = 128 << 10

// Put stores data in objects under a fresh name that starts with key and a dot, and returns
// the name. Names are unique per write, so a writer that lost a race for the entry never
// overwrites the body the entry names. The body is stored in chunks of MaxChunk, or what fits
// in one message of nc's server when its max payload is smaller (the object store's default
// chunk would exceed it, and every body be refused).
func Put(ctx context.Context, nc *nats.Conn, objects jetstream.ObjectStore, key string, data []byte) (string, error) {
	name := key + "." + nuid.Next()
	chunk := min(MaxChunk, nc.MaxPayload()-Margin)
	meta := jetstream.ObjectMeta{Name: name, Opts: &jetstream.ObjectMetaOptions{ChunkSize: uint32(max(chunk, 1))}}
	if _, err := objects.Put(ctx, meta, bytes.NewReader(data)); err != nil {
		return "", err
	}
	return name, nil
}
