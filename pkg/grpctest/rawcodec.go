package grpctest

import "google.golang.org/grpc/mem"

// RawCodec sends and receives messages as the bytes they are (a *[]byte on both sides), so a
// test can send what no protobuf library would encode. Use it with grpc.ForceCodecV2.
type RawCodec struct{}

// Marshal returns the bytes v points to.
func (RawCodec) Marshal(v any) (mem.BufferSlice, error) {
	return mem.BufferSlice{mem.SliceBuffer(*v.(*[]byte))}, nil
}

// Unmarshal stores the received bytes in v.
func (RawCodec) Unmarshal(data mem.BufferSlice, v any) error {
	*v.(*[]byte) = data.Materialize()
	return nil
}

// Name is "proto", the content subtype the servers expect.
func (RawCodec) Name() string { return "proto" }
