// Package toolwire encodes the tools a process sends again and again once, and decodes the
// tools it is sent again and again once.
//
// Every request of an agent's turn carries the tools the model is offered (the context and
// generation stages' requests, a replan's), and a tool is mostly its input schema, a
// google.protobuf.Struct: a map and a Value per node of a JSON schema, which protobuf encodes
// and decodes node by node, sorting each map's keys by reflection when the encoding must be
// deterministic. With a few dozen tools that was most of the CPU a turn cost (issue 15). A
// tool the orchestrator offers does not change while it is offered, so:
//
//   - Share registers tools that their owner will not change; AppendMarshal (and Codec, a
//     gRPC codec) writes each shared tool of a message's tool lists as the deterministic
//     encoding Share made once. The bytes are protobuf's encoding of the same message (its
//     deterministic one, when asked), so any receiver, a third-party stage included, decodes
//     them as before, and a hash of them is what it was.
//   - Unmarshal (and Codec) decode each tool of a message's tool lists once per distinct
//     encoding: equal bytes get the same shared *typev1.Tool, which a receiver must not
//     change. A shared tool's bytes are equal every time it is sent, so a stage decodes the
//     tools of a run once, not with every request.
//
// A message's tool lists are its repeated agentmesh.type.v1.Tool fields and those of the
// messages in its singular message fields, at any depth (GenerateStreamRequest.request.tools).
//
// Written here rather than taken from a library: protobuf-go has no notion of a field encoded
// once and reused, and gRPC's codecs are the place to plug one in.
package toolwire

