package toolwire

import (
	"bytes"
	"hash/maphash"
	"sync/atomic"

	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	lru "github.com/hashicorp/golang-lru/v2"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// decodedSize is how many distinct tool encodings Unmarshal keeps decoded: far more than the
// tools of one deployment.
const decodedSize = 1024

// maxDecodedBytes bounds the encodings of the tools Unmarshal keeps decoded, so that a caller
// sending many large schemas cannot make the cache hold much memory: a tool that would
// overflow it is decoded for its request alone, as every tool was before.
const maxDecodedBytes = 8 << 20

// decodedTool is a tool Unmarshal decoded and the encoding it came from.
type decodedTool struct {
	enc  []byte
	tool *typev1.Tool
}

// decoded holds the tools Unmarshal decoded, by the hash of their encoding; decodedBytes is
// the size of their encodings.
var (
	decodedBytes atomic.Int64
	decoded      = func() *lru.Cache[uint64, decodedTool] {
		c, err := lru.NewWithEvict(decodedSize, func(_ uint64, d decodedTool) { decodedBytes.Add(-int64(len(d.enc))) })
		if err != nil {
			panic(err) // only for a size that is not positive
		}
		return c
	}()
)

// seed seeds the hashes of encodings.
var seed = maphash.MakeSeed()

// Unmarshal decodes b into m as proto.Unmarshal does, except that each tool of m's tool lists
// is decoded once per distinct encoding and shared with every message decoded from the same
// bytes: nobody may change the tools of m's tool lists.
func Unmarshal(b []byte, m proto.Message) error {
	l := layoutOf(m.ProtoReflect().Descriptor())
	if l.empty() {
		return proto.Unmarshal(b, m)
	}
	return l.unmarshalMessage(b, m)
}

// unmarshalMessage is Unmarshal for a message m whose layout is l, which holds tool lists.
func (l *layout) unmarshalMessage(b []byte, m proto.Message) error {
	proto.Reset(m)
	if err := l.unmarshal(b, m.ProtoReflect()); err != nil {
		return proto.Unmarshal(b, m) // malformed: proto names the problem, as for any message
	}
	return nil
}

// fieldBytes is the value of a length-delimited field the layout decodes itself.
type fieldBytes struct {
	fd    protoreflect.FieldDescriptor
	tools bool // a tool of a tool list, or else a message holding some
	value []byte
}

// unmarshal decodes b into the empty message pm of layout l: its other fields by proto, its
// tools through the cache, the messages holding tools by their layouts.
func (l *layout) unmarshal(b []byte, pm protoreflect.Message) error {
	var (
		own  []fieldBytes
		rest []byte // b without the fields the layout decodes, once one was found
	)
	for in := b; len(in) > 0; {
		num, typ, n := protowire.ConsumeTag(in)
		if n < 0 {
			return protowire.ParseError(n)
		}
		size := protowire.ConsumeFieldValue(num, typ, in[n:])
		if size < 0 {
			return protowire.ParseError(size)
		}
		if fd, tools := l.field(num); fd != nil && typ == protowire.BytesType {
			value, _ := protowire.ConsumeBytes(in[n:])
			if rest == nil {
				rest = append(make([]byte, 0, len(b)), b[:len(b)-len(in)]...)
			}
			own = append(own, fieldBytes{fd, tools, value})
		} else if rest != nil {
			rest = append(rest, in[:n+size]...)
		}
		in = in[n+size:]
	}
	if rest == nil {
		rest = b
	}
	if err := (proto.UnmarshalOptions{Merge: true}).Unmarshal(rest, pm.Interface()); err != nil {
		return err
	}
	for _, f := range own {
		if !f.tools {
			// A message field met more than once merges, as protobuf's decoding does.
			if err := layoutOf(f.fd.Message()).unmarshal(f.value, pm.Mutable(f.fd).Message()); err != nil {
				return err
			}
			continue
		}
		tool, err := decode(f.value)
		if err != nil {
			return err
		}
		pm.Mutable(f.fd).List().Append(protoreflect.ValueOfMessage(tool.ProtoReflect()))
	}
	return nil
}

// decode returns the tool enc encodes, decoded once per distinct encoding.
func decode(enc []byte) (*typev1.Tool, error) {
	h := maphash.Bytes(seed, enc)
	if d, ok := decoded.Get(h); ok && bytes.Equal(d.enc, enc) {
		return d.tool, nil
	}
	tool := &typev1.Tool{}
	if err := proto.Unmarshal(enc, tool); err != nil {
		return nil, err
	}
	if decodedBytes.Add(int64(len(enc))) > maxDecodedBytes {
		decodedBytes.Add(-int64(len(enc)))
		return tool, nil
	}
	if held, _ := decoded.ContainsOrAdd(h, decodedTool{enc: bytes.Clone(enc), tool: tool}); held {
		// Another encoding of the same hash, or this one decoded at the same time by another
		// call, holds the entry: this tool is its request's alone.
		decodedBytes.Add(-int64(len(enc)))
		return tool, nil
	}
	decodedShared(tool)
	return tool, nil
}
