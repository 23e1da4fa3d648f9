// Package validutf8 replaces the text of protobuf messages that is not UTF-8, which protobuf
// refuses to encode in a string field.
//
// A mesh's stages keep their text UTF-8 where it enters (a tool's output, a provider's
// answer); this package is for a process that holds a message it must store and finds it
// cannot encode, from a defect upstream, and would rather keep it repaired than lose it; and
// String for a stage's own text where it enters.
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
		default:
			if s, ok := repairValue(fd, v, &n); ok {
				m.Set(fd, s)
			}
		}
		return true
	})
	return n
}

func repairList(fd protoreflect.FieldDescriptor, l protoreflect.List) (n int) {
	for i := range l.Len() {
		if s, ok := repairValue(fd, l.Get(i), &n); ok {
			l.Set(i, s)
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
		if s, ok := repairValue(fd.MapValue(), v, &n); ok {
			m.Set(k, s)
		}
		return true
	})
	for _, k := range badKeys { // keys change outside the iteration
		v := m.Get(k)
		m.Clear(k)
		s, _ := String(k.String())
		m.Set(protoreflect.ValueOfString(s).MapKey(), v)
		n++
	}
	return n
}

// repairValue repairs v, a single value of fd (a field's, a list's element or a map's value),
// adding to *n the strings it changed: a message in place; a string that is not UTF-8 is
// returned repaired, with ok, for the caller to set where v was.
func repairValue(fd protoreflect.FieldDescriptor, v protoreflect.Value, n *int) (repaired protoreflect.Value, ok bool) {
	switch {
	case fd.Kind() == protoreflect.StringKind:
		if s, fine := String(v.String()); !fine {
			*n++
			return protoreflect.ValueOfString(s), true
		}
	case isMessage(fd):
		*n += repair(v.Message())
	}
	return v, false
}

// String is s with the bytes that are not UTF-8 replaced with U+FFFD, and whether s was
// UTF-8 already (then it is s itself, not a copy).
func String(s string) (string, bool) {
	if utf8.ValidString(s) {
		return s, true
	}
	return strings.ToValidUTF8(s, "\uFFFD"), false
}

func isMessage(fd protoreflect.FieldDescriptor) bool {
	return fd.Kind() == protoreflect.MessageKind || fd.Kind() == protoreflect.GroupKind
}