import (
	"cmp"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"weak"

	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// toolName is the full name of the message the package encodes and decodes once.
var toolName = (&typev1.Tool{}).ProtoReflect().Descriptor().FullName()

// encodings holds the deterministic encoding of each shared tool, by a weak pointer to the
// tool: an entry goes when its tool is collected.
var encodings sync.Map // weak.Pointer[typev1.Tool] → []byte

// Share registers tools whose owner will not change them again, so that AppendMarshal writes
// each as an encoding made here once. Sharing a tool twice is harmless; nil tools are ignored.
func Share(tools ...*typev1.Tool) {
	for _, t := range tools {
		if t == nil {
			continue
		}
		key := weak.Make(t)
		if _, ok := encodings.Load(key); ok {
			continue
		}
		b, err := proto.MarshalOptions{Deterministic: true}.Marshal(t)
		if err != nil {
			continue // never for a valid in-memory message; AppendMarshal then encodes it as usual
		}
		if _, loaded := encodings.LoadOrStore(key, b); !loaded {
			runtime.AddCleanup(t, func(key weak.Pointer[typev1.Tool]) { encodings.Delete(key) }, key)
		}
	}
}

// shared returns the encoding Share made of the message m, if m is a tool it made one of.
func shared(m proto.Message) ([]byte, bool) {
	t, ok := m.(*typev1.Tool)
	if !ok {
		return nil, false
	}
	b, ok := encodings.Load(weak.Make(t))
	if !ok {
		return nil, false
	}
	return b.([]byte), true
}

// AppendMarshal appends the encoding of m to b, as opts.MarshalAppend does, except that each
// shared tool (Share) of m's tool lists is written as the encoding Share made. Fields come in
// the order protobuf writes them (by number, unknown fields last), so with opts.Deterministic
// the bytes are exactly protobuf's deterministic encoding of m: a hash of them is the hash of
// any equal message, however its tools were made.
func AppendMarshal(b []byte, m proto.Message, opts proto.MarshalOptions) ([]byte, error) {
	pm := m.ProtoReflect()
	l := layoutOf(pm.Descriptor())
	if !l.holdsShared(pm) {
		return opts.MarshalAppend(b, m)
	}
	return l.appendMarshal(b, pm, opts)
}

// appendMarshal is AppendMarshal for a message whose layout is l: the fields between two the
// layout encodes itself are encoded together by protobuf.
func (l *layout) appendMarshal(b []byte, pm protoreflect.Message, opts proto.MarshalOptions) ([]byte, error) {
	var set []protoreflect.FieldDescriptor
	pm.Range(func(fd protoreflect.FieldDescriptor, _ protoreflect.Value) bool {
		set = append(set, fd)
		return true
	})
	slices.SortFunc(set, func(a, b protoreflect.FieldDescriptor) int { return cmp.Compare(a.Number(), b.Number()) })
	var (
		others protoreflect.Message // the fields since the last one the layout encodes
		err    error
	)
	flush := func() {
		if others != nil && err == nil {
			b, err = opts.MarshalAppend(b, others.Interface())
		}
		others = nil
	}
	for _, fd := range set {
		own, tools := l.field(fd.Number())
		if own == nil {
			if others == nil {
				others = pm.New()
			}
			others.Set(fd, pm.Get(fd))
			continue
		}
		if flush(); err != nil {
			return nil, err
		}
		if !tools {
			b = protowire.AppendTag(b, fd.Number(), protowire.BytesType)
			if b, err = appendNested(b, pm.Get(fd).Message(), opts); err != nil {
				return nil, err
			}
			continue
		}
		list := pm.Get(fd).List()
		for i := range list.Len() {
			t := list.Get(i).Message().Interface()
			enc, ok := shared(t)
			if !ok {
				if enc, err = opts.Marshal(t); err != nil {
					return nil, err
				}
			}
			b = protowire.AppendTag(b, fd.Number(), protowire.BytesType)
			b = protowire.AppendBytes(b, enc)
		}
	}
	if flush(); err != nil {
		return nil, err
	}
	return append(b, pm.GetUnknown()...), nil
}

// appendNested appends the length and the encoding of the message nm, whose layout holds tool
// lists, in place: its encoding goes after a byte kept for its length, and moves up should the
// length take more. Encoded apart and then copied, a request's tools cost a copy and a buffer
// more.
func appendNested(b []byte, nm protoreflect.Message, opts proto.MarshalOptions) ([]byte, error) {
	at := len(b)
	b, err := layoutOf(nm.Descriptor()).appendMarshal(append(b, 0), nm, opts)
	if err != nil {
		return nil, err
	}
	n := len(b) - at - 1
	if w := protowire.SizeVarint(uint64(n)); w > 1 {
		b = append(b, make([]byte, w-1)...)
		copy(b[at+w:], b[at+1:at+1+n])
	}
	protowire.AppendVarint(b[at:at], uint64(n))
	return b, nil
}

// layout is where a message type keeps tool lists: its own repeated Tool fields, and its
// singular message fields whose messages keep some.
type layout struct {
	tools  []protoreflect.FieldDescriptor
	nested []protoreflect.FieldDescriptor
	last   atomic.Int64 // the size of the last message of the type Codec encoded
}

// empty reports whether messages of the layout hold no tool list.
func (l *layout) empty() bool { return len(l.tools) == 0 && len(l.nested) == 0 }

// field returns the field of the layout numbered num, and whether it is a tool list; nil when
// the layout has none.
func (l *layout) field(num protowire.Number) (fd protoreflect.FieldDescriptor, tools bool) {
	for _, f := range l.tools {
		if f.Number() == num {
			return f, true
		}
	}
	for _, f := range l.nested {
		if f.Number() == num {
			return f, false
		}
	}
	return nil, false
}

// holdsShared reports whether one of pm's tool lists holds a shared tool.
func (l *layout) holdsShared(pm protoreflect.Message) bool {
	for _, fd := range l.tools {
		if !pm.Has(fd) {
			continue
		}
		list := pm.Get(fd).List()
		for i := range list.Len() {
			if _, ok := shared(list.Get(i).Message().Interface()); ok {
				return true
			}
		}
	}
	for _, fd := range l.nested {
		if pm.Has(fd) && layoutOf(fd.Message()).holdsShared(pm.Get(fd).Message()) {
			return true
		}
	}
	return false
}

// layouts caches layoutOf by message name.
var layouts sync.Map // protoreflect.FullName → *layout

// layoutOf returns the layout of messages of type md.
func layoutOf(md protoreflect.MessageDescriptor) *layout {
	if l, ok := layouts.Load(md.FullName()); ok {
		return l.(*layout)
	}
	l := newLayout(md, map[protoreflect.FullName]bool{})
	layouts.Store(md.FullName(), l)
	return l
}

// newLayout finds md's tool lists; visiting holds the messages being looked into, so that a
// recursive message type ends the search.
func newLayout(md protoreflect.MessageDescriptor, visiting map[protoreflect.FullName]bool) *layout {
	visiting[md.FullName()] = true
	defer delete(visiting, md.FullName())
	l := &layout{}
	fields := md.Fields()
	for i := range fields.Len() {
		fd := fields.Get(i)
		switch {
		case fd.Message() == nil || fd.IsMap():
		case fd.IsList():
			if fd.Message().FullName() == toolName {
				l.tools = append(l.tools, fd)
			}
		case fd.Message().FullName() != toolName && !visiting[fd.Message().FullName()]:
			if !newLayout(fd.Message(), visiting).empty() {
				l.nested = append(l.nested, fd)
			}
		}
	}
	return l
}
