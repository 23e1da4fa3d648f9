package events

import "github.com/nats-io/nats.go"

// defaultMaxPayload is NATS's default payload limit, assumed until the server has told its own.
const defaultMaxPayload = 1 << 20

// headerMargin is left free beyond the headers' computed size, for the escaping of header values.
const headerMargin = 256

// payloadLimit returns how many bytes an event may encode to in a message with headers h on
// nc: the server's payload limit (which counts the headers) less the headers.
func payloadLimit(nc *nats.Conn, h nats.Header) int {
	limit := nc.MaxPayload()
	if limit <= 0 {
		limit = defaultMaxPayload
	}
	return int(limit) - headerSize(h) - headerMargin
}

// headerSize returns the size of h as NATS encodes it: a "NATS/1.0" line, one "key: value"
// line per value, and an empty line.
func headerSize(h nats.Header) int {
	const crlf = len("\r\n")
	n := len("NATS/1.0") + crlf
	for k, vs := range h {
		for _, v := range vs {
			n += len(k) + len(": ") + len(v) + crlf
		}
	}
	return n + crlf
}
