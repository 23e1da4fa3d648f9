package server

import (
	"sync"

	"github.com/agentmesh/agentmesh/pkg/stageerr"
	"github.com/agentmesh/agentmesh/pkg/toolwire"
	"google.golang.org/grpc"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/dynamicpb"
)

// requestCodec is the server's protobuf codec. grpc-go answers a request its codec cannot
// decode (not protobuf, or a string that is not UTF-8) with INTERNAL, before any interceptor
// runs; requestCodec instead decodes without failing and keeps the error for the gate, which
// answers INVALID_ARGUMENT naming the message type and the problem (failure, decodingStream).
type requestCodec struct {
	encoding.CodecV2 // gRPC's protobuf codec, decoding each distinct tool once (toolwire.Codec)

	failed sync.Map // proto.Message (the request being decoded into) → its decoding error
}

func newRequestCodec() *requestCodec {
	return &requestCodec{CodecV2: toolwire.NewCodec()}
}

// Unmarshal decodes data into v. When v is a message that data does not decode into, it
// keeps the error for failure(v) and returns nil.
func (c *requestCodec) Unmarshal(data mem.BufferSlice, v any) error {
	err := c.CodecV2.Unmarshal(data, v)
	m, ok := v.(proto.Message)
	if err == nil || !ok {
		return err
	}
	// The generated decoder says "string field contains invalid UTF-8"; the reflective one,
	// which a dynamic message uses, names the field.
	buf := data.Materialize()
	if derr := proto.Unmarshal(buf, dynamicpb.NewMessage(m.ProtoReflect().Descriptor())); derr != nil {
		err = derr
	}
	c.failed.Store(m, err)
	return nil
}

// failure returns the INVALID_ARGUMENT error of a request that did not decode, and forgets
// it; nil for a request that decoded.
func (c *requestCodec) failure(req any) error {
	m, ok := req.(proto.Message)
	if !ok {
		return nil
	}
	err, ok := c.failed.LoadAndDelete(m)
	if !ok {
		return nil
	}
	return stageerr.Invalid("the request is not a valid %s: %v", m.ProtoReflect().Descriptor().FullName(), err)
}

// decodingStream is a ServerStream whose RecvMsg reports messages that did not decode.
type decodingStream struct {
	grpc.ServerStream
	codec *requestCodec
}

// RecvMsg receives and decodes m on a goroutine of its own. Decoding is often the deepest a
// streaming handler goes (protobuf decodes nested messages by recursion, and a tool's JSON
// schema, a Struct, nests deep), and the runtime halves a goroutine's grown stack only while
// less than a quarter of it is in use: a handler that then waits deep in a call, as the
// generation stage does in net/http while its model answers, would hold twice the stack it
// needs for as long as its stream lasts. A panic while decoding is the handler's, re-raised
// here for the gate.
func (s decodingStream) RecvMsg(m any) error {
	type received struct {
		err      error
		panicked any
	}
	done := make(chan received, 1)
	go func() {
		var got received
		defer func() {
			got.panicked = recover()
			done <- got
		}()
		got.err = s.ServerStream.RecvMsg(m)
	}()
	got := <-done
	if got.panicked != nil {
		panic(got.panicked)
	}
	// Taken also when RecvMsg failed after decoding m (a second request of a call that takes
	// one): the codec keeps the error until it is taken.
	failed := s.codec.failure(m)
	if got.err != nil {
		return got.err
	}
	return failed
}
