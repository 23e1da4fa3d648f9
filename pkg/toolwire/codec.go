package toolwire

import (
	"unsafe"

	"google.golang.org/grpc/encoding"
	protocodec "google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"
)

// Codec is gRPC's protobuf codec with this package's Marshal and Unmarshal for messages that
// carry tools: a client sends the shared tools of its requests as their encodings made once,
// and a server decodes each distinct tool it is sent once. Messages without tools go through
// gRPC's codec unchanged. Use it on clients with grpc.ForceCodecV2 and on servers with
// grpc.ForceServerCodecV2.
type Codec struct {
	base encoding.CodecV2
}

// NewCodec returns the codec.
func NewCodec() Codec { return Codec{base: encoding.GetCodecV2(protocodec.Name)} }

// Name is gRPC's protobuf codec's, "proto": a client that forces the codec sends the content
// type application/grpc+proto, which any gRPC server takes for protobuf.
func (c Codec) Name() string { return c.base.Name() }

// Marshal encodes v, writing its shared tools as the encodings Share made of them.
func (c Codec) Marshal(v any) (mem.BufferSlice, error) {
	m, ok := v.(proto.Message)
	if !ok {
		return c.base.Marshal(v)
	}
	pm := m.ProtoReflect()
	l := layoutOf(pm.Descriptor())
	if !l.holdsShared(pm) {
		return c.base.Marshal(v)
	}
	// In a buffer of gRPC's pool, as its own codec encodes: one the size of the last message of
	// the type and a quarter more, so that a conversation a message longer than the last
	// rarely outgrows it. Grown from nothing, a request cost twice its size and more in
	// buffers (issue 15: bytes allocated per turn).
	pool := mem.DefaultBufferPool()
	buf := pool.Get(int(l.last.Load() * 5 / 4))
	b, err := l.appendMarshal((*buf)[:0], pm, proto.MarshalOptions{})
	if err != nil {
		pool.Put(buf)
		return nil, err
	}
	l.last.Store(int64(len(b)))
	if unsafe.SliceData(b) != unsafe.SliceData(*buf) { // outgrew it
		pool.Put(buf)
		return mem.BufferSlice{mem.SliceBuffer(b)}, nil
	}
	*buf = b
	return mem.BufferSlice{mem.NewBuffer(buf, pool)}, nil
}

// Unmarshal decodes data into v, each distinct tool once (see Unmarshal).
func (c Codec) Unmarshal(data mem.BufferSlice, v any) error {
	m, ok := v.(proto.Message)
	if !ok {
		return c.base.Unmarshal(data, v)
	}
	l := layoutOf(m.ProtoReflect().Descriptor())
	if l.empty() {
		return c.base.Unmarshal(data, v)
	}
	buf := data.MaterializeToBuffer(mem.DefaultBufferPool())
	defer buf.Free()
	return l.unmarshalMessage(buf.ReadOnlyData(), m)
}
