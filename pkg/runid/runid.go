// Package runid holds the rule every run id keeps: letters, digits, '_' and '-', at most
// MaxBytes bytes. A run id is part of NATS subjects and keys, so every stage refuses, as the
// public API does, a request naming a run by any other id.
package runid

import "github.com/agentmesh/agentmesh/pkg/stageerr"

// MaxBytes is the longest run id accepted, in bytes.
const MaxBytes = 128

// Check returns an INVALID_INPUT error saying what is wrong with id, or nil when id is a
// non-empty run id of at most MaxBytes letters, digits, '_' and '-'. Other characters ('.',
// '*', '>', spaces) would break the run's subjects.
func Check(id string) error {
	if id == "" {
		return stageerr.Invalid("run id must not be empty")
	}
	if len(id) > MaxBytes {
		return stageerr.Invalid("run id is %d bytes long; at most %d are allowed", len(id), MaxBytes)
	}
	for i, r := range id {
		if !valid(r) {
			return stageerr.Invalid("run id %q contains %q at byte %d; only letters, digits, '_' and '-' are allowed", id, r, i)
		}
	}
	return nil
}

// CheckField is Check of the request field named field, which may be empty when the request
// is for no run: its error names the field.
func CheckField(field, id string) error {
	if id == "" {
		return nil
	}
	if err := Check(id); err != nil {
		return stageerr.Invalid("%s: %v", field, err)
	}
	return nil
}

// valid reports whether r may appear in a run id.
func valid(r rune) bool {
	switch {
	case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '_', r == '-':
		return true
	}
	return false
}
