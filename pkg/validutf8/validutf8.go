// Package validutf8 replaces the text of protobuf messages that is not UTF-8, which protobuf
// refuses to encode in a string field.
//
// A mesh's stages keep their text UTF-8 where it enters (a tool's output, a provider's
// answer); this package is for a process that holds a message it must store and finds it
// cannot encode, from a defect upstream, and would rather keep it repaired than lose it.
// protobuf-go only refuses such text (its encoder has no option to repair it), and no
// library of the module proxy walks a message to do it, hence this package.
package validutf8

import (
	"strings"
	"unicode/utf8"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// Repair replaces the bytes that are not UTF-8 in every string of m, in nested messages,
// lists and maps (keys too), with U+FFFD, in place, and returns how many strings it changed.
// Map keys that differ only in their bad bytes become one key, holding one of their values.
func Repair(m proto.Message) int {
	if m == nil {
		return 0
	}
	return repair(m.ProtoReflect())
}

func repair(m protoreflect.Message) (n int) {
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		switch {
		case fd.IsList():
			n += repairList(fd, v.List())
		case fd.IsMap():
			n += repairMap(fd, v.Map())
		case fd.Kind() == protoreflect.StringKind:
			if s, ok := valid(v.String()); !ok {
				m.Set(fd, protoreflect.ValueOfString(s))
				n++
			}
		case isMessage(fd):
			n += repair(v.Message())
		}
		return true
	})
	return n
}

func repairList(fd protoreflect.FieldDescriptor, l protoreflect.List) (n int) {
	for i := range l.Len() {
		switch {
		case fd.Kind() == protoreflect.StringKind:
			if s, ok := valid(l.Get(i).String()); !ok {
				l.Set(i, protoreflect.ValueOfString(s))
				n++
			}
		case isMessage(fd):
			n += repair(l.Get(i).Message())
		}
	}
	return n
}

func repairMap(fd protoreflect.FieldDescriptor, m protoreflect.Map) (n int) {
	var badKeys []protoreflect.MapKey
	m.Range(func(k protoreflect.MapKey, v protoreflect.Value) bool {
		if fd.MapKey().Kind() == protoreflect.StringKind && !utf8.ValidString(k.String()) {
			badKeys = append(badKeys, k)
		}
		switch val := fd.MapValue(); {
		case val.Kind() == protoreflect.StringKind:
			if s, ok := valid(v.String()); !ok {
				m.Set(k, protoreflect.ValueOfString(s))
				n++
			}
		case isMessage(val):
			n += repair(v.Message())
		}
		return true
	})
	for _, k := range badKeys { // keys change outside the iteration
		v := m.Get(k)
		m.Clear(k)
		s, _ := valid(k.String())
		m.Set(protoreflect.ValueOfString(s).MapKey(), v)
		n++
	}
	return n
}

// valid is s with what is not UTF-8 replaced, and whether s was valid already.
func valid(s string) (string, bool) {
	if utf8.ValidString(s) {
		return s, true
	}
	return strings.ToValidUTF8(s, "\uFFFD"), false
}

func isMessage(fd protoreflect.FieldDescriptor) bool {
	return fd.Kind() == protoreflect.MessageKind || fd.Kind() == protoreflect.GroupKind
}
